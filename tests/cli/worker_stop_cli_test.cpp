// How a tune worker ends when it is told to (SIGTERM: a scheduler's preemption, time limit or
// scancel) and when a trial poisons its CUDA context (a sticky CUDA error, simulated on the CPU by
// the trainer's TUNE_TEST_STICKY_CUDA_ERROR hook): the `tune` binary on a real SQLite study.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "testing/workers.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;
using Clock = std::chrono::steady_clock;

// A study whose trials run objective.py's sleep_pid mode: each appends its pid to `pids` and
// sleeps `seconds` (then reports x^2).
std::string WriteSleepConfig(const testing::TempDir& dir, int n_trials, int retry_failed,
                             double seconds) {
  Json doc = {{"direction", "minimize"},
              {"n_trials", n_trials},
              {"retry_failed", retry_failed},
              {"sampler", {{"name", "random"}, {"seed", 3}}},
              {"search_space", {{"x", {{"type", "float"}, {"low", -2}, {"high", 2}}}}},
              {"objective",
               {{"type", "command"},
                {"argv",
                 {"/usr/bin/python3", std::string(TUNE_TEST_DATA_DIR) + "/objective.py",
                  "sleep_pid", (dir.path() / "pids").string(), std::to_string(seconds)}}}}};
  const std::string path = (dir.path() / "sleep.json").string();
  std::ofstream(path) << doc.dump(2);
  return path;
}

// The pids the trials' programs wrote, once `count` of them started (empty after 60 s).
std::vector<pid_t> WaitForPrograms(const testing::TempDir& dir, size_t count) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::istringstream in(Slurp(dir.path() / "pids"));
    std::vector<pid_t> pids;
    for (pid_t p; in >> p;) pids.push_back(p);
    if (pids.size() >= count) return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

// A worker of study "s" (sqlite) on WriteSleepConfig's study, once `programs` of its trials'
// programs run.
struct Worker {
  pid_t pid = -1;
  std::string storage, log;
  std::vector<pid_t> programs;
};
Worker StartWorker(const testing::TempDir& dir, int n_trials, int retry_failed,
                   const std::vector<std::string>& extra = {}, size_t programs = 1) {
  Worker w;
  w.storage = "sqlite:///" + (dir.path() / "s.db").string();
  w.log = (dir.path() / "tune.log").string();
  std::vector<std::string> args{"--study",   "s",
                                "--config",  WriteSleepConfig(dir, n_trials, retry_failed, 30),
                                "--storage", w.storage};
  args.insert(args.end(), extra.begin(), extra.end());
  w.pid = testing::SpawnTune(args, dir.path(), w.log);
  w.programs = WaitForPrograms(dir, programs);
  return w;
}

struct Ended {
  int code = -1;
  double seconds = 0;  // from the signal to the exit
};

Ended Terminate(pid_t pid, const std::vector<pid_t>& programs_first = {}) {
  const auto start = Clock::now();
  // A scheduler signals every process of the job: here the programs a moment before tune.
  for (pid_t p : programs_first) kill(p, SIGTERM);
  if (!programs_first.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          std::chrono::duration<double>(Clock::now() - start).count()};
}

Json Trials(const std::string& storage) {
  ProcessRun r = Tune({"trials", "--study", "s", "--storage", storage, "--format", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? Json::parse(r.out) : Json::array();
}

// SIGTERM mid-trial: the worker exits 0 within seconds; the trial is FAIL with a reason naming
// SIGTERM and, with retry_failed, re-enqueued with its params; the next worker runs the retry.
TEST(WorkerStop, SigtermFailsTheRunningTrialRequeuesItAndExitsZero) {
  testing::TempDir dir;
  const Worker w = StartWorker(dir, 3, 2);
  ASSERT_EQ(w.programs.size(), 1u) << Slurp(w.log);
  const std::string& storage = w.storage;
  const Ended ended = Terminate(w.pid);
  const std::string err = Slurp(w.log);
  EXPECT_EQ(ended.code, 0) << err;
  EXPECT_LT(ended.seconds, 10.0) << err;  // the program's SIGTERM, at most 5 s to its SIGKILL
  EXPECT_NE(err.find("Stopped by SIGTERM"), std::string::npos) << err;
  EXPECT_NE(err.find("re-enqueued as trial 1"), std::string::npos) << err;

  Json trials = Trials(storage);
  ASSERT_EQ(trials.size(), 2u) << trials.dump(2);
  const Json stopped = trials[0];
  EXPECT_EQ(stopped["state"], "FAIL");
  EXPECT_EQ(stopped["user_attrs"]["reason"], "interrupted");
  EXPECT_NE(stopped["user_attrs"]["fail_reason"].get<std::string>().find("SIGTERM"),
            std::string::npos);
  const Json retry = trials[1];
  EXPECT_EQ(retry["state"], "WAITING");
  EXPECT_EQ(retry["params"], stopped["params"]);
  EXPECT_EQ(retry["system_attrs"]["failed_trial"], 0);
  EXPECT_EQ(retry["system_attrs"]["interrupt_retry"], true);
  EXPECT_FALSE(retry["user_attrs"].contains("reason"));

  // The next worker (short trials now) runs the retry first and the study's target counts it.
  const std::string quick = WriteSleepConfig(dir, 3, 2, 0);
  ProcessRun next = Tune({"--study", "s", "--config", quick, "--storage", storage});
  ASSERT_EQ(next.code, 0) << next.err;
  trials = Trials(storage);
  ASSERT_EQ(trials.size(), 4u) << trials.dump(2);  // 3 finished + the retry of the FAIL one
  EXPECT_EQ(trials[1]["state"], "COMPLETE");
  EXPECT_EQ(trials[1]["params"], stopped["params"]);
  int complete = 0;
  for (const Json& t : trials) complete += t["state"] == "COMPLETE";
  EXPECT_EQ(complete, 3);
}

// The programs get SIGTERM first (as when Slurm signals the whole job): the trial still ends as
// stopped, not as a failed program; without retry_failed it is not re-enqueued.
TEST(WorkerStop, SigtermToTheWholeJobEndsTheTrialAsStopped) {
  testing::TempDir dir;
  const Worker w = StartWorker(dir, 4, 0, {"--jobs", "2"}, 2);
  ASSERT_EQ(w.programs.size(), 2u) << Slurp(w.log);
  const std::string& storage = w.storage;
  const Ended ended = Terminate(w.pid, w.programs);
  const std::string err = Slurp(w.log);
  EXPECT_EQ(ended.code, 0) << err;
  EXPECT_LT(ended.seconds, 10.0) << err;
  EXPECT_NE(err.find("not re-enqueued: retry_failed is 0"), std::string::npos) << err;
  Json trials = Trials(storage);
  ASSERT_EQ(trials.size(), 2u) << trials.dump(2);
  for (const Json& t : trials) {
    EXPECT_EQ(t["state"], "FAIL") << t.dump(2);
    EXPECT_EQ(t["user_attrs"]["reason"], "interrupted") << t.dump(2);
    EXPECT_NE(t["user_attrs"]["fail_reason"].get<std::string>().find("SIGTERM"), std::string::npos);
  }
}

// Ctrl-C stays a user's interruption: exit 130, no retry.
TEST(WorkerStop, CtrlCIsNotRetried) {
  testing::TempDir dir;
  const Worker w = StartWorker(dir, 3, 2);
  ASSERT_EQ(w.programs.size(), 1u) << Slurp(w.log);
  const pid_t pid = w.pid;
  const std::string& storage = w.storage;
  const std::string& log = w.log;
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << Slurp(log);
  Json trials = Trials(storage);
  ASSERT_EQ(trials.size(), 1u) << trials.dump(2);
  EXPECT_EQ(trials[0]["user_attrs"]["fail_reason"], "interrupted by the user");
}

}  // namespace
}  // namespace tune

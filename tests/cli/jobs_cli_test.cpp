// Several trials at once (--jobs) through the tune binary: trials overlap, a trial whose process
// dies (SIGSEGV, SIGABRT, SIGKILL) fails alone, Ctrl-C stops them all, and a killed tune leaves
// no trial process behind.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "memory/guard.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;
using Clock = std::chrono::steady_clock;

const std::string kProgram = std::string(TUNE_TEST_DATA_DIR) + "/jobs_objective.py";

class JobsCli : public ::testing::Test {
 protected:
  // A command study of jobs_objective.py; `marker` goes on every trial's command line.
  std::string WriteConfig(const Json& space, const Json& extra = Json::object()) {
    Json doc = {{"direction", "minimize"},
                {"sampler", {{"name", "random"}, {"seed", 1}}},
                {"search_space", space},
                {"objective",
                 {{"type", "command"},
                  {"argv", {"/usr/bin/python3", kProgram, Marker()}},
                  {"env", {{"JOBS_LOG", (dir_.path() / "log").string()}}}}}};
    for (const auto& [k, v] : extra.items()) doc[k] = v;
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }
  std::string Marker() const { return "marker=" + dir_.path().string(); }
  std::string Storage() const { return "sqlite:///" + (dir_.path() / "s.db").string(); }

  Json Trials() {
    ProcessRun r = Tune({"trials", "--study", "j", "--storage", Storage(), "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out);
  }

  // Processes (other than zombies) whose command line holds the marker.
  int CountMarkedProcesses() const {
    int n = 0;
    DIR* proc = opendir("/proc");
    while (dirent* e = readdir(proc)) {
      const std::string pid = e->d_name;
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = Slurp("/proc/" + pid + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      const std::string stat = Slurp("/proc/" + pid + "/stat");
      const size_t paren = stat.rfind(')');
      const bool zombie =
          paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
      if (!zombie && cmdline.find(Marker()) != std::string::npos) ++n;
    }
    closedir(proc);
    return n;
  }

  // Starts tune in the background with its output in run.log.
  pid_t StartTune(const std::vector<std::string>& args) {
    const std::string log = (dir_.path() / "run.log").string();
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv = {const_cast<char*>(TUNE_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(TUNE_BINARY, argv.data());
      _exit(127);
    }
    return pid;
  }

  bool WaitForLog(const std::string& text, double seconds) const {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
      if (Slurp(dir_.path() / "run.log").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  testing::TempDir dir_;
};

TEST_F(JobsCli, TrialsRunAtTheSameTimeInTheirOwnProcesses) {
  const std::string config = WriteConfig(
      {{"mode", {"sleep"}}, {"seconds", {{"type", "float"}, {"low", 1.0}, {"high", 1.2}}}});
  const auto start = Clock::now();
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage(), "--n-trials",
                       "6", "--jobs", "3"});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(seconds, 5.5);  // one at a time: at least 6 s
  EXPECT_NE(r.err.find("Jobs: 3, each trial in its own process"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 running"), std::string::npos) << r.err;
  // The trials' own records: at some moment three programs ran at once.
  std::vector<std::pair<double, double>> spans;
  std::istringstream log(Slurp(dir_.path() / "log"));
  double a, b;
  int pid;
  while (log >> a >> b >> pid) spans.emplace_back(a, b);
  ASSERT_EQ(spans.size(), 6u);
  int most = 0;
  for (const auto& s : spans) {
    int at_once = 0;
    for (const auto& o : spans) at_once += o.first <= s.first && s.first < o.second;
    most = std::max(most, at_once);
  }
  EXPECT_EQ(most, 3);
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 6u);
  for (const Json& t : trials) {
    EXPECT_EQ(t["state"], "COMPLETE");
    EXPECT_TRUE(t["user_attrs"]["schedule"].contains("started")) << t.dump();
    EXPECT_EQ(t["user_attrs"]["schedule"]["jobs"], 3);
  }
}

// A trial whose process dies ends FAIL with its signal; the study and the other trials go on.
TEST_F(JobsCli, ADyingTrialFailsAloneWithItsSignal) {
  const std::string config =
      WriteConfig({{"mode", {"sleep", "segv", "abort", "kill9"}},
                   {"seconds", {{"type", "float"}, {"low", 0.3}, {"high", 0.5}}}},
                  {{"enqueue_trials",
                    {{{"mode", "segv"}, {"seconds", 0.3}},
                     {{"mode", "abort"}, {"seconds", 0.3}},
                     {{"mode", "kill9"}, {"seconds", 0.3}},
                     {{"mode", "sleep"}, {"seconds", 0.3}}}}});
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage(), "--n-trials",
                       "8", "--jobs", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 8u);
  const std::vector<std::string> signals = {"Segmentation fault", "Aborted", "Killed"};
  for (int i = 0; i < 3; ++i) {
    const Json& t = trials[static_cast<size_t>(i)];
    EXPECT_EQ(t["state"], "FAIL") << t.dump();
    EXPECT_EQ(t["user_attrs"]["signal"], signals[static_cast<size_t>(i)]) << t.dump();
    EXPECT_NE(t["user_attrs"]["stderr_tail"].get<std::string>().find(
                  "mode " + std::string(i == 0   ? "segv"
                                        : i == 1 ? "abort"
                                                 : "kill9")),
              std::string::npos);
  }
  EXPECT_EQ(trials[3]["state"], "COMPLETE");
}

TEST_F(JobsCli, CtrlCStopsEveryRunningTrialWithinFiveSeconds) {
  const std::string config = WriteConfig(
      {{"mode", {"sleep"}}, {"seconds", {{"type", "float"}, {"low", 60}, {"high", 60}}}});
  const pid_t pid = StartTune({"--study", "j", "--config", config, "--storage", Storage(),
                               "--n-trials", "10", "--jobs", "3"});
  ASSERT_TRUE(WaitForLog("Trial 2 started", 30)) << Slurp(dir_.path() / "run.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(CountMarkedProcesses(), 3);
  const auto start = Clock::now();
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << Slurp(dir_.path() / "run.log");
  EXPECT_LT(seconds, 5.0);
  EXPECT_EQ(CountMarkedProcesses(), 0);
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 3u);
  for (const Json& t : trials) {
    EXPECT_EQ(t["state"], "FAIL");
    EXPECT_EQ(t["user_attrs"]["reason"], "interrupted");
    // The children got tune's SIGTERM; the reason is the user's Ctrl-C.
    EXPECT_EQ(t["user_attrs"]["fail_reason"], "interrupted by the user");
  }
}

// kill -9 of tune: its trial processes die with it (PR_SET_PDEATHSIG), and the next run fails
// the trials it left RUNNING as stale.
TEST_F(JobsCli, AKilledTuneLeavesNoTrialProcessAndItsTrialsGoStale) {
  const std::string config = WriteConfig(
      {{"mode", {"sleep"}}, {"seconds", {{"type", "float"}, {"low", 60}, {"high", 60}}}},
      {{"heartbeat_interval", 1}, {"grace_period", 2}});
  const pid_t pid = StartTune({"--study", "j", "--config", config, "--storage", Storage(),
                               "--n-trials", "4", "--jobs", "2"});
  ASSERT_TRUE(WaitForLog("Trial 1 started", 30)) << Slurp(dir_.path() / "run.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(CountMarkedProcesses(), 2);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(CountMarkedProcesses(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the grace period
  const std::string quick = WriteConfig(
      {{"mode", {"sleep"}}, {"seconds", {{"type", "float"}, {"low", 0.1}, {"high", 0.1}}}},
      {{"heartbeat_interval", 1}, {"grace_period", 2}});
  ProcessRun again = Tune({"--study", "j", "--config", quick, "--storage", Storage(), "--n-trials",
                           "4", "--jobs", "2"});
  ASSERT_EQ(again.code, 0) << again.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0]["state"], "FAIL");
  EXPECT_EQ(trials[1]["state"], "FAIL");
  EXPECT_NE(trials[0]["user_attrs"]["fail_reason"].get<std::string>().find("stale"),
            std::string::npos);
  EXPECT_EQ(trials[2]["state"], "COMPLETE");
  EXPECT_EQ(trials[3]["state"], "COMPLETE");
}

// The device peak `tune estimate` predicts for a bf16 training configuration on CUDA.
int64_t DevicePeak(const std::string& model, int batch, int grad_accum = 1) {
  ProcessRun r = Tune({"estimate", "--model", model, "--batch-size", std::to_string(batch),
                       "--grad-accum", std::to_string(grad_accum), "--max-length", "128",
                       "--precision", "bf16", "--format", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  return Json::parse(r.out)["device_peak"].get<int64_t>();
}

// A command objective with a "memory" section: admission halves the batch (the program's argv
// and TUNE_PARAM_* show the shrunk values) and a configuration that cannot fit is pruned without
// running.
TEST_F(JobsCli, TheGuardAdmitsShrinksAndRejectsCommandTrials) {
  // Halving the batch doubles the accumulation (the gradients then stay alive across
  // micro-batches): bert-base at 16 x 2 against 32 x 1.
  const int64_t b16 = DevicePeak("bert-base-uncased", 16, 2),
                b32 = DevicePeak("bert-base-uncased", 32);
  const int64_t large = DevicePeak("roberta-large", 1);
  ASSERT_LT(b16, b32);
  ASSERT_LT(b32, large);  // a card between bert-base at 16 and 32 cannot hold roberta-large
  // A model never measured is predicted at its estimate x kUnmeasuredHeadroom: the card holds
  // bert-base at 16 with that headroom, not at 32.
  const auto usable = static_cast<int64_t>(MemoryCalibration::kUnmeasuredHeadroom *
                                           static_cast<double>(b16 + b32) / 2);
  const int64_t device_memory = static_cast<int64_t>(static_cast<double>(usable) / 0.95) + 1;
  const std::string program = std::string(TUNE_TEST_DATA_DIR) + "/memory_objective.py";
  Json doc = {
      {"direction", "maximize"},
      {"n_trials", 2},
      {"search_space",
       {{"model", {{"type", "model"}, {"choices", {"bert-base-uncased", "roberta-large"}}}},
        {"batch_size", {32}},
        {"max_length", {128}},
        {"grad_accum", {1}}}},
      {"enqueue_trials",
       {{{"model", "bert-base-uncased"},
         {"batch_size", 32},
         {"max_length", 128},
         {"grad_accum", 1}},
        {{"model", "roberta-large"}, {"batch_size", 32}, {"max_length", 128}, {"grad_accum", 1}}}},
      {"objective",
       {{"type", "command"},
        {"argv",
         {"/usr/bin/python3", program, "--per_device_train_batch_size={batch_size}",
          "--gradient_accumulation_steps={grad_accum}"}},
        {"work_dir", (dir_.path() / "trials").string()},
        {"memory",
         {{"device_memory", device_memory},
          {"levers", {"grad_accum"}},
          {"model", "{model}"},
          {"batch_size", "{batch_size}"},
          {"max_length", "{max_length}"},
          {"grad_accum", "{grad_accum}"},
          {"precision", "bf16"}}}}}};
  const std::string config = (dir_.path() / "memory.json").string();
  std::ofstream(config) << doc.dump(2);
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage()});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  // Trial 0 ran at half the batch and twice the accumulation, and says so everywhere.
  const Json ran = Json::parse(Slurp(dir_.path() / "trials" / "trial_0" / "ran.json"));
  EXPECT_EQ(ran["argv"],
            Json({"--per_device_train_batch_size=16", "--gradient_accumulation_steps=2"}));
  EXPECT_EQ(ran["params"]["batch_size"], "16");
  EXPECT_EQ(trials[0]["state"], "COMPLETE");
  EXPECT_EQ(trials[0]["value"], 16.0);
  EXPECT_EQ(trials[0]["params"]["batch_size"], 32);  // the trial keeps what the sampler chose
  const Json& memory = trials[0]["user_attrs"]["memory"];
  EXPECT_EQ(memory["admission"], "run_with_levers") << memory.dump();
  EXPECT_EQ(memory["peak"], 123456789);  // the program's {"memory_peak": ...}
  EXPECT_EQ(memory["batch_size"], 16);
  // Trial 1 never ran.
  EXPECT_EQ(trials[1]["state"], "PRUNED");
  EXPECT_EQ(trials[1]["user_attrs"]["reason"], "predicted");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "trials" / "trial_1" / "ran.json"));
}

// A command study of memory_objective.py (each trial sleeps `seconds`) on a card of
// `device_memory`, running the enqueued `trials` of bert-base-uncased; `memory` adds keys to
// the objective's memory section.
std::string MemoryStudy(const std::filesystem::path& dir, int64_t device_memory,
                        const std::vector<int>& batch_sizes, double seconds,
                        const Json& memory = Json::object()) {
  Json trials = Json::array();
  for (int b : batch_sizes) {
    trials.push_back({{"model", "bert-base-uncased"}, {"batch_size", b}, {"max_length", 128}});
  }
  Json doc = {
      {"direction", "maximize"},
      {"search_space",
       {{"model", {{"type", "model"}, {"choices", {"bert-base-uncased"}}}},
        {"batch_size", {4, 32}},
        {"max_length", {128}}}},
      {"enqueue_trials", trials},
      {"objective",
       {{"type", "command"},
        {"argv", {"/usr/bin/python3", std::string(TUNE_TEST_DATA_DIR) + "/memory_objective.py"}},
        {"env", {{"MEMORY_OBJECTIVE_SECONDS", fmt::format("{}", seconds)}}},
        {"work_dir", (dir / "trials").string()},
        {"memory",
         {{"device_memory", device_memory},
          {"model", "{model}"},
          {"batch_size", "{batch_size}"},
          {"max_length", "{max_length}"},
          {"precision", "bf16"}}}}}};
  for (const auto& [k, v] : memory.items()) doc["objective"]["memory"][k] = v;
  const std::string config = (dir / "memory.json").string();
  std::ofstream(config) << doc.dump(2);
  return config;
}

// A card that holds bert-base at batch 32 beside one at batch 4, not two at 32. Models never
// measured are reserved at estimate x kUnmeasuredHeadroom.
int64_t CardFor32And4() {
  const int64_t b4 = DevicePeak("bert-base-uncased", 4), b32 = DevicePeak("bert-base-uncased", 32);
  EXPECT_LT(b4, b32);
  const double headroom = MemoryCalibration::kUnmeasuredHeadroom;
  const auto usable = static_cast<int64_t>(headroom * static_cast<double>(b32 + (b32 + b4) / 2));
  return static_cast<int64_t>(static_cast<double>(usable) / 0.95) + 1;
}

// Backfilling: with bert-base at batch 32 running, a second one at 32 does not fit beside it and
// waits; a later trial at batch 4 fits and starts first; the one at 32 starts when the first
// ends.
TEST_F(JobsCli, ASmallerLaterTrialStartsWhileTheOldestWaitsForMemory) {
  const std::string config = MemoryStudy(dir_.path(), CardFor32And4(), {32, 32, 4}, 1.0);
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage(), "--n-trials",
                       "3", "--jobs", "auto"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 3u);
  for (const Json& t : trials) ASSERT_EQ(t["state"], "COMPLETE") << t.dump();
  auto schedule = [&](int i, const char* key) {
    return trials[static_cast<size_t>(i)]["user_attrs"]["schedule"][key].get<std::string>();
  };
  EXPECT_LT(schedule(2, "started"), schedule(1, "started"));  // the small one went first
  EXPECT_LT(schedule(2, "started"), schedule(0, "ended"));    // beside trial 0
  EXPECT_GE(schedule(1, "started"), schedule(0, "ended"));    // trial 1 waited for trial 0
}

// On a CUDA device the status line carries the card's utilisation as NVML reports it (here the
// stand-in library, which says 37%).
TEST_F(JobsCli, TheStatusLineShowsTheCardsUtilization) {
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_UTIL", "37", 1);
  const std::string config = MemoryStudy(dir_.path(), int64_t{80} << 30, {4, 4}, 0.2);
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage(), "--n-trials",
                       "2", "--jobs", "2"});
  unsetenv("TUNE_FAKE_NVML_UTIL");
  unsetenv("TUNE_NVML_LIBRARY");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("GPU 37% utilized"), std::string::npos) << r.err;
}

// memory.shrink_to_start: with bert-base at batch 32 running, a second one at 32 does not fit
// beside it, but at a smaller micro-batch (16 x grad_accum 2 or less) it does: it starts at once
// with that micro-batch (the program receives it), where without shrink_to_start it waits for
// the first to end.
TEST_F(JobsCli, AWaitingTrialStartsAtOnceAtASmallerMicroBatchThatFits) {
  const Json levers = {{"levers", {"grad_accum"}}, {"grad_accum", "{grad_accum}"}};
  for (const bool shrink : {true, false}) {
    SCOPED_TRACE(shrink ? "shrink_to_start" : "wait");
    testing::TempDir dir;
    Json memory = levers;
    memory["shrink_to_start"] = shrink;
    const std::string config = MemoryStudy(dir.path(), CardFor32And4(), {32, 32}, 1.5, memory);
    Json doc = Json::parse(Slurp(config));
    doc["search_space"]["grad_accum"] = Json::array({1});
    for (Json& t : doc["enqueue_trials"]) t["grad_accum"] = 1;
    doc["objective"]["argv"].push_back("--per_device_train_batch_size={batch_size}");
    doc["objective"]["argv"].push_back("--gradient_accumulation_steps={grad_accum}");
    std::ofstream(config) << doc.dump(2);
    const std::string storage = "sqlite:///" + (dir.path() / "s.db").string();
    ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", storage, "--n-trials",
                         "2", "--jobs", "auto"});
    ASSERT_EQ(r.code, 0) << r.err;
    ProcessRun listed = Tune({"trials", "--study", "j", "--storage", storage, "--format", "json"});
    ASSERT_EQ(listed.code, 0) << listed.err;
    const Json trials = Json::parse(listed.out);
    ASSERT_EQ(trials.size(), 2u);
    for (const Json& t : trials) ASSERT_EQ(t["state"], "COMPLETE") << t.dump();
    const Json& second = trials[1];
    const Json ran = Json::parse(Slurp(dir.path() / "trials" / "trial_1" / "ran.json"));
    const std::string started = second["user_attrs"]["schedule"]["started"];
    const std::string first_ended = trials[0]["user_attrs"]["schedule"]["ended"];
    EXPECT_EQ(second["params"]["batch_size"], 32);  // the trial keeps what was asked
    if (shrink) {
      EXPECT_LT(started, first_ended);
      // A smaller micro-batch, the same effective batch, received by the program.
      const int64_t batch = second["user_attrs"]["memory"]["batch_size"];
      EXPECT_LT(batch, 32);
      EXPECT_EQ(second["user_attrs"]["memory"]["grad_accum"].get<int64_t>() * batch, 32);
      EXPECT_EQ(ran["argv"], Json({fmt::format("--per_device_train_batch_size={}", batch),
                                   fmt::format("--gradient_accumulation_steps={}", 32 / batch)}));
      EXPECT_EQ(second["value"], static_cast<double>(batch));
      EXPECT_NE(r.err.find("Trial 1 shrunk to start beside 1 running"), std::string::npos) << r.err;
      EXPECT_LE(second["user_attrs"]["schedule"]["reservation"].get<int64_t>(),
                static_cast<int64_t>(0.95 * static_cast<double>(CardFor32And4())) -
                    trials[0]["user_attrs"]["schedule"]["reservation"].get<int64_t>());
    } else {
      EXPECT_GE(started, first_ended);
      EXPECT_EQ(ran["argv"],
                Json({"--per_device_train_batch_size=32", "--gradient_accumulation_steps=1"}));
    }
  }
}

// --timeout: the running trial finishes; the ones waiting for memory never start.
TEST_F(JobsCli, TrialsStillWaitingAtTheTimeoutNeverStart) {
  const std::string config = MemoryStudy(dir_.path(), CardFor32And4(), {32, 32, 32}, 2.0);
  ProcessRun r = Tune({"--study", "j", "--config", config, "--storage", Storage(), "--n-trials",
                       "3", "--jobs", "auto", "--timeout", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0]["state"], "COMPLETE");
  for (int i : {1, 2}) {
    const Json& t = trials[static_cast<size_t>(i)];
    EXPECT_EQ(t["state"], "FAIL") << t.dump();
    EXPECT_EQ(t["user_attrs"]["reason"], "timeout");
    EXPECT_FALSE(t["user_attrs"]["schedule"].contains("started"));
    EXPECT_FALSE(std::filesystem::exists(dir_.path() / "trials" / ("trial_" + std::to_string(i)) /
                                         "ran.json"));
  }
}

TEST_F(JobsCli, BadJobsValuesAreUsageErrors) {
  const std::string config = WriteConfig({{"mode", {"sleep"}}});
  ProcessRun r = Tune({"--study", "j", "--config", config, "--jobs", "many"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--jobs: expected \"auto\" or a number of trials from 1 to 256, got many"),
            std::string::npos)
      << r.err;
  const std::string bad = WriteConfig({{"mode", {"sleep"}}}, {{"jobs", 0}});
  r = Tune({"--study", "j", "--config", bad});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("study.json: /jobs: expected \"auto\""), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tune

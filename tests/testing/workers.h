// Several `tune` worker processes on one study, for the CLI tests of every storage backend:
// start them, wait for them, and check that they shared the study without losing or
// duplicating a trial.
//
//   TempDir dir;
//   ExpectWorkersShareAStudy("sqlite:///" + (dir.path() / "s.db").string(), dir.path(),
//                            /*workers=*/8, /*n_trials=*/400, WriteSphereConfig(dir.path()));
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune::testing {

// Starts `tune args...` in `cwd` with stdout to /dev/null and stderr to `log`; returns its pid.
inline pid_t SpawnTune(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                       const std::filesystem::path& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (chdir(cwd.c_str()) != 0) _exit(126);
  if (!freopen(log.c_str(), "w", stderr)) _exit(126);
  if (!freopen("/dev/null", "w", stdout)) _exit(126);
  std::vector<char*> argv = {const_cast<char*>(TUNE_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(TUNE_BINARY, argv.data());
  _exit(127);
}

// Waits for `pid` up to `timeout_seconds` (then kills it); its exit status, or -1 if it did not
// exit normally.
inline int WaitTune(pid_t pid, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "tune (pid " << pid << ") still running after " << timeout_seconds
                    << "s; killed";
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A sphere study config (TPE, 3 reported steps per trial) in `dir`; returns its path.
inline std::string WriteSphereConfig(const std::filesystem::path& dir,
                                     const std::string& direction = "minimize") {
  std::filesystem::path cfg = dir / "sphere.json";
  std::ofstream(cfg) << R"({"direction": ")" << direction << R"(", "sampler": {"name": "tpe",
    "n_startup_trials": 3}, "search_space": {"x0": {"type": "float", "low": -5, "high": 5},
    "x1": {"type": "float", "low": -5, "high": 5}},
    "objective": {"type": "function", "name": "sphere", "n_steps": 3}})";
  return cfg.string();
}

// The study's trials as `tune trials --format json` prints them.
inline Json TrialsJson(const std::string& storage_url, const std::string& study,
                       const std::string& cwd = TUNE_SOURCE_DIR) {
  ProcessRun r =
      Tune({"trials", "--study", study, "--storage", storage_url, "--format", "json"}, cwd);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? Json::parse(r.out) : Json::array();
}

// Runs `workers` processes of `tune --study shared --n-trials n_trials` on `storage_url` at
// once and checks: every worker exits 0 without an error line; the study holds exactly
// n_trials trials, all COMPLETE, numbered 0..n_trials-1; each was run by exactly one worker
// (its "Trial N COMPLETE" line is in exactly one log), so none was lost or run twice.
inline void ExpectWorkersShareAStudy(const std::string& storage_url,
                                     const std::filesystem::path& dir, int workers, int n_trials,
                                     const std::string& config) {
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    pids.push_back(SpawnTune({"--study", "shared", "--config", config, "--n-trials",
                              std::to_string(n_trials), "--storage", storage_url},
                             dir, dir / ("worker" + std::to_string(w) + ".log")));
    ASSERT_GT(pids.back(), 0);
  }
  std::map<int64_t, int> runs;  // trial number -> how many workers logged it as COMPLETE
  const std::regex complete(R"(\] Trial (\d+) COMPLETE )");
  std::string per_worker;
  for (int w = 0; w < workers; ++w) {
    const int code = WaitTune(pids[static_cast<size_t>(w)], 600);
    const std::string log = Slurp(dir / ("worker" + std::to_string(w) + ".log"));
    EXPECT_EQ(code, 0) << "worker " << w << ":\n" << log;
    EXPECT_EQ(log.find("] [error]"), std::string::npos) << "worker " << w << ":\n" << log;
    int n = 0;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), complete);
         it != std::sregex_iterator(); ++it, ++n) {
      ++runs[std::stoll((*it)[1].str())];
    }
    per_worker += (w ? " " : "") + std::to_string(n);
  }
  std::cerr << "[ workers ] trials finished per worker: " << per_worker << "\n";
  Json trials = TrialsJson(storage_url, "shared", dir.string());
  ASSERT_EQ(trials.size(), static_cast<size_t>(n_trials));
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i]["number"], i);
    EXPECT_EQ(trials[i]["state"], "COMPLETE") << trials[i].dump();
    const int by = runs[static_cast<int64_t>(i)];
    EXPECT_EQ(by, 1) << "trial " << i << " logged as COMPLETE by " << by << " workers";
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(n_trials));
}

// A study whose command objective touches `dir`/started_<trial number> when a trial's program
// starts, sleeps `sleep_seconds` and reports x; returns the config's path.
inline std::string WriteSleepyCommandConfig(const std::filesystem::path& dir,
                                            double sleep_seconds) {
  const std::filesystem::path script = dir / "sleepy.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "touch \"$(dirname \"$0\")/started_$TUNE_TRIAL_NUMBER\"\n"
                           "sleep \"$1\"\n"
                           "echo \"{\\\"value\\\": $TUNE_PARAM_X}\"\n";
  const std::filesystem::path cfg = dir / "sleepy.json";
  Json doc = {{"direction", "minimize"},
              {"sampler", {{"name", "random"}, {"seed", 1}}},
              {"search_space", {{"x", {{"type", "float"}, {"low", -5}, {"high", 5}}}}},
              {"objective",
               {{"type", "command"},
                {"argv", {"/bin/sh", script.string(), std::to_string(sleep_seconds)}}}}};
  std::ofstream(cfg) << doc.dump(2);
  return cfg.string();
}

// Waits up to `timeout_seconds` for `path` to exist.
inline bool WaitForFile(const std::filesystem::path& path, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// kill -9 of a worker in the middle of trial 1; after the grace period the next run fails the
// trial as stale and, with --retry-failed, runs it again with the same params (system attrs
// failed_trial and retry_history as Optuna's RetryFailedTrialCallback sets them).
inline void ExpectKilledWorkersTrialIsRetried(const std::string& storage_url,
                                              const std::filesystem::path& dir) {
  const std::string cfg = WriteSleepyCommandConfig(dir, 0.3);
  std::vector<std::string> common = {"--study", "k", "--config", cfg, "--storage", storage_url};
  common.insert(common.end(),
                {"--n-trials", "3", "--heartbeat-interval", "0.3", "--grace-period", "1"});
  pid_t first = SpawnTune(common, dir, dir / "first.log");
  ASSERT_GT(first, 0);
  const bool started = WaitForFile(dir / "started_1", 120);
  kill(first, SIGKILL);
  int status = 0;
  waitpid(first, &status, 0);
  ASSERT_TRUE(started) << Slurp(dir / "first.log");
  Json before = TrialsJson(storage_url, "k", dir.string());
  ASSERT_EQ(before.size(), 2u) << before.dump(1);
  EXPECT_EQ(before[0]["state"], "COMPLETE");
  EXPECT_EQ(before[1]["state"], "RUNNING");
  ASSERT_TRUE(before[1]["params"].contains("x"));

  // Its last heartbeat is at most as recent as the kill: after 1.5 s it is older than 1 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--retry-failed", "1"});
  ProcessRun next = Tune(args, dir.string());
  ASSERT_EQ(next.code, 0) << next.err;
  EXPECT_NE(next.err.find("Trial 1 FAIL (stale: no heartbeat for"), std::string::npos) << next.err;
  EXPECT_NE(next.err.find("re-enqueued as trial 2 with the same params (retry 1 of 1)"),
            std::string::npos)
      << next.err;
  Json after = TrialsJson(storage_url, "k", dir.string());
  ASSERT_EQ(after.size(), 4u) << after.dump(1);
  EXPECT_EQ(after[0], before[0]);  // untouched
  EXPECT_EQ(after[1]["state"], "FAIL");
  EXPECT_EQ(after[1]["params"], before[1]["params"]);
  EXPECT_EQ(after[1]["user_attrs"]["fail_reason"].get<std::string>().rfind("stale: ", 0), 0u);
  EXPECT_EQ(after[2]["state"], "COMPLETE");
  EXPECT_EQ(after[2]["params"], before[1]["params"]);  // the same params, run again
  EXPECT_EQ(after[2]["system_attrs"]["failed_trial"], 1);
  EXPECT_EQ(after[2]["system_attrs"]["retry_history"], Json::array({1}));
  EXPECT_FALSE(after[2]["user_attrs"].contains("fail_reason"));
  EXPECT_EQ(after[3]["state"], "COMPLETE");  // the retry made up for the failed trial
  EXPECT_FALSE(after[3]["system_attrs"].contains("failed_trial"));
}

// Runs `runs` workers one after another, each killed with SIGKILL after a random delay of
// 50-500 ms (trials take about 30 ms), and checks after every kill that no COMPLETE trial of an
// earlier check is missing or changed and that numbers stay contiguous; then a last run
// finishes 5 more trials, failing the dead workers' trials as stale and retrying them. Returns
// the study's trials at the end.
inline Json KillWorkersAtRandomPoints(const std::string& storage_url,
                                      const std::filesystem::path& dir, int runs) {
  const std::string cfg = WriteSleepyCommandConfig(dir, 0.03);
  std::vector<std::string> common = {"--study", "r", "--config", cfg, "--storage", storage_url};
  common.insert(common.end(),
                {"--heartbeat-interval", "0.2", "--grace-period", "0.6", "--retry-failed", "2"});
  std::mt19937 rng(20261121);
  std::map<int64_t, Json> complete;  // number -> trial, from the previous check
  auto check = [&](const Json& trials, const std::string& when) {
    std::map<int64_t, Json> now;
    for (size_t i = 0; i < trials.size(); ++i) {
      EXPECT_EQ(trials[i]["number"], i) << when;
      if (trials[i]["state"] == "COMPLETE") now[trials[i]["number"].get<int64_t>()] = trials[i];
    }
    for (const auto& [number, t] : complete) {
      auto it = now.find(number);
      if (it == now.end()) {
        ADD_FAILURE() << when << ": COMPLETE trial " << number << " was lost";
        continue;
      }
      EXPECT_EQ(it->second["values"], t["values"]) << when << ": trial " << number;
      EXPECT_EQ(it->second["params"], t["params"]) << when << ": trial " << number;
    }
    complete = std::move(now);
  };
  for (int run = 0; run < runs; ++run) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--n-trials", "100000"});
    const std::string log = "run" + std::to_string(run) + ".log";
    pid_t pid = SpawnTune(args, dir, dir / log);
    if (pid <= 0) {
      ADD_FAILURE() << "cannot start tune";
      return Json::array();
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 500)(rng)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    // Killed before the study had a trial (maybe before it existed): nothing to check yet.
    if (!std::filesystem::exists(dir / "started_0")) continue;
    check(TrialsJson(storage_url, "r", dir.string()), "after kill " + std::to_string(run));
  }
  // Every dead worker's trial is stale now (grace period 0.6 s): the last run fails them all
  // when it starts.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Json before = TrialsJson(storage_url, "r", dir.string());
  int64_t finished = 0;
  for (const Json& t : before) finished += t["state"] != "RUNNING" && t["state"] != "WAITING";
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--n-trials", std::to_string(finished + 5)});
  const int code = WaitTune(SpawnTune(args, dir, dir / "last.log"), 300);
  EXPECT_EQ(code, 0) << Slurp(dir / "last.log");
  Json trials = TrialsJson(storage_url, "r", dir.string());
  check(trials, "after the last run");
  int64_t stale = 0;
  for (const Json& t : trials) {
    EXPECT_NE(t["state"], "RUNNING") << t.dump();  // every dead worker's trial was failed
    if (t["state"] == "FAIL") {
      ++stale;
      EXPECT_EQ(t["user_attrs"]["fail_reason"].get<std::string>().rfind("stale: ", 0), 0u)
          << t.dump();
    }
    if (t["system_attrs"].contains("retry_history")) {
      // A retry has the params of the trial it replaces: all of them if that one was killed
      // after sampling, fewer (and the rest sampled afresh) if it was killed before.
      const int64_t previous = t["system_attrs"]["retry_history"].back().get<int64_t>();
      for (const auto& [name, v] : trials[static_cast<size_t>(previous)]["params"].items()) {
        EXPECT_EQ(t["params"][name], v) << t.dump();
      }
      EXPECT_LE(t["system_attrs"]["retry_history"].size(), 2u);
    }
  }
  std::cerr << "[ kill loop ] " << runs << " runs killed: " << trials.size() << " trials, "
            << complete.size() << " COMPLETE, " << stale << " failed as stale\n";
  return trials;
}

}  // namespace tune::testing

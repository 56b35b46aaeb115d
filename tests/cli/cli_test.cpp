// Runs the built `tune` binary like a user: exit codes, output formats, config errors, Ctrl-C.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Tune;

TEST(Cli, DemoRunsAndPrintsTheBestTrial) {
  ProcessRun r = Tune({"--study", "demo", "--n-trials", "20", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json best = Json::parse(r.out);
  EXPECT_EQ(best["state"], "COMPLETE");
  EXPECT_TRUE(best["params"].contains("model"));
  EXPECT_NE(r.err.find("Trial 19 COMPLETE"), std::string::npos);
  EXPECT_NE(r.err.find("Progress: 20/20"), std::string::npos);
}

TEST(Cli, SeedMakesRunsReproducible) {
  ProcessRun a = Tune({"--study", "demo", "--n-trials", "15", "--seed", "7", "--format", "json"});
  ProcessRun b = Tune({"--study", "demo", "--n-trials", "15", "--seed", "7", "--format", "json"});
  ASSERT_EQ(a.code, 0);
  ASSERT_EQ(b.code, 0);
  Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  EXPECT_EQ(ja["number"], jb["number"]);
  EXPECT_EQ(ja["params"], jb["params"]);
  EXPECT_EQ(ja["value"], jb["value"]);
  ProcessRun c = Tune({"--study", "demo", "--n-trials", "15", "--seed", "8", "--format", "json"});
  EXPECT_NE(Json::parse(c.out)["params"], ja["params"]);
}

TEST(Cli, UsageErrorsExit2) {
  EXPECT_EQ(Tune({}).code, 2);                                      // no --study
  EXPECT_EQ(Tune({"--study", "demo", "--n-trails", "5"}).code, 2);  // unknown flag
  EXPECT_EQ(Tune({"--study", "demo", "--n-trials", "-1"}).code, 2);
  ProcessRun missing = Tune({"--study", "dmeo"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("configs/dmeo.json"), std::string::npos);
  EXPECT_NE(missing.err.find("did you mean 'demo'"), std::string::npos);
  ProcessRun storage = Tune({"--study", "demo", "--storage", "memroy"});
  EXPECT_EQ(storage.code, 2);
  EXPECT_NE(storage.err.find("did you mean 'memory'"), std::string::npos);
  EXPECT_EQ(Tune({"--study", "demo", "--sampler", "tpee"}).code, 2);
  EXPECT_EQ(Tune({"--study", "demo", "--log-level", "loud"}).code, 2);
  EXPECT_EQ(Tune({"--help"}).code, 0);
}

TEST(Cli, BadConfigExits2AndNamesThePath) {
  testing::TempDir dir;
  auto cfg = dir.path() / "bad.json";
  std::ofstream(cfg)
      << R"({"search_space": {"lr": {"type": "float", "low": 0, "high": 1, "log": true}},
                            "objective": {"type": "function", "name": "sphere"}})";
  ProcessRun r = Tune({"--study", "x", "--config", cfg.string(), "--n-trials", "3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.json: /search_space/lr/low"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());  // nothing ran, nothing printed
}

TEST(Cli, ManagementCommandsOnMemoryStorage) {
  ProcessRun studies = Tune({"studies", "--storage", "memory", "--format", "json"});
  EXPECT_EQ(studies.code, 0);
  EXPECT_EQ(Json::parse(studies.out), Json::array());
  ProcessRun trials = Tune({"trials", "--study", "demo", "--storage", "memory"});
  EXPECT_EQ(trials.code, 2);  // study not found
  EXPECT_NE(trials.err.find("study 'demo' not found"), std::string::npos);
  EXPECT_EQ(Tune({"best-trial", "--study", "demo", "--storage", "memory", "--format", "xml"}).code,
            2);
}

TEST(Cli, CommandObjectiveEndToEnd) {
  testing::TempDir dir;
  auto cfg = dir.path() / "cmd.json";
  std::ofstream(cfg) << R"({"direction": "minimize", "n_trials": 6,
    "search_space": {"x": {"type": "float", "low": -2, "high": 2}},
    "objective": {"type": "command", "argv": ["/usr/bin/python3", ")"
                     << TUNE_TEST_DATA_DIR << R"(/objective.py", "ok"]}})";
  ProcessRun r =
      Tune({"--study", "cmd", "--config", cfg.string(), "--storage", "memory", "--format", "csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("key,value"), std::string::npos);
  EXPECT_NE(r.out.find("params_x,"), std::string::npos);
}

// Ctrl-C during a trial: the running trial is failed, the best trial so far is printed, exit 130.
TEST(Cli, InterruptExits130) {
  testing::TempDir dir;
  auto cfg = dir.path() / "slow.json";
  std::ofstream(cfg) << R"({"n_trials": 100,
    "search_space": {"x": {"type": "float", "low": -2, "high": 2}},
    "objective": {"type": "command", "argv": ["/usr/bin/python3", ")"
                     << TUNE_TEST_DATA_DIR << R"(/objective.py", "sleep"]}})";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(TUNE_BINARY, TUNE_BINARY, "--study", "slow", "--config", cfg.c_str(), "--storage",
          "memory", nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto start = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(secs, 10.0);  // the 30 s trial was stopped
}

}  // namespace
}  // namespace tune

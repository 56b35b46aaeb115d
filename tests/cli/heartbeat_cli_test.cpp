// Heartbeats with the tune binary on SQLite: kill -9 of a worker mid-trial, stale trials failed
// and retried, 20 runs killed at random points, and the file still opened by Debian's Optuna.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "testing/workers.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Slurp;
using testing::TempDir;
using testing::Tune;

TEST(CliHeartbeat, KilledWorkersTrialIsFailedAsStaleAndRetriedWithItsParams) {
  TempDir dir;
  testing::ExpectKilledWorkersTrialIsRetried("sqlite:///" + (dir.path() / "k.db").string(),
                                             dir.path());
}

TEST(CliHeartbeat, BadSettingsExit2) {
  TempDir dir;
  const std::string cfg = testing::WriteSphereConfig(dir.path());
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"--study",    "s", "--config",  cfg,
                                     "--n-trials", "1", "--storage", "sqlite:///s.db"};
    args.insert(args.end(), flags.begin(), flags.end());
    return Tune(args, dir.path().string());
  };
  ProcessRun close = run({"--heartbeat-interval", "10", "--grace-period", "10"});
  EXPECT_EQ(close.code, 2);
  EXPECT_NE(close.err.find("the grace period (10s) must be greater than the heartbeat interval"),
            std::string::npos)
      << close.err;
  EXPECT_EQ(run({"--grace-period", "0"}).code, 2);
  EXPECT_EQ(run({"--heartbeat-interval", "-1"}).code, 2);
  EXPECT_EQ(run({"--retry-failed", "-2"}).code, 2);
  EXPECT_FALSE(fs::exists(dir.path() / "s.db"));
  ProcessRun off = run({"--heartbeat-interval", "0"});
  EXPECT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.err.find("Heartbeat every"), std::string::npos) << off.err;
  ProcessRun on = run({"--heartbeat-interval", "5", "--retry-failed", "2"});
  EXPECT_EQ(on.code, 0) << on.err;
  EXPECT_NE(on.err.find("Heartbeat every 5s; RUNNING trials silent for more than 10s are failed "
                        "as stale and retried up to 2 time(s)"),
            std::string::npos)
      << on.err;
}

// Runs a shell command; its exit status and stdout.
ProcessRun Shell(const std::string& command, const fs::path& dir) {
  const std::string out = (dir / "shell.out").string(), err = (dir / "shell.err").string();
  int status = std::system((command + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
}

TEST(CliHeartbeat, RandomKillsLoseNoCompleteTrialAndOptunaStillOpensTheFile) {
  TempDir dir;
  const fs::path db = dir.path() / "r.db";
  // Debian 12's Optuna 3.1 opens schema v3.0.0.d only; Optuna >= 3.2 (Debian 13's 4.1) opens
  // the default v3.2.0.a and refuses v3.0.0.d until it is upgraded.
  const bool optuna_3_1 =
      Shell(
          "/usr/bin/python3 -c \"import optuna, sys; "
          "sys.exit(0 if tuple(map(int, optuna.__version__.split('.')[:2])) < (3, 2) else 1)\"",
          dir.path())
          .code == 0;
  const std::string url = "sqlite:///" + db.string() + (optuna_3_1 ? "?schema=v3.0.0.d" : "");
  Json trials = testing::KillWorkersAtRandomPoints(url, dir.path(), 20);
  ASSERT_FALSE(trials.empty());
  ProcessRun integrity = Shell(
      "/usr/bin/python3 -c \"import sqlite3,sys; print(sqlite3.connect("
      "sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])\" '" +
          db.string() + "'",
      dir.path());
  EXPECT_EQ(integrity.out, "ok\n") << integrity.err;

  if (Shell("/usr/bin/python3 -c 'import optuna'", dir.path()).code != 0) {
    std::cerr << "\n*** SKIPPED: Debian's python3-optuna is not installed, so the Optuna check of "
                 "the killed study did not run (scripts/install-deps.sh installs it) ***\n\n";
    GTEST_SKIP() << "python3-optuna is not installed";
  }
  ProcessRun optuna = Shell(
      "/usr/bin/python3 -c \"import json, optuna, sys\n"
      "optuna.logging.set_verbosity(optuna.logging.WARNING)\n"
      "s = optuna.load_study(study_name='r', storage=sys.argv[1])\n"
      "print(json.dumps({'numbers': [t.number for t in s.trials], 'states': [t.state.name for t "
      "in s.trials], 'params': [t.params for t in s.trials], 'best': s.best_trial.number}))\" "
      "'sqlite:///" +
          db.string() + "'",
      dir.path());
  ASSERT_EQ(optuna.code, 0) << optuna.err;
  Json seen = Json::parse(optuna.out);
  ASSERT_EQ(seen["numbers"].size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(seen["numbers"][i], trials[i]["number"]);
    EXPECT_EQ(seen["states"][i], trials[i]["state"]);
    EXPECT_EQ(seen["params"][i], trials[i]["params"]);
  }
  ProcessRun best = Tune({"best-trial", "--study", "r", "--storage", url, "--format", "json"},
                         dir.path().string());
  ASSERT_EQ(best.code, 0) << best.err;
  EXPECT_EQ(seen["best"], Json::parse(best.out)["number"]);
}

}  // namespace
}  // namespace tune

// The tune binary on a PostgreSQL storage (testing/postgres_server.h): a run, resuming and the
// read-only commands; eight worker processes on one study; bad URLs, servers and databases
// (exit 2, a clear message, no password, nothing created).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "testing/postgres_server.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "testing/workers.h"
#include "tune/trial.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Slurp;
using testing::TempDir;
using testing::Tune;
using Rows = std::vector<std::vector<std::string>>;

class CliPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    TUNE_SKIP_WITHOUT_POSTGRES();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string error;
    url_ = testing::TestPostgres::Get().NewDatabase(std::string("cli_") + info->name(), &error);
    ASSERT_FALSE(url_.empty()) << error;
  }

  Rows Sql(const std::string& sql) {
    std::string error;
    Rows rows = testing::PgQuery(url_, sql, &error);
    EXPECT_EQ(error, "") << sql;
    return rows;
  }

  // A small sphere study config in `dir`; returns its path.
  static std::string WriteConfig(const fs::path& dir, const std::string& direction = "minimize") {
    fs::path cfg = dir / "sphere.json";
    std::ofstream(cfg) << R"({"direction": ")" << direction << R"(", "sampler": {"name": "tpe",
      "n_startup_trials": 3}, "search_space": {"x0": {"type": "float", "low": -5, "high": 5},
      "x1": {"type": "float", "low": -5, "high": 5}},
      "objective": {"type": "function", "name": "sphere", "n_steps": 3}})";
    return cfg.string();
  }

  Json TrialsJson(const std::string& study, const std::string& storage) {
    ProcessRun r = Tune({"trials", "--study", study, "--storage", storage, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? Json::parse(r.out) : Json::array();
  }

  std::string url_;
};

TEST_F(CliPostgres, RunResumeAndReadOnlyCommands) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  // The scheme Optuna users write works too.
  const std::string psycopg2 = "postgresql+psycopg2" + url_.substr(url_.find("://"));
  ProcessRun first =
      Tune({"--study", "sph", "--config", cfg, "--n-trials", "5", "--storage", psycopg2});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.err.find("on " + psycopg2), std::string::npos) << first.err;
  EXPECT_EQ(Sql("SELECT version_num FROM alembic_version"), (Rows{{"v3.2.0.a"}}));

  ProcessRun again =
      Tune({"--study", "sph", "--config", cfg, "--n-trials", "8", "--storage", url_});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("Resuming study 'sph' (5 trials stored)"), std::string::npos)
      << again.err;
  EXPECT_NE(again.err.find("Progress: 8/8"), std::string::npos) << again.err;
  Json trials = TrialsJson("sph", url_);
  ASSERT_EQ(trials.size(), 8u);
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i]["number"], i);
    EXPECT_EQ(trials[i]["state"], "COMPLETE");
    EXPECT_EQ(trials[i]["intermediate_values"].size(), 3u);
  }
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM trial_intermediate_values"), (Rows{{"24"}}));

  ProcessRun studies = Tune({"studies", "--storage", url_, "--format", "json"});
  ASSERT_EQ(studies.code, 0) << studies.err;
  Json s = Json::parse(studies.out);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["name"], "sph");
  EXPECT_EQ(s[0]["n_trials"], 8);
  ProcessRun best = Tune({"best-trial", "--study", "sph", "--storage", url_, "--format", "json"});
  ASSERT_EQ(best.code, 0) << best.err;
  EXPECT_EQ(Json::parse(best.out)["state"], "COMPLETE");
  ProcessRun typo = Tune({"trials", "--study", "sphh", "--storage", url_});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean 'sph'"), std::string::npos) << typo.err;
  // A direction that does not match the stored study changes nothing.
  ProcessRun flipped = Tune({"--study", "sph", "--config", WriteConfig(dir.path(), "maximize"),
                             "--n-trials", "12", "--storage", url_});
  EXPECT_EQ(flipped.code, 2);
  EXPECT_NE(flipped.err.find("exists with direction(s) [MINIMIZE]"), std::string::npos)
      << flipped.err;
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM trials"), (Rows{{"8"}}));
}

// Eight tune processes start together on an empty database (all racing to create the schema
// and the study) and run one study to 400 finished trials: every process exits 0, the numbers
// are unique and contiguous, nothing is left RUNNING.
TEST_F(CliPostgres, EightWorkerProcessesShareAStudy) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  constexpr int kWorkers = 8;
  constexpr int kTarget = 400;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (chdir(dir.path().c_str()) != 0) _exit(126);
      std::string log = "worker" + std::to_string(w) + ".log";
      FILE* f = freopen(log.c_str(), "w", stderr);
      (void)f;
      FILE* o = freopen("/dev/null", "w", stdout);
      (void)o;
      execl(TUNE_BINARY, TUNE_BINARY, "--study", "shared", "--config", cfg.c_str(), "--n-trials",
            std::to_string(kTarget).c_str(), "--storage", url_.c_str(), nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  int per_worker_trials = 0;
  for (int w = 0; w < kWorkers; ++w) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[static_cast<size_t>(w)], &status, 0), pids[static_cast<size_t>(w)]);
    ASSERT_TRUE(WIFEXITED(status));
    const std::string log = Slurp(dir.path() / ("worker" + std::to_string(w) + ".log"));
    EXPECT_EQ(WEXITSTATUS(status), 0) << log;
    EXPECT_EQ(log.find("[error]"), std::string::npos) << log;
    EXPECT_EQ(log.find("[warning]"), std::string::npos) << log;
    per_worker_trials += log.find("COMPLETE value=") != std::string::npos;
  }
  // Each worker stops once the study holds the target; trials already started still finish.
  Json trials = TrialsJson("shared", url_);
  EXPECT_GE(trials.size(), static_cast<size_t>(kTarget));
  EXPECT_LE(trials.size(), static_cast<size_t>(kTarget + kWorkers - 1));
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i]["number"], i);
    EXPECT_EQ(trials[i]["state"], "COMPLETE");
  }
  EXPECT_EQ(Sql("SELECT COUNT(*) = COUNT(DISTINCT number), MIN(number), MAX(number) = COUNT(*) "
                "- 1, COUNT(*) FILTER (WHERE state <> 'COMPLETE') FROM trials"),
            (Rows{{"t", "0", "t", "0"}}));
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM studies"), (Rows{{"1"}}));
  EXPECT_GE(per_worker_trials, 2) << "the work was not shared";
}

TEST_F(CliPostgres, BadUrlsServersAndDatabasesExit2WithoutThePassword) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  auto run = [&](const std::string& storage) {
    return Tune({"--study", "s", "--config", cfg, "--n-trials", "2", "--storage", storage});
  };
  const std::string rest = url_.substr(url_.find("://") + 3);  // user@host:port/db
  const std::string user = rest.substr(0, rest.find('@'));
  const std::string host = rest.substr(rest.find('@') + 1, rest.rfind(':') - rest.find('@') - 1);
  const std::string port = rest.substr(rest.rfind(':') + 1, rest.find('/') - rest.rfind(':') - 1);

  ProcessRun r = run("postgresql://" + user + ":s3cret@" + host + ":99999/db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad port '99999'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;

  const std::string closed = std::to_string(testing::FreePort());
  r = run("postgresql://" + user + ":s3cret@" + host + ":" + closed + "/db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot connect to PostgreSQL database 'db' on " + host + ":" + closed),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;

  r = run("postgresql://" + user + ":s3cret@" + host + ":" + port + "/no_such_db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("database \"no_such_db\" does not exist"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;

  r = run(url_ + "?schema=v3.0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown schema 'v3.0'"), std::string::npos) << r.err;
  r = run("postgresq://" + user + ":s3cret@" + host + "/db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'postgresql'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;

  // Read-only commands never create the schema.
  r = Tune({"studies", "--storage", url_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds no Optuna/tune storage"), std::string::npos) << r.err;
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()"),
            (Rows{{"0"}}));
  // A revision tune does not know: refused, nothing changed.
  ASSERT_EQ(run(url_).code, 0);
  Sql("UPDATE alembic_version SET version_num = 'v5.1.0.a'");
  r = run(url_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'v5.1.0.a', which tune does not support; supported: v3.0.0.d"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM trials"), (Rows{{"2"}}));
}

// The heartbeat acceptance checks of tests/cli/heartbeat_cli_test.cpp, on PostgreSQL.
TEST_F(CliPostgres, KilledWorkersTrialIsFailedAsStaleAndRetriedWithItsParams) {
  TempDir dir;
  testing::ExpectKilledWorkersTrialIsRetried(url_, dir.path());
}

TEST_F(CliPostgres, RandomKillsLoseNoCompleteTrial) {
  TempDir dir;
  Json trials = testing::KillWorkersAtRandomPoints(url_, dir.path(), 10);
  int complete = 0;
  for (const Json& t : trials) complete += t["state"] == "COMPLETE";
  EXPECT_GE(complete, 5) << trials.dump(1);
}

}  // namespace
}  // namespace tune

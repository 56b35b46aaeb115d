// The tune binary on SQLite storages: the default file, resuming, the schema option, bad files
// and URLs (exit 2, nothing changed), and several worker processes on one study.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>

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

// A one-value query on a file, with the plain SQLite API.
std::string SqlValue(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string out = "<error>";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    out = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0)
              ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))
              : "<none>";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// A small sphere study config in `dir`; returns its path.
std::string WriteConfig(const fs::path& dir, const std::string& direction = "minimize") {
  return testing::WriteSphereConfig(dir, direction);
}

Json TrialsJson(const std::string& cwd, const std::string& study, const std::string& storage) {
  return testing::TrialsJson(storage, study, cwd);
}

TEST(CliSqlite, DefaultStorageIsTuneDbInTheWorkingDirectoryAndRerunsResume) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  ProcessRun first = Tune({"--study", "sph", "--config", cfg, "--n-trials", "5"}, dir.path());
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_TRUE(fs::exists(dir.path() / "tune.db"));
  EXPECT_NE(first.err.find("on sqlite:///tune.db"), std::string::npos) << first.err;
  EXPECT_EQ(SqlValue(dir.path() / "tune.db", "SELECT version_num FROM alembic_version"),
            "v3.2.0.a");

  ProcessRun again = Tune({"--study", "sph", "--config", cfg, "--n-trials", "8"}, dir.path());
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("Resuming study 'sph' (5 trials stored)"), std::string::npos)
      << again.err;
  EXPECT_NE(again.err.find("Progress: 8/8"), std::string::npos) << again.err;
  Json trials = TrialsJson(dir.path(), "sph", "sqlite:///tune.db");
  ASSERT_EQ(trials.size(), 8u);
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i]["number"], i);
    EXPECT_EQ(trials[i]["state"], "COMPLETE");
    EXPECT_EQ(trials[i]["intermediate_values"].size(), 3u);
  }
  // Reaching the target again runs nothing.
  ProcessRun done = Tune({"--study", "sph", "--config", cfg, "--n-trials", "8"}, dir.path());
  EXPECT_EQ(done.code, 0);
  EXPECT_EQ(TrialsJson(dir.path(), "sph", "sqlite:///tune.db").size(), 8u);

  // The read-only commands default to the same file.
  ProcessRun studies = Tune({"studies", "--format", "json"}, dir.path());
  ASSERT_EQ(studies.code, 0) << studies.err;
  Json s = Json::parse(studies.out);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["name"], "sph");
  EXPECT_EQ(s[0]["n_trials"], 8);
  ProcessRun best = Tune({"best-trial", "--study", "sph", "--format", "json"}, dir.path());
  ASSERT_EQ(best.code, 0) << best.err;
  EXPECT_EQ(Json::parse(best.out)["state"], "COMPLETE");
  ProcessRun typo = Tune({"trials", "--study", "sphh"}, dir.path());
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean 'sph'"), std::string::npos) << typo.err;
}

TEST(CliSqlite, AbsoluteUrlAndSchemaOption) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  const fs::path file = dir.path() / "old.db";
  const std::string url = "sqlite:///" + file.string() + "?schema=v3.0.0.d";
  ASSERT_EQ(url.rfind("sqlite:////", 0), 0u);
  ProcessRun r = Tune({"--study", "s", "--config", cfg, "--n-trials", "3", "--storage", url});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SqlValue(file, "SELECT version_num FROM alembic_version"), "v3.0.0.d");
  EXPECT_EQ(SqlValue(file, "SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'"), "3");
  // Resuming without the option keeps the file's revision; asking for another one is refused.
  ProcessRun more = Tune({"--study", "s", "--config", cfg, "--n-trials", "4", "--storage",
                          "sqlite:///" + file.string()});
  ASSERT_EQ(more.code, 0) << more.err;
  const std::string before = Slurp(file);
  ProcessRun clash = Tune({"--study", "s", "--config", cfg, "--n-trials", "9", "--storage",
                           "sqlite:///" + file.string() + "?schema=v3.2.0.a"});
  EXPECT_EQ(clash.code, 2);
  EXPECT_NE(clash.err.find("has schema revision v3.0.0.d, but v3.2.0.a was asked for"),
            std::string::npos)
      << clash.err;
  EXPECT_EQ(Slurp(file), before);
}

TEST(CliSqlite, BadStorageInputsExit2AndChangeNothing) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  auto run = [&](const std::string& storage) {
    return Tune({"--study", "s", "--config", cfg, "--n-trials", "2", "--storage", storage},
                dir.path());
  };
  // Not a database.
  const fs::path notes = dir.path() / "notes.db";
  std::ofstream(notes) << "not a database at all, just some text that is long enough\n";
  const std::string notes_before = Slurp(notes);
  ProcessRun r = run("sqlite:///notes.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'notes.db' is not a readable SQLite database"), std::string::npos) << r.err;
  EXPECT_EQ(Slurp(notes), notes_before);
  // A revision tune does not know.
  ASSERT_EQ(run("sqlite:///future.db").code, 0);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "future.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA journal_mode=DELETE; UPDATE alembic_version SET version_num = "
                         "'v5.1.0.a'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string future_before = Slurp(dir.path() / "future.db");
  r = run("sqlite:///future.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'v5.1.0.a', which tune does not support; supported: v3.0.0.d"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Slurp(dir.path() / "future.db"), future_before);
  // A direction that does not match the stored study.
  ASSERT_EQ(run("sqlite:///dir.db").code, 0);
  const std::string dir_before = Slurp(dir.path() / "dir.db");
  ProcessRun flipped = Tune({"--study", "s", "--config", WriteConfig(dir.path(), "maximize"),
                             "--n-trials", "5", "--storage", "sqlite:///dir.db"},
                            dir.path());
  EXPECT_EQ(flipped.code, 2);
  EXPECT_NE(flipped.err.find("exists with direction(s) [MINIMIZE]"), std::string::npos)
      << flipped.err;
  EXPECT_EQ(Slurp(dir.path() / "dir.db"), dir_before);
  // URLs.
  r = run("sqlite:///x.db?schema=v3.0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown schema 'v3.0'"), std::string::npos) << r.err;
  r = run("postgresql://u@localhost:99999/db");  // refused before connecting
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad port '99999'"), std::string::npos) << r.err;
  r = run("sqlit:///x.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'sqlite'"), std::string::npos) << r.err;
  // Read-only commands never create a file.
  r = Tune({"studies", "--storage", "sqlite:///missing.db"}, dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'missing.db' does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "missing.db"));
  EXPECT_FALSE(fs::exists(dir.path() / "x.db"));
}

// The issue's acceptance test: 8 worker processes x 50 trials on one SQLite study.
TEST(CliSqlite, EightWorkerProcessesShareAStudyExactly) {
  TempDir dir;
  testing::ExpectWorkersShareAStudy("sqlite:///" + (dir.path() / "shared.db").string(), dir.path(),
                                    /*workers=*/8, /*n_trials=*/400, WriteConfig(dir.path()));
}

// A job array's workers start a new study together: its config's enqueue_trials are enqueued
// once (they are created in one transaction, only while the study is empty), not once per worker.
TEST(CliSqlite, WorkersStartingANewStudyTogetherEnqueueItsTrialsOnce) {
  TempDir dir;
  Json config = Json::parse(Slurp(WriteConfig(dir.path())));
  config["enqueue_trials"] = {{{"x0", 1.0}, {"x1", 1.0}},
                              {{"x0", 2.0}, {"x1", 2.0}},
                              {{"x0", 3.0}, {"x1", 3.0}},
                              {{"x0", 4.0}, {"x1", 4.0}}};
  const std::string cfg = (dir.path() / "enqueue.json").string();
  std::ofstream(cfg) << config.dump();
  const std::string storage = "sqlite:///" + (dir.path() / "array.db").string();
  for (int round = 0; round < 3; ++round) {
    const std::string study = "array" + std::to_string(round);
    std::vector<pid_t> pids;
    for (int w = 0; w < 6; ++w) {
      pids.push_back(testing::SpawnTune(
          {"--study", study, "--config", cfg, "--storage", storage, "--n-trials", "0"}, dir.path(),
          dir.path() / ("w" + std::to_string(w) + ".log")));
    }
    for (pid_t pid : pids) EXPECT_EQ(testing::WaitTune(pid, 120), 0);
    Json trials = TrialsJson(dir.path().string(), study, storage);
    ASSERT_EQ(trials.size(), 4u) << trials.dump(2);
    for (size_t i = 0; i < trials.size(); ++i) {
      EXPECT_EQ(trials[i]["state"], "WAITING");
      EXPECT_EQ(trials[i]["system_attrs"]["fixed_params"]["x0"], 1.0 + static_cast<double>(i));
    }
  }
}

// Resuming: the sampler sees the earlier runs' trials, so a study run to 5 trials and resumed
// to 12 draws exactly what one run to 12 draws (TPE with the same seed: each trial's RNG is
// seeded by the seed and its number, and after 3 random startup trials TPE's draws depend on
// the history; with a history missing the first run, trials 5.. would be random startup
// draws).
TEST(CliSqlite, ResumedRunsSampleFromTheWholeHistory) {
  TempDir dir;
  const std::string cfg = WriteConfig(dir.path());
  auto run = [&](const std::string& db, const std::string& n) {
    return Tune({"--study", "s", "--config", cfg, "--seed", "3", "--n-trials", n, "--storage",
                 "sqlite:///" + db},
                dir.path());
  };
  ASSERT_EQ(run("once.db", "12").code, 0);
  ASSERT_EQ(run("twice.db", "5").code, 0);
  ProcessRun resumed = run("twice.db", "12");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("Resuming study 's' (5 trials stored)"), std::string::npos)
      << resumed.err;
  Json once = TrialsJson(dir.path(), "s", "sqlite:///once.db");
  Json twice = TrialsJson(dir.path(), "s", "sqlite:///twice.db");
  ASSERT_EQ(once.size(), 12u);
  ASSERT_EQ(twice.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(once[i]["params"], twice[i]["params"]) << "trial " << i;
    EXPECT_EQ(once[i]["value"], twice[i]["value"]) << "trial " << i;
  }
}

// Optuna 5.0's defaults (docs/config.md#defaults-and-presets): a config without "sampler" is
// sampled by TPE under the optuna-5.0 preset, for one objective and several, and the rules are
// recorded on the study. A study begun before (trials, no record: an older tune or Optuna) keeps
// the old rules, says so, and is recorded as such; names in the config win.
TEST(CliSqlite, StudiesFollowOptuna50DefaultsAndNeverSwitchMidway) {
  TempDir dir;
  const fs::path cfg = dir.path() / "plain.json";
  std::ofstream(cfg) << R"({"search_space": {"x0": {"type": "float", "low": -5, "high": 5}},
    "objective": {"type": "function", "name": "sphere", "dims": 1}, "direction": "minimize"})";
  const fs::path mo = dir.path() / "mo.json";
  std::ofstream(mo) << R"({"directions": ["minimize", "minimize"],
    "objective": {"type": "function", "name": "zdt1", "dims": 3}})";
  auto run = [&](const fs::path& config, const std::string& study, const std::string& n) {
    return Tune({"--study", study, "--config", config.string(), "--n-trials", n, "--storage",
                 "sqlite:///s.db"},
                dir.path());
  };
  const fs::path db = dir.path() / "s.db";
  auto rules = [&](const std::string& study) {
    return SqlValue(db,
                    "SELECT a.value_json FROM study_system_attributes a JOIN studies s ON "
                    "a.study_id = s.study_id WHERE s.study_name = '" +
                        study + "' AND a.key = 'tune:defaults'");
  };
  ProcessRun single = run(cfg, "single", "12");
  ASSERT_EQ(single.code, 0) << single.err;
  EXPECT_NE(single.err.find("sampler tpe (preset optuna-5.0, multivariate, constant liar)"),
            std::string::npos)
      << single.err;
  EXPECT_EQ(rules("single"), "\"optuna-5.0\"");
  ProcessRun several = run(mo, "several", "12");
  ASSERT_EQ(several.code, 0) << several.err;
  EXPECT_NE(several.err.find("sampler tpe (preset optuna-5.0, constant liar)"), std::string::npos)
      << several.err;

  // A study of an older tune: its trials, without the record.
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle,
                         "DELETE FROM study_system_attributes WHERE key = 'tune:defaults' AND "
                         "study_id = (SELECT study_id FROM studies WHERE study_name = 'single')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(handle);
  ProcessRun old = run(cfg, "single", "14");
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_NE(old.err.find("Study 'single' was begun before tune followed Optuna 5.0's defaults "
                         "and continues under its own: sampler random"),
            std::string::npos)
      << old.err;
  EXPECT_NE(old.err.find(", sampler random, "), std::string::npos) << old.err;
  EXPECT_EQ(rules("single"), "\"optuna-4.9\"");
  // Recorded: the next run keeps the old rules without being told again.
  ProcessRun again = run(cfg, "single", "15");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find(", sampler random, "), std::string::npos) << again.err;
  // Naming TPE keeps 4.9's TPE; naming the preset moves the study to 5.0's.
  const fs::path tpe = dir.path() / "tpe.json";
  std::ofstream(tpe) << R"({"search_space": {"x0": {"type": "float", "low": -5, "high": 5}},
    "objective": {"type": "function", "name": "sphere", "dims": 1}, "sampler": {"name": "tpe"}})";
  ProcessRun named = run(tpe, "single", "16");
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_NE(named.err.find("sampler tpe (preset optuna-4.9)"), std::string::npos) << named.err;
  const fs::path v50 = dir.path() / "v50.json";
  std::ofstream(v50) << R"({"search_space": {"x0": {"type": "float", "low": -5, "high": 5}},
    "objective": {"type": "function", "name": "sphere", "dims": 1},
    "sampler": {"name": "tpe", "preset": "optuna-5.0"}})";
  ProcessRun moved = run(v50, "single", "17");
  ASSERT_EQ(moved.code, 0) << moved.err;
  EXPECT_NE(moved.err.find("sampler tpe (preset optuna-5.0, multivariate, constant liar)"),
            std::string::npos)
      << moved.err;
  EXPECT_EQ(TrialsJson(dir.path(), "single", "sqlite:///s.db").size(), 17u);
}

}  // namespace
}  // namespace tune

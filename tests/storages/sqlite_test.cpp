// The SQLite backend on real files: Optuna's schema, reopening, files Optuna wrote, bad files
// (left byte-identical), URLs, the statements a read runs, and several processes writing one
// file.
#include "tune/storages/sqlite.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "storages/rdb/codec.h"
#include "storages/rdb/rdb_storage.h"
#include "storages/sqlite/sqlite_connection.h"
#include "testing/storage_processes.h"
#include "testing/temp_dir.h"
#include "util/py_json.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs SQL on a file with the plain SQLite API (outside tune); returns the rows as text.
std::vector<std::vector<std::string>> Sql(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  std::vector<std::vector<std::string>> rows;
  char* err = nullptr;
  auto cb = [](void* out, int n, char** vals, char**) {
    auto* r = static_cast<std::vector<std::vector<std::string>>*>(out);
    r->emplace_back();
    for (int i = 0; i < n; ++i) r->back().push_back(vals[i] ? vals[i] : "NULL");
    return 0;
  };
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), cb, &rows, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return rows;
}

std::unique_ptr<Storage> Open(const fs::path& file, SqliteOptions options = {}) {
  auto s = OpenSqliteStorage(file.string(), options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Expects OpenSqliteStorage to fail with `code` and a message containing every `needles`, and
// the file (and its directory listing) to be unchanged.
void ExpectRefused(const fs::path& file, const SqliteOptions& options, StatusCode code,
                   const std::vector<std::string>& needles) {
  const std::string before = Slurp(file);
  std::set<std::string> listing_before;
  for (const auto& e : fs::directory_iterator(file.parent_path())) {
    listing_before.insert(e.path().filename().string());
  }
  auto s = OpenSqliteStorage(file.string(), options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), code) << s.status().ToString();
  for (const auto& n : needles) {
    EXPECT_NE(s.status().message().find(n), std::string::npos)
        << "missing '" << n << "' in: " << s.status().message();
  }
  EXPECT_EQ(Slurp(file), before) << "the file was modified";
  std::set<std::string> listing_after;
  for (const auto& e : fs::directory_iterator(file.parent_path())) {
    listing_after.insert(e.path().filename().string());
  }
  EXPECT_EQ(listing_after, listing_before);
}

// --- schema ---------------------------------------------------------------------------------

TEST(SqliteSchema, NewFileHasOptunasTablesRevisionAndWal) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "new.db";
  { auto s = Open(file); }
  auto tables = Sql(file, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name");
  std::vector<std::string> names;
  for (auto& r : tables) names.push_back(r[0]);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "alembic_version", "studies", "study_directions", "study_system_attributes",
                       "study_user_attributes", "trial_heartbeats", "trial_intermediate_values",
                       "trial_params", "trial_system_attributes", "trial_user_attributes",
                       "trial_values", "trials", "version_info"}));
  EXPECT_EQ(Sql(file, "SELECT version_num FROM alembic_version"),
            (std::vector<std::vector<std::string>>{{"v3.2.0.a"}}));
  EXPECT_EQ(Sql(file, "SELECT * FROM version_info"),
            (std::vector<std::vector<std::string>>{{"1", "12", "3.2.0"}}));
  EXPECT_EQ(Sql(file, "SELECT sql FROM sqlite_master WHERE name='ix_trials_study_id'"),
            (std::vector<std::vector<std::string>>{
                {"CREATE INDEX ix_trials_study_id ON trials (study_id)"}}));
  EXPECT_EQ(Sql(file, "PRAGMA journal_mode"), (std::vector<std::vector<std::string>>{{"wal"}}));
  // SQLAlchemy's exact text (tabs, ", " + newline), as in a file Optuna 3.1 creates.
  EXPECT_EQ(Sql(file, "SELECT sql FROM sqlite_master WHERE name='trial_values'")[0][0],
            "CREATE TABLE trial_values (\n\ttrial_value_id INTEGER NOT NULL, \n\ttrial_id INTEGER "
            "NOT NULL, \n\tobjective INTEGER NOT NULL, \n\tvalue FLOAT, \n\tvalue_type "
            "VARCHAR(7) NOT NULL, \n\tPRIMARY KEY (trial_value_id), \n\tUNIQUE (trial_id, "
            "objective), \n\tFOREIGN KEY(trial_id) REFERENCES trials (trial_id)\n)");
}

TEST(SqliteSchema, V300dHasNoStudyIndex) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "old.db";
  SqliteOptions o;
  o.schema_revision = "v3.0.0.d";
  { auto s = Open(file, o); }
  EXPECT_EQ(Sql(file, "SELECT version_num FROM alembic_version"),
            (std::vector<std::vector<std::string>>{{"v3.0.0.d"}}));
  EXPECT_EQ(Sql(file, "SELECT * FROM version_info"),
            (std::vector<std::vector<std::string>>{{"1", "12", "3.1.0"}}));
  EXPECT_TRUE(Sql(file, "SELECT name FROM sqlite_master WHERE name='ix_trials_study_id'").empty());
  // Reopened without the option: the file keeps its revision.
  { auto s = Open(file); }
  EXPECT_EQ(Sql(file, "SELECT version_num FROM alembic_version"),
            (std::vector<std::vector<std::string>>{{"v3.0.0.d"}}));
}

TEST(SqliteSchema, StoredRowsUseOptunasRepresentation) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "rows.db";
  {
    auto s = Open(file);
    int64_t sid = *s->CreateStudy("s", {StudyDirection::kMaximize});
    FrozenTrial t = *s->CreateTrial(sid);
    ASSERT_TRUE(
        s->SetTrialParam(t.trial_id, "c", 1, *MakeCategoricalDistribution({"a", "b"})).ok());
    ASSERT_TRUE(
        s->SetTrialParam(t.trial_id, "bs", 288, *MakeIntDistribution(128, 512, false, 32)).ok());
    ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 0, std::nan("")).ok());
    ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 1, -HUGE_VAL).ok());
    ASSERT_TRUE(s->SetTrialUserAttr(t.trial_id, "u", {{"k", {1, 2.5, "x"}}}).ok());
    ASSERT_TRUE(*s->SetTrialStateValues(t.trial_id, TrialState::kComplete, {HUGE_VAL}));
    FrozenTrial templ;
    templ.state = TrialState::kWaiting;
    (void)s->CreateTrial(sid, &templ);
  }
  EXPECT_EQ(Sql(file, "SELECT direction, objective FROM study_directions"),
            (std::vector<std::vector<std::string>>{{"MAXIMIZE", "0"}}));
  EXPECT_EQ(Sql(file,
                "SELECT number, state, datetime_start IS NULL, datetime_complete IS NULL "
                "FROM trials ORDER BY trial_id"),
            (std::vector<std::vector<std::string>>{{"0", "COMPLETE", "0", "0"},
                                                   {"1", "WAITING", "1", "1"}}));
  auto start = Sql(file, "SELECT datetime_start FROM trials WHERE number = 0")[0][0];
  EXPECT_EQ(start.size(), 26u) << start;  // YYYY-MM-DD HH:MM:SS.ffffff
  EXPECT_EQ(start[10], ' ');
  EXPECT_EQ(
      Sql(file,
          "SELECT param_name, param_value, distribution_json FROM trial_params "
          "ORDER BY param_name"),
      (std::vector<std::vector<std::string>>{
          {"bs", "288.0",
           R"({"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 128, "high": 512}})"},
          {"c", "1.0",
           R"({"name": "CategoricalDistribution", "attributes": {"choices": ["a", "b"]}})"}}));
  EXPECT_EQ(
      Sql(file,
          "SELECT step, intermediate_value, intermediate_value_type FROM "
          "trial_intermediate_values ORDER BY step"),
      (std::vector<std::vector<std::string>>{{"0", "NULL", "NAN"}, {"1", "NULL", "INF_NEG"}}));
  EXPECT_EQ(Sql(file, "SELECT objective, value, value_type FROM trial_values"),
            (std::vector<std::vector<std::string>>{{"0", "NULL", "INF_POS"}}));
  EXPECT_EQ(Sql(file, "SELECT value_json FROM trial_user_attributes"),
            (std::vector<std::vector<std::string>>{{R"({"k": [1, 2.5, "x"]})"}}));
}

// --- reopening and files written by Optuna ---------------------------------------------------

TEST(SqliteFiles, ReopenReadsEverythingBack) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "re.db";
  std::vector<FrozenTrial> written;
  {
    auto s = Open(file);
    int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
    ASSERT_TRUE(s->SetStudyUserAttr(sid, "k", "v").ok());
    for (int i = 0; i < 12; ++i) {
      FrozenTrial t = *s->CreateTrial(sid);
      ASSERT_TRUE(s->SetTrialParam(t.trial_id, "x", 0.1 * i, *MakeFloatDistribution(0, 2)).ok());
      ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 0, i).ok());
      if (i < 10) {
        ASSERT_TRUE(*s->SetTrialStateValues(t.trial_id, TrialState::kComplete, {1.0 * i}));
      }
    }
    written = *s->GetAllTrials(sid);
  }
  auto s = Open(file);
  int64_t sid = *s->GetStudyId("s");
  EXPECT_EQ(s->GetStudy(sid)->user_attrs, (Json{{"k", "v"}}));
  auto back = *s->GetAllTrials(sid);
  ASSERT_EQ(back.size(), written.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].trial_id, written[i].trial_id);
    EXPECT_EQ(back[i].number, written[i].number);
    EXPECT_EQ(back[i].state, written[i].state);
    EXPECT_EQ(back[i].values, written[i].values);
    EXPECT_EQ(back[i].params, written[i].params);
    EXPECT_EQ(back[i].intermediate_values, written[i].intermediate_values);
    EXPECT_EQ(back[i].datetime_start, written[i].datetime_start);
    EXPECT_EQ(back[i].datetime_complete, written[i].datetime_complete);
  }
  // A fresh instance knows no trial ids yet: GetTrialsSince still finds the right trials.
  auto s2 = Open(file);
  auto since = *s2->GetTrialsSince(sid, 10, {3});
  ASSERT_EQ(since.size(), 3u);
  EXPECT_EQ(since[0].number, 3);
  EXPECT_EQ(since[1].number, 10);
  EXPECT_EQ(since[2].number, 11);
  // Numbering continues after a reopen, and a trial written by one instance is seen by another.
  FrozenTrial next = *s->CreateTrial(sid);
  EXPECT_EQ(next.number, 12);
  auto seen = *s2->GetTrialsSince(sid, 12, {});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].trial_id, next.trial_id);
}

TEST(SqliteFiles, ReadsAndContinuesAStudyOptunaWrote) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "optuna.db";
  Sql(file, Slurp(fs::path(TUNE_TEST_DATA_DIR) / "optuna31_study.sql"));
  auto s = Open(file);
  int64_t sid = *s->GetStudyId("optuna31");
  StudyInfo info = *s->GetStudy(sid);
  EXPECT_EQ(info.directions, std::vector<StudyDirection>{StudyDirection::kMaximize});
  EXPECT_EQ(info.user_attrs, (Json{{"owner", "optuna"}}));
  EXPECT_EQ(info.n_trials, 6);
  auto trials = *s->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), 6u);
  const std::vector<TrialState> states = {TrialState::kComplete, TrialState::kPruned,
                                          TrialState::kFail,     TrialState::kComplete,
                                          TrialState::kRunning,  TrialState::kWaiting};
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].number, static_cast<int64_t>(i));
    EXPECT_EQ(trials[i].state, states[i]) << i;
  }
  const FrozenTrial& best = trials[0];
  EXPECT_DOUBLE_EQ(best.value(), 3.001596583402894);
  EXPECT_DOUBLE_EQ(best.params.at("lr"), 0.0015965834028940295);
  EXPECT_EQ(best.param("layers"), 3);
  EXPECT_EQ(best.param("opt"), nullptr);
  EXPECT_EQ(best.distributions.at("lr"), Distribution(*MakeFloatDistribution(1e-5, 0.1, true)));
  EXPECT_EQ(best.distributions.at("opt"),
            Distribution(*MakeCategoricalDistribution({"adam", "sgd", nullptr})));
  EXPECT_EQ(best.user_attrs["note"], (Json{{"n", 0}, {"vals", {1.5, nullptr}}}));
  EXPECT_EQ(best.intermediate_values, (std::map<int64_t, double>{{0, 0.5}}));
  EXPECT_TRUE(best.datetime_complete.has_value());
  const FrozenTrial& pruned = trials[1];
  EXPECT_EQ(pruned.values, std::vector<double>{0.25});
  EXPECT_EQ(pruned.intermediate_values.at(0), HUGE_VAL);
  EXPECT_TRUE(std::isnan(pruned.intermediate_values.at(1)));
  EXPECT_FALSE(trials[5].datetime_start.has_value());
  EXPECT_EQ(trials[5].system_attrs["fixed_params"],
            (Json{{"lr", 0.001}, {"layers", 2}, {"opt", "sgd"}}));
  // Continue: claim Optuna's enqueued trial, then add a new one.
  auto claimed = *s->ClaimWaitingTrial(sid);
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ(claimed->number, 5);
  ASSERT_TRUE(*s->SetTrialStateValues(claimed->trial_id, TrialState::kComplete, {4.0}));
  EXPECT_EQ(s->CreateTrial(sid)->number, 6);
  EXPECT_EQ(Sql(file, "SELECT version_num FROM alembic_version"),
            (std::vector<std::vector<std::string>>{{"v3.0.0.d"}}));
}

TEST(SqliteFiles, ReadsEveryDatetimeFormOptunaAccepts) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "dates.db";
  int64_t sid = 0;
  {
    auto s = Open(file);
    sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  }
  const std::vector<std::string> texts = {"2026-11-21 21:10:27.662041", "2026-11-21 21:10:27",
                                          "2026-11-21 21:10:27.5", "2026-03-29 02:30:00.000001",
                                          "2026-11-21T21:10:27.25"};
  for (size_t i = 0; i < texts.size(); ++i) {
    Sql(file,
        "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) "
        "VALUES (" +
            std::to_string(i) + ", " + std::to_string(sid) + ", 'FAIL', '" + texts[i] + "', '" +
            texts[0] + "')");
  }
  auto s = Open(file);
  auto trials = *s->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(*trials[i].datetime_start, *ParseDatetime(texts[i])) << texts[i];
    EXPECT_EQ(*trials[i].datetime_complete, *ParseDatetime(texts[0]));
  }
  EXPECT_EQ(FormatDatetime(*trials[2].datetime_start), "2026-11-21 21:10:27.500000");
}

// --- bad files --------------------------------------------------------------------------------

TEST(SqliteFiles, UnknownRevisionIsRefusedAndTheFileUntouched) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "future.db";
  { auto s = Open(file); }
  Sql(file, "PRAGMA journal_mode=DELETE; UPDATE alembic_version SET version_num = 'v9.9.9.z'");
  ExpectRefused(file, {}, StatusCode::kInvalidArgument,
                {file.string(), "'v9.9.9.z'", "v3.0.0.d", "v3.2.0.a", "newer Optuna"});
  Sql(file, "UPDATE alembic_version SET version_num = 'v2.6.0.a'");
  ExpectRefused(file, {}, StatusCode::kInvalidArgument, {"'v2.6.0.a'", "optuna storage upgrade"});
  Sql(file, "DELETE FROM alembic_version");
  ExpectRefused(file, {}, StatusCode::kInvalidArgument, {"alembic_version", "none"});
}

TEST(SqliteFiles, AskingForAnotherRevisionThanTheFilesIsRefused) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "v32.db";
  { auto s = Open(file); }
  Sql(file, "PRAGMA journal_mode=DELETE");
  SqliteOptions o;
  o.schema_revision = "v3.0.0.d";
  ExpectRefused(file, o, StatusCode::kInvalidArgument, {"v3.2.0.a", "v3.0.0.d", "never migrates"});
  o.schema_revision = "v3.1";
  ExpectRefused(file, o, StatusCode::kInvalidArgument, {"unknown SQLite schema revision 'v3.1'"});
}

TEST(SqliteFiles, NotADatabaseIsRefusedAndTheFileUntouched) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "notes.db";
  std::ofstream(file) << "these are my notes, not a database\n" << std::string(5000, 'x');
  ExpectRefused(file, {}, StatusCode::kInvalidArgument,
                {file.string(), "not a readable SQLite database", "nothing was changed"});
  SqliteOptions ro;
  ro.read_only = true;
  ExpectRefused(file, ro, StatusCode::kInvalidArgument, {"not a readable SQLite database"});
}

TEST(SqliteFiles, AnUnreadableFileWithAWalBesideItNamesTheStaleFiles) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "notes.db";
  std::ofstream(file) << "these are my notes, not a database\n" << std::string(5000, 'x');
  {
    auto alone = OpenSqliteStorage(file.string(), {});
    ASSERT_FALSE(alone.ok());
    EXPECT_EQ(alone.status().message().find("-shm"), std::string::npos)
        << alone.status().message();  // no hint without the files
  }
  std::ofstream(file.string() + "-shm") << std::string(100, 'y');
  ExpectRefused(file, {}, StatusCode::kInvalidArgument,
                {"not a readable SQLite database", file.string() + "-shm' is beside it",
                 "belong to the old one"});
  EXPECT_TRUE(fs::exists(file.string() + "-shm"));  // named, never deleted
}

TEST(SqliteFiles, CorruptDatabaseIsRefusedAndTheFileUntouched) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "corrupt.db";
  {
    auto s = Open(file);
    int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
    for (int i = 0; i < 200; ++i) {
      FrozenTrial t = *s->CreateTrial(sid);
      ASSERT_TRUE(s->SetTrialUserAttr(t.trial_id, "pad", std::string(300, 'p')).ok());
    }
  }
  Sql(file, "PRAGMA journal_mode=DELETE");
  std::string bytes = Slurp(file);
  ASSERT_GT(bytes.size(), 40000u);
  // Scribble over the middle pages (the header stays valid).
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 9000; ++i) {
    bytes[i] = static_cast<char>(i * 7919 % 251);
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  ExpectRefused(file, {}, StatusCode::kInvalidArgument, {file.string(), "nothing was changed"});
}

TEST(SqliteFiles, AnotherProgramsDatabaseIsRefused) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "other.db";
  Sql(file, "CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x')");
  ExpectRefused(file, {}, StatusCode::kInvalidArgument,
                {"not an Optuna/tune storage", "missing tables: studies"});
}

TEST(SqliteFiles, MissingFileIsNotCreatedWhenNotAsked) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "missing.db";
  SqliteOptions o;
  o.create_if_missing = false;
  auto s = OpenSqliteStorage(file.string(), o);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find(file.string()), std::string::npos);
  SqliteOptions ro;
  ro.read_only = true;
  EXPECT_EQ(OpenSqliteStorage(file.string(), ro).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(OpenSqliteStorage(dir.path().string()).status().code(),
            StatusCode::kInvalidArgument);  // a directory
}

TEST(SqliteFiles, ReadOnlyOpenChangesNothing) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "ro.db";
  Sql(file, Slurp(fs::path(TUNE_TEST_DATA_DIR) / "optuna31_study.sql"));  // rollback journal
  const std::string before = Slurp(file);
  {
    SqliteOptions ro;
    ro.read_only = true;
    auto s = Open(file, ro);
    int64_t sid = *s->GetStudyId("optuna31");
    EXPECT_EQ(s->GetAllTrials(sid)->size(), 6u);
    EXPECT_FALSE(s->CreateTrial(sid).ok());
  }
  EXPECT_EQ(Slurp(file), before);
  EXPECT_EQ(Sql(file, "PRAGMA journal_mode"), (std::vector<std::vector<std::string>>{{"delete"}}));
}

// --- URLs ------------------------------------------------------------------------------------

TEST(SqliteUrl, ParsesSqlAlchemyStyleUrls) {
  auto rel = *ParseSqliteUrl("sqlite:///studies/x.db");
  EXPECT_EQ(rel.path, "studies/x.db");
  EXPECT_FALSE(rel.options.schema_revision.has_value());
  auto abs = *ParseSqliteUrl("sqlite:////tmp/my%20x.db?schema=v3.0.0.d&timeout=2.5");
  EXPECT_EQ(abs.path, "/tmp/my x.db");
  EXPECT_EQ(abs.options.schema_revision, "v3.0.0.d");
  EXPECT_EQ(abs.options.busy_timeout_ms, 2500);
  auto bad_key = ParseSqliteUrl("sqlite:///x.db?shema=v3.0.0.d");
  EXPECT_EQ(bad_key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_key.status().message().find("did you mean 'schema'"), std::string::npos);
  auto bad_rev = ParseSqliteUrl("sqlite:///x.db?schema=v3.0.0");
  EXPECT_NE(bad_rev.status().message().find("v3.0.0.d"), std::string::npos);
  EXPECT_FALSE(ParseSqliteUrl("sqlite:///x.db?timeout=soon").ok());
  EXPECT_FALSE(ParseSqliteUrl("sqlite:///").ok());
  EXPECT_FALSE(ParseSqliteUrl("sqlite://").ok());
  EXPECT_FALSE(ParseSqliteUrl("sqlite:x.db").ok());
}

TEST(SqliteCodec, PythonJsonTokensOutsideStringsOnly) {
  auto j = *internal::rdb::DecodeJson(R"({"a": NaN, "b": [Infinity, -Infinity], "c": "NaN"})");
  EXPECT_TRUE(std::isnan(j["a"].get<double>()));
  EXPECT_EQ(j["b"][0].get<double>(), HUGE_VAL);
  EXPECT_EQ(j["b"][1].get<double>(), -HUGE_VAL);
  EXPECT_EQ(j["c"], "NaN");
  EXPECT_EQ(internal::rdb::EncodeJson(j), R"({"a": NaN, "b": [Infinity, -Infinity], "c": "NaN"})");
  EXPECT_FALSE(internal::rdb::DecodeJson("{oops").ok());
}

// --- locks -----------------------------------------------------------------------------------

TEST(SqliteLocks, AWriterWaitsForALockThenGivesUpWithUnavailable) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "locked.db";
  SqliteOptions o;
  o.busy_timeout_ms = 50;
  o.max_attempts = 3;
  auto s = Open(file, o);
  int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  FrozenTrial t = *s->CreateTrial(sid);

  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  // Readers are not blocked by the other writer (WAL) ...
  EXPECT_EQ(*s->CountTrials(sid), 1);
  EXPECT_EQ(s->GetTrial(t.trial_id)->state, TrialState::kRunning);
  // ... writers wait, retry, then report the lock.
  auto start = std::chrono::steady_clock::now();
  auto blocked = s->CreateTrial(sid);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(blocked.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(blocked.status().message().find("database is locked"), std::string::npos)
      << blocked.status().message();
  EXPECT_NE(blocked.status().message().find("gave up after 3 attempts"), std::string::npos);
  EXPECT_NE(blocked.status().message().find(file.string()), std::string::npos);
  EXPECT_GE(waited, 0.15);  // 3 x 50 ms busy timeout
  EXPECT_EQ(s->SetTrialUserAttr(t.trial_id, "k", 1).code(), StatusCode::kUnavailable);

  // A lock released while a writer waits costs only the wait.
  SqliteOptions patient;
  patient.busy_timeout_ms = 5000;
  auto s2 = Open(file, patient);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  });
  auto created = s2->CreateTrial(sid);
  release.join();
  sqlite3_close(other);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->number, 1);  // the failed attempts left nothing behind
  EXPECT_EQ(*s->CountTrials(sid), 2);
  EXPECT_TRUE(s->GetTrial(t.trial_id)->user_attrs.empty());
  EXPECT_EQ(s->CreateTrial(sid)->number, 2);
}

// --- statements per read ---------------------------------------------------------------------

// Counts the statements the storage runs: each goes through Prepare (the connection's own BEGIN
// and COMMIT do not).
class CountingConnection : public internal::rdb::Connection {
 public:
  CountingConnection(std::unique_ptr<internal::rdb::Connection> inner, int* statements)
      : inner_(std::move(inner)), statements_(statements) {}
  Result<internal::rdb::Statement*> Prepare(const std::string& sql) override {
    ++*statements_;
    return inner_->Prepare(sql);
  }
  Status Begin(internal::rdb::TxKind kind) override { return inner_->Begin(kind); }
  Status Commit() override { return inner_->Commit(); }
  void Rollback() override { inner_->Rollback(); }
  int64_t Changes() override { return inner_->Changes(); }
  Result<std::optional<int64_t>> DataVersion() override { return inner_->DataVersion(); }
  Status ExecScript(const std::string& sql) override { return inner_->ExecScript(sql); }

 private:
  std::unique_ptr<internal::rdb::Connection> inner_;
  int* statements_;
};

// A History read (GetTrialsSince with the unfinished trials listed) runs the same statements
// however many trials are listed: the listed trials, the new ones, one per child table.
TEST(SqliteReads, AHistoryReadIsSevenStatementsHoweverManyTrialsAreListed) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "study.db";
  int64_t sid = 0;
  std::vector<int64_t> running;
  {
    auto s = Open(file);
    sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
    const Distribution d = *MakeFloatDistribution(0, 1);
    for (int i = 0; i < 40; ++i) {
      FrozenTrial t = *s->CreateTrial(sid);
      ASSERT_TRUE(s->SetTrialParam(t.trial_id, "x", 0.5, d).ok());
      ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 0, 1.0).ok());
      if (i % 2) {
        running.push_back(t.number);
      } else {
        ASSERT_TRUE(*s->SetTrialStateValues(t.trial_id, TrialState::kComplete, {1.0}));
      }
    }
  }
  auto conn = internal::sqlite::SqliteConnection::Open(file.string(), "counted", {});
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  int statements = 0;
  internal::rdb::RdbStorageOptions options;
  options.url = "sqlite:///" + file.string();
  auto storage = internal::rdb::NewRdbStorage(
      std::make_unique<CountingConnection>(std::move(conn).value(), &statements), options);
  ASSERT_EQ(storage->GetTrialsSince(sid, 0, {})->size(), 40u);  // learns the ids
  for (int listed : {1, 4, 20}) {
    statements = 0;
    std::vector<int64_t> numbers(running.begin(), running.begin() + listed);
    auto got = storage->GetTrialsSince(sid, 40, numbers);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->size(), static_cast<size_t>(listed));
    EXPECT_EQ(got->back().params.at("x"), 0.5);
    EXPECT_EQ(statements, 7) << listed << " listed";
  }
}

// --- several processes -------------------------------------------------------------------------

// Forks `workers` processes that each open the file and run `trials` ask/tell cycles (claiming
// enqueued trials first), like tune workers sharing a study.
TEST(SqliteProcesses, WritersShareOneFileWithoutLosingOrDuplicatingTrials) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "shared.db";
  testing::ExpectProcessesShareAStudy(
      [&]() -> Result<std::unique_ptr<Storage>> { return OpenSqliteStorage(file.string()); },
      /*workers=*/6, /*trials=*/40, /*enqueued=*/12);
}

// SQLite is checked by feature, not by version: an older SQLite built with JSON1 (Ubuntu 22.04's
// 3.37.2) is accepted, one without RETURNING or without json_each is refused, naming what is
// missing and the version found.
TEST(SqliteFeatures, AcceptsAnySqliteWithReturningAndJsonEach) {
  using internal::sqlite::SqliteFeatureProblem;
  EXPECT_EQ(SqliteFeatureProblem("3.37.2", 3037002, true), std::nullopt);
  EXPECT_EQ(SqliteFeatureProblem("3.35.0", 3035000, true), std::nullopt);
  EXPECT_EQ(SqliteFeatureProblem(sqlite3_libversion(), sqlite3_libversion_number(), true),
            std::nullopt);

  const std::optional<std::string> old = SqliteFeatureProblem("3.34.1", 3034001, true);
  ASSERT_TRUE(old.has_value());
  EXPECT_NE(old->find(">= 3.35"), std::string::npos) << *old;
  EXPECT_NE(old->find("3.34.1"), std::string::npos) << *old;

  const std::optional<std::string> no_json = SqliteFeatureProblem("3.41.0", 3041000, false);
  ASSERT_TRUE(no_json.has_value());
  EXPECT_NE(no_json->find("json_each"), std::string::npos) << *no_json;
  EXPECT_NE(no_json->find("3.41.0"), std::string::npos) << *no_json;
}

// The SQLite this process runs has what the storage needs, as OpenSqliteStorage checks on every
// open, and json_each answers as the storage's reads by trial id use it.
TEST(SqliteFeatures, ThisProcessesSqliteHasJsonEach) {
  EXPECT_EQ(internal::sqlite::SqliteLibraryProblem(), std::nullopt);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  int rows = 0;
  char* error = nullptr;
  const int rc = sqlite3_exec(
      db, "SELECT value FROM json_each('[1,2,3]')",
      [](void* n, int, char**, char**) { return ++*static_cast<int*>(n), 0; }, &rows, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  EXPECT_EQ(rc, SQLITE_OK) << message;
  EXPECT_EQ(rows, 3);
}

}  // namespace
}  // namespace tune

// The PostgreSQL backend on a real server (testing/postgres_server.h; each test gets a fresh
// database): Optuna's schema with native ENUM types, revisions, bad servers and URLs (no
// password in any message), several connections and processes on one study, row locks, retries
// and reconnects.
#include "tune/storages/postgres.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "testing/postgres_server.h"
#include "testing/storage_processes.h"

namespace tune {
namespace {

using Rows = std::vector<std::vector<std::string>>;

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TUNE_SKIP_WITHOUT_POSTGRES();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string error;
    url_ = testing::TestPostgres::Get().NewDatabase(info->name(), &error);
    ASSERT_FALSE(url_.empty()) << error;
  }

  Result<std::unique_ptr<Storage>> TryOpen(const PostgresOptions& options = {},
                                           const std::string& query = "") {
    auto parsed = ParsePostgresUrl(url_ + query);
    if (!parsed.ok()) return parsed.status();
    std::optional<std::string> from_url = parsed->options.schema_revision;
    parsed->options = options;
    if (from_url) parsed->options.schema_revision = from_url;
    return OpenPostgresStorage(*parsed);
  }

  std::unique_ptr<Storage> Open(const PostgresOptions& options = {}) {
    auto s = TryOpen(options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  Rows Sql(const std::string& sql) {
    std::string error;
    Rows rows = testing::PgQuery(url_, sql, &error);
    EXPECT_EQ(error, "") << sql;
    return rows;
  }

  // One column of a query.
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> out;
    for (auto& r : Sql(sql)) out.push_back(r.at(0));
    return out;
  }

  std::string url_;
};

class PostgresSchema : public PgTest {};
class PostgresOpen : public PgTest {};
class PostgresConcurrency : public PgTest {};

// Every column as "table.column type [NOT NULL] [SERIAL]" and every constraint, in a stable
// order: what SQLAlchemy's DDL for Optuna's models produces (see schema.cpp).
const char* kColumnsSql =
    "SELECT table_name || '.' || column_name || ' ' || CASE WHEN data_type = 'USER-DEFINED' "
    "THEN udt_name ELSE data_type END || COALESCE('(' || character_maximum_length || ')', '') "
    "|| CASE WHEN is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END || CASE WHEN column_default "
    "LIKE 'nextval%' THEN ' SERIAL' ELSE '' END FROM information_schema.columns WHERE "
    "table_schema = current_schema() ORDER BY table_name, ordinal_position";
const char* kConstraintsSql =
    "SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM "
    "pg_constraint WHERE "
    "connamespace = current_schema()::regnamespace ORDER BY 1";

TEST_F(PostgresSchema, NewDatabaseHasOptunasTablesEnumsAndRevision) {
  { auto s = Open(); }
  EXPECT_EQ(Column("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER "
                   "BY tablename"),
            (std::vector<std::string>{
                "alembic_version", "studies", "study_directions", "study_system_attributes",
                "study_user_attributes", "trial_heartbeats", "trial_intermediate_values",
                "trial_params", "trial_system_attributes", "trial_user_attributes", "trial_values",
                "trials", "version_info"}));
  // Native ENUM types named after Optuna's Python enums, values in their order.
  EXPECT_EQ(Sql("SELECT t.typname, string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM "
                "pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname ORDER BY "
                "t.typname"),
            (Rows{{"studydirection", "NOT_SET,MINIMIZE,MAXIMIZE"},
                  {"trialintermediatevaluetype", "FINITE,INF_POS,INF_NEG,NAN"},
                  {"trialstate", "RUNNING,COMPLETE,PRUNED,FAIL,WAITING"},
                  {"trialvaluetype", "FINITE,INF_POS,INF_NEG"}}));
  EXPECT_EQ(Column(kColumnsSql),
            (std::vector<std::string>{
                "alembic_version.version_num character varying(32) NOT NULL",
                "studies.study_id integer NOT NULL SERIAL",
                "studies.study_name character varying(512) NOT NULL",
                "study_directions.study_direction_id integer NOT NULL SERIAL",
                "study_directions.direction studydirection NOT NULL",
                "study_directions.study_id integer NOT NULL",
                "study_directions.objective integer NOT NULL",
                "study_system_attributes.study_system_attribute_id integer NOT NULL SERIAL",
                "study_system_attributes.study_id integer",
                "study_system_attributes.key character varying(512)",
                "study_system_attributes.value_json text",
                "study_user_attributes.study_user_attribute_id integer NOT NULL SERIAL",
                "study_user_attributes.study_id integer",
                "study_user_attributes.key character varying(512)",
                "study_user_attributes.value_json text",
                "trial_heartbeats.trial_heartbeat_id integer NOT NULL SERIAL",
                "trial_heartbeats.trial_id integer NOT NULL",
                "trial_heartbeats.heartbeat timestamp without time zone NOT NULL",
                "trial_intermediate_values.trial_intermediate_value_id integer NOT NULL SERIAL",
                "trial_intermediate_values.trial_id integer NOT NULL",
                "trial_intermediate_values.step integer NOT NULL",
                "trial_intermediate_values.intermediate_value double precision",
                "trial_intermediate_values.intermediate_value_type trialintermediatevaluetype NOT "
                "NULL",
                "trial_params.param_id integer NOT NULL SERIAL",
                "trial_params.trial_id integer",
                "trial_params.param_name character varying(512)",
                "trial_params.param_value double precision",
                "trial_params.distribution_json text",
                "trial_system_attributes.trial_system_attribute_id integer NOT NULL SERIAL",
                "trial_system_attributes.trial_id integer",
                "trial_system_attributes.key character varying(512)",
                "trial_system_attributes.value_json text",
                "trial_user_attributes.trial_user_attribute_id integer NOT NULL SERIAL",
                "trial_user_attributes.trial_id integer",
                "trial_user_attributes.key character varying(512)",
                "trial_user_attributes.value_json text",
                "trial_values.trial_value_id integer NOT NULL SERIAL",
                "trial_values.trial_id integer NOT NULL",
                "trial_values.objective integer NOT NULL",
                "trial_values.value double precision",
                "trial_values.value_type trialvaluetype NOT NULL",
                "trials.trial_id integer NOT NULL SERIAL",
                "trials.number integer",
                "trials.study_id integer",
                "trials.state trialstate NOT NULL",
                "trials.datetime_start timestamp without time zone",
                "trials.datetime_complete timestamp without time zone",
                "version_info.version_info_id integer NOT NULL",
                "version_info.schema_version integer",
                "version_info.library_version character varying(256)",
            }));
  // As PostgreSQL names and prints them after running SQLAlchemy's DDL for Optuna 3.1.
  EXPECT_EQ(
      Column(kConstraintsSql),
      (std::vector<std::string>{
          "alembic_version alembic_version_pkc PRIMARY KEY (version_num)",
          "studies studies_pkey PRIMARY KEY (study_id)",
          "study_directions study_directions_pkey PRIMARY KEY (study_direction_id)",
          "study_directions study_directions_study_id_fkey FOREIGN KEY (study_id) REFERENCES "
          "studies(study_id)",
          "study_directions study_directions_study_id_objective_key UNIQUE (study_id, objective)",
          "study_system_attributes study_system_attributes_pkey PRIMARY KEY "
          "(study_system_attribute_id)",
          "study_system_attributes study_system_attributes_study_id_fkey FOREIGN KEY (study_id) "
          "REFERENCES studies(study_id)",
          "study_system_attributes study_system_attributes_study_id_key_key UNIQUE (study_id, key)",
          "study_user_attributes study_user_attributes_pkey PRIMARY KEY (study_user_attribute_id)",
          "study_user_attributes study_user_attributes_study_id_fkey FOREIGN KEY (study_id) "
          "REFERENCES studies(study_id)",
          "study_user_attributes study_user_attributes_study_id_key_key UNIQUE (study_id, key)",
          "trial_heartbeats trial_heartbeats_pkey PRIMARY KEY (trial_heartbeat_id)",
          "trial_heartbeats trial_heartbeats_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES "
          "trials(trial_id)",
          "trial_heartbeats trial_heartbeats_trial_id_key UNIQUE (trial_id)",
          "trial_intermediate_values trial_intermediate_values_pkey PRIMARY KEY "
          "(trial_intermediate_value_id)",
          "trial_intermediate_values trial_intermediate_values_trial_id_fkey FOREIGN KEY "
          "(trial_id) REFERENCES trials(trial_id)",
          "trial_intermediate_values trial_intermediate_values_trial_id_step_key UNIQUE (trial_id, "
          "step)",
          "trial_params trial_params_pkey PRIMARY KEY (param_id)",
          "trial_params trial_params_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES "
          "trials(trial_id)",
          "trial_params trial_params_trial_id_param_name_key UNIQUE (trial_id, param_name)",
          "trial_system_attributes trial_system_attributes_pkey PRIMARY KEY "
          "(trial_system_attribute_id)",
          "trial_system_attributes trial_system_attributes_trial_id_fkey FOREIGN KEY (trial_id) "
          "REFERENCES trials(trial_id)",
          "trial_system_attributes trial_system_attributes_trial_id_key_key UNIQUE (trial_id, key)",
          "trial_user_attributes trial_user_attributes_pkey PRIMARY KEY (trial_user_attribute_id)",
          "trial_user_attributes trial_user_attributes_trial_id_fkey FOREIGN KEY (trial_id) "
          "REFERENCES trials(trial_id)",
          "trial_user_attributes trial_user_attributes_trial_id_key_key UNIQUE (trial_id, key)",
          "trial_values trial_values_pkey PRIMARY KEY (trial_value_id)",
          "trial_values trial_values_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES "
          "trials(trial_id)",
          "trial_values trial_values_trial_id_objective_key UNIQUE (trial_id, objective)",
          "trials trials_pkey PRIMARY KEY (trial_id)",
          "trials trials_study_id_fkey FOREIGN KEY (study_id) REFERENCES studies(study_id)",
          "version_info version_info_pkey PRIMARY KEY (version_info_id)",
          "version_info version_info_version_info_id_check CHECK ((version_info_id = 1))",
      }));
  EXPECT_EQ(Column("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND "
                   "indexname LIKE 'ix_%' ORDER BY 1"),
            (std::vector<std::string>{"ix_studies_study_name", "ix_trials_study_id"}));
  EXPECT_EQ(Sql("SELECT version_num FROM alembic_version"), (Rows{{"v3.2.0.a"}}));
  EXPECT_EQ(Sql("SELECT * FROM version_info"), (Rows{{"1", "12", "3.2.0"}}));
}

TEST_F(PostgresSchema, V300dHasNoStudyIndexAndKeepsItsRevision) {
  {
    auto s = TryOpen({}, "?schema=v3.0.0.d");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
  EXPECT_EQ(Sql("SELECT version_num FROM alembic_version"), (Rows{{"v3.0.0.d"}}));
  EXPECT_EQ(Sql("SELECT * FROM version_info"), (Rows{{"1", "12", "3.1.0"}}));
  EXPECT_TRUE(Sql("SELECT 1 FROM pg_indexes WHERE indexname = 'ix_trials_study_id'").empty());
  { auto s = Open(); }  // without the option: the database keeps its revision
  EXPECT_EQ(Sql("SELECT version_num FROM alembic_version"), (Rows{{"v3.0.0.d"}}));
  auto clash = TryOpen({}, "?schema=v3.2.0.a");
  ASSERT_EQ(clash.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(clash.status().message().find("has schema revision v3.0.0.d, but v3.2.0.a was asked"),
            std::string::npos)
      << clash.status().message();
}

TEST_F(PostgresSchema, StoredRowsUseOptunasRepresentation) {
  {
    auto s = Open();
    int64_t sid = *s->CreateStudy("s", {StudyDirection::kMaximize});
    FrozenTrial t = *s->CreateTrial(sid);
    ASSERT_TRUE(
        s->SetTrialParam(t.trial_id, "c", 1, *MakeCategoricalDistribution({"a", "b"})).ok());
    ASSERT_TRUE(
        s->SetTrialParam(t.trial_id, "bs", 288, *MakeIntDistribution(128, 512, false, 32)).ok());
    ASSERT_TRUE(s->SetTrialParam(t.trial_id, "lr", 0.1 + 0.2, *MakeFloatDistribution(0, 1)).ok());
    ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 0, std::nan("")).ok());
    ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 1, -HUGE_VAL).ok());
    ASSERT_TRUE(s->SetTrialIntermediateValue(t.trial_id, 2, 1e-300).ok());
    ASSERT_TRUE(s->SetTrialUserAttr(t.trial_id, "u", {{"k", {1, 2.5, "x\u00e9"}}}).ok());
    ASSERT_TRUE(*s->SetTrialStateValues(t.trial_id, TrialState::kComplete, {HUGE_VAL}));
    FrozenTrial templ;
    templ.state = TrialState::kWaiting;
    (void)s->CreateTrial(sid, &templ);
    // Read back exactly (doubles survive the text protocol bit for bit).
    FrozenTrial back = *s->GetTrial(t.trial_id);
    EXPECT_EQ(back.params.at("lr"), 0.1 + 0.2);
    EXPECT_EQ(back.intermediate_values.at(2), 1e-300);
    EXPECT_TRUE(std::isnan(back.intermediate_values.at(0)));
    EXPECT_EQ(back.values, std::vector<double>{HUGE_VAL});
    EXPECT_EQ(back.user_attrs["u"]["k"][2], "x\u00e9");
  }
  EXPECT_EQ(Sql("SELECT direction, objective FROM study_directions"), (Rows{{"MAXIMIZE", "0"}}));
  EXPECT_EQ(Sql("SELECT number, state, datetime_start IS NULL, datetime_complete IS NULL "
                "FROM trials ORDER BY trial_id"),
            (Rows{{"0", "COMPLETE", "f", "f"}, {"1", "WAITING", "t", "t"}}));
  EXPECT_EQ(Sql("SELECT pg_typeof(datetime_start)::text FROM trials WHERE number = 0"),
            (Rows{{"timestamp without time zone"}}));
  EXPECT_EQ(
      Sql("SELECT param_name, param_value, distribution_json FROM trial_params ORDER BY "
          "param_name"),
      (Rows{
          {"bs", "288",
           R"({"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 128, "high": 512}})"},
          {"c", "1",
           R"({"name": "CategoricalDistribution", "attributes": {"choices": ["a", "b"]}})"},
          {"lr", "0.30000000000000004",
           R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})"}}));
  EXPECT_EQ(Sql("SELECT step, intermediate_value, intermediate_value_type FROM "
                "trial_intermediate_values ORDER BY step"),
            (Rows{{"0", "NULL", "NAN"}, {"1", "NULL", "INF_NEG"}, {"2", "1e-300", "FINITE"}}));
  EXPECT_EQ(Sql("SELECT objective, value, value_type FROM trial_values"),
            (Rows{{"0", "NULL", "INF_POS"}}));
  EXPECT_EQ(Sql("SELECT value_json FROM trial_user_attributes"),
            (Rows{{"{\"k\": [1, 2.5, \"x\\u00e9\"]}"}}));
}

// --- opening: revisions, partial schemas, read-only ------------------------------------------

TEST_F(PostgresOpen, UnknownOrOlderRevisionIsRefusedAndNothingChanges) {
  { auto s = Open(); }
  Sql("UPDATE alembic_version SET version_num = 'v5.1.0.a'");
  auto future = TryOpen();
  ASSERT_EQ(future.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(future.status().message().find(
                "has Optuna schema revision 'v5.1.0.a', which tune does not support; supported: "
                "v3.0.0.d"),
            std::string::npos)
      << future.status().message();
  EXPECT_NE(future.status().message().find("written by a newer Optuna"), std::string::npos);
  Sql("UPDATE alembic_version SET version_num = 'v2.6.0.a'");
  auto older = TryOpen();
  ASSERT_EQ(older.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(older.status().message().find("optuna storage upgrade --storage postgresql://"),
            std::string::npos)
      << older.status().message();
  EXPECT_EQ(Sql("SELECT version_num FROM alembic_version"), (Rows{{"v2.6.0.a"}}));
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM studies"), (Rows{{"0"}}));
}

TEST_F(PostgresOpen, PartialSchemaIsRefusedOtherTablesAreLeftAlone) {
  Sql("CREATE TABLE notes (id integer)");
  Sql("CREATE TABLE studies (study_id integer)");
  auto partial = TryOpen();
  ASSERT_EQ(partial.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(partial.status().message().find("holds only part of an Optuna/tune storage (missing "
                                            "tables: version_info, study_directions"),
            std::string::npos)
      << partial.status().message();
  EXPECT_NE(partial.status().message().find("on 127.0.0.1:"), std::string::npos);
  EXPECT_TRUE(Sql("SELECT 1 FROM pg_type WHERE typname = 'trialstate'").empty());
  // Another application's table alone: Optuna's schema is added beside it.
  Sql("DROP TABLE studies");
  auto s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->CreateStudy("x", {StudyDirection::kMinimize}).ok());
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()"),
            (Rows{{"14"}}));
}

TEST_F(PostgresOpen, ReadOnlyCreatesNothingAndCannotWrite) {
  PostgresOptions ro;
  ro.read_only = true;
  auto empty = TryOpen(ro);
  ASSERT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("holds no Optuna/tune storage"), std::string::npos)
      << empty.status().message();
  EXPECT_TRUE(Sql("SELECT 1 FROM pg_tables WHERE tablename = 'trials'").empty());
  int64_t sid = 0;
  {
    auto s = Open();
    sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  }
  auto r = TryOpen(ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->GetStudy(sid)->name, "s");
  auto created = (*r)->CreateTrial(sid);
  EXPECT_EQ(created.status().code(), StatusCode::kFailedPrecondition)
      << created.status().ToString();
  EXPECT_NE(created.status().message().find("read-only transaction"), std::string::npos);
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM trials"), (Rows{{"0"}}));
}

// --- bad servers and URLs ---------------------------------------------------------------------

std::map<std::string, std::string> UrlParams(const std::string& url) {
  auto parsed = ParsePostgresUrl(url);
  EXPECT_TRUE(parsed.ok());
  return std::map<std::string, std::string>(parsed->params.begin(), parsed->params.end());
}

TEST_F(PostgresOpen, ConnectionErrorsNameHostAndDatabaseButNeverThePassword) {
  auto test_db = UrlParams(url_);
  const std::string host = test_db["host"];
  auto at = [&](const std::string& userinfo, const std::string& port, const std::string& db) {
    return "postgresql://" + userinfo + "@" + host + ":" + port + "/" + db;
  };
  const std::string closed = std::to_string(testing::FreePort());
  auto unreachable = OpenPostgresStorage(at("u:s3cret", closed, "db1"));
  ASSERT_EQ(unreachable.status().code(), StatusCode::kInvalidArgument);
  const std::string m1 = unreachable.status().message();
  EXPECT_NE(m1.find("cannot connect to PostgreSQL database 'db1' on " + host + ":" + closed +
                    " as user 'u'"),
            std::string::npos)
      << m1;
  EXPECT_NE(m1.find("Connection refused"), std::string::npos) << m1;
  EXPECT_NE(m1.find("postgresql://u:***@" + host), std::string::npos) << m1;
  EXPECT_EQ(m1.find("s3cret"), std::string::npos) << m1;

  const std::string port = test_db["port"];
  const std::string user = test_db["user"];

  auto no_db = OpenPostgresStorage(at(user + ":s3cret", port, "nope"));
  ASSERT_EQ(no_db.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_db.status().message().find("database \"nope\" does not exist"), std::string::npos)
      << no_db.status().message();
  EXPECT_EQ(no_db.status().message().find("s3cret"), std::string::npos);

  auto no_user = OpenPostgresStorage(at("ghost", port, "postgres"));
  ASSERT_EQ(no_user.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_user.status().message().find("role \"ghost\" does not exist"), std::string::npos)
      << no_user.status().message();

  auto typo = OpenPostgresStorage(url_ + "?sslmod=disable");
  ASSERT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(typo.status().message().find("unknown option 'sslmod' (did you mean 'sslmode'?)"),
            std::string::npos)
      << typo.status().message();
  // libpq's own keywords pass through.
  auto with_options = OpenPostgresStorage(url_ + "?sslmode=disable&application_name=w1");
  EXPECT_TRUE(with_options.ok()) << with_options.status().ToString();
}

TEST(PostgresUrl, ParsesSqlAlchemyStyleUrls) {
  auto params = [](const PostgresUrl& u) {
    std::map<std::string, std::string> m(u.params.begin(), u.params.end());
    return m;
  };
  auto full = *ParsePostgresUrl("postgresql://me:p%40ss:w@db.example.org:6543/my%20db");
  EXPECT_EQ(params(full), (std::map<std::string, std::string>{{"user", "me"},
                                                              {"password", "p@ss:w"},
                                                              {"host", "db.example.org"},
                                                              {"port", "6543"},
                                                              {"dbname", "my db"}}));
  EXPECT_EQ(full.display, "postgresql://me:***@db.example.org:6543/my%20db");
  EXPECT_FALSE(full.options.schema_revision.has_value());
  // Optuna users' driver-qualified scheme, tune's schema key, libpq keys and a socket dir.
  auto psy = *ParsePostgresUrl(
      "postgresql+psycopg2://u@/optuna?host=/var/run/postgresql&schema=v3.0.0.d&sslmode=require");
  EXPECT_EQ(params(psy), (std::map<std::string, std::string>{{"user", "u"},
                                                             {"dbname", "optuna"},
                                                             {"host", "/var/run/postgresql"},
                                                             {"sslmode", "require"}}));
  EXPECT_EQ(psy.options.schema_revision, "v3.0.0.d");
  auto v6 = *ParsePostgresUrl("postgres://[::1]:5433,h2/db?password=hunter2");
  EXPECT_EQ(params(v6)["host"], "::1,h2");
  EXPECT_EQ(params(v6)["port"], "5433,");
  EXPECT_EQ(params(v6)["password"], "hunter2");
  EXPECT_EQ(v6.display, "postgres://[::1]:5433,h2/db?password=***");
  auto bare = *ParsePostgresUrl("postgresql://");
  EXPECT_TRUE(bare.params.empty());  // libpq's defaults (PGHOST, PGUSER, ...)

  auto bad_port = ParsePostgresUrl("postgresql://u:pw@h:99999/db");
  ASSERT_EQ(bad_port.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_port.status().message().find("bad port '99999'"), std::string::npos);
  EXPECT_EQ(bad_port.status().message().find("pw@"), std::string::npos)
      << bad_port.status().message();
  auto bad_schema = ParsePostgresUrl("postgresql://u@h/db?schema=v3.2.0");
  EXPECT_NE(bad_schema.status().message().find("did you mean 'v3.2.0.a'"), std::string::npos)
      << bad_schema.status().message();
  EXPECT_FALSE(ParsePostgresUrl("mysql://u@h/db").ok());
  EXPECT_FALSE(ParsePostgresUrl("postgresql:/u@h/db").ok());
  EXPECT_FALSE(ParsePostgresUrl("postgresql://u@h/db/x").ok());
  EXPECT_FALSE(ParsePostgresUrl("postgresql://u@h/d%zzb").ok());
}

// --- several connections and processes ------------------------------------------------------

// Connections (one storage each, so no shared mutex) race to create trials and to claim the
// same enqueued trials: contiguous numbers, every enqueued trial claimed exactly once.
TEST_F(PostgresConcurrency, ConnectionsNumberTrialsAndClaimEnqueuedOnesOnce) {
  constexpr int kConnections = 6;
  constexpr int kEnqueued = 30;
  int64_t sid = 0;
  {
    auto s = Open();
    sid = *s->CreateStudy("race", {StudyDirection::kMinimize});
    for (int i = 0; i < kEnqueued; ++i) {
      FrozenTrial templ;
      templ.state = TrialState::kWaiting;
      templ.system_attrs["fixed_params"] = {{"i", i}};
      ASSERT_TRUE(s->CreateTrial(sid, &templ).ok());
    }
  }
  std::vector<std::unique_ptr<Storage>> storages;
  for (int c = 0; c < kConnections; ++c) storages.push_back(Open());
  std::atomic<int> errors{0};
  std::mutex mu;
  std::multiset<int64_t> claimed;
  std::vector<std::thread> threads;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      Storage& s = *storages[static_cast<size_t>(c)];
      for (int i = 0; i < 10; ++i) {
        auto got = s.ClaimWaitingTrial(sid);
        if (!got.ok()) {
          ++errors;
          continue;
        }
        if (got->has_value()) {
          std::lock_guard lock(mu);
          claimed.insert((*got)->number);
        }
        auto created = s.CreateTrial(sid);
        if (!created.ok() ||
            !*s.SetTrialStateValues(created->trial_id, TrialState::kComplete, {1.0 * c})) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::multiset<int64_t> expected;
  for (int i = 0; i < kEnqueued; ++i) expected.insert(i);
  EXPECT_EQ(claimed, expected);  // each once, none lost
  auto trials = *storages[0]->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), static_cast<size_t>(kEnqueued + kConnections * 10));
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].number, static_cast<int64_t>(i));
    EXPECT_EQ(trials[i].state, i < kEnqueued ? TrialState::kRunning : TrialState::kComplete) << i;
  }
  EXPECT_EQ(Sql("SELECT COUNT(DISTINCT number), MIN(number), MAX(number) FROM trials"),
            (Rows{{std::to_string(trials.size()), "0", std::to_string(trials.size() - 1)}}));
}

// Workers starting a new study together (a Slurm job array) each try to enqueue its config's
// trials, on connections of their own: the study holds them once.
TEST_F(PostgresConcurrency, ConnectionsEnqueueANewStudysTrialsOnce) {
  constexpr int kConnections = 6;
  int64_t sid = 0;
  {
    auto s = Open();
    sid = *s->CreateStudy("enqueue-race", {StudyDirection::kMinimize});
  }
  std::vector<FrozenTrial> templates(4);
  for (size_t i = 0; i < templates.size(); ++i) {
    templates[i].state = TrialState::kWaiting;
    templates[i].system_attrs["fixed_params"] = {{"i", i}};
  }
  std::vector<std::unique_ptr<Storage>> storages;
  for (int c = 0; c < kConnections; ++c) storages.push_back(Open());
  std::atomic<int> created{0}, errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      auto got = storages[static_cast<size_t>(c)]->CreateTrialsIfEmpty(sid, templates);
      if (!got.ok()) ++errors;
      if (got.ok()) created += static_cast<int>(got->size());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(created.load(), 4);
  EXPECT_EQ(*storages[0]->CountTrials(sid), 4);
}

// 8 forked worker processes x 50 ask/tell cycles on one study (claiming enqueued trials first):
// 400 finished trials numbered 0..399, each enqueued trial run once, no errors.
TEST_F(PostgresConcurrency, EightProcessesShareAStudyWithoutLosingOrDuplicatingTrials) {
  testing::ExpectProcessesShareAStudy([&] { return TryOpen(); }, /*workers=*/8, /*trials=*/50,
                                      /*enqueued=*/16);
  EXPECT_EQ(Sql("SELECT COUNT(*), COUNT(DISTINCT number), MAX(number) FROM trials WHERE state = "
                "'COMPLETE'"),
            (Rows{{"400", "400", "399"}}));
}

// --- locks, retries, reconnects ---------------------------------------------------------------

// Holds `sql` (a row lock) in an open transaction of its own connection until Release().
class LockHolder {
 public:
  LockHolder(const std::string& url, const std::string& sql) : conn_(PQconnectdb(url.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
    for (const std::string& s : {std::string("BEGIN"), sql}) {
      PGresult* r = PQexec(conn_, s.c_str());
      EXPECT_TRUE(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK)
          << PQresultErrorMessage(r);
      PQclear(r);
    }
  }
  ~LockHolder() { PQfinish(conn_); }
  void Release() { PQclear(PQexec(conn_, "COMMIT")); }

 private:
  PGconn* conn_;
};

TEST_F(PostgresConcurrency, TrialCreationWaitsForTheStudyRowLockAndGivesUpBounded) {
  auto s = Open();
  int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  FrozenTrial first = *s->CreateTrial(sid);
  // What Optuna's _create_new_trial takes: the study row, FOR UPDATE.
  LockHolder holder(
      url_, "SELECT * FROM studies WHERE study_id = " + std::to_string(sid) + " FOR UPDATE");
  // A storage whose statements wait at most 50 ms for a lock: each attempt fails with
  // lock_not_available (retryable), and after max_attempts it gives up with Unavailable.
  PostgresOptions impatient;
  impatient.max_attempts = 3;
  auto s2 = TryOpen(impatient, "?options=-c%20lock_timeout%3D50");
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  auto start = std::chrono::steady_clock::now();
  auto blocked = (*s2)->CreateTrial(sid);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(blocked.status().code(), StatusCode::kUnavailable) << blocked.status().ToString();
  EXPECT_NE(blocked.status().message().find("lock timeout"), std::string::npos)
      << blocked.status().message();
  EXPECT_NE(blocked.status().message().find("gave up after 3 attempts"), std::string::npos);
  EXPECT_GE(waited, 0.15);
  // Other trials' updates do not need the study row.
  EXPECT_TRUE(s->SetTrialUserAttr(first.trial_id, "k", 1).ok());
  // A patient writer just waits for the lock.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    holder.Release();
  });
  start = std::chrono::steady_clock::now();
  auto created = s->CreateTrial(sid);
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  release.join();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_GE(waited, 0.1);
  EXPECT_EQ(created->number, 1);  // the failed attempts left nothing behind
  EXPECT_EQ((*s2)->CreateTrial(sid)->number, 2);
}

TEST_F(PostgresConcurrency, FinishedCheckHoldsTheTrialRowSoTwoFinishersCannotBothWin) {
  auto s = Open();
  int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  FrozenTrial t = *s->CreateTrial(sid);
  // Many connections try to finish the same trial at once: exactly one succeeds.
  std::vector<std::unique_ptr<Storage>> others;
  for (int i = 0; i < 6; ++i) others.push_back(Open());
  std::atomic<int> won{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      auto r = others[static_cast<size_t>(i)]->SetTrialStateValues(
          t.trial_id, i % 2 ? TrialState::kFail : TrialState::kComplete,
          i % 2 ? std::vector<double>{} : std::vector<double>{1.0 * i});
      if (r.ok() && *r) {
        ++won;
      } else if (r.status().code() == StatusCode::kFailedPrecondition) {
        ++refused;
      } else {
        ++other;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), 5);
  EXPECT_EQ(other.load(), 0);
  FrozenTrial back = *s->GetTrial(t.trial_id);
  EXPECT_EQ(back.values.size(), back.state == TrialState::kComplete ? 1u : 0u);
}

TEST_F(PostgresConcurrency, ALostConnectionIsReopenedByTheNextTransaction) {
  auto s = Open();
  int64_t sid = *s->CreateStudy("s", {StudyDirection::kMinimize});
  ASSERT_TRUE(s->CreateTrial(sid).ok());
  const std::string db = url_.substr(url_.rfind('/') + 1);
  // The server ends every tune session on this database (as a restart or a proxy would).
  EXPECT_EQ(Sql("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname "
                "= '" +
                db + "' AND application_name = 'tune'"),
            (Rows{{"1"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto next = s->CreateTrial(sid);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->number, 1);
  EXPECT_EQ(*s->CountTrials(sid), 2);
}

}  // namespace
}  // namespace tune

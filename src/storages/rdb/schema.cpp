#include "storages/rdb/schema.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/text.h"

namespace tune::internal::rdb {
namespace {

// SQLAlchemy's layout: "CREATE TABLE name (\n\t<item>, \n\t<item>\n)".
std::string Table(const std::string& name, const std::vector<std::string>& items) {
  std::string out = "CREATE TABLE " + name + " (\n\t";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", \n\t";
    out += items[i];
  }
  return out + "\n)";
}

// Optuna 3.1's models as SQLAlchemy 1.4.46 creates them. SQLite: dumped from sqlite_master of a
// file created by Optuna 3.1.0 (docs/cli.md, Optuna's schema, The tables). PostgreSQL: the
// DDL SQLAlchemy compiles for the postgresql dialect from optuna/storages/_rdb/models.py
// (create_all on a mock engine): SERIAL ids, native ENUM types named after the Python enums,
// FLOAT(53), TIMESTAMP WITHOUT TIME ZONE, and `key` unquoted.
std::vector<std::string> Tables(Dialect dialect) {
  const bool pg = dialect == Dialect::kPostgres;
  const std::string serial = pg ? " SERIAL NOT NULL" : " INTEGER NOT NULL";
  const std::string key = pg ? "key" : "\"key\"";
  const std::string real = pg ? "FLOAT(53)" : "FLOAT";
  const std::string datetime = pg ? "TIMESTAMP WITHOUT TIME ZONE" : "DATETIME";
  auto enum_type = [&](const char* pg_type, const char* sqlite_type) {
    return std::string(pg ? pg_type : sqlite_type);
  };
  auto attrs = [&](const std::string& table, const std::string& id, const std::string& owner,
                   const std::string& owner_table) {
    return Table(table,
                 {id + serial, owner + " INTEGER", key + " VARCHAR(512)", "value_json TEXT",
                  "PRIMARY KEY (" + id + ")", "UNIQUE (" + owner + ", " + key + ")",
                  "FOREIGN KEY(" + owner + ") REFERENCES " + owner_table + " (" + owner + ")"});
  };
  std::vector<std::string> out;
  if (pg) {
    out = {
        "CREATE TYPE studydirection AS ENUM ('NOT_SET', 'MINIMIZE', 'MAXIMIZE')",
        "CREATE TYPE trialstate AS ENUM ('RUNNING', 'COMPLETE', 'PRUNED', 'FAIL', 'WAITING')",
        "CREATE TYPE trialvaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG')",
        "CREATE TYPE trialintermediatevaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG', 'NAN')",
    };
  }
  std::vector<std::string> tables = {
      Table("studies",
            {"study_id" + serial, "study_name VARCHAR(512) NOT NULL", "PRIMARY KEY (study_id)"}),
      "CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name)",
      Table("version_info", {"version_info_id INTEGER NOT NULL", "schema_version INTEGER",
                             "library_version VARCHAR(256)", "PRIMARY KEY (version_info_id)",
                             "CHECK (version_info_id=1)"}),
      Table("study_directions",
            {"study_direction_id" + serial,
             "direction " + enum_type("studydirection", "VARCHAR(8)") + " NOT NULL",
             "study_id INTEGER NOT NULL", "objective INTEGER NOT NULL",
             "PRIMARY KEY (study_direction_id)", "UNIQUE (study_id, objective)",
             "FOREIGN KEY(study_id) REFERENCES studies (study_id)"}),
      attrs("study_user_attributes", "study_user_attribute_id", "study_id", "studies"),
      attrs("study_system_attributes", "study_system_attribute_id", "study_id", "studies"),
      Table("trials",
            {"trial_id" + serial, "number INTEGER", "study_id INTEGER",
             "state " + enum_type("trialstate", "VARCHAR(8)") + " NOT NULL",
             "datetime_start " + datetime, "datetime_complete " + datetime,
             "PRIMARY KEY (trial_id)", "FOREIGN KEY(study_id) REFERENCES studies (study_id)"}),
      attrs("trial_user_attributes", "trial_user_attribute_id", "trial_id", "trials"),
      attrs("trial_system_attributes", "trial_system_attribute_id", "trial_id", "trials"),
      Table("trial_params", {"param_id" + serial, "trial_id INTEGER", "param_name VARCHAR(512)",
                             "param_value " + real, "distribution_json TEXT",
                             "PRIMARY KEY (param_id)", "UNIQUE (trial_id, param_name)",
                             "FOREIGN KEY(trial_id) REFERENCES trials (trial_id)"}),
      Table(
          "trial_values",
          {"trial_value_id" + serial, "trial_id INTEGER NOT NULL", "objective INTEGER NOT NULL",
           "value " + real, "value_type " + enum_type("trialvaluetype", "VARCHAR(7)") + " NOT NULL",
           "PRIMARY KEY (trial_value_id)", "UNIQUE (trial_id, objective)",
           "FOREIGN KEY(trial_id) REFERENCES trials (trial_id)"}),
      Table("trial_intermediate_values",
            {"trial_intermediate_value_id" + serial, "trial_id INTEGER NOT NULL",
             "step INTEGER NOT NULL", "intermediate_value " + real,
             "intermediate_value_type " + enum_type("trialintermediatevaluetype", "VARCHAR(7)") +
                 " NOT NULL",
             "PRIMARY KEY (trial_intermediate_value_id)", "UNIQUE (trial_id, step)",
             "FOREIGN KEY(trial_id) REFERENCES trials (trial_id)"}),
      Table("trial_heartbeats",
            {"trial_heartbeat_id" + serial, "trial_id INTEGER NOT NULL",
             "heartbeat " + datetime + " NOT NULL", "PRIMARY KEY (trial_heartbeat_id)",
             "UNIQUE (trial_id)", "FOREIGN KEY(trial_id) REFERENCES trials (trial_id)"}),
      // Created by alembic (same text in both dialects).
      Table("alembic_version", {"version_num VARCHAR(32) NOT NULL",
                                "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)"}),
  };
  out.insert(out.end(), tables.begin(), tables.end());
  return out;
}

}  // namespace

const std::vector<std::string>& SupportedRevisions() {
  static const std::vector<std::string> kRevisions = {kRevisionV300d, kRevisionV320a};
  return kRevisions;
}

bool IsSupportedRevision(const std::string& revision) {
  const auto& r = SupportedRevisions();
  return std::find(r.begin(), r.end(), revision) != r.end();
}

std::string SupportedRevisionsText() {
  return fmt::format("{} (Optuna 3.0-3.1), {} (Optuna >= 3.2)", kRevisionV300d, kRevisionV320a);
}

Status CheckSchemaOption(const std::string& storage, const std::string& revision) {
  if (IsSupportedRevision(revision)) return Status::Ok();
  return InvalidArgumentError(
      fmt::format("storage '{}': unknown schema '{}'{}; supported: {}", storage, revision,
                  DidYouMean(revision, SupportedRevisions()), SupportedRevisionsText()));
}

const std::vector<std::string>& SchemaTables() {
  static const std::vector<std::string> kTables = {"studies",
                                                   "version_info",
                                                   "study_directions",
                                                   "study_user_attributes",
                                                   "study_system_attributes",
                                                   "trials",
                                                   "trial_user_attributes",
                                                   "trial_system_attributes",
                                                   "trial_params",
                                                   "trial_values",
                                                   "trial_intermediate_values",
                                                   "trial_heartbeats",
                                                   "alembic_version"};
  return kTables;
}

const std::vector<std::string>& PostgresEnumTypes() {
  static const std::vector<std::string> kTypes = {"studydirection", "trialstate", "trialvaluetype",
                                                  "trialintermediatevaluetype"};
  return kTypes;
}

bool IsOlderOptunaRevision(const std::string& revision) {
  static const std::vector<std::string> kOlder = {"v0.9.0.a", "v1.2.0.a", "v1.3.0.a", "v2.4.0.a",
                                                  "v2.6.0.a", "v3.0.0.a", "v3.0.0.b", "v3.0.0.c"};
  return std::find(kOlder.begin(), kOlder.end(), revision) != kOlder.end();
}

std::string LibraryVersionFor(const std::string& revision) {
  return revision == kRevisionV300d ? "3.1.0" : "3.2.0";
}

std::vector<std::string> CreateSchemaStatements(Dialect dialect, const std::string& revision) {
  std::vector<std::string> out = Tables(dialect);
  if (revision == kRevisionV320a) {
    // What Optuna >= 3.2 creates for a new file (models.py: index=True on TrialModel.study_id).
    out.emplace_back("CREATE INDEX ix_trials_study_id ON trials (study_id)");
  }
  out.push_back(
      fmt::format("INSERT INTO version_info (version_info_id, schema_version, library_version) "
                  "VALUES (1, {}, '{}')",
                  kSchemaVersion, LibraryVersionFor(revision)));
  out.push_back(fmt::format("INSERT INTO alembic_version (version_num) VALUES ('{}')", revision));
  return out;
}

}  // namespace tune::internal::rdb

// Optuna's RDB schema (optuna/storages/_rdb/models.py) as tune writes it: the revisions tune
// knows and the DDL of each, byte for byte what SQLAlchemy emits for Optuna. Shared by the RDB
// backends; no database headers.
#pragma once

#include <string>
#include <vector>

#include "tune/status.h"

namespace tune::internal::rdb {

enum class Dialect {
  kSqlite,    // SQLAlchemy 1.4's SQLite DDL (Optuna 3.1 / Debian 12)
  kPostgres,  // SQLAlchemy 1.4's PostgreSQL DDL: native ENUM types, SERIAL ids
};

// Alembic revisions, oldest first. Only these two exist between Optuna 3.0 and 5.0:
// v3.0.0.d is the head of Optuna 3.0-3.1, v3.2.0.a (index on trials.study_id) of 3.2-5.0.
inline constexpr const char* kRevisionV300d = "v3.0.0.d";
inline constexpr const char* kRevisionV320a = "v3.2.0.a";
const std::vector<std::string>& SupportedRevisions();
bool IsSupportedRevision(const std::string& revision);
// "v3.0.0.d (Optuna 3.0-3.1), v3.2.0.a (Optuna >= 3.2)".
std::string SupportedRevisionsText();
// The `?schema=` option of a storage URL: InvalidArgument naming the storage, the value, the
// closest revision and the supported ones unless `revision` is supported.
Status CheckSchemaOption(const std::string& storage, const std::string& revision);

// The tables of the schema (creation order) plus alembic_version.
const std::vector<std::string>& SchemaTables();
// PostgreSQL only: the ENUM types the tables use (trialstate, studydirection, ...).
const std::vector<std::string>& PostgresEnumTypes();

// Optuna's alembic revisions older than tune's, oldest first (v0.9.0.a ... v3.0.0.c): a
// storage stamped with one of these needs `optuna storage upgrade` before tune can use it.
bool IsOlderOptunaRevision(const std::string& revision);

// version_info.schema_version: frozen at 12 since Optuna 2.x (models.py SCHEMA_VERSION).
inline constexpr int kSchemaVersion = 12;
// version_info.library_version written for a revision: the first Optuna release with that head.
std::string LibraryVersionFor(const std::string& revision);

// The statements that create the schema at `revision` (tables, indices, version_info row and
// alembic stamp), to run in one write transaction on an empty database.
// REQUIRES: IsSupportedRevision(revision).
std::vector<std::string> CreateSchemaStatements(Dialect dialect, const std::string& revision);

}  // namespace tune::internal::rdb

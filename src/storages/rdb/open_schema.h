// Opening an RDB storage's schema, shared by the backends (SQLite, PostgreSQL): the text rows of
// a query, the revision a database is stamped with (checked), and creating the schema in an
// empty database when no other process does it first. No database headers.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "storages/rdb/connection.h"
#include "storages/rdb/schema.h"
#include "tune/status.h"

namespace tune::internal::rdb {

// What a database holds.
struct Inspection {
  bool empty = false;    // none of Optuna's tables: a new storage
  std::string revision;  // set when !empty
};

// How messages name a database, and what to tell its owner when its revision is not tune's.
struct DatabaseNaming {
  std::string where;         // "'study.db'", "database 'db' on host:5432 as user 'u'"
  std::string upgrade_hint;  // for an older Optuna revision: "Upgrade ... first: optuna ..."
  std::string newer_hint;    // for an unknown one: "The file was written by a newer Optuna"
};

// The first column of every row of `sql`, as text.
Result<std::vector<std::string>> QueryTexts(Connection& conn, const std::string& sql);

// The schema tables (SchemaTables) that `tables` lacks.
std::vector<std::string> MissingTables(const std::vector<std::string>& tables);

// The revision in alembic_version: InvalidArgument unless there is exactly one and tune supports
// it (naming the supported ones, and how to upgrade an older one). Query errors as they are.
Result<std::string> CheckedRevision(Connection& conn, const DatabaseNaming& naming);

// Creates the schema at `revision` in one write transaction unless the database is no longer
// empty by then (another process created it): `lock` (when set) runs first in the transaction,
// then `inspect`. A busy database (Unavailable) retries the whole transaction, `max_attempts`
// times at most; Unavailable "creating the schema in WHERE: ..." after the last.
Status CreateSchemaIfEmpty(Connection& conn, Dialect dialect, const std::string& revision,
                           int max_attempts, const std::string& where,
                           const std::function<Status()>& lock,
                           const std::function<Result<Inspection>()>& inspect);

}  // namespace tune::internal::rdb

// PostgreSQL storage in Optuna's own RDB schema [tune_postgres, target tune::postgres]: one
// database server shared by workers on several machines. The database holds the tables, ENUM
// types and SERIAL ids of Optuna's RDBStorage (SQLAlchemy 1.4), so Optuna and optuna-dashboard
// open a tune study as it is, and tune continues studies Optuna created.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/status.h"
#include "tune/storages/storage.h"

namespace tune {

// The revision written to an empty database unless PostgresOptions::schema_revision says
// otherwise.
inline constexpr const char* kDefaultPostgresSchemaRevision = "v3.2.0.a";

struct PostgresOptions {
  // Revision for an empty database: "v3.2.0.a" (default; Optuna >= 3.2) or "v3.0.0.d" (Optuna
  // 3.0-3.1), as with SQLite. Set for a database that holds a schema, it must match
  // (InvalidArgument otherwise: tune never migrates one). URL: ?schema=.
  std::optional<std::string> schema_revision;
  // Attempts per transaction on a serialization failure, deadlock or lost connection; then
  // Unavailable.
  int max_attempts = 8;
  // Seconds to wait for the server when connecting, unless the URL says (connect_timeout=).
  int connect_timeout_seconds = 10;
  // Create the schema on first open in a database that has none of Optuna's tables (other
  // applications' tables may share it); otherwise NotFound.
  bool create_if_missing = true;
  // Open without writing anything (no schema creation; the session is read-only).
  bool read_only = false;
};

// Whether this build has the PostgreSQL backend (tune_postgres linked against libpq). Without
// it OpenPostgresStorage returns InvalidArgument saying so.
bool PostgresAvailable();

// A parsed storage URL, SQLAlchemy style:
//   postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?KEY=VALUE&...]
// also postgres:// and postgresql+DRIVER:// (postgresql+psycopg2://, as Optuna users write it).
// Query keys: tune's `schema` (a revision, see PostgresOptions) and libpq's own
// (sslmode, connect_timeout, application_name, host=/socket/dir, ...).
// User, password, database and query values are %-decoded. The password may instead come from
// PGPASSWORD or ~/.pgpass, as with psql.
struct PostgresUrl {
  // libpq connection keywords and values (host, port, user, password, dbname, sslmode, ...),
  // in URL order; libpq checks the keywords when connecting.
  std::vector<std::pair<std::string, std::string>> params;
  std::string display;  // the URL as given, with any password replaced by "***"
  PostgresOptions options;
};
// InvalidArgument (naming the URL without its password) for anything else.
Result<PostgresUrl> ParsePostgresUrl(const std::string& url);

// Opens the storage. Every state change is one transaction (READ COMMITTED). A new trial's
// number is counted while the study's row is locked (SELECT ... FOR UPDATE, as Optuna does), so
// numbers are contiguous across processes and machines; a WAITING trial is claimed with
// FOR UPDATE SKIP LOCKED, so exactly one worker gets it; a trial's row is locked while an update
// checks that it has not finished. Serialization failures, deadlocks and lost connections are
// retried up to max_attempts times (a lost connection is re-opened at the next transaction),
// then Unavailable. The storage may be shared by many threads (one connection, one mutex).
// Errors, never showing a password: InvalidArgument for an unknown URL keyword, a server that
// cannot be reached or refuses the login, a database that does not exist, one that holds only
// part of Optuna's tables (left unchanged), a schema revision tune does not know (listing the
// supported ones) or other than options.schema_revision, and in a build without libpq
// (PostgresAvailable); FailedPrecondition for a server older than 9.5; NotFound for a database
// without the schema when create_if_missing is false or read_only is set. Each message about
// the database names its host, port and database.
Result<std::unique_ptr<Storage>> OpenPostgresStorage(const PostgresUrl& url);
// ParsePostgresUrl, then OpenPostgresStorage.
Result<std::unique_ptr<Storage>> OpenPostgresStorage(const std::string& url);

}  // namespace tune

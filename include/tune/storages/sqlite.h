// SQLite storage in Optuna's own RDB schema [tune_sqlite, target tune::sqlite]: the file holds
// Optuna's 12 tables plus alembic_version as Optuna's RDBStorage creates them, so Optuna and
// optuna-dashboard open a tune study as it is, and tune continues studies Optuna created.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/storages/storage.h"

namespace tune {

// Optuna's alembic revisions tune reads and writes, oldest first: {"v3.0.0.d", "v3.2.0.a"}.
// The revision stamped in alembic_version decides which Optuna versions can open the file:
//   v3.2.0.a  Optuna >= 3.2 (4.x, 5.0) and optuna-dashboard; adds the index on trials.study_id.
//   v3.0.0.d  Optuna 3.0 and 3.1 (Debian 12's python3-optuna); no such index.
const std::vector<std::string>& SqliteSchemaRevisions();
// The revision written to new files unless SqliteOptions::schema_revision says otherwise.
inline constexpr const char* kDefaultSqliteSchemaRevision = "v3.2.0.a";

struct SqliteOptions {
  // Revision for a new file (SqliteSchemaRevisions; chosen when the file is created, an existing
  // file keeps its own). Set for an existing file, it must match the file's
  // revision (InvalidArgument otherwise: tune never migrates a file). URL: ?schema=.
  std::optional<std::string> schema_revision;
  // How long one statement waits for another process's lock (sqlite3_busy_timeout).
  // URL: ?timeout=SECONDS (SQLAlchemy's pysqlite name).
  int busy_timeout_ms = 5000;
  // Attempts per transaction when the database stays locked past the busy timeout; then
  // Unavailable ("database is locked").
  int max_attempts = 8;
  // Create the file (and the schema) if it does not exist; otherwise NotFound.
  bool create_if_missing = true;
  // Open without writing anything (no schema creation, no switch to WAL): for read-only
  // commands. Writes then fail.
  bool read_only = false;
};

// Opens (or creates) the SQLite storage at `path`. Unless read_only, the file is put in WAL mode
// (readers such as a dashboard never block the writer); every state change is one transaction
// (BEGIN IMMEDIATE), retried up to max_attempts times while another process holds the lock.
// Trial numbers and the claiming of WAITING trials are race-free across threads and processes
// on one machine; REQUIRES: a local file system (SQLite's locking is unreliable on network ones).
// The storage may be shared by many threads (one connection, one mutex).
// Errors: InvalidArgument for an empty path or an options.schema_revision tune does not know
// (the message lists the supported ones); FailedPrecondition when the linked SQLite is older
// than 3.35 or lacks JSON1; and, naming the file and leaving it unchanged, InvalidArgument for a
// directory, a file that is not a SQLite database, is corrupt, is not an Optuna storage, has a
// schema revision tune does not know or other than options.schema_revision, or is empty when
// read_only; NotFound for a missing file with create_if_missing = false or read_only;
// Unavailable when the file stays locked.
Result<std::unique_ptr<Storage>> OpenSqliteStorage(const std::string& path,
                                                   const SqliteOptions& options = {});

// A parsed SQLAlchemy-style URL: "sqlite:///relative/x.db", "sqlite:////abs/x.db", with the
// optional query "?schema=v3.0.0.d&timeout=30".
struct SqliteUrl {
  std::string path;
  SqliteOptions options;
};
// InvalidArgument (naming the URL and the valid keys/values) for anything else.
Result<SqliteUrl> ParseSqliteUrl(const std::string& url);

}  // namespace tune

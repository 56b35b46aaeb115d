// The PostgreSQL driver of the RDB storage [tune_postgres]: one libpq connection with its prepared
// statements. The only place besides postgres_connection.cpp and postgres_storage.cpp that knows
// libpq (by a forward declaration; <libpq-fe.h> is included by the .cpp files only).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "storages/rdb/connection.h"

typedef struct pg_conn PGconn;      // NOLINT: libpq's own declarations
typedef struct pg_result PGresult;  // NOLINT

namespace tune::internal::postgres {

class PgStatement;

// The shared SQL's `?` placeholders become $1..$n; values travel as text and the server infers
// their types from the statement (ENUM columns take the names, timestamps the
// "YYYY-MM-DD HH:MM:SS.ffffff" text). Sessions use DateStyle ISO and exact float output.
// Errors of statements and transactions (see connection.h), each message starting with the
// storage's display URL: serialization failure, deadlock, lock not available, a shutting-down
// server and a lost connection -> Unavailable (the storage retries the transaction; the next
// Begin reconnects); unique violation -> AlreadyExists; a read-only session asked to write ->
// FailedPrecondition; anything else -> Internal.
class PgConnection : public rdb::Connection {
 public:
  struct OpenOptions {
    bool read_only = false;            // SET default_transaction_read_only
    int connect_timeout_seconds = 10;  // unless `params` has connect_timeout
  };
  // Connects with libpq keywords `params`; `name` (the display URL) prefixes every message of the
  // statements. InvalidArgument when the server cannot be reached or refuses the login;
  // FailedPrecondition for a server older than 9.5.
  static Result<std::unique_ptr<PgConnection>> Open(
      const std::vector<std::pair<std::string, std::string>>& params, const std::string& name,
      const OpenOptions& options);
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  Result<rdb::Statement*> Prepare(const std::string& sql) override;
  Status Begin(rdb::TxKind kind) override;
  Status Commit() override;
  void Rollback() override;
  int64_t Changes() override;
  Result<std::optional<int64_t>> DataVersion() override;

  // Runs SQL without parameters or results (DDL, SET, several statements at once).
  Status ExecScript(const std::string& sql) override;
  const std::string& name() const { return name_; }
  // "database 'db' on host:port as user 'u'", for messages.
  std::string Where() const;

  // For PgStatement: prepares `sql` as `statement_name` in this session if not done yet, runs
  // it with text `values` (nullptr = NULL) and stores the result in *result (the caller clears
  // it), or returns the mapped error.
  Status ExecPrepared(const std::string& statement_name, const std::string& sql, int n_params,
                      const std::vector<const char*>& values, PGresult** result);

 private:
  PgConnection(PGconn* conn, std::string name, OpenOptions options);
  // Settings for every session (also after a reconnect).
  Status ConfigureSession();
  // After the server closed the connection: reconnects (the prepared statements are gone).
  Status Reconnect();
  // Maps a failed result (or, with no result, the connection's error) to a Status.
  Status Error(const PGresult* result, const std::string& what);

  PGconn* conn_;
  std::string name_;
  OpenOptions options_;
  int64_t changes_ = 0;
  // Statements by SQL text; `prepared_` = server-side names prepared in the current session.
  std::unordered_map<std::string, std::unique_ptr<PgStatement>> statements_;
  std::unordered_set<std::string> prepared_;
};

}  // namespace tune::internal::postgres

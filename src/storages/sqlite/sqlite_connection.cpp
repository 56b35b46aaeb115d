#include "storages/sqlite/sqlite_connection.h"

#include <fmt/format.h>
#include <sqlite3.h>

namespace tune::internal::sqlite {

class SqliteStatement : public rdb::Statement {
 public:
  SqliteStatement(sqlite3_stmt* stmt, const SqliteConnection* conn) : stmt_(stmt), conn_(conn) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void BindNull(int index) override { Check(sqlite3_bind_null(stmt_, index)); }
  void BindInt(int index, int64_t value) override {
    Check(sqlite3_bind_int64(stmt_, index, value));
  }
  void BindDouble(int index, double value) override {
    Check(sqlite3_bind_double(stmt_, index, value));
  }
  void BindText(int index, std::string_view value) override {
    Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }

  Result<bool> Step() override {
    if (bind_rc_ != SQLITE_OK) {
      return conn_->Error(bind_rc_, fmt::format("binding '{}'", sqlite3_sql(stmt_)));
    }
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return conn_->Error(rc, fmt::format("'{}'", sqlite3_sql(stmt_)));
  }

  bool IsNull(int column) const override {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
  }
  int64_t Int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const override { return sqlite3_column_double(stmt_, column); }
  std::string Text(int column) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (!p) return {};
    return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }

  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3_stmt* stmt_;
  const SqliteConnection* conn_;
  int bind_rc_ = SQLITE_OK;
};

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path,
                                                                 const std::string& name,
                                                                 const OpenOptions& options) {
  // One connection per storage, serialised by the storage's mutex: no SQLite-level mutex.
  // Read-only access is PRAGMA query_only on a read-write connection: a SQLITE_OPEN_READONLY
  // connection to a WAL file would create -wal/-shm files it cannot remove on close. (SQLite
  // falls back to a read-only connection by itself if the file is write-protected.)
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READWRITE;
  if (options.create && !options.read_only) flags |= SQLITE_OPEN_CREATE;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return InvalidArgumentError(fmt::format("cannot open SQLite file '{}': {}", path, msg));
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  if (options.read_only) {
    rc = sqlite3_exec(db, "PRAGMA query_only=1", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = sqlite3_errmsg(db);
      sqlite3_close_v2(db);
      return InternalError(fmt::format("{}: PRAGMA query_only: {}", name, msg));
    }
  }
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(db, name));
}

SqliteConnection::SqliteConnection(sqlite3* db, std::string name)
    : db_(db), name_(std::move(name)) {}

SqliteConnection::~SqliteConnection() {
  statements_.clear();  // finalize before closing
  sqlite3_close_v2(db_);
}

Status SqliteConnection::Error(int rc, const std::string& what) const {
  const int primary = rc & 0xff;
  std::string msg = fmt::format("{}: {}: {}", name_, what, sqlite3_errmsg(db_));
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return UnavailableError(msg);
  if (primary == SQLITE_READONLY) return FailedPreconditionError(msg);
  return InternalError(msg);
}

Result<rdb::Statement*> SqliteConnection::Prepare(const std::string& sql) {
  if (auto it = statements_.find(sql); it != statements_.end()) return it->second.get();
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, fmt::format("preparing '{}'", sql));
  }
  auto owned = std::make_unique<SqliteStatement>(stmt, this);
  rdb::Statement* raw = owned.get();
  statements_.emplace(sql, std::move(owned));
  return raw;
}

Status SqliteConnection::Begin(rdb::TxKind kind) {
  // IMMEDIATE takes the write lock now, so a writer never fails later on upgrading a read lock
  // (which SQLite cannot wait for).
  return rdb::Exec(*this, kind == rdb::TxKind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN");
}

Status SqliteConnection::Commit() { return rdb::Exec(*this, "COMMIT"); }

void SqliteConnection::Rollback() {
  if (!sqlite3_get_autocommit(db_)) (void)rdb::Exec(*this, "ROLLBACK");
}

int64_t SqliteConnection::Changes() { return sqlite3_changes64(db_); }

Result<std::optional<int64_t>> SqliteConnection::DataVersion() {
  TUNE_ASSIGN_OR_RETURN(rdb::ScopedQuery q, rdb::ScopedQuery::Make(*this, "PRAGMA data_version"));
  TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(q->Int(0));
}

Status SqliteConnection::ExecScript(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  const int primary = rc & 0xff;
  std::string text = fmt::format("{}: '{}': {}", name_, sql.substr(0, 80), msg);
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return UnavailableError(text);
  return InternalError(text);
}

std::optional<std::string> SqliteFeatureProblem(const std::string& version, int version_number,
                                                bool json_each_works) {
  if (version_number < 3035000) {
    return fmt::format(
        "the SQLite storage needs SQLite >= 3.35 (for RETURNING); this process runs SQLite {}: "
        "install a newer libsqlite3 (Debian 12 and Ubuntu 22.04 have one)",
        version);
  }
  if (!json_each_works) {
    return fmt::format(
        "the SQLite storage needs SQLite's JSON functions (json_each), which this SQLite {} was "
        "built without (SQLITE_OMIT_JSON, or before 3.38 without SQLITE_ENABLE_JSON1): use a "
        "libsqlite3 with JSON1, as every Debian and Ubuntu package has it",
        version);
  }
  return std::nullopt;
}

std::optional<std::string> SqliteLibraryProblem() {
  static const std::optional<std::string> problem = [] {
    // By feature, not version: JSON1 may be built into an older SQLite or left out of a newer one.
    bool json_each_works = false;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
      json_each_works = sqlite3_exec(db, "SELECT value FROM json_each('[1]')", nullptr, nullptr,
                                     nullptr) == SQLITE_OK;
    }
    sqlite3_close(db);
    return SqliteFeatureProblem(sqlite3_libversion(), sqlite3_libversion_number(), json_each_works);
  }();
  return problem;
}

}  // namespace tune::internal::sqlite

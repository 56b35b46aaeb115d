// The database seam of the RDB storages [tune_rdb]: a connection that prepares statements and
// runs transactions. SQLite (src/storages/sqlite/) and PostgreSQL (src/storages/postgres/)
// implement it; the storage logic over it (rdb_storage.cpp) and the SQL text are shared. No
// database headers here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "tune/status.h"

namespace tune::internal::rdb {

// A prepared statement owned (and cached) by its connection. Bind indices start at 1, column
// indices at 0. After the last Step the caller calls Reset (ScopedQuery does).
class Statement {
 public:
  virtual ~Statement() = default;
  virtual void BindNull(int index) = 0;
  virtual void BindInt(int index, int64_t value) = 0;
  virtual void BindDouble(int index, double value) = 0;
  virtual void BindText(int index, std::string_view value) = 0;
  // Executes the statement (first call) or moves to the next row; true while a row is there.
  virtual Result<bool> Step() = 0;
  virtual bool IsNull(int column) const = 0;
  virtual int64_t Int(int column) const = 0;
  virtual double Double(int column) const = 0;
  virtual std::string Text(int column) const = 0;
  // Ends this execution and clears the bindings.
  virtual void Reset() = 0;
};

enum class TxKind {
  kRead,   // a consistent snapshot for several SELECTs
  kWrite,  // SQLite: takes the write lock at once (BEGIN IMMEDIATE); PostgreSQL: READ COMMITTED,
           // each statement sees what was committed before it (row locks order the writers)
};

// Error convention for drivers: a lock or serialisation conflict that may succeed when the whole
// transaction is retried is reported as Unavailable; everything else keeps its own code.
// Not thread-safe: RdbStorage serialises all use of a connection with its mutex.
class Connection {
 public:
  virtual ~Connection() = default;
  // The statement for `sql`, prepared on first use and cached for the connection's lifetime.
  // SQL text uses `?` placeholders (SQLite's); a driver whose database wants `$1, $2, ...`
  // rewrites them here. REQUIRES: no `?` inside a literal of `sql`.
  virtual Result<Statement*> Prepare(const std::string& sql) = 0;
  virtual Status Begin(TxKind kind) = 0;
  virtual Status Commit() = 0;
  // Best effort; a failed rollback leaves nothing to report to the caller.
  virtual void Rollback() = 0;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int64_t Changes() = 0;
  // Inside a transaction: a number that differs from the one read in an earlier transaction iff
  // another connection has committed since (SQLite: PRAGMA data_version). nullopt if the
  // database cannot tell (PostgreSQL); the storage then re-reads what it would otherwise keep.
  virtual Result<std::optional<int64_t>> DataVersion() = 0;
  // Runs one or more statements without parameters or results (DDL, PRAGMA, SET).
  virtual Status ExecScript(const std::string& sql) = 0;
};

// Binds arguments to a statement by position, runs it and resets it when it goes out of scope.
//
//   TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(conn, kSql, study_id, name));
//   while (true) { TUNE_ASSIGN_OR_RETURN(bool row, q.Next()); if (!row) break; ... q->Int(0) }
class ScopedQuery {
 public:
  template <typename... Args>
  static Result<ScopedQuery> Make(Connection& conn, const std::string& sql, const Args&... args) {
    TUNE_ASSIGN_OR_RETURN(Statement * stmt, conn.Prepare(sql));
    ScopedQuery q(stmt);
    int index = 0;
    (q.Bind(++index, args), ...);
    (void)index;
    return q;
  }

  ScopedQuery(ScopedQuery&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  ScopedQuery& operator=(ScopedQuery&&) = delete;
  ScopedQuery(const ScopedQuery&) = delete;
  ~ScopedQuery() {
    if (stmt_) stmt_->Reset();
  }

  Result<bool> Next() { return stmt_->Step(); }
  const Statement* operator->() const { return stmt_; }
  const Statement& operator*() const { return *stmt_; }

 private:
  explicit ScopedQuery(Statement* stmt) : stmt_(stmt) {}

  void Bind(int i, std::nullopt_t) { stmt_->BindNull(i); }
  void Bind(int i, const std::string& v) { stmt_->BindText(i, v); }
  void Bind(int i, std::string_view v) { stmt_->BindText(i, v); }
  void Bind(int i, const char* v) { stmt_->BindText(i, v); }
  void Bind(int i, double v) { stmt_->BindDouble(i, v); }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  void Bind(int i, T v) {
    stmt_->BindInt(i, static_cast<int64_t>(v));
  }
  template <typename T>
  void Bind(int i, const std::optional<T>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      stmt_->BindNull(i);
    }
  }

  Statement* stmt_;
};

// Runs a statement that returns no rows (or whose rows are ignored).
template <typename... Args>
Status Exec(Connection& conn, const std::string& sql, const Args&... args) {
  TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(conn, sql, args...));
  while (true) {
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) return Status::Ok();
  }
}

}  // namespace tune::internal::rdb

// The SQLite driver of the RDB storage: one sqlite3 connection with its cached prepared
// statements. The only place besides sqlite_storage.cpp that includes <sqlite3.h>.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "storages/rdb/connection.h"

struct sqlite3;

namespace tune::internal::sqlite {

class SqliteStatement;

class SqliteConnection : public rdb::Connection {
 public:
  struct OpenOptions {
    bool read_only = false;
    bool create = false;  // create the file if missing
    int busy_timeout_ms = 5000;
  };
  // `path` as given to sqlite3_open_v2; `name` (the URL) prefixes every error message.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path,
                                                        const std::string& name,
                                                        const OpenOptions& options);
  ~SqliteConnection() override;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  Result<rdb::Statement*> Prepare(const std::string& sql) override;
  Status Begin(rdb::TxKind kind) override;
  Status Commit() override;
  void Rollback() override;
  int64_t Changes() override;
  Result<std::optional<int64_t>> DataVersion() override;

  // Runs one or more statements without results (PRAGMA, DDL).
  Status ExecScript(const std::string& sql) override;
  // Maps a SQLite result code to a Status: BUSY/LOCKED -> Unavailable, others -> Internal.
  Status Error(int rc, const std::string& what) const;
  const std::string& name() const { return name_; }

 private:
  SqliteConnection(sqlite3* db, std::string name);

  sqlite3* db_;
  std::string name_;
  std::unordered_map<std::string, std::unique_ptr<SqliteStatement>> statements_;
};

// What SQLite must offer the storage: RETURNING (3.35) and the JSON function json_each (built in
// since 3.38, a compile-time option before: Ubuntu 22.04's 3.37.2 has it). Returns a message
// naming what is missing and how to get it, or nothing when `version_number`
// (sqlite3_libversion_number) and `json_each_works` (a query of json_each succeeded) suffice.
std::optional<std::string> SqliteFeatureProblem(const std::string& version, int version_number,
                                                bool json_each_works);
// SqliteFeatureProblem of the SQLite this process runs (json_each tried on an in-memory
// database, once per process).
std::optional<std::string> SqliteLibraryProblem();

}  // namespace tune::internal::sqlite

// The Storage contract over Optuna's RDB schema [tune_rdb], written once for every RDB backend:
// the SQL, the transactions and their retries, the row <-> FrozenTrial mapping.
#pragma once

#include <memory>
#include <string>

#include "storages/rdb/connection.h"
#include "storages/rdb/schema.h"
#include "tune/storages/storage.h"

namespace tune::internal::rdb {

struct RdbStorageOptions {
  std::string url;       // what url() returns, e.g. "sqlite:///x.db"
  int max_attempts = 8;  // per transaction, when the database reports a lock conflict
  // For databases with concurrent writers (PostgreSQL, write transactions at READ COMMITTED):
  // lock the study row (SELECT ... FOR UPDATE, as Optuna does) before numbering a new trial or
  // deleting the study, lock a trial's row before checking that it may change, and pick the
  // WAITING trial to claim with FOR UPDATE SKIP LOCKED. Off for SQLite, whose write
  // transactions already exclude each other (and which has no FOR UPDATE).
  bool row_locks = false;
  // One row, one column: the database's current time as text that ParseUtcTimestamp
  // (codec.h) reads. Heartbeats use the database's clock, as Optuna does: RecordHeartbeat writes
  // this time and FailStaleTrials compares with it, so workers on machines with skewed clocks
  // agree. The default works on SQLite (second resolution) and PostgreSQL; SQLite
  // passes strftime('%Y-%m-%d %H:%M:%f', 'now') for milliseconds.
  std::string current_timestamp_sql = "SELECT CURRENT_TIMESTAMP";
  // The SQL of the reads by a list of trial ids (all other SQL is the same on both), bound as
  // one text parameter so those statements are prepared once and use the indexes: SQLite
  // takes the list as a JSON array (json_each: JSON1, built in since SQLite 3.38), PostgreSQL
  // as an array literal (= ANY).
  Dialect dialect = Dialect::kSqlite;
};

// The Storage over `connection`, whose database already holds the schema (a backend opens it:
// see sqlite_storage.cpp). Beyond Storage's contract:
//  - Each state change is one write transaction of O(1) statements; a trial's number is the
//    study's trial count read inside the INSERT's write transaction, so numbers stay contiguous
//    across processes.
//  - Reads of several rows run in one read transaction (a consistent snapshot). GetTrialsSince
//    is at most 7 statements however many trials are listed (a listed number whose id this
//    storage has not read yet costs one more) and reads no row of a trial it does not return.
//  - Per-study counts by state are kept between transactions while Connection::DataVersion()
//    shows no other writer, so CountTrials, the WAITING check of every ask and the next number
//    cost O(1) for a lone worker.
//  - FailStaleTrials checks each candidate again in its write transaction (still RUNNING, still
//    stale), so concurrent callers fail each trial once.
// REQUIRES: trial ids increase in commit order within a study (true for SQLite's INTEGER
// PRIMARY KEY under its single writer; with row_locks, a trial is inserted only while its study
// row is locked, so the ids, taken from the sequence at INSERT, do too).
std::unique_ptr<Storage> NewRdbStorage(std::unique_ptr<Connection> connection,
                                       RdbStorageOptions options);

}  // namespace tune::internal::rdb

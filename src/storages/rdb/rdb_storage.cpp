#include "storages/rdb/rdb_storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "storages/rdb/codec.h"

namespace tune::internal::rdb {
namespace {

// ---------------------------------------------------------------------------------------------
// SQL. Portable between SQLite >= 3.35 and PostgreSQL (upserts, RETURNING), except the reads by
// a list of trial ids (one text per Dialect, below); `?` placeholders.

// --- studies
const std::string kFindStudyByName = "SELECT study_id FROM studies WHERE study_name = ?";
const std::string kStudyExists = "SELECT 1 FROM studies WHERE study_id = ?";
// row_locks: held until the transaction ends; trial creation waits for the one before it.
const std::string kLockStudy = "SELECT 1 FROM studies WHERE study_id = ? FOR UPDATE";
const std::string kInsertStudy = "INSERT INTO studies (study_name) VALUES (?) RETURNING study_id";
const std::string kInsertDirection =
    "INSERT INTO study_directions (direction, study_id, objective) VALUES (?, ?, ?)";
const std::string kSelectStudies = "SELECT study_id, study_name FROM studies ORDER BY study_id";
const std::string kSelectStudy = "SELECT study_id, study_name FROM studies WHERE study_id = ?";
const std::string kSelectDirections = "SELECT study_id, objective, direction FROM study_directions";
const std::string kSelectStudyDirections =
    "SELECT study_id, objective, direction FROM study_directions WHERE study_id = ?";
const std::string kSelectStudyUserAttrs =
    "SELECT study_id, \"key\", value_json FROM study_user_attributes";
const std::string kSelectStudySystemAttrs =
    "SELECT study_id, \"key\", value_json FROM study_system_attributes";
const std::string kSelectOneStudyUserAttrs =
    "SELECT study_id, \"key\", value_json FROM study_user_attributes WHERE study_id = ?";
const std::string kSelectOneStudySystemAttrs =
    "SELECT study_id, \"key\", value_json FROM study_system_attributes WHERE study_id = ?";
const std::string kStudyTrialSummaries =
    "SELECT study_id, COUNT(*), MIN(datetime_start) FROM trials GROUP BY study_id";
const std::string kOneStudyTrialSummary =
    "SELECT study_id, COUNT(*), MIN(datetime_start) FROM trials WHERE study_id = ? "
    "GROUP BY study_id";
const std::string kUpsertStudyUserAttr =
    "INSERT INTO study_user_attributes (study_id, \"key\", value_json) VALUES (?, ?, ?) "
    "ON CONFLICT (study_id, \"key\") DO UPDATE SET value_json = excluded.value_json";
const std::string kUpsertStudySystemAttr =
    "INSERT INTO study_system_attributes (study_id, \"key\", value_json) VALUES (?, ?, ?) "
    "ON CONFLICT (study_id, \"key\") DO UPDATE SET value_json = excluded.value_json";
// Deleting a study: children first (the schema's foreign keys).
const std::vector<std::string> kDeleteStudy = {
    "DELETE FROM trial_params WHERE trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trial_values WHERE trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trial_intermediate_values WHERE trial_id IN "
    "(SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trial_user_attributes WHERE trial_id IN "
    "(SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trial_system_attributes WHERE trial_id IN "
    "(SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trial_heartbeats WHERE trial_id IN "
    "(SELECT trial_id FROM trials WHERE study_id = ?)",
    "DELETE FROM trials WHERE study_id = ?",
    "DELETE FROM study_user_attributes WHERE study_id = ?",
    "DELETE FROM study_system_attributes WHERE study_id = ?",
    "DELETE FROM study_directions WHERE study_id = ?",
    "DELETE FROM studies WHERE study_id = ?",
};

// --- trials
// The number is Optuna's (models.py: the count of the study's earlier trials), counted in the
// INSERT's write transaction.
const std::string kInsertTrial =
    "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) "
    "VALUES (?, ?, ?, ?, ?) RETURNING trial_id";
#define TUNE_TRIAL_COLUMNS "trial_id, number, study_id, state, datetime_start, datetime_complete"
const std::string kTrialById = "SELECT " TUNE_TRIAL_COLUMNS " FROM trials WHERE trial_id = ?";
const std::string kTrialsOfStudy =
    "SELECT " TUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ? ORDER BY trial_id";
const std::string kTrialsAfterId = "SELECT " TUNE_TRIAL_COLUMNS
                                   " FROM trials WHERE study_id = ? AND trial_id > ? AND "
                                   "number >= ? ORDER BY trial_id";
const std::string kTrialsFromNumber =
    "SELECT " TUNE_TRIAL_COLUMNS
    " FROM trials WHERE study_id = ? AND number >= ? ORDER BY trial_id";
const std::string kTrialByNumber =
    "SELECT " TUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ? AND number = ?";
const std::string kFirstWaiting =
    "SELECT trial_id FROM trials WHERE study_id = ? AND state = 'WAITING' ORDER BY trial_id "
    "LIMIT 1";
// row_locks: skips WAITING trials that another transaction is claiming right now.
const std::string kFirstWaitingSkipLocked = kFirstWaiting + " FOR UPDATE SKIP LOCKED";
const std::string kClaimWaiting =
    "UPDATE trials SET state = 'RUNNING', datetime_start = ? WHERE trial_id = ? AND "
    "state = 'WAITING'";
const std::string kCountByState =
    "SELECT state, COUNT(*) FROM trials WHERE study_id = ? GROUP BY state";
const std::string kTrialHead = "SELECT number, state, study_id FROM trials WHERE trial_id = ?";
const std::string kTrialHeadForUpdate = kTrialHead + " FOR UPDATE";
// --- heartbeats (Optuna: one row per trial, never deleted)
const std::string kUpsertHeartbeat =
    "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?, ?) "
    "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat";
const std::string kRunningHeartbeats =
    "SELECT t.trial_id, h.heartbeat FROM trials t JOIN trial_heartbeats h ON "
    "h.trial_id = t.trial_id WHERE t.study_id = ? AND t.state = 'RUNNING'";
const std::string kHeartbeatOf = "SELECT heartbeat FROM trial_heartbeats WHERE trial_id = ?";
const std::string kFailRunning =
    "UPDATE trials SET state = 'FAIL', datetime_complete = ? WHERE trial_id = ? AND "
    "study_id = ? AND state = 'RUNNING'";
const std::string kSetStateStarted =
    "UPDATE trials SET state = ?, datetime_start = ? WHERE trial_id = ?";
const std::string kSetStateFinished =
    "UPDATE trials SET state = ?, datetime_complete = ? WHERE trial_id = ?";
const std::string kSetState = "UPDATE trials SET state = ? WHERE trial_id = ?";
const std::string kDeleteValues = "DELETE FROM trial_values WHERE trial_id = ?";
const std::string kInsertValue =
    "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, ?, ?, ?)";
const std::string kUpsertParam =
    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (trial_id, param_name) DO UPDATE SET "
    "param_value = excluded.param_value, distribution_json = excluded.distribution_json";
const std::string kUpsertIntermediate =
    "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, "
    "intermediate_value_type) VALUES (?, ?, ?, ?) ON CONFLICT (trial_id, step) DO UPDATE SET "
    "intermediate_value = excluded.intermediate_value, "
    "intermediate_value_type = excluded.intermediate_value_type";
const std::string kUpsertTrialUserAttr =
    "INSERT INTO trial_user_attributes (trial_id, \"key\", value_json) VALUES (?, ?, ?) "
    "ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json";
const std::string kUpsertTrialSystemAttr =
    "INSERT INTO trial_system_attributes (trial_id, \"key\", value_json) VALUES (?, ?, ?) "
    "ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json";

// --- reads by a list of trial ids
// One statement per table however many trials are read: the ids are bound as one text parameter
// (IdList), so each table has one SQL text per dialect, prepared once and cached by the
// connection. The lookups go through the indexes only (trials' primary key, the children's UNIQUE
// (trial_id, ...)) and read no row of a trial that was not asked for; a join over the study's
// trials from the smallest id read would, and PostgreSQL plans it as a sequential scan of the
// whole child table once the range holds ~100 trials (docs/benchmarks.md, "Making the per-trial
// traffic smaller"). A single trial takes the same path: `trial_id = ?` is no faster (about 1 us
// a statement on SQLite), and every read then runs the one path the tests check.
std::string IdsCondition(Dialect dialect) {
  switch (dialect) {
    case Dialect::kSqlite:
      return "trial_id IN (SELECT value FROM json_each(?))";  // '[1,2,3]'
    case Dialect::kPostgres:
      return "trial_id = ANY(CAST(? AS BIGINT[]))";  // '{1,2,3}'
  }
  return "";
}

// The list for IdsCondition.
std::string IdList(Dialect dialect, const std::vector<int64_t>& ids) {
  const bool pg = dialect == Dialect::kPostgres;
  std::string out(1, pg ? '{' : '[');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += pg ? '}' : ']';
  return out;
}

// The statements of one dialect. Children: column 0 is trial_id.
struct ListedSql {
  std::string trials;  // TUNE_TRIAL_COLUMNS
  std::string params, values, intermediates, user_attrs, system_attrs;
};
ListedSql MakeListedSql(Dialect dialect) {
  const std::string where = " WHERE " + IdsCondition(dialect);
  auto child = [&](const char* columns, const char* table) {
    return std::string("SELECT trial_id, ") + columns + " FROM " + table + where;
  };
  ListedSql sql;
  sql.trials = "SELECT " TUNE_TRIAL_COLUMNS " FROM trials" + where;
  sql.params = child("param_name, param_value, distribution_json", "trial_params");
  sql.values = child("objective, value, value_type", "trial_values");
  sql.intermediates =
      child("step, intermediate_value, intermediate_value_type", "trial_intermediate_values");
  sql.user_attrs = child("\"key\", value_json", "trial_user_attributes");
  sql.system_attrs = child("\"key\", value_json", "trial_system_attributes");
  return sql;
}
const ListedSql kListedSqlite = MakeListedSql(Dialect::kSqlite);
const ListedSql kListedPostgres = MakeListedSql(Dialect::kPostgres);
#undef TUNE_TRIAL_COLUMNS

// ---------------------------------------------------------------------------------------------

// Now, at the microsecond resolution of the datetime columns, so a returned FrozenTrial equals
// the one read back.
TimePoint Now() { return std::chrono::floor<std::chrono::microseconds>(Clock::now()); }

std::optional<std::string> FormatOpt(const std::optional<TimePoint>& t) {
  if (!t) return std::nullopt;
  return FormatDatetimeUtc(*t);
}

Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

bool StateIn(TrialState s, const std::vector<TrialState>& states) {
  return states.empty() || std::find(states.begin(), states.end(), s) != states.end();
}

struct TrialHead {
  int64_t number;
  TrialState state;
  int64_t study_id;
};

// A study's trial counts by state (indexed by TrialState).
struct StateCounts {
  std::optional<int64_t> version;  // the Connection::DataVersion() they were read at
  std::array<int64_t, 5> by_state{};

  int64_t total() const {
    int64_t n = 0;
    for (int64_t c : by_state) n += c;
    return n;
  }
  int64_t& operator[](TrialState s) { return by_state[static_cast<size_t>(s)]; }
  int64_t operator[](TrialState s) const { return by_state[static_cast<size_t>(s)]; }
};

class RdbStorage : public Storage {
 public:
  RdbStorage(std::unique_ptr<Connection> conn, RdbStorageOptions options)
      : conn_(std::move(conn)),
        options_(std::move(options)),
        listed_(options_.dialect == Dialect::kPostgres ? kListedPostgres : kListedSqlite) {}

  std::string url() const override { return options_.url; }

  // --- studies ------------------------------------------------------------------------------

  Result<int64_t> CreateStudy(const std::string& name,
                              const std::vector<StudyDirection>& directions) override {
    std::lock_guard lock(mu_);
    return Transact<Result<int64_t>>(TxKind::kWrite, [&]() -> Result<int64_t> {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery found, ScopedQuery::Make(*conn_, kFindStudyByName, name));
      TUNE_ASSIGN_OR_RETURN(bool exists, found.Next());
      if (exists) return AlreadyExistsError(fmt::format("a study named '{}' already exists", name));
      TUNE_ASSIGN_OR_RETURN(int64_t id, InsertReturningId(kInsertStudy, name));
      for (size_t i = 0; i < directions.size(); ++i) {
        TUNE_RETURN_IF_ERROR(
            Exec(*conn_, kInsertDirection, StudyDirectionName(directions[i]), id, i));
      }
      return id;
    });
  }

  Status DeleteStudy(int64_t study_id) override {
    std::lock_guard lock(mu_);
    Status s = Transact<Status>(TxKind::kWrite, [&]() -> Status {
      TUNE_RETURN_IF_ERROR(options_.row_locks ? LockStudyLocked(study_id)
                                              : CheckStudyLocked(study_id));
      for (const std::string& sql : kDeleteStudy) TUNE_RETURN_IF_ERROR(Exec(*conn_, sql, study_id));
      return Status::Ok();
    });
    ids_by_number_.erase(study_id);
    counts_.erase(study_id);
    return s;
  }

  Result<int64_t> GetStudyId(const std::string& name) override {
    std::lock_guard lock(mu_);
    return Transact<Result<int64_t>>(TxKind::kRead, [&]() -> Result<int64_t> {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, kFindStudyByName, name));
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (row) return q->Int(0);
      TUNE_ASSIGN_OR_RETURN(std::vector<StudyInfo> all, StudiesLocked(std::nullopt));
      std::vector<std::string> names;
      for (const StudyInfo& s : all) names.push_back(s.name);
      return StudyNotFoundError(name, names);
    });
  }

  Result<std::vector<StudyInfo>> GetAllStudies() override {
    std::lock_guard lock(mu_);
    return Transact<Result<std::vector<StudyInfo>>>(TxKind::kRead,
                                                    [&]() { return StudiesLocked(std::nullopt); });
  }

  Result<StudyInfo> GetStudy(int64_t study_id) override {
    std::lock_guard lock(mu_);
    return Transact<Result<StudyInfo>>(TxKind::kRead, [&]() -> Result<StudyInfo> {
      TUNE_ASSIGN_OR_RETURN(std::vector<StudyInfo> one, StudiesLocked(study_id));
      if (one.empty()) return NoStudy(study_id);
      return std::move(one[0]);
    });
  }

  Status SetStudyUserAttr(int64_t study_id, const std::string& key, const Json& value) override {
    return SetStudyAttr(kUpsertStudyUserAttr, study_id, key, value);
  }

  Status SetStudySystemAttr(int64_t study_id, const std::string& key, const Json& value) override {
    return SetStudyAttr(kUpsertStudySystemAttr, study_id, key, value);
  }

  // --- trials -------------------------------------------------------------------------------

  Result<FrozenTrial> CreateTrial(int64_t study_id, const FrozenTrial* templ) override {
    TUNE_ASSIGN_OR_RETURN(PreparedTrial prepared, Prepare(templ));
    std::lock_guard lock(mu_);
    std::optional<int64_t> version;
    TUNE_ASSIGN_OR_RETURN(
        FrozenTrial created,
        Transact<Result<FrozenTrial>>(TxKind::kWrite, [&]() -> Result<FrozenTrial> {
          // Exact: no other connection can add a trial while this transaction holds the lock
          // (SQLite: the database's write lock; row_locks: the study row's).
          if (options_.row_locks) TUNE_RETURN_IF_ERROR(LockStudyLocked(study_id));
          TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
          version = counts.version;
          return InsertTrialLocked(study_id, prepared, counts.total());
        }));
    Remember(study_id, created.number, created.trial_id);
    CountOwnChange(study_id, version, std::nullopt, created.state);
    return created;
  }

  Result<std::vector<FrozenTrial>> CreateTrialsIfEmpty(
      int64_t study_id, const std::vector<FrozenTrial>& templates) override {
    using Created = Result<std::vector<FrozenTrial>>;
    std::vector<PreparedTrial> prepared;
    for (const FrozenTrial& t : templates) {
      TUNE_ASSIGN_OR_RETURN(PreparedTrial p, Prepare(&t));
      prepared.push_back(std::move(p));
    }
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(
        std::vector<FrozenTrial> created, Transact<Created>(TxKind::kWrite, [&]() -> Created {
          // The same exclusion as CreateTrial: nobody adds a trial between the count and ours.
          if (options_.row_locks) TUNE_RETURN_IF_ERROR(LockStudyLocked(study_id));
          TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
          std::vector<FrozenTrial> out;
          if (counts.total() > 0) return out;
          for (const PreparedTrial& p : prepared) {
            TUNE_ASSIGN_OR_RETURN(FrozenTrial t,
                                  InsertTrialLocked(study_id, p, static_cast<int64_t>(out.size())));
            out.push_back(std::move(t));
          }
          return out;
        }));
    for (const FrozenTrial& t : created) Remember(study_id, t.number, t.trial_id);
    if (!created.empty()) CountOwnChange(study_id, std::nullopt, std::nullopt, created[0].state);
    return created;
  }

  Result<std::optional<FrozenTrial>> ClaimWaitingTrial(int64_t study_id) override {
    using Claimed = Result<std::optional<FrozenTrial>>;
    std::lock_guard lock(mu_);
    // Most asks find nothing waiting: look first without taking the write lock.
    TUNE_ASSIGN_OR_RETURN(bool any, Transact<Result<bool>>(TxKind::kRead, [&]() -> Result<bool> {
                            TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
                            return counts[TrialState::kWaiting] > 0;
                          }));
    if (!any) return std::optional<FrozenTrial>();
    std::optional<int64_t> version;
    TUNE_ASSIGN_OR_RETURN(
        std::optional<FrozenTrial> claimed, Transact<Claimed>(TxKind::kWrite, [&]() -> Claimed {
          TUNE_ASSIGN_OR_RETURN(version, conn_->DataVersion());
          TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> id, FirstWaitingLocked(study_id));
          if (!id) return std::optional<FrozenTrial>();
          TUNE_RETURN_IF_ERROR(Exec(*conn_, kClaimWaiting, FormatDatetimeUtc(Now()), *id));
          if (conn_->Changes() != 1) return std::optional<FrozenTrial>();
          TUNE_ASSIGN_OR_RETURN(FrozenTrial t, TrialLocked(*id));
          return std::optional<FrozenTrial>(std::move(t));
        }));
    if (claimed) CountOwnChange(study_id, version, TrialState::kWaiting, TrialState::kRunning);
    return claimed;
  }

  Result<std::optional<FrozenTrial>> StartTrial(int64_t study_id,
                                                const StartTrialOptions& options) override {
    using Started = Result<std::optional<FrozenTrial>>;
    TUNE_ASSIGN_OR_RETURN(PreparedTrial prepared, Prepare(nullptr));
    std::lock_guard lock(mu_);
    std::optional<int64_t> version;
    bool claimed = false;  // a WAITING trial (else a new one)
    TUNE_ASSIGN_OR_RETURN(
        std::optional<FrozenTrial> started, Transact<Started>(TxKind::kWrite, [&]() -> Started {
          claimed = false;
          // The start limit and a new trial's number are exact under the study lock.
          if (options_.row_locks) TUNE_RETURN_IF_ERROR(LockStudyLocked(study_id));
          TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
          version = counts.version;
          const int64_t n_started = counts.total() - counts[TrialState::kWaiting];
          if (options.max_started && n_started >= *options.max_started) {
            return std::optional<FrozenTrial>();
          }
          std::optional<FrozenTrial> t;
          if (counts[TrialState::kWaiting] > 0) {
            TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> id, FirstWaitingLocked(study_id));
            if (id) {
              TUNE_RETURN_IF_ERROR(Exec(*conn_, kClaimWaiting, FormatDatetimeUtc(Now()), *id));
              if (conn_->Changes() == 1) {
                TUNE_ASSIGN_OR_RETURN(t, TrialLocked(*id));
                claimed = true;
              }
            }
          }
          if (!t) {
            TUNE_ASSIGN_OR_RETURN(t, InsertTrialLocked(study_id, prepared, counts.total()));
          }
          if (options.heartbeat) {
            TUNE_ASSIGN_OR_RETURN(TimePoint now, DatabaseNowLocked());
            TUNE_RETURN_IF_ERROR(
                Exec(*conn_, kUpsertHeartbeat, t->trial_id, FormatUtcTimestamp(now)));
          }
          return t;
        }));
    if (started) {
      if (!claimed) Remember(study_id, started->number, started->trial_id);
      CountOwnChange(study_id, version,
                     claimed ? std::optional<TrialState>(TrialState::kWaiting) : std::nullopt,
                     TrialState::kRunning);
    }
    return started;
  }

  Status SetTrialParam(int64_t trial_id, const std::string& name, double internal_value,
                       const Distribution& distribution) override {
    const std::string json = DistributionToJson(distribution);
    return UpdateTrial(trial_id, [&]() {
      return Exec(*conn_, kUpsertParam, trial_id, name, internal_value, json);
    });
  }

  Status SetTrialIntermediateValue(int64_t trial_id, int64_t step, double value) override {
    StoredNumber sv = EncodeIntermediateValue(value);
    return UpdateTrial(trial_id, [&]() {
      return Exec(*conn_, kUpsertIntermediate, trial_id, step, sv.value, sv.type);
    });
  }

  Status SetTrialUserAttr(int64_t trial_id, const std::string& key, const Json& value) override {
    const std::string json = EncodeJson(value);
    return UpdateTrial(trial_id,
                       [&]() { return Exec(*conn_, kUpsertTrialUserAttr, trial_id, key, json); });
  }

  Status SetTrialSystemAttr(int64_t trial_id, const std::string& key, const Json& value) override {
    const std::string json = EncodeJson(value);
    return UpdateTrial(trial_id,
                       [&]() { return Exec(*conn_, kUpsertTrialSystemAttr, trial_id, key, json); });
  }

  Result<bool> SetTrialStateValues(int64_t trial_id, TrialState state,
                                   const std::vector<double>& values) override {
    std::vector<StoredNumber> stored;
    for (double v : values) {
      TUNE_ASSIGN_OR_RETURN(StoredNumber sv, EncodeTrialValue(v));
      stored.push_back(sv);
    }
    std::lock_guard lock(mu_);
    std::optional<int64_t> version;
    std::optional<TrialHead> changed;
    auto write = [&]() -> Result<bool> {
      changed.reset();
      TUNE_ASSIGN_OR_RETURN(version, conn_->DataVersion());
      TUNE_ASSIGN_OR_RETURN(TrialHead head, UpdatableHeadLocked(trial_id));
      const char* name = TrialStateName(state);
      if (state == TrialState::kRunning) {
        if (head.state != TrialState::kWaiting) return false;
        TUNE_RETURN_IF_ERROR(
            Exec(*conn_, kSetStateStarted, name, FormatDatetimeUtc(Now()), trial_id));
      } else if (IsFinished(state)) {
        TUNE_RETURN_IF_ERROR(
            Exec(*conn_, kSetStateFinished, name, FormatDatetimeUtc(Now()), trial_id));
      } else {
        TUNE_RETURN_IF_ERROR(Exec(*conn_, kSetState, name, trial_id));
      }
      if (!stored.empty()) {
        TUNE_RETURN_IF_ERROR(Exec(*conn_, kDeleteValues, trial_id));
        for (size_t i = 0; i < stored.size(); ++i) {
          TUNE_RETURN_IF_ERROR(
              Exec(*conn_, kInsertValue, trial_id, i, stored[i].value, stored[i].type));
        }
      }
      changed = head;
      return true;
    };
    TUNE_ASSIGN_OR_RETURN(bool applied, Transact<Result<bool>>(TxKind::kWrite, write));
    if (changed) CountOwnChange(changed->study_id, version, changed->state, state);
    return applied;
  }

  Result<FrozenTrial> GetTrial(int64_t trial_id) override {
    std::lock_guard lock(mu_);
    return Transact<Result<FrozenTrial>>(TxKind::kRead, [&]() { return TrialLocked(trial_id); });
  }

  Result<std::vector<FrozenTrial>> GetAllTrials(int64_t study_id,
                                                const std::vector<TrialState>& states) override {
    using Trials = Result<std::vector<FrozenTrial>>;
    std::lock_guard lock(mu_);
    return Transact<Trials>(TxKind::kRead, [&]() -> Trials {
      TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> rows,
                            TrialRowsLocked(kTrialsOfStudy, study_id));
      if (rows.empty()) TUNE_RETURN_IF_ERROR(CheckStudyLocked(study_id));
      std::vector<FrozenTrial> picked;
      for (FrozenTrial& t : rows) {
        if (StateIn(t.state, states)) picked.push_back(std::move(t));
      }
      TUNE_RETURN_IF_ERROR(FillChildrenLocked(picked));
      return picked;
    });
  }

  Result<std::vector<FrozenTrial>> GetTrialsSince(int64_t study_id, int64_t first_number,
                                                  const std::vector<int64_t>& numbers) override {
    using Trials = Result<std::vector<FrozenTrial>>;
    std::lock_guard lock(mu_);
    return Transact<Trials>(TxKind::kRead, [&]() -> Trials {
      TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> rows,
                            ListedTrialsLocked(study_id, first_number, numbers));
      // Trials from first_number on: a trial_id range after the last known trial.
      std::vector<FrozenTrial> fresh;
      std::optional<int64_t> anchor =
          first_number > 0 ? KnownId(study_id, first_number - 1) : std::optional<int64_t>(-1);
      if (anchor) {
        TUNE_ASSIGN_OR_RETURN(fresh, TrialRowsLocked(kTrialsAfterId, study_id, *anchor,
                                                     std::max<int64_t>(first_number, 0)));
      } else {
        TUNE_ASSIGN_OR_RETURN(fresh, TrialRowsLocked(kTrialsFromNumber, study_id, first_number));
      }
      if (rows.empty() && fresh.empty()) TUNE_RETURN_IF_ERROR(CheckStudyLocked(study_id));
      for (FrozenTrial& t : fresh) rows.push_back(std::move(t));
      std::sort(rows.begin(), rows.end(),
                [](const FrozenTrial& a, const FrozenTrial& b) { return a.number < b.number; });
      TUNE_RETURN_IF_ERROR(FillChildrenLocked(rows));
      return rows;
    });
  }

  Result<int64_t> CountTrials(int64_t study_id, const std::vector<TrialState>& states) override {
    std::lock_guard lock(mu_);
    return Transact<Result<int64_t>>(TxKind::kRead, [&]() -> Result<int64_t> {
      TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
      int64_t n = 0;
      for (TrialState s : {TrialState::kRunning, TrialState::kComplete, TrialState::kPruned,
                           TrialState::kFail, TrialState::kWaiting}) {
        if (StateIn(s, states)) n += counts[s];
      }
      return n;
    });
  }

  // --- heartbeats ---------------------------------------------------------------------------

  Status RecordHeartbeat(int64_t trial_id) override {
    std::lock_guard lock(mu_);
    return Transact<Status>(TxKind::kWrite, [&]() -> Status {
      TUNE_ASSIGN_OR_RETURN(TrialHead head, UpdatableHeadLocked(trial_id));
      if (head.state != TrialState::kRunning) return TrialNotRunningError(head.number, head.state);
      TUNE_ASSIGN_OR_RETURN(TimePoint now, DatabaseNowLocked());
      return Exec(*conn_, kUpsertHeartbeat, trial_id, FormatUtcTimestamp(now));
    });
  }

  Result<std::vector<FailedStaleTrial>> FailStaleTrials(int64_t study_id,
                                                        double grace_period_seconds,
                                                        const StaleTrialRetry& retry) override {
    using Failed = Result<std::vector<FailedStaleTrial>>;
    std::lock_guard lock(mu_);
    // Candidates first, without the write lock: most calls find none.
    TUNE_ASSIGN_OR_RETURN(
        std::vector<int64_t> candidates,
        Transact<Result<std::vector<int64_t>>>(
            TxKind::kRead, [&]() -> Result<std::vector<int64_t>> {
              TUNE_RETURN_IF_ERROR(CheckStudyLocked(study_id));
              TUNE_ASSIGN_OR_RETURN(TimePoint now, DatabaseNowLocked());
              std::vector<int64_t> ids;
              TUNE_ASSIGN_OR_RETURN(ScopedQuery q,
                                    ScopedQuery::Make(*conn_, kRunningHeartbeats, study_id));
              while (true) {
                TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
                if (!row) break;
                TUNE_ASSIGN_OR_RETURN(std::optional<double> age, HeartbeatAge(*q, 1, now));
                if (age && *age > grace_period_seconds) ids.push_back(q->Int(0));
              }
              return ids;
            }));
    if (candidates.empty()) return std::vector<FailedStaleTrial>();
    std::optional<int64_t> version;
    int64_t n_failed = 0;
    std::vector<TrialState> created_states;
    TUNE_ASSIGN_OR_RETURN(
        std::vector<FailedStaleTrial> failed, Transact<Failed>(TxKind::kWrite, [&]() -> Failed {
          created_states.clear();
          n_failed = 0;
          // Retried trials get numbers: under the study lock, as in CreateTrial.
          if (options_.row_locks) TUNE_RETURN_IF_ERROR(LockStudyLocked(study_id));
          TUNE_ASSIGN_OR_RETURN(StateCounts counts, CountsLocked(study_id));
          version = counts.version;
          int64_t next_number = counts.total();
          TUNE_ASSIGN_OR_RETURN(TimePoint now, DatabaseNowLocked());
          std::vector<FailedStaleTrial> out;
          for (int64_t id : candidates) {
            // Again under the write lock: another worker may have failed it, or its own
            // worker heartbeated since.
            TUNE_ASSIGN_OR_RETURN(ScopedQuery hq, ScopedQuery::Make(*conn_, kHeartbeatOf, id));
            TUNE_ASSIGN_OR_RETURN(bool has, hq.Next());
            if (!has) continue;
            TUNE_ASSIGN_OR_RETURN(std::optional<double> age, HeartbeatAge(*hq, 0, now));
            if (!age || *age <= grace_period_seconds) continue;
            // Only if still RUNNING: on a database with row locks (PostgreSQL) a second caller
            // waits here for the first to commit and then changes nothing.
            TUNE_RETURN_IF_ERROR(
                Exec(*conn_, kFailRunning, FormatDatetimeUtc(Now()), id, study_id));
            if (conn_->Changes() != 1) continue;
            TUNE_RETURN_IF_ERROR(Exec(*conn_, kUpsertTrialUserAttr, id, "fail_reason",
                                      EncodeJson(StaleFailReason(*age, grace_period_seconds))));
            ++n_failed;
            FailedStaleTrial f;
            f.heartbeat_age_seconds = *age;
            TUNE_ASSIGN_OR_RETURN(f.failed, TrialLocked(id));
            if (retry) {
              if (std::optional<FrozenTrial> templ = retry(f.failed)) {
                TUNE_ASSIGN_OR_RETURN(PreparedTrial prepared, Prepare(&*templ));
                TUNE_ASSIGN_OR_RETURN(f.retry,
                                      InsertTrialLocked(study_id, prepared, next_number++));
                created_states.push_back(f.retry->state);
              }
            }
            out.push_back(std::move(f));
          }
          return out;
        }));
    for (int64_t i = 0; i < n_failed; ++i) {
      CountOwnChange(study_id, version, TrialState::kRunning, TrialState::kFail);
    }
    for (const FailedStaleTrial& f : failed) {
      if (f.retry) Remember(study_id, f.retry->number, f.retry->trial_id);
    }
    for (TrialState s : created_states) CountOwnChange(study_id, version, std::nullopt, s);
    return failed;
  }

 private:
  // Runs `fn` in a transaction, retrying the whole transaction (with a short random backoff)
  // while the database reports a lock conflict (Unavailable), up to max_attempts times.
  // REQUIRES: mu_ is held.
  template <typename R, typename F>
  R Transact(TxKind kind, F&& fn) {
    Status last;
    for (int attempt = 0; attempt < std::max(1, options_.max_attempts); ++attempt) {
      if (attempt > 0) Backoff(attempt);
      if (Status begun = conn_->Begin(kind); !begun.ok()) {
        if (begun.code() == StatusCode::kUnavailable) {
          last = begun;
          continue;
        }
        return begun;
      }
      R result = fn();
      if (Status s = StatusOf(result); !s.ok()) {
        conn_->Rollback();
        if (s.code() == StatusCode::kUnavailable) {
          last = s;
          continue;
        }
        return result;
      }
      if (Status committed = conn_->Commit(); !committed.ok()) {
        conn_->Rollback();
        if (committed.code() == StatusCode::kUnavailable) {
          last = committed;
          continue;
        }
        return committed;
      }
      return result;
    }
    return UnavailableError(fmt::format("{} (gave up after {} attempts)", last.message(),
                                        std::max(1, options_.max_attempts)));
  }

  // A trial to insert: the template with its datetimes settled and its values encoded.
  struct PreparedTrial {
    FrozenTrial trial;
    std::vector<StoredNumber> values;
  };

  // Checks and settles a CreateTrial template (nullptr: a new RUNNING trial).
  static Result<PreparedTrial> Prepare(const FrozenTrial* templ) {
    PreparedTrial p;
    FrozenTrial& t = p.trial;
    if (templ) {
      t = *templ;
    } else {
      t.state = TrialState::kRunning;
    }
    const TimePoint now = Now();
    if (t.state == TrialState::kRunning && !t.datetime_start) t.datetime_start = now;
    if (t.state == TrialState::kWaiting) t.datetime_start.reset();
    if (IsFinished(t.state) && !t.datetime_complete) t.datetime_complete = now;
    if (!IsFinished(t.state)) t.datetime_complete.reset();
    for (double v : t.values) {
      TUNE_ASSIGN_OR_RETURN(StoredNumber sv, EncodeTrialValue(v));
      p.values.push_back(sv);
    }
    for (const auto& [name, v] : t.params) {
      if (!t.distributions.count(name)) {
        return InvalidArgumentError(
            fmt::format("trial template: parameter '{}' has no distribution", name));
      }
    }
    return p;
  }

  // Inserts a prepared trial as number `number` with its child rows; returns it with its id.
  // The caller keeps the counts (Remember, CountOwnChange) after the commit.
  // REQUIRES: mu_ is held, inside a write transaction that read the study's counts.
  Result<FrozenTrial> InsertTrialLocked(int64_t study_id, const PreparedTrial& p, int64_t number) {
    const FrozenTrial& t = p.trial;
    FrozenTrial out = t;
    out.number = number;
    {
      TUNE_ASSIGN_OR_RETURN(
          ScopedQuery q,
          ScopedQuery::Make(*conn_, kInsertTrial, out.number, study_id, TrialStateName(t.state),
                            FormatOpt(t.datetime_start), FormatOpt(t.datetime_complete)));
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (!row) return InternalError(fmt::format("{}: INSERT returned no id", options_.url));
      out.trial_id = q->Int(0);
      TUNE_ASSIGN_OR_RETURN(bool more, q.Next());
      (void)more;
    }
    for (const auto& [name, v] : t.params) {
      TUNE_RETURN_IF_ERROR(Exec(*conn_, kUpsertParam, out.trial_id, name, v,
                                DistributionToJson(t.distributions.at(name))));
    }
    for (size_t i = 0; i < p.values.size(); ++i) {
      TUNE_RETURN_IF_ERROR(
          Exec(*conn_, kInsertValue, out.trial_id, i, p.values[i].value, p.values[i].type));
    }
    for (const auto& [step, v] : t.intermediate_values) {
      StoredNumber sv = EncodeIntermediateValue(v);
      TUNE_RETURN_IF_ERROR(
          Exec(*conn_, kUpsertIntermediate, out.trial_id, step, sv.value, sv.type));
    }
    for (const auto& [key, v] : t.user_attrs.items()) {
      TUNE_RETURN_IF_ERROR(Exec(*conn_, kUpsertTrialUserAttr, out.trial_id, key, EncodeJson(v)));
    }
    for (const auto& [key, v] : t.system_attrs.items()) {
      TUNE_RETURN_IF_ERROR(Exec(*conn_, kUpsertTrialSystemAttr, out.trial_id, key, EncodeJson(v)));
    }
    return out;
  }

  // The database's clock. REQUIRES: mu_ is held, inside a transaction.
  Result<TimePoint> DatabaseNowLocked() {
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, options_.current_timestamp_sql));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row || q->IsNull(0)) {
      return InternalError(
          fmt::format("{}: '{}' returned no time", options_.url, options_.current_timestamp_sql));
    }
    Result<TimePoint> t = ParseUtcTimestamp(q->Text(0));
    if (!t.ok()) return InternalError(fmt::format("{}: {}", options_.url, t.status().message()));
    return t;
  }

  // Seconds from a heartbeat column to `now`; nullopt for NULL.
  Result<std::optional<double>> HeartbeatAge(const Statement& row, int column, TimePoint now) {
    if (row.IsNull(column)) return std::optional<double>();
    Result<TimePoint> hb = ParseUtcTimestamp(row.Text(column));
    if (!hb.ok()) {
      return InternalError(
          fmt::format("{}: trial_heartbeats: {}", options_.url, hb.status().message()));
    }
    return std::optional<double>(std::chrono::duration<double>(now - *hb).count());
  }

  void Backoff(int attempt) {
    thread_local std::minstd_rand rng(std::random_device{}());
    int max_ms = std::min(10 * attempt * attempt, 200);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(1 + static_cast<int>(rng() % static_cast<unsigned>(max_ms))));
  }

  Status NoStudy(int64_t study_id) const {
    return NotFoundError(fmt::format("no study with id {} in {}", study_id, options_.url));
  }

  Result<TrialState> ParseState(const std::string& name) const {
    Result<TrialState> s = ParseTrialState(name);
    if (!s.ok()) return InternalError(fmt::format("{}: {}", options_.url, s.status().message()));
    return s;
  }

  Result<int64_t> InsertReturningId(const std::string& sql, const std::string& arg) {
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, sql, arg));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) return InternalError(fmt::format("{}: INSERT returned no id", options_.url));
    int64_t id = q->Int(0);
    TUNE_ASSIGN_OR_RETURN(bool more, q.Next());
    (void)more;
    return id;
  }

  // row_locks: locks the study's row until the transaction ends; NotFound if there is none.
  // REQUIRES: mu_ is held, inside a write transaction.
  Status LockStudyLocked(int64_t study_id) {
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, kLockStudy, study_id));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    return row ? Status::Ok() : NoStudy(study_id);
  }

  // REQUIRES: mu_ is held, inside a transaction.
  Status CheckStudyLocked(int64_t study_id) {
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, kStudyExists, study_id));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    return row ? Status::Ok() : NoStudy(study_id);
  }

  Status SetStudyAttr(const std::string& sql, int64_t study_id, const std::string& key,
                      const Json& value) {
    const std::string json = EncodeJson(value);
    std::lock_guard lock(mu_);
    return Transact<Status>(TxKind::kWrite, [&]() -> Status {
      TUNE_RETURN_IF_ERROR(CheckStudyLocked(study_id));
      return Exec(*conn_, sql, study_id, key, json);
    });
  }

  // `study_id` set: that study only (empty if it does not exist).
  // REQUIRES: mu_ is held, inside a transaction.
  Result<std::vector<StudyInfo>> StudiesLocked(std::optional<int64_t> study_id) {
    std::vector<StudyInfo> out;
    std::unordered_map<int64_t, size_t> index;
    {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, study_id
                                               ? ScopedQuery::Make(*conn_, kSelectStudy, *study_id)
                                               : ScopedQuery::Make(*conn_, kSelectStudies));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) break;
        StudyInfo info;
        info.study_id = q->Int(0);
        info.name = q->Text(1);
        index[info.study_id] = out.size();
        out.push_back(std::move(info));
      }
    }
    if (out.empty()) return out;
    {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q,
                            study_id ? ScopedQuery::Make(*conn_, kSelectStudyDirections, *study_id)
                                     : ScopedQuery::Make(*conn_, kSelectDirections));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) break;
        auto it = index.find(q->Int(0));
        if (it == index.end()) continue;
        auto objective = static_cast<size_t>(std::max<int64_t>(0, q->Int(1)));
        TUNE_ASSIGN_OR_RETURN(StudyDirection d, ParseStudyDirection(q->Text(2)));
        auto& dirs = out[it->second].directions;
        if (dirs.size() <= objective) dirs.resize(objective + 1, StudyDirection::kNotSet);
        dirs[objective] = d;
      }
    }
    for (bool user : {true, false}) {
      const std::string& sql =
          user ? (study_id ? kSelectOneStudyUserAttrs : kSelectStudyUserAttrs)
               : (study_id ? kSelectOneStudySystemAttrs : kSelectStudySystemAttrs);
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, study_id ? ScopedQuery::Make(*conn_, sql, *study_id)
                                                    : ScopedQuery::Make(*conn_, sql));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) break;
        auto it = index.find(q->Int(0));
        if (it == index.end()) continue;
        TUNE_ASSIGN_OR_RETURN(Json v, DecodeJsonColumn(*q, 2, "study attribute"));
        (user ? out[it->second].user_attrs : out[it->second].system_attrs)[q->Text(1)] =
            std::move(v);
      }
    }
    {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q,
                            study_id ? ScopedQuery::Make(*conn_, kOneStudyTrialSummary, *study_id)
                                     : ScopedQuery::Make(*conn_, kStudyTrialSummaries));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) break;
        auto it = index.find(q->Int(0));
        if (it == index.end()) continue;
        out[it->second].n_trials = q->Int(1);
        if (!q->IsNull(2)) {
          TUNE_ASSIGN_OR_RETURN(out[it->second].datetime_start, ParseDatetimeColumn(q->Text(2)));
        }
      }
    }
    return out;
  }

  Result<Json> DecodeJsonColumn(const Statement& row, int column, const char* what) const {
    if (row.IsNull(column)) return Json(nullptr);
    Result<Json> j = DecodeJson(row.Text(column));
    if (!j.ok()) {
      return InternalError(fmt::format("{}: {}: {}", options_.url, what, j.status().message()));
    }
    return j;
  }

  // ParseDatetimeUtc (the columns hold naive UTC, as Optuna 5.0 writes them), the calendar
  // conversion done once per hour: "YYYY-MM-DD HH" -> the time point of HH:00:00.
  // REQUIRES: mu_ is held.
  Result<TimePoint> ParseDatetimeColumn(const std::string& text) {
    auto fail = [&](const Status& s) {
      return InternalError(fmt::format("{}: {}", options_.url, s.message()));
    };
    auto digits = [&](size_t pos, size_t n) {
      int v = 0;
      for (size_t i = pos; i < pos + n; ++i) {
        if (i >= text.size() || text[i] < '0' || text[i] > '9') return -1;
        v = v * 10 + (text[i] - '0');
      }
      return v;
    };
    // "YYYY-MM-DD HH:MM:SS[.ffffff]" in the common form; anything else takes the slow path.
    const int minute = digits(14, 2), second = digits(17, 2);
    const bool fraction = text.size() > 20 && text[19] == '.' && text.size() <= 26;
    const int micros = fraction ? digits(20, text.size() - 20) : 0;
    if (text.size() < 19 || text[10] != ' ' || text[13] != ':' || text[16] != ':' || minute < 0 ||
        minute > 59 || second < 0 || second > 59 || micros < 0 || (text.size() > 19 && !fraction)) {
      Result<TimePoint> t = ParseDatetimeUtc(text);
      if (!t.ok()) return fail(t.status());
      return t;
    }
    const std::string hour = text.substr(0, 13);
    auto it = hours_.find(hour);
    if (it == hours_.end()) {
      Result<TimePoint> base = ParseDatetimeUtc(hour + ":00:00");
      if (!base.ok()) return fail(base.status());
      if (hours_.size() > 100000) hours_.clear();
      it = hours_.emplace(hour, *base).first;
    }
    int64_t us = micros;
    for (size_t i = fraction ? text.size() : 26; i < 26; ++i) us *= 10;  // ".5" is 500000 us
    return it->second + std::chrono::seconds(minute * 60 + second) + std::chrono::microseconds(us);
  }

  // Trial rows (without children) of `sql`, whose columns are TUNE_TRIAL_COLUMNS.
  // REQUIRES: mu_ is held, inside a transaction.
  template <typename... Args>
  Result<std::vector<FrozenTrial>> TrialRowsLocked(const std::string& sql, const Args&... args) {
    std::vector<FrozenTrial> out;
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, sql, args...));
    while (true) {
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (!row) break;
      FrozenTrial t;
      t.trial_id = q->Int(0);
      if (q->IsNull(1)) {
        return InternalError(
            fmt::format("{}: trial id {} has no number", options_.url, t.trial_id));
      }
      t.number = q->Int(1);
      TUNE_ASSIGN_OR_RETURN(t.state, ParseState(q->Text(3)));
      if (!q->IsNull(4)) {
        TUNE_ASSIGN_OR_RETURN(t.datetime_start, ParseDatetimeColumn(q->Text(4)));
      }
      if (!q->IsNull(5)) {
        TUNE_ASSIGN_OR_RETURN(t.datetime_complete, ParseDatetimeColumn(q->Text(5)));
      }
      if (!q->IsNull(2)) Remember(q->Int(2), t.number, t.trial_id);
      out.push_back(std::move(t));
    }
    return out;
  }

  // One trial with everything. REQUIRES: mu_ is held, inside a transaction.
  Result<FrozenTrial> TrialLocked(int64_t trial_id) {
    TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> rows, TrialRowsLocked(kTrialById, trial_id));
    if (rows.empty()) return NotFoundError(fmt::format("no trial with id {}", trial_id));
    TUNE_RETURN_IF_ERROR(FillChildrenLocked(rows));
    return std::move(rows[0]);
  }

  // The trials of `numbers` below `first_number`, each once, without children: those whose id
  // is known in one statement by id, the others (a number this storage has not read, or whose
  // row did not match) one statement each by number. REQUIRES: mu_ is held, inside a transaction.
  Result<std::vector<FrozenTrial>> ListedTrialsLocked(int64_t study_id, int64_t first_number,
                                                      std::vector<int64_t> numbers) {
    std::sort(numbers.begin(), numbers.end());
    numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
    std::unordered_map<int64_t, int64_t> asked;  // trial_id -> number
    std::vector<int64_t> by_number;
    for (int64_t number : numbers) {
      if (number < 0 || number >= first_number) continue;
      std::optional<int64_t> id = KnownId(study_id, number);
      if (!id || !asked.emplace(*id, number).second) by_number.push_back(number);
    }
    std::vector<FrozenTrial> out;
    if (!asked.empty()) {
      std::vector<int64_t> ids;
      for (const auto& [id, number] : asked) ids.push_back(id);
      TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> rows,
                            TrialRowsLocked(listed_.trials, IdList(options_.dialect, ids)));
      for (FrozenTrial& t : rows) {
        auto it = asked.find(t.trial_id);
        if (it == asked.end() || it->second != t.number) continue;
        asked.erase(it);
        out.push_back(std::move(t));
      }
      for (const auto& [id, number] : asked) by_number.push_back(number);
    }
    for (int64_t number : by_number) {
      TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> r,
                            TrialRowsLocked(kTrialByNumber, study_id, number));
      if (!r.empty()) out.push_back(std::move(r[0]));
    }
    return out;
  }

  // Reads params, values, intermediate values and attributes of `trials`: one statement per
  // child table, for exactly their ids. REQUIRES: mu_ is held, inside a transaction.
  Status FillChildrenLocked(std::vector<FrozenTrial>& trials) {
    if (trials.empty()) return Status::Ok();
    std::unordered_map<int64_t, FrozenTrial*> by_id;
    std::vector<int64_t> ids;
    for (FrozenTrial& t : trials) {
      by_id[t.trial_id] = &t;
      ids.push_back(t.trial_id);
    }
    const std::string id_list = IdList(options_.dialect, ids);
    // Runs `sql` for the trials and hands each row to `apply` with its trial.
    auto each = [&](const std::string& sql, auto&& apply) -> Status {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, sql, id_list));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) return Status::Ok();
        auto it = by_id.find(q->Int(0));
        if (it != by_id.end()) TUNE_RETURN_IF_ERROR(apply(*it->second, *q));
      }
    };
    auto number_column = [](const Statement& row, int column) {
      return row.IsNull(column) ? std::optional<double>()
                                : std::optional<double>(row.Double(column));
    };
    TUNE_RETURN_IF_ERROR(each(listed_.params, [&](FrozenTrial& t, const Statement& row) -> Status {
      const std::string name = row.Text(1);
      if (row.IsNull(2)) {
        return InternalError(
            fmt::format("{}: trial {}: parameter '{}' has no value", options_.url, t.number, name));
      }
      Result<Distribution> d = dists_.Get(row.Text(3));
      if (!d.ok()) {
        return InternalError(fmt::format("{}: trial {}: parameter '{}': {}", options_.url, t.number,
                                         name, d.status().message()));
      }
      t.params[name] = row.Double(2);
      t.distributions[name] = std::move(d).value();
      return Status::Ok();
    }));
    TUNE_RETURN_IF_ERROR(each(listed_.values, [&](FrozenTrial& t, const Statement& row) -> Status {
      auto objective = static_cast<size_t>(std::max<int64_t>(0, row.Int(1)));
      Result<double> v = DecodeNumber(number_column(row, 2), row.Text(3));
      if (!v.ok()) {
        return InternalError(
            fmt::format("{}: trial {}: value: {}", options_.url, t.number, v.status().message()));
      }
      if (t.values.size() <= objective) {
        t.values.resize(objective + 1, std::numeric_limits<double>::quiet_NaN());
      }
      t.values[objective] = *v;
      return Status::Ok();
    }));
    TUNE_RETURN_IF_ERROR(
        each(listed_.intermediates, [&](FrozenTrial& t, const Statement& row) -> Status {
          Result<double> v = DecodeNumber(number_column(row, 2), row.Text(3));
          if (!v.ok()) {
            return InternalError(fmt::format("{}: trial {}: intermediate value: {}", options_.url,
                                             t.number, v.status().message()));
          }
          t.intermediate_values[row.Int(1)] = *v;
          return Status::Ok();
        }));
    for (bool user : {true, false}) {
      TUNE_RETURN_IF_ERROR(
          each(user ? listed_.user_attrs : listed_.system_attrs,
               [&](FrozenTrial& t, const Statement& row) -> Status {
                 TUNE_ASSIGN_OR_RETURN(Json v, DecodeJsonColumn(row, 2, "trial attribute"));
                 (user ? t.user_attrs : t.system_attrs)[row.Text(1)] = std::move(v);
                 return Status::Ok();
               }));
    }
    return Status::Ok();
  }

  // REQUIRES: mu_ is held, inside a transaction.
  Result<std::optional<int64_t>> FirstWaitingLocked(int64_t study_id) {
    TUNE_ASSIGN_OR_RETURN(
        ScopedQuery q,
        ScopedQuery::Make(*conn_, options_.row_locks ? kFirstWaitingSkipLocked : kFirstWaiting,
                          study_id));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) return std::optional<int64_t>();
    return std::optional<int64_t>(q->Int(0));
  }

  // The trial's number and state; NotFound, or Optuna's error for a finished trial.
  // REQUIRES: mu_ is held, inside a write transaction.
  Result<TrialHead> UpdatableHeadLocked(int64_t trial_id) {
    TUNE_ASSIGN_OR_RETURN(
        ScopedQuery q,
        ScopedQuery::Make(*conn_, options_.row_locks ? kTrialHeadForUpdate : kTrialHead, trial_id));
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) return NotFoundError(fmt::format("no trial with id {}", trial_id));
    TrialHead head{q->Int(0), TrialState::kRunning, q->Int(2)};
    TUNE_ASSIGN_OR_RETURN(head.state, ParseState(q->Text(1)));
    if (IsFinished(head.state)) return TrialFinishedError(head.number);
    return head;
  }

  // One write transaction: check that the trial may change, then `write`.
  template <typename F>
  Status UpdateTrial(int64_t trial_id, F&& write) {
    std::lock_guard lock(mu_);
    return Transact<Status>(TxKind::kWrite, [&]() -> Status {
      TUNE_ASSIGN_OR_RETURN(TrialHead head, UpdatableHeadLocked(trial_id));
      (void)head;
      return write();
    });
  }

  // The study's trial counts by state as of this transaction: kept from an earlier
  // transaction while no other connection has committed since, else counted again (NotFound
  // for an unknown study). In a write transaction, call it before writing.
  // REQUIRES: mu_ is held, inside a transaction.
  Result<StateCounts> CountsLocked(int64_t study_id) {
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> version, conn_->DataVersion());
    if (version) {
      auto it = counts_.find(study_id);
      if (it != counts_.end() && it->second.version == version) return it->second;
    }
    StateCounts counts;
    counts.version = version;
    bool any = false;
    {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(*conn_, kCountByState, study_id));
      while (true) {
        TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
        if (!row) break;
        any = true;
        TUNE_ASSIGN_OR_RETURN(TrialState s, ParseState(q->Text(0)));
        counts[s] += q->Int(1);
      }
    }
    if (!any) TUNE_RETURN_IF_ERROR(CheckStudyLocked(study_id));
    if (version) counts_[study_id] = counts;
    return counts;
  }

  // After this storage committed a change of one of the study's trials from `from` (nullopt:
  // a new trial) to `to` in a transaction that saw DataVersion() `version`: keeps the cached
  // counts current, or drops them if they were not current then. REQUIRES: mu_ is held.
  void CountOwnChange(int64_t study_id, const std::optional<int64_t>& version,
                      std::optional<TrialState> from, TrialState to) {
    auto it = counts_.find(study_id);
    if (it == counts_.end()) return;
    if (!version || it->second.version != version) {
      counts_.erase(it);
      return;
    }
    if (from) --it->second[*from];
    ++it->second[to];
  }

  // number -> trial_id of committed trials: ids never change once given, so GetTrialsSince can
  // read by primary key / id range. REQUIRES: mu_ is held.
  void Remember(int64_t study_id, int64_t number, int64_t trial_id) {
    if (number < 0 || number > (int64_t{1} << 40)) return;
    std::vector<int64_t>& ids = ids_by_number_[study_id];
    if (ids.size() <= static_cast<size_t>(number)) ids.resize(static_cast<size_t>(number) + 1, -1);
    ids[static_cast<size_t>(number)] = trial_id;
  }
  std::optional<int64_t> KnownId(int64_t study_id, int64_t number) const {
    auto it = ids_by_number_.find(study_id);
    if (it == ids_by_number_.end() || number < 0 ||
        static_cast<size_t>(number) >= it->second.size() ||
        it->second[static_cast<size_t>(number)] < 0) {
      return std::nullopt;
    }
    return it->second[static_cast<size_t>(number)];
  }

  std::mutex mu_;
  std::unique_ptr<Connection> conn_;  // guarded by mu_
  const RdbStorageOptions options_;
  const ListedSql& listed_;                                          // options_.dialect's
  DistributionCache dists_;                                          // guarded by mu_
  std::unordered_map<int64_t, std::vector<int64_t>> ids_by_number_;  // guarded by mu_
  std::unordered_map<int64_t, StateCounts> counts_;                  // guarded by mu_
  std::unordered_map<std::string, TimePoint> hours_;                 // guarded by mu_
};

}  // namespace

std::unique_ptr<Storage> NewRdbStorage(std::unique_ptr<Connection> connection,
                                       RdbStorageOptions options) {
  return std::make_unique<RdbStorage>(std::move(connection), std::move(options));
}

}  // namespace tune::internal::rdb

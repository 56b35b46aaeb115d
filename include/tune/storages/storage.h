// Storage: where studies and trials live. Optuna's BaseStorage, as a C++ interface. Backends:
// in_memory.h (this process only); sqlite.h (tune_sqlite); postgres.h (tune_postgres).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

struct StudyInfo {
  int64_t study_id = -1;
  std::string name;
  std::vector<StudyDirection> directions;
  Json user_attrs = Json::object();
  Json system_attrs = Json::object();
  int64_t n_trials = 0;
  std::optional<TimePoint> datetime_start;  // start of the first trial
};

// Storage::StartTrial's options.
struct StartTrialOptions {
  // Start nothing once the study holds this many trials that are not WAITING (RUNNING or
  // finished). Unset: no limit.
  std::optional<int64_t> max_started;
  // Record the trial's first heartbeat in the same transaction, so that a worker killed right
  // after starting a trial still leaves a trial that goes stale.
  bool heartbeat = false;
};

// What FailStaleTrials does after failing a stale trial: nullopt, or a template of a new trial
// created in the same transaction (RetryOfStaleTrial below: Optuna's RetryFailedTrialCallback).
// Called inside the storage's transaction and lock: it must not call the storage.
using StaleTrialRetry = std::function<std::optional<FrozenTrial>(const FrozenTrial& failed)>;

// A trial failed by FailStaleTrials, and the trial created for it (if any).
struct FailedStaleTrial {
  FrozenTrial failed;                // as stored after failing (state FAIL)
  std::optional<FrozenTrial> retry;  // as created (normally WAITING)
  double heartbeat_age_seconds = 0;  // age of the last heartbeat when it was failed
};

// The contract below holds for every backend; tests/storages/storage_conformance_test.cpp
// checks it. Thread safety: one instance may be shared by many threads.
class Storage {
 public:
  virtual ~Storage() = default;

  // Human-readable location ("memory", "sqlite:///x.db").
  virtual std::string url() const = 0;

  // --- studies ---
  // AlreadyExists if a study of that name exists.
  virtual Result<int64_t> CreateStudy(const std::string& name,
                                      const std::vector<StudyDirection>& directions) = 0;
  virtual Status DeleteStudy(int64_t study_id) = 0;
  // NotFound (listing the existing names) if there is no such study.
  virtual Result<int64_t> GetStudyId(const std::string& name) = 0;
  virtual Result<std::vector<StudyInfo>> GetAllStudies() = 0;
  virtual Result<StudyInfo> GetStudy(int64_t study_id) = 0;
  virtual Status SetStudyUserAttr(int64_t study_id, const std::string& key, const Json& value) = 0;
  virtual Status SetStudySystemAttr(int64_t study_id, const std::string& key,
                                    const Json& value) = 0;
  // The study's system attributes (Optuna's get_study_system_attrs). The default reads
  // GetStudy; backends override it where that costs less.
  virtual Result<Json> GetStudySystemAttrs(int64_t study_id);
  // One of them; nullopt when it is not set. The default reads GetStudySystemAttrs.
  virtual Result<std::optional<Json>> GetStudySystemAttr(int64_t study_id, const std::string& key);

  // --- trials ---
  // Creates a trial with the next number: trial numbers are 0-based and contiguous within a
  // study, in creation order. Without a template: RUNNING, started now. With a
  // template: its state (RUNNING or WAITING; finished states allowed for imports), params,
  // attributes, values and intermediate values are copied (InvalidArgument for a NaN value).
  virtual Result<FrozenTrial> CreateTrial(int64_t study_id, const FrozenTrial* templ = nullptr) = 0;
  // Creates one trial per template, as CreateTrial does, numbered 0, 1, ... — only if the study
  // has no trial yet, in one transaction: several workers starting a new study at once (a job
  // array) enqueue its config's trials once. Returns the trials created (none: it had trials).
  virtual Result<std::vector<FrozenTrial>> CreateTrialsIfEmpty(
      int64_t study_id, const std::vector<FrozenTrial>& templates) = 0;
  // Atomically moves the oldest WAITING trial of the study to RUNNING (datetime_start = now) and
  // returns it; nullopt when none is waiting. A WAITING trial is claimed by exactly one worker:
  // ClaimWaitingTrial, StartTrial and SetTrialStateValues to RUNNING return nothing or false to
  // the losers.
  virtual Result<std::optional<FrozenTrial>> ClaimWaitingTrial(int64_t study_id) = 0;
  // What a worker's ask does, in one transaction: nullopt if the study already holds
  // options.max_started trials that are not WAITING; else claims the oldest WAITING trial as
  // ClaimWaitingTrial does, or creates a RUNNING trial as CreateTrial does. The limit is exact
  // across workers: no more trials are started than it allows.
  virtual Result<std::optional<FrozenTrial>> StartTrial(int64_t study_id,
                                                        const StartTrialOptions& options) = 0;
  // Finished trials (COMPLETE, PRUNED, FAIL) are immutable: the setters below return
  // FailedPrecondition (TrialFinishedError) for one.
  virtual Status SetTrialParam(int64_t trial_id, const std::string& name, double internal_value,
                               const Distribution& distribution) = 0;
  // The value may be anything, NaN included.
  virtual Status SetTrialIntermediateValue(int64_t trial_id, int64_t step, double value) = 0;
  virtual Status SetTrialUserAttr(int64_t trial_id, const std::string& key, const Json& value) = 0;
  virtual Status SetTrialSystemAttr(int64_t trial_id, const std::string& key,
                                    const Json& value) = 0;
  // Sets the state (and values for COMPLETE/PRUNED). Returns false without changing anything
  // when asked to move a trial to RUNNING that is not WAITING (another worker took it).
  // Finished states set datetime_complete. Values may be +-inf but not NaN (InvalidArgument;
  // Optuna's schema cannot store it).
  virtual Result<bool> SetTrialStateValues(int64_t trial_id, TrialState state,
                                           const std::vector<double>& values) = 0;
  virtual Result<FrozenTrial> GetTrial(int64_t trial_id) = 0;
  // All trials of the study ordered by number; `states` empty = every state.
  virtual Result<std::vector<FrozenTrial>> GetAllTrials(
      int64_t study_id, const std::vector<TrialState>& states = {}) = 0;
  // Trials whose number is >= `first_number` or listed in `numbers`, each once, ordered by
  // number. Lets a reader keep finished (immutable) trials and re-read only new and unfinished
  // ones. The default filters GetAllTrials; backends override it with an indexed read.
  virtual Result<std::vector<FrozenTrial>> GetTrialsSince(int64_t study_id, int64_t first_number,
                                                          const std::vector<int64_t>& numbers);
  virtual Result<int64_t> CountTrials(int64_t study_id,
                                      const std::vector<TrialState>& states = {}) = 0;

  // --- heartbeats (Optuna: record_heartbeat, _get_stale_trial_ids, fail_stale_trials) ---
  // Only RUNNING trials heartbeat; a RUNNING trial whose last heartbeat is older than the grace
  // period is stale; trials that never heartbeat are never stale. Heartbeat times come from one
  // clock shared by all workers of the storage (the database's).
  // Records that the trial's worker is alive now. FailedPrecondition for a trial that is not
  // RUNNING (finished: Optuna's "Trial#N has already finished" message, which tells a worker
  // that its trial was failed as stale by another worker); NotFound for an unknown trial.
  virtual Status RecordHeartbeat(int64_t trial_id) = 0;
  // Fails (state FAIL, datetime_complete now, user attr fail_reason) every RUNNING trial of the
  // study whose last heartbeat is more than `grace_period_seconds` old, and, for each, creates
  // the trial `retry` returns, in the same transaction. Each stale trial is failed, and
  // returned, exactly once, even when several workers call this at the same moment.
  // NotFound for an unknown study.
  virtual Result<std::vector<FailedStaleTrial>> FailStaleTrials(int64_t study_id,
                                                                double grace_period_seconds,
                                                                const StaleTrialRetry& retry) = 0;
};

// "Trial#N has already finished and can not be updated." (Optuna's wording).
Status TrialFinishedError(int64_t number);
// FailedPrecondition: a heartbeat for a trial that is not RUNNING (and not finished).
Status TrialNotRunningError(int64_t number, TrialState state);
// NotFound for a study name: suggests the closest existing name and lists them all.
Status StudyNotFoundError(const std::string& name, const std::vector<std::string>& existing);
// InvalidArgument if a value is NaN (see the contract above).
Status CheckTrialValues(const std::vector<double>& values);

// Optuna's RetryFailedTrialCallback(max_retry) as a StaleTrialRetry: a WAITING copy of `failed`
// with its params, distributions, user attributes (less fail_reason) and system attributes,
// plus system attrs failed_trial (the number of the original trial) and retry_history (the
// numbers of the failed trials so far, oldest first). nullopt once retry_history would hold
// more than `max_retry` numbers, i.e. at most max_retry retries per original trial.
std::optional<FrozenTrial> RetryOfStaleTrial(const FrozenTrial& failed, int64_t max_retry);
// The user attr fail_reason of a trial failed as stale.
std::string StaleFailReason(double heartbeat_age_seconds, double grace_period_seconds);

}  // namespace tune

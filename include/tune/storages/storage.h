// Storage: where studies and trials live. Optuna's BaseStorage, as a C++ interface.
//
// Contract (every backend; tests/storages/storage_conformance_test.cpp checks it):
//  - Thread safety: one instance may be shared by many threads.
//  - Trial numbers are 0-based and contiguous within a study, in creation order.
//  - Finished trials (COMPLETE, PRUNED, FAIL) are immutable: any update returns
//    FailedPrecondition ("Trial#N has already finished and can not be updated").
//  - A WAITING trial is claimed by exactly one worker (ClaimWaitingTrial / SetTrialStateValues
//    to RUNNING return false to the losers).
//  - Trial values may be +-inf but not NaN (InvalidArgument; Optuna's schema cannot store it);
//    intermediate values may be anything.
// Backends: in_memory.h (this process only); sqlite.h (tune_sqlite); PostgreSQL later.
#pragma once

#include <cstdint>
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

  // --- trials ---
  // Creates a trial with the next number. Without a template: RUNNING, started now. With a
  // template: its state (RUNNING or WAITING; finished states allowed for imports), params,
  // attributes, values and intermediate values are copied.
  virtual Result<FrozenTrial> CreateTrial(int64_t study_id, const FrozenTrial* templ = nullptr) = 0;
  // Atomically moves the oldest WAITING trial of the study to RUNNING (datetime_start = now) and
  // returns it; nullopt when none is waiting.
  virtual Result<std::optional<FrozenTrial>> ClaimWaitingTrial(int64_t study_id) = 0;
  virtual Status SetTrialParam(int64_t trial_id, const std::string& name, double internal_value,
                               const Distribution& distribution) = 0;
  virtual Status SetTrialIntermediateValue(int64_t trial_id, int64_t step, double value) = 0;
  virtual Status SetTrialUserAttr(int64_t trial_id, const std::string& key, const Json& value) = 0;
  virtual Status SetTrialSystemAttr(int64_t trial_id, const std::string& key,
                                    const Json& value) = 0;
  // Sets the state (and values for COMPLETE/PRUNED). Returns false without changing anything
  // when asked to move a trial to RUNNING that is not WAITING (another worker took it).
  // Finished states set datetime_complete.
  virtual Result<bool> SetTrialStateValues(int64_t trial_id, TrialState state,
                                           const std::vector<double>& values) = 0;
  virtual Result<FrozenTrial> GetTrial(int64_t trial_id) = 0;
  // All trials of the study ordered by number; `states` empty = every state.
  virtual Result<std::vector<FrozenTrial>> GetAllTrials(
      int64_t study_id, const std::vector<TrialState>& states = {}) = 0;
  // Trials whose number is >= `first_number` or listed in `numbers`, ordered by number. Lets a
  // reader keep finished (immutable) trials and re-read only new and unfinished ones. The
  // default filters GetAllTrials; backends override it with an indexed read.
  virtual Result<std::vector<FrozenTrial>> GetTrialsSince(int64_t study_id, int64_t first_number,
                                                          const std::vector<int64_t>& numbers);
  virtual Result<int64_t> CountTrials(int64_t study_id,
                                      const std::vector<TrialState>& states = {}) = 0;
};

// "Trial#N has already finished and can not be updated." (Optuna's wording).
Status TrialFinishedError(int64_t number);
// NotFound for a study name: suggests the closest existing name and lists them all.
Status StudyNotFoundError(const std::string& name, const std::vector<std::string>& existing);
// InvalidArgument if a value is NaN (see the contract above).
Status CheckTrialValues(const std::vector<double>& values);

}  // namespace tune

#include "tune/storages/in_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

namespace tune {

Status TrialFinishedError(int64_t number) {
  return FailedPreconditionError(
      fmt::format("Trial#{} has already finished and can not be updated.", number));
}

namespace {

bool StateMatches(TrialState s, const std::vector<TrialState>& states) {
  return states.empty() || std::find(states.begin(), states.end(), s) != states.end();
}

class InMemoryStorage : public Storage {
 public:
  std::string url() const override { return "memory"; }

  Result<int64_t> CreateStudy(const std::string& name,
                              const std::vector<StudyDirection>& directions) override {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : studies_) {
      if (s.info.name == name) {
        return AlreadyExistsError(fmt::format("a study named '{}' already exists", name));
      }
    }
    int64_t id = next_study_id_++;
    StudyRecord& s = studies_[id];
    s.info.study_id = id;
    s.info.name = name;
    s.info.directions = directions;
    return id;
  }

  Status DeleteStudy(int64_t study_id) override {
    std::lock_guard lock(mu_);
    auto it = studies_.find(study_id);
    if (it == studies_.end()) return NotFoundError(fmt::format("no study with id {}", study_id));
    for (int64_t tid : it->second.trial_ids) trials_.erase(tid);
    studies_.erase(it);
    return Status::Ok();
  }

  Result<int64_t> GetStudyId(const std::string& name) override {
    std::lock_guard lock(mu_);
    std::vector<std::string> names;
    for (const auto& [id, s] : studies_) {
      if (s.info.name == name) return id;
      names.push_back(s.info.name);
    }
    return StudyNotFoundError(name, names);
  }

  Result<std::vector<StudyInfo>> GetAllStudies() override {
    std::lock_guard lock(mu_);
    std::vector<StudyInfo> out;
    for (const auto& [id, s] : studies_) out.push_back(InfoLocked(s));
    return out;
  }

  Result<StudyInfo> GetStudy(int64_t study_id) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    return InfoLocked(*s);
  }

  Result<Json> GetStudySystemAttrs(int64_t study_id) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    return s->info.system_attrs;
  }

  Result<std::optional<Json>> GetStudySystemAttr(int64_t study_id,
                                                 const std::string& key) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    auto it = s->info.system_attrs.find(key);
    if (it == s->info.system_attrs.end()) return std::optional<Json>();
    return std::optional<Json>(*it);
  }

  Status SetStudyUserAttr(int64_t study_id, const std::string& key, const Json& value) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    s->info.user_attrs[key] = value;
    return Status::Ok();
  }

  Status SetStudySystemAttr(int64_t study_id, const std::string& key, const Json& value) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    s->info.system_attrs[key] = value;
    return Status::Ok();
  }

  Result<FrozenTrial> CreateTrial(int64_t study_id, const FrozenTrial* templ) override {
    if (templ) TUNE_RETURN_IF_ERROR(CheckTrialValues(templ->values));
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    return CreateTrialLocked(study_id, *s, templ);
  }

  Result<std::vector<FrozenTrial>> CreateTrialsIfEmpty(
      int64_t study_id, const std::vector<FrozenTrial>& templates) override {
    for (const FrozenTrial& t : templates) TUNE_RETURN_IF_ERROR(CheckTrialValues(t.values));
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    std::vector<FrozenTrial> created;
    if (!s->trial_ids.empty()) return created;
    for (const FrozenTrial& t : templates) {
      TUNE_ASSIGN_OR_RETURN(FrozenTrial c, CreateTrialLocked(study_id, *s, &t));
      created.push_back(std::move(c));
    }
    return created;
  }

  Result<std::optional<FrozenTrial>> ClaimWaitingTrial(int64_t study_id) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    return ClaimLocked(*s);
  }

  Result<std::optional<FrozenTrial>> StartTrial(int64_t study_id,
                                                const StartTrialOptions& options) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    auto started = static_cast<int64_t>(s->trial_ids.size() - s->waiting.size());
    if (options.max_started && started >= *options.max_started) {
      return std::optional<FrozenTrial>();
    }
    std::optional<FrozenTrial> t = ClaimLocked(*s);
    if (!t) {
      TUNE_ASSIGN_OR_RETURN(FrozenTrial created, CreateTrialLocked(study_id, *s, nullptr));
      t = std::move(created);
    }
    if (options.heartbeat) s->heartbeats[t->number] = Clock::now();
    return t;
  }

  Status SetTrialParam(int64_t trial_id, const std::string& name, double internal_value,
                       const Distribution& distribution) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    t->params[name] = internal_value;
    t->distributions[name] = distribution;
    return Status::Ok();
  }

  Status SetTrialIntermediateValue(int64_t trial_id, int64_t step, double value) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    t->intermediate_values[step] = value;
    return Status::Ok();
  }

  Status SetTrialUserAttr(int64_t trial_id, const std::string& key, const Json& value) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    t->user_attrs[key] = value;
    return Status::Ok();
  }

  Status SetTrialSystemAttr(int64_t trial_id, const std::string& key, const Json& value) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    t->system_attrs[key] = value;
    return Status::Ok();
  }

  Result<bool> SetTrialStateValues(int64_t trial_id, TrialState state,
                                   const std::vector<double>& values) override {
    TUNE_RETURN_IF_ERROR(CheckTrialValues(values));
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    if (state == TrialState::kRunning) {
      if (t->state != TrialState::kWaiting) return false;
      t->datetime_start = Clock::now();
    }
    StudyRecord& s = studies_.at(trials_.at(trial_id).study_id);
    if (t->state == TrialState::kWaiting && state != TrialState::kWaiting) {
      s.waiting.erase(t->number);
    }
    if (IsFinished(state)) s.heartbeats.erase(t->number);
    t->state = state;
    if (!values.empty()) t->values = values;
    if (IsFinished(state)) t->datetime_complete = Clock::now();
    return true;
  }

  Result<FrozenTrial> GetTrial(int64_t trial_id) override {
    std::lock_guard lock(mu_);
    auto it = trials_.find(trial_id);
    if (it == trials_.end()) return NotFoundError(fmt::format("no trial with id {}", trial_id));
    return it->second.trial;
  }

  Result<std::vector<FrozenTrial>> GetAllTrials(int64_t study_id,
                                                const std::vector<TrialState>& states) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    std::vector<FrozenTrial> out;
    out.reserve(s->trial_ids.size());
    for (int64_t tid : s->trial_ids) {
      const FrozenTrial& t = trials_.at(tid).trial;
      if (StateMatches(t.state, states)) out.push_back(t);
    }
    return out;
  }

  Result<std::vector<FrozenTrial>> GetTrialsSince(int64_t study_id, int64_t first_number,
                                                  const std::vector<int64_t>& numbers) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    std::vector<FrozenTrial> out;
    auto n = static_cast<int64_t>(s->trial_ids.size());
    for (int64_t number : numbers) {
      if (number >= 0 && number < std::min(n, first_number)) {
        out.push_back(trials_.at(s->trial_ids[static_cast<size_t>(number)]).trial);
      }
    }
    std::sort(out.begin(), out.end(),
              [](const FrozenTrial& a, const FrozenTrial& b) { return a.number < b.number; });
    out.erase(std::unique(
                  out.begin(), out.end(),
                  [](const FrozenTrial& a, const FrozenTrial& b) { return a.number == b.number; }),
              out.end());
    for (int64_t number = std::max<int64_t>(first_number, 0); number < n; ++number) {
      out.push_back(trials_.at(s->trial_ids[static_cast<size_t>(number)]).trial);
    }
    return out;
  }

  Result<int64_t> CountTrials(int64_t study_id, const std::vector<TrialState>& states) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    int64_t n = 0;
    for (int64_t tid : s->trial_ids) n += StateMatches(trials_.at(tid).trial.state, states);
    return n;
  }

  Status RecordHeartbeat(int64_t trial_id) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(FrozenTrial * t, FindUpdatableLocked(trial_id));
    if (t->state != TrialState::kRunning) return TrialNotRunningError(t->number, t->state);
    studies_.at(trials_.at(trial_id).study_id).heartbeats[t->number] = Clock::now();
    return Status::Ok();
  }

  Result<std::vector<FailedStaleTrial>> FailStaleTrials(int64_t study_id,
                                                        double grace_period_seconds,
                                                        const StaleTrialRetry& retry) override {
    std::lock_guard lock(mu_);
    TUNE_ASSIGN_OR_RETURN(StudyRecord * s, FindStudyLocked(study_id));
    const TimePoint now = Clock::now();
    std::vector<FailedStaleTrial> out;
    for (auto it = s->heartbeats.begin(); it != s->heartbeats.end();) {
      const double age = std::chrono::duration<double>(now - it->second).count();
      if (age <= grace_period_seconds) {
        ++it;
        continue;
      }
      FrozenTrial& t = trials_.at(s->trial_ids[static_cast<size_t>(it->first)]).trial;
      it = s->heartbeats.erase(it);
      if (t.state != TrialState::kRunning) continue;
      t.user_attrs["fail_reason"] = StaleFailReason(age, grace_period_seconds);
      t.state = TrialState::kFail;
      t.datetime_complete = now;
      FailedStaleTrial failed{t, std::nullopt, age};
      if (retry) {
        if (std::optional<FrozenTrial> templ = retry(t)) {
          TUNE_RETURN_IF_ERROR(CheckTrialValues(templ->values));
          TUNE_ASSIGN_OR_RETURN(failed.retry, CreateTrialLocked(study_id, *s, &*templ));
        }
      }
      out.push_back(std::move(failed));
    }
    return out;
  }

 private:
  struct StudyRecord {
    StudyInfo info;
    std::vector<int64_t> trial_ids;
    std::set<int64_t> waiting;                // numbers of WAITING trials
    std::map<int64_t, TimePoint> heartbeats;  // number -> last heartbeat, RUNNING trials only
  };
  struct Entry {
    int64_t study_id;
    FrozenTrial trial;
  };

  // REQUIRES: mu_ is held.
  Result<FrozenTrial> CreateTrialLocked(int64_t study_id, StudyRecord& s,
                                        const FrozenTrial* templ) {
    FrozenTrial t;
    if (templ) {
      t = *templ;
    } else {
      t.state = TrialState::kRunning;
    }
    t.trial_id = next_trial_id_++;
    t.number = static_cast<int64_t>(s.trial_ids.size());
    if (t.state == TrialState::kRunning && !t.datetime_start) t.datetime_start = Clock::now();
    if (t.state == TrialState::kWaiting) t.datetime_start.reset();
    if (IsFinished(t.state) && !t.datetime_complete) t.datetime_complete = Clock::now();
    s.trial_ids.push_back(t.trial_id);
    if (t.state == TrialState::kWaiting) s.waiting.insert(t.number);
    trials_[t.trial_id] = Entry{study_id, t};
    return t;
  }

  // The oldest WAITING trial, now RUNNING; nullopt if none. REQUIRES: mu_ is held.
  std::optional<FrozenTrial> ClaimLocked(StudyRecord& s) {
    if (s.waiting.empty()) return std::nullopt;
    int64_t number = *s.waiting.begin();
    s.waiting.erase(s.waiting.begin());
    FrozenTrial& t = trials_.at(s.trial_ids[static_cast<size_t>(number)]).trial;
    t.state = TrialState::kRunning;
    t.datetime_start = Clock::now();
    return t;
  }

  // REQUIRES: mu_ is held.
  Result<StudyRecord*> FindStudyLocked(int64_t study_id) {
    auto it = studies_.find(study_id);
    if (it == studies_.end()) return NotFoundError(fmt::format("no study with id {}", study_id));
    return &it->second;
  }

  // REQUIRES: mu_ is held.
  Result<FrozenTrial*> FindUpdatableLocked(int64_t trial_id) {
    auto it = trials_.find(trial_id);
    if (it == trials_.end()) return NotFoundError(fmt::format("no trial with id {}", trial_id));
    FrozenTrial& t = it->second.trial;
    if (IsFinished(t.state)) return TrialFinishedError(t.number);
    return &t;
  }

  // REQUIRES: mu_ is held.
  StudyInfo InfoLocked(const StudyRecord& s) const {
    StudyInfo info = s.info;
    info.n_trials = static_cast<int64_t>(s.trial_ids.size());
    for (int64_t tid : s.trial_ids) {
      const auto& start = trials_.at(tid).trial.datetime_start;
      if (start && (!info.datetime_start || *start < *info.datetime_start)) {
        info.datetime_start = start;
      }
    }
    return info;
  }

  std::mutex mu_;
  std::map<int64_t, StudyRecord> studies_;
  std::map<int64_t, Entry> trials_;
  int64_t next_study_id_ = 1;
  int64_t next_trial_id_ = 1;
};

}  // namespace

std::unique_ptr<Storage> NewInMemoryStorage() { return std::make_unique<InMemoryStorage>(); }

}  // namespace tune

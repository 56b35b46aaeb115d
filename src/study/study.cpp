#include "tune/study.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>

#include "tune/trial_attrs.h"

namespace tune {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Trial

Trial::Trial(Study* study, FrozenTrial frozen, std::shared_ptr<const TrialHistory> history,
             uint64_t rng_seed)
    : study_(study),
      trial_id_(frozen.trial_id),
      number_(frozen.number),
      frozen_(std::move(frozen)),
      history_(std::move(history)),
      rng_(rng_seed) {
  if (auto it = frozen_.system_attrs.find("fixed_params");
      it != frozen_.system_attrs.end() && it->is_object()) {
    fixed_params_ = *it;
  }
  for (const auto& [name, v] : frozen_.params) {
    params_[name] = ToExternal(frozen_.distributions.at(name), v);
  }
}

const std::string& Trial::study_name() const { return study_->name(); }

Result<Json> Trial::Suggest(const std::string& name, const Distribution& distribution) {
  if (auto it = frozen_.params.find(name); it != frozen_.params.end()) {
    const Distribution& old = frozen_.distributions.at(name);
    TUNE_RETURN_IF_ERROR(CheckCompatibility(old, distribution).WithContext("parameter " + name));
    return ToExternal(old, it->second);
  }
  double internal = 0.0;
  if (auto fixed = fixed_params_.find(name); fixed != fixed_params_.end()) {
    Result<double> r = ToInternal(distribution, *fixed);
    if (!r.ok()) return r.status().WithContext("enqueued parameter '" + name + "'");
    internal = *r;
    if (!Contains(distribution, internal)) {
      spdlog::warn("Trial {}: enqueued value {} of '{}' is outside {}; using it anyway", number_,
                   fixed->dump(), name, DistributionToJson(distribution));
    }
  } else if (IsSingle(distribution)) {
    internal = std::visit(
        [](const auto& d) -> double {
          if constexpr (requires { d.choices; }) {
            return 0.0;
          } else {
            return static_cast<double>(d.low);
          }
        },
        distribution);
  } else {
    TUNE_ASSIGN_OR_RETURN(internal, Sample(name, distribution));
  }
  TUNE_RETURN_IF_ERROR(study_->storage().SetTrialParam(trial_id_, name, internal, distribution));
  frozen_.params[name] = internal;
  frozen_.distributions[name] = distribution;
  Json external = ToExternal(distribution, internal);
  params_[name] = external;
  return external;
}

Status Trial::SampleRelative() {
  Sampler& sampler = study_->sampler();
  StudyAttrReader study_attrs = [this](const std::string& key) {
    return study_->storage().GetStudySystemAttr(study_->study_id(), key);
  };
  TUNE_ASSIGN_OR_RETURN(SamplerRecords records,
                        sampler.BeforeSample(*history_, frozen_, study_attrs));
  for (const auto& [key, value] : records.trial_system_attrs.items()) {
    TUNE_RETURN_IF_ERROR(SetSystemAttr(key, value));
  }
  for (const auto& [key, value] : records.study_system_attrs.items()) {
    TUNE_RETURN_IF_ERROR(study_->storage().SetStudySystemAttr(study_->study_id(), key, value));
  }
  relative_space_ = sampler.InferRelativeSearchSpace(*history_);
  if (!relative_space_.empty()) {
    relative_params_ = sampler.SampleRelative(*history_, frozen_, relative_space_, rng_);
  }
  if (!relative_params_.empty()) {
    const SamplerRecords after = sampler.AfterSampleRelative(relative_space_, relative_params_);
    for (const auto& [key, value] : after.trial_system_attrs.items()) {
      TUNE_RETURN_IF_ERROR(SetSystemAttr(key, value));
    }
  }
  return Status::Ok();
}

Result<double> Trial::Sample(const std::string& name, const Distribution& distribution) {
  std::lock_guard lock(study_->sampler_mu_);
  if (!relative_done_) {
    TUNE_RETURN_IF_ERROR(SampleRelative());  // tried again at the next suggest if it failed
    relative_done_ = true;
  }
  if (auto rel = relative_params_.find(name);
      rel != relative_params_.end() && relative_space_.count(name) &&
      relative_space_.at(name) == distribution && Contains(distribution, rel->second)) {
    return rel->second;
  }
  return study_->sampler().SampleIndependent(*history_, frozen_, name, distribution, rng_);
}

Result<double> Trial::SuggestFloat(const std::string& name, double low, double high, bool log,
                                   std::optional<double> step) {
  TUNE_ASSIGN_OR_RETURN(FloatDistribution d, MakeFloatDistribution(low, high, log, step));
  TUNE_ASSIGN_OR_RETURN(Json v, Suggest(name, d));
  return v.get<double>();
}

Result<int64_t> Trial::SuggestInt(const std::string& name, int64_t low, int64_t high, bool log,
                                  int64_t step) {
  TUNE_ASSIGN_OR_RETURN(IntDistribution d, MakeIntDistribution(low, high, log, step));
  TUNE_ASSIGN_OR_RETURN(Json v, Suggest(name, d));
  return v.get<int64_t>();
}

Result<Json> Trial::SuggestCategorical(const std::string& name, std::vector<Json> choices) {
  TUNE_ASSIGN_OR_RETURN(CategoricalDistribution d, MakeCategoricalDistribution(std::move(choices)));
  return Suggest(name, d);
}

Status Trial::Report(double value, int64_t step) {
  if (step < 0) {
    return InvalidArgumentError(fmt::format("report step must be >= 0, got {}", step));
  }
  if (reported_.count(step)) {
    spdlog::warn("Trial {}: step {} was already reported; the new value {} is ignored", number_,
                 step, value);
    return Status::Ok();
  }
  TUNE_RETURN_IF_ERROR(study_->storage().SetTrialIntermediateValue(trial_id_, step, value));
  reported_[step] = value;
  frozen_.intermediate_values[step] = value;
  return Status::Ok();
}

Result<bool> Trial::ShouldPrune() {
  if (reported_.empty()) return false;
  // The pruner compares with the other trials as they are now, not as they were at Ask.
  TUNE_ASSIGN_OR_RETURN(std::shared_ptr<const TrialHistory> now, study_->History());
  PruneDecision decision;
  {
    std::lock_guard lock(study_->sampler_mu_);
    decision = study_->pruner().Prune(*now, frozen_);
  }
  for (const auto& [key, value] : decision.system_attrs.items()) {
    TUNE_RETURN_IF_ERROR(SetSystemAttr(key, value));
  }
  if (decision.prune) {
    TUNE_RETURN_IF_ERROR(SetSystemAttr(attrs::kPrunedBy, study_->pruner().name()));
  }
  return decision.prune;
}

Status Trial::SetUserAttr(const std::string& key, const Json& value) {
  TUNE_RETURN_IF_ERROR(study_->storage().SetTrialUserAttr(trial_id_, key, value));
  frozen_.user_attrs[key] = value;
  return Status::Ok();
}

std::optional<Json> Trial::UserAttr(const std::string& key) const {
  auto it = frozen_.user_attrs.find(key);
  if (it == frozen_.user_attrs.end()) return std::nullopt;
  // Not `return *it`: nlohmann_json 3.10's implicit conversion to optional makes that ambiguous.
  return std::make_optional(*it);
}

Status Trial::SetSystemAttr(const std::string& key, const Json& value) {
  TUNE_RETURN_IF_ERROR(study_->storage().SetTrialSystemAttr(trial_id_, key, value));
  frozen_.system_attrs[key] = value;
  return Status::Ok();
}

Status Trial::SetStudySystemAttr(const std::string& key, const Json& value) {
  return study_->storage().SetStudySystemAttr(study_->study_id(), key, value);
}

Result<std::optional<Json>> Trial::GetStudySystemAttr(const std::string& key) {
  return study_->storage().GetStudySystemAttr(study_->study_id(), key);
}

Result<FrozenTrial> Trial::Snapshot() const { return study_->storage().GetTrial(trial_id_); }

// ---------------------------------------------------------------------------------------------
// Study

Study::Study(std::shared_ptr<Storage> storage, std::string name, int64_t study_id,
             std::vector<StudyDirection> directions, std::unique_ptr<Sampler> sampler,
             std::unique_ptr<Pruner> pruner, std::optional<uint64_t> seed)
    : storage_(std::move(storage)),
      name_(std::move(name)),
      study_id_(study_id),
      directions_(std::move(directions)),
      sampler_(std::move(sampler)),
      pruner_(std::move(pruner)),
      seed_(seed) {}

Result<std::unique_ptr<Study>> Study::CreateOrLoad(std::shared_ptr<Storage> storage,
                                                   const std::string& name,
                                                   std::vector<StudyDirection> directions,
                                                   std::unique_ptr<Sampler> sampler,
                                                   std::unique_ptr<Pruner> pruner,
                                                   std::optional<uint64_t> seed) {
  if (name.empty()) return InvalidArgumentError("study name must not be empty");
  if (directions.empty()) return InvalidArgumentError("a study needs at least one direction");
  Result<int64_t> id = storage->CreateStudy(name, directions);
  if (!id.ok() && id.status().code() != StatusCode::kAlreadyExists) return id.status();
  if (!id.ok()) {
    TUNE_ASSIGN_OR_RETURN(int64_t existing, storage->GetStudyId(name));
    TUNE_ASSIGN_OR_RETURN(StudyInfo info, storage->GetStudy(existing));
    if (info.directions != directions) {
      return InvalidArgumentError(fmt::format(
          "study '{}' exists with direction(s) [{}], but [{}] was requested; use the stored "
          "direction or another study name",
          name, StudyDirectionsText(info.directions), StudyDirectionsText(directions)));
    }
    id = existing;
  }
  return std::unique_ptr<Study>(new Study(std::move(storage), name, *id, std::move(directions),
                                          std::move(sampler), std::move(pruner), seed));
}

Result<std::unique_ptr<Study>> Study::Load(std::shared_ptr<Storage> storage,
                                           const std::string& name,
                                           std::unique_ptr<Sampler> sampler,
                                           std::unique_ptr<Pruner> pruner,
                                           std::optional<uint64_t> seed) {
  TUNE_ASSIGN_OR_RETURN(int64_t id, storage->GetStudyId(name));
  TUNE_ASSIGN_OR_RETURN(StudyInfo info, storage->GetStudy(id));
  return std::unique_ptr<Study>(new Study(std::move(storage), name, id, info.directions,
                                          std::move(sampler), std::move(pruner), seed));
}

Result<std::shared_ptr<const TrialHistory>> Study::History() {
  static std::atomic<uint64_t> next_snapshot_id{1};
  auto h = std::make_shared<TrialHistory>();
  h->study_name = name_;
  h->directions = directions_;
  h->snapshot_id = next_snapshot_id.fetch_add(1);
  std::lock_guard lock(cache_mu_);
  TUNE_ASSIGN_OR_RETURN(
      std::vector<FrozenTrial> fresh,
      storage_->GetTrialsSince(study_id_, static_cast<int64_t>(cache_.size()), unfinished_));
  unfinished_.clear();
  for (FrozenTrial& t : fresh) {
    auto number = static_cast<size_t>(t.number);
    if (number >= cache_.size()) cache_.resize(number + 1);
    cache_[number] = std::make_shared<const FrozenTrial>(std::move(t));
  }
  for (const auto& t : cache_) {
    if (!t) return InternalError("the storage returned non-contiguous trial numbers");
    if (!IsFinished(t->state)) unfinished_.push_back(t->number);
  }
  h->trials = cache_;
  return std::shared_ptr<const TrialHistory>(std::move(h));
}

Result<std::unique_ptr<Trial>> Study::Ask() {
  TUNE_ASSIGN_OR_RETURN(std::optional<FrozenTrial> waiting, storage_->ClaimWaitingTrial(study_id_));
  FrozenTrial frozen;
  if (waiting) {
    frozen = std::move(*waiting);
  } else {
    TUNE_ASSIGN_OR_RETURN(frozen, storage_->CreateTrial(study_id_));
  }
  return MakeTrial(std::move(frozen));
}

Result<std::unique_ptr<Trial>> Study::Ask(const StartTrialOptions& options) {
  TUNE_ASSIGN_OR_RETURN(std::optional<FrozenTrial> started,
                        storage_->StartTrial(study_id_, options));
  if (!started) return std::unique_ptr<Trial>();
  return MakeTrial(std::move(*started));
}

Result<std::unique_ptr<Trial>> Study::MakeTrial(FrozenTrial frozen) {
  TUNE_ASSIGN_OR_RETURN(std::shared_ptr<const TrialHistory> history, History());
  {
    std::lock_guard lock(sampler_mu_);
    history = pruner_->SamplerHistory(std::move(history), frozen);
  }
  uint64_t rng_seed = seed_ ? SplitMix64(*seed_ ^ SplitMix64(static_cast<uint64_t>(frozen.number)))
                            : std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  return std::unique_ptr<Trial>(new Trial(this, std::move(frozen), std::move(history), rng_seed));
}

Result<std::vector<FailedStaleTrial>> Study::FailStaleTrials(double grace_period_seconds,
                                                             int64_t max_retry) {
  StaleTrialRetry retry;
  if (max_retry > 0) {
    retry = [max_retry](const FrozenTrial& failed) { return RetryOfStaleTrial(failed, max_retry); };
  }
  return storage_->FailStaleTrials(study_id_, grace_period_seconds, retry);
}

Result<FrozenTrial> Study::Tell(Trial& trial, TrialState state, std::vector<double> values) {
  std::optional<double> last;
  if (!trial.reported_.empty()) last = trial.reported_.rbegin()->second;
  TUNE_ASSIGN_OR_RETURN(FrozenTrial told,
                        Finish(trial.trial_id(), trial.number(), state, std::move(values), last));
  return told;
}

Result<FrozenTrial> Study::TellNumber(int64_t number, TrialState state,
                                      std::vector<double> values) {
  // Only trial `number` (a first number past every trial reads no others).
  TUNE_ASSIGN_OR_RETURN(
      std::vector<FrozenTrial> found,
      storage_->GetTrialsSince(study_id_, std::numeric_limits<int64_t>::max(), {number}));
  if (found.empty() || found.front().number != number) {
    return NotFoundError(fmt::format("study '{}' has no trial {}", name_, number));
  }
  const FrozenTrial& t = found.front();
  if (IsFinished(t.state)) return TrialFinishedError(number);
  if (t.state != TrialState::kRunning) {
    return FailedPreconditionError(
        fmt::format("trial {} is {}, not RUNNING; only a trial that was asked for can be told",
                    number, TrialStateName(t.state)));
  }
  std::optional<double> last;
  if (!t.intermediate_values.empty()) last = t.intermediate_values.rbegin()->second;
  return Finish(t.trial_id, number, state, std::move(values), last);
}

Result<FrozenTrial> Study::Finish(int64_t trial_id, int64_t number, TrialState state,
                                  std::vector<double> values, std::optional<double> last_reported) {
  if (state == TrialState::kRunning || state == TrialState::kWaiting) {
    return InvalidArgumentError(
        fmt::format("cannot tell a trial the state {}; use COMPLETE, "
                    "PRUNED or FAIL",
                    TrialStateName(state)));
  }
  if (state == TrialState::kComplete) {
    if (values.size() != directions_.size()) {
      return InvalidArgumentError(
          fmt::format("trial {}: {} value(s) given, but the study has {} objective(s)", number,
                      values.size(), directions_.size()));
    }
    for (double v : values) {
      if (std::isnan(v)) {
        // Optuna's fail_reason (a system attribute), and tune's reason (trial_attrs.h). An
        // infinite value is a value, as in Optuna: the trial is COMPLETE.
        spdlog::warn("Trial {} failed because the objective returned NaN", number);
        TUNE_RETURN_IF_ERROR(
            storage_->SetTrialSystemAttr(trial_id, "fail_reason", "objective returned NaN"));
        TUNE_RETURN_IF_ERROR(storage_->SetTrialUserAttr(trial_id, attrs::kReason,
                                                        EndReasonName(EndReason::kNonFinite)));
        TUNE_RETURN_IF_ERROR(storage_->SetTrialUserAttr(
            trial_id, attrs::kNonFinite,
            NonFiniteAttrToJson({.where = "value", .count = 1, .value = "NaN"})));
        state = TrialState::kFail;
        values.clear();
        break;
      }
    }
  } else if (state == TrialState::kPruned) {
    values.clear();
    if (last_reported && !std::isnan(*last_reported) && directions_.size() == 1) {
      values.push_back(*last_reported);
    }
  } else {
    values.clear();
  }
  TUNE_ASSIGN_OR_RETURN(bool applied, storage_->SetTrialStateValues(trial_id, state, values));
  if (!applied) return InternalError("trial state update was not applied");
  return storage_->GetTrial(trial_id);
}

namespace {

Result<FrozenTrial> EnqueuedTemplate(const Json& params, const Json& user_attrs) {
  if (!params.is_object()) {
    return InvalidArgumentError("enqueued params must be a JSON object, got " + params.dump());
  }
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  templ.system_attrs["fixed_params"] = params;
  templ.user_attrs = user_attrs.is_object() ? user_attrs : Json::object();
  return templ;
}

}  // namespace

Result<FrozenTrial> Study::EnqueueTrial(const Json& params, const Json& user_attrs) {
  TUNE_ASSIGN_OR_RETURN(FrozenTrial templ, EnqueuedTemplate(params, user_attrs));
  return storage_->CreateTrial(study_id_, &templ);
}

Result<int64_t> Study::EnqueueTrialsIfEmpty(const std::vector<std::pair<Json, Json>>& trials) {
  std::vector<FrozenTrial> templates;
  for (const auto& [params, user_attrs] : trials) {
    TUNE_ASSIGN_OR_RETURN(FrozenTrial templ, EnqueuedTemplate(params, user_attrs));
    templates.push_back(std::move(templ));
  }
  TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> created,
                        storage_->CreateTrialsIfEmpty(study_id_, templates));
  return static_cast<int64_t>(created.size());
}

Result<std::vector<FrozenTrial>> Study::Trials(const std::vector<TrialState>& states) {
  return storage_->GetAllTrials(study_id_, states);
}

std::optional<FrozenTrial> FindBestTrial(const std::vector<FrozenTrial>& trials,
                                         StudyDirection direction) {
  std::optional<FrozenTrial> best;
  for (const FrozenTrial& t : trials) {
    if (t.state != TrialState::kComplete || t.values.size() != 1) continue;
    if (!best || IsBetter(direction, t.value(), best->value())) best = t;
  }
  return best;
}

namespace {

// True when `a` is no worse than `b` in every objective and better in one.
bool Dominates(const std::vector<double>& a, const std::vector<double>& b,
               const std::vector<StudyDirection>& directions) {
  bool better = false;
  for (size_t i = 0; i < directions.size(); ++i) {
    if (IsBetter(directions[i], b[i], a[i])) return false;
    better = better || IsBetter(directions[i], a[i], b[i]);
  }
  return better;
}

}  // namespace

std::vector<FrozenTrial> FindBestTrials(const std::vector<FrozenTrial>& trials,
                                        const std::vector<StudyDirection>& directions) {
  std::vector<const FrozenTrial*> complete;
  for (const FrozenTrial& t : trials) {
    if (t.state == TrialState::kComplete && t.values.size() == directions.size()) {
      complete.push_back(&t);
    }
  }
  std::vector<FrozenTrial> front;
  for (const FrozenTrial* t : complete) {
    bool dominated = false;
    for (const FrozenTrial* other : complete) {
      if (Dominates(other->values, t->values, directions)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(*t);
  }
  std::sort(front.begin(), front.end(),
            [](const FrozenTrial& a, const FrozenTrial& b) { return a.number < b.number; });
  return front;
}

Result<FrozenTrial> Study::BestTrial() {
  if (directions_.size() != 1) return BestTrialOf({});
  TUNE_ASSIGN_OR_RETURN(auto trials, storage_->GetAllTrials(study_id_, {TrialState::kComplete}));
  return BestTrialOf(trials);
}

Result<FrozenTrial> Study::BestTrialOf(const std::vector<FrozenTrial>& trials) const {
  if (directions_.size() != 1) {
    return InvalidArgumentError("best trial is defined for single-objective studies only");
  }
  auto best = FindBestTrial(trials, directions_.front());
  if (!best) return NotFoundError(fmt::format("study '{}' has no COMPLETE trial yet", name_));
  return *best;
}

}  // namespace tune

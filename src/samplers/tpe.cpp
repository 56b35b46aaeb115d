#include "tune/samplers/tpe.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "samplers/multi_objective.h"
#include "samplers/parzen_estimator.h"
#include "samplers/tpe_model.h"
#include "tune/samplers/random.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Optuna 5.0's keys of a joint sample shared by a RUNNING trial, and their length.
constexpr const char* kRelativeParamsKey = "tpe:relative_params";
constexpr size_t kSystemAttrMaxLength = 2045;

// "tpe:relative_params:<i>", appended piece by piece: GCC 13 warns (-Warray-bounds, wrongly) on
// the same string built by concatenating temporaries.
std::string RelativeParamsKey(size_t i) {
  std::string key = kRelativeParamsKey;
  key += ':';
  key += std::to_string(i);
  return key;
}

// Ranking key of a finished trial; smaller is better (docs/tpe.md#ranking). The first
// element is 0 for feasible trials and 1 for infeasible ones (only with constraints).
using RankKey = std::array<double, 3>;

}  // namespace

const char* TpePresetName(TpePreset preset) {
  return preset == TpePreset::kOptuna49 ? "optuna-4.9" : "optuna-5.0";
}

TpeOptions TpePresetOptions(TpePreset preset) {
  TpeOptions o;
  o.preset = preset;
  if (preset == TpePreset::kOptuna49) {
    o.gamma_uncapped_multi_objective = false;
    o.hypervolume_weights = true;
    o.multivariate = false;
    o.multivariate_bandwidth = MultivariateBandwidth::kScott;
    o.constant_liar = false;
    o.constraints = false;
    o.constraints_missing_infeasible = true;
  }
  return o;
}

int TpeGamma(const TpeOptions& options, int n, bool multi_objective) {
  double g = options.gamma_hyperopt
                 ? std::ceil(options.gamma_sqrt_beta * std::sqrt(static_cast<double>(n)))
                 : std::ceil(options.gamma_ratio * static_cast<double>(n));
  if (multi_objective && options.gamma_uncapped_multi_objective) return static_cast<int>(g);
  return std::min(static_cast<int>(g), options.gamma_max);
}

std::vector<double> TpeWeights(const TpeOptions& options, int m) {
  if (m <= 0) return {};
  // Expected-improvement weights replace these for the below set only (BuildEstimators).
  if (options.weights != WeightRule::kOptuna || m < 25) {
    return std::vector<double>(static_cast<size_t>(m), 1.0);
  }
  // numpy.linspace(1/m, 1, m - 25) followed by 25 ones.
  std::vector<double> w;
  w.reserve(static_cast<size_t>(m));
  int ramp = m - 25;
  double start = 1.0 / m;
  for (int i = 0; i < ramp; ++i) {
    w.push_back(ramp == 1 ? start : start + (1.0 - start) * i / (ramp - 1));
  }
  w.resize(static_cast<size_t>(m), 1.0);
  return w;
}

// ---------------------------------------------------------------------------------------------
// The typed, incremental history.

class TpeSampler::Index {
 public:
  explicit Index(const TpeOptions& options) : options_(options) {}

  // Brings the index up to `history`: ingests finished trials seen for the first time and
  // records which trials this snapshot contains.
  void Sync(const TrialHistory& history) {
    if (history.snapshot_id != 0 && history.snapshot_id == last_snapshot_) return;
    last_snapshot_ = history.snapshot_id;
    multi_objective_ = history.directions.size() > 1;
    size_t size =
        history.trials.empty() ? 0 : static_cast<size_t>(history.trials.back()->number) + 1;
    present_.assign(size, 0);
    running_.clear();
    shared_.clear();
    n_ = 0;
    for (const auto& ptr : history.trials) {
      const FrozenTrial& t = *ptr;
      if (t.state == TrialState::kComplete || t.state == TrialState::kPruned) {
        auto number = static_cast<size_t>(t.number);
        if (number >= present_.size()) present_.resize(number + 1, 0);
        if (number >= trials_.size() || !trials_[number].ingested) Ingest(t, history.directions);
        present_[number] = 1;
        ++n_;
      } else if (t.state == TrialState::kRunning) {
        running_.push_back(ptr);
        if (options_.Multivariate(multi_objective_ ? 2 : 1)) ReadShared(t);
      }
    }
    below_valid_ = false;
  }

  int n() const { return n_; }
  bool multi_objective() const { return multi_objective_; }

  // Below flags (by number) of the current snapshot: the first gamma(n) present trials in
  // ranking order (several objectives: the feasible COMPLETE trials by non-domination rank and
  // hypervolume first, docs/tpe.md#several-objectives).
  const std::vector<char>& Below() {
    if (below_valid_) return below_;
    below_.assign(present_.size(), 0);
    threshold_ = kInf;
    int want = TpeGamma(options_, n_, multi_objective_);
    if (multi_objective_) want -= SplitCompleteMultiObjective(want);
    for (const auto& [key, number] : ranking_) {
      auto k = static_cast<size_t>(number);
      if (k >= present_.size() || !present_[k]) continue;
      if (multi_objective_ && IsFeasibleComplete(key)) continue;  // split above
      if (want <= 0) {                                            // the best trial above
        if (key[0] == 0.0 && key[1] == -kInf) threshold_ = key[2];
        break;
      }
      below_[k] = 1;
      --want;
    }
    below_weight_.assign(present_.size(), 1.0);
    if (multi_objective_ && options_.hypervolume_weights) WeighBelowMultiObjective();
    below_valid_ = true;
    return below_;
  }

  // Several objectives: the weight of each below trial's kernel in l, by number (Optuna's
  // hypervolume-contribution weights).
  double BelowWeight(int64_t number) {
    Below();
    return below_weight_[static_cast<size_t>(number)];
  }

  // WeightRule::kExpectedImprovement: the weight of each below trial, max(1e-12, t - value),
  // t the value of the best trial above (signed so that smaller is better). Empty (uniform
  // weights) when that trial or one of `below_numbers` is not a feasible COMPLETE trial with a
  // finite value.
  std::vector<double> EiWeights(const std::vector<int64_t>& below_numbers) {
    Below();
    if (!std::isfinite(threshold_)) return {};
    std::vector<double> w;
    w.reserve(below_numbers.size());
    for (int64_t number : below_numbers) {
      const double value = trials_[static_cast<size_t>(number)].value;
      if (!std::isfinite(value)) return {};
      w.push_back(std::max(1e-12, threshold_ - value));
    }
    return w;
  }

  int ParamId(const std::string& name) {
    auto [it, inserted] = param_ids_.try_emplace(name, static_cast<int>(param_names_.size()));
    if (inserted) {
      param_names_.push_back(name);
      raw_value_.emplace_back(trials_.size(), kNaN);
      raw_dist_.emplace_back(trials_.size(), -1);
    }
    return it->second;
  }
  const std::string& ParamName(int pid) const { return param_names_[static_cast<size_t>(pid)]; }

  int DistId(const Distribution& d) {
    for (size_t i = 0; i < dists_.size(); ++i) {
      if (dists_[i] == d) return static_cast<int>(i);
    }
    dists_.push_back(d);
    return static_cast<int>(dists_.size() - 1);
  }
  const Distribution& Dist(int did) const { return dists_[static_cast<size_t>(did)]; }

  // Values of parameter `pid` in the transformed space of distribution `did`, by trial number
  // (NaN where the trial lacks it or its value is not in `did`).
  const std::vector<double>& Column(int pid, int did) {
    auto key = std::make_pair(pid, did);
    auto it = columns_.find(key);
    if (it != columns_.end()) return it->second;
    std::vector<double>& col = columns_[key];
    col.assign(trials_.size(), kNaN);
    for (size_t number = 0; number < trials_.size(); ++number) {
      if (trials_[number].ingested) col[number] = Convert(pid, number, did);
    }
    return col;
  }

  // The non-NaN entries of Column(pid, did) as (value, number), ascending: kept sorted as trials
  // arrive, so the estimators' bandwidth rule needs no sort per suggest.
  const std::vector<std::pair<double, int64_t>>& SortedColumn(int pid, int did) {
    auto key = std::make_pair(pid, did);
    auto it = sorted_columns_.find(key);
    if (it != sorted_columns_.end()) return it->second;
    const std::vector<double>& col = Column(pid, did);
    std::vector<std::pair<double, int64_t>>& sorted = sorted_columns_[key];
    for (size_t number = 0; number < col.size(); ++number) {
      if (!std::isnan(col[number])) sorted.emplace_back(col[number], static_cast<int64_t>(number));
    }
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }

  // A value of a RUNNING trial in the transformed space of `did` (NaN if absent): its param,
  // else (multivariate) the joint sample it shared (Optuna 5.0's _get_params).
  double RunningValue(const FrozenTrial& t, int pid, int did) const {
    auto it = t.params.find(ParamName(pid));
    if (it != t.params.end()) {
      return ConvertValue(t.distributions.at(it->first), it->second, Dist(did));
    }
    auto shared = shared_.find(t.number);
    if (shared == shared_.end()) return kNaN;
    auto value = shared->second.find(ParamName(pid));
    if (value == shared->second.end()) return kNaN;
    Result<double> internal = ToInternal(Dist(did), *value);
    if (!internal.ok() || !Contains(Dist(did), *internal)) return kNaN;
    return ToParzenSpace(Dist(did), *internal);
  }

  const std::vector<char>& present() const { return present_; }
  bool oom(size_t number) const { return number < trials_.size() && trials_[number].oom; }
  // TpeWeights(options, m), remembered for the last few m (the parameters of one trial share
  // their set sizes).
  const std::vector<double>& Weights(int m) {
    for (const auto& [size, w] : weights_cache_) {
      if (size == m) return w;
    }
    if (weights_cache_.size() >= 4) weights_cache_.erase(weights_cache_.begin());
    weights_cache_.emplace_back(m, TpeWeights(options_, m));
    return weights_cache_.back().second;
  }

  // Whether any ingested trial ran out of memory (oom_feasibility has something to learn).
  bool any_oom() const { return any_oom_; }
  const std::vector<std::shared_ptr<const FrozenTrial>>& running() const { return running_; }

  // The distinct parameter sets (param id -> dist id, sorted) of the present trials.
  std::vector<const std::vector<std::pair<int, int>>*> PresentSignatures() const {
    std::vector<char> seen(signatures_.size(), 0);
    std::vector<const std::vector<std::pair<int, int>>*> out;
    for (size_t number = 0; number < present_.size(); ++number) {
      if (!present_[number]) continue;
      auto sig = static_cast<size_t>(trials_[number].signature);
      if (!seen[sig]) {
        seen[sig] = 1;
        out.push_back(&signatures_[sig]);
      }
    }
    return out;
  }

 private:
  struct Entry {
    bool ingested = false;
    bool complete = false;
    bool feasible_complete = false;     // COMPLETE and not ranked infeasible
    bool satisfies_constraints = true;  // SatisfiesAll (with constraints)
    std::vector<double> losses;         // COMPLETE: the values as losses
    bool oom = false;  // PRUNED with the user attribute oom=true (tune's memory guard)
    int signature = -1;
    double value = kNaN;  // signed value of a feasible COMPLETE trial (EI weights)
  };

  static bool IsFeasibleComplete(const RankKey& key) { return key[0] == 0.0 && key[1] == -kInf; }

  // Several objectives: marks below the best `want` of the feasible COMPLETE trials present
  // (whole non-domination fronts, then HSSP on the next); returns how many.
  int SplitCompleteMultiObjective(int want) {
    LossPoints losses;
    std::vector<size_t> numbers;
    for (size_t number = 0; number < present_.size(); ++number) {
      if (present_[number] && trials_[number].feasible_complete) {
        losses.push_back(trials_[number].losses);
        numbers.push_back(number);
      }
    }
    const std::vector<int64_t> chosen = SplitBelowMultiObjective(losses, want);
    for (int64_t i : chosen) below_[numbers[static_cast<size_t>(i)]] = 1;
    return static_cast<int>(chosen.size());
  }

  // Optuna's _calculate_weights_below_for_multi_objective over the below trials in number order.
  // A below trial that is not COMPLETE (Optuna 4.9 fails on one) weighs like an infeasible one.
  void WeighBelowMultiObjective() {
    LossPoints losses;
    std::vector<char> feasible;
    std::vector<size_t> numbers;
    for (size_t number = 0; number < present_.size(); ++number) {
      if (!below_[number]) continue;
      const Entry& e = trials_[number];
      feasible.push_back(e.complete && e.satisfies_constraints ? 1 : 0);
      losses.push_back(feasible.back() ? e.losses : std::vector<double>());
      numbers.push_back(number);
    }
    const std::vector<double> w = BelowWeightsMultiObjective(losses, feasible);
    for (size_t i = 0; i < numbers.size(); ++i) below_weight_[numbers[i]] = w[i];
  }

  void Ingest(const FrozenTrial& t, const std::vector<StudyDirection>& directions) {
    const StudyDirection direction = directions.empty() ? StudyDirection::kMinimize : directions[0];
    auto number = static_cast<size_t>(t.number);
    if (number >= trials_.size()) {
      size_t size = std::max(number + 1, trials_.size() * 2);
      trials_.resize(size);
      for (auto& v : raw_value_) v.resize(size, kNaN);
      for (auto& v : raw_dist_) v.resize(size, -1);
      for (auto& [key, col] : columns_) col.resize(size, kNaN);
    }
    double sign = direction == StudyDirection::kMaximize ? -1.0 : 1.0;
    RankKey key{0.0, 0.0, 0.0};
    if (t.state == TrialState::kComplete) {
      key = {0.0, -kInf, t.values.empty() ? kInf : sign * t.values[0]};
    } else if (!t.intermediate_values.empty()) {
      auto [step, value] = *t.intermediate_values.rbegin();
      key = {0.0, -static_cast<double>(step), std::isnan(value) ? kInf : sign * value};
    } else {
      key = {0.0, 1.0, 0.0};
    }
    const std::map<std::string, double> constraints =
        options_.constraints ? TrialConstraints(t) : std::map<std::string, double>();
    if (options_.constraints) {
      double violation = Violation(t.number, constraints);
      if (violation > 0.0) key = {1.0, violation, 0.0};
    }
    if (key[0] == 0.0 && key[1] == -kInf) trials_[number].value = key[2];
    Entry& e = trials_[number];
    e.complete = t.state == TrialState::kComplete;
    e.feasible_complete = IsFeasibleComplete(key);
    e.satisfies_constraints = !options_.constraints || SatisfiesAll(constraints);
    if (e.complete) e.losses = Losses(t, directions);
    auto pos = std::lower_bound(ranking_.begin(), ranking_.end(), std::make_pair(key, t.number));
    ranking_.insert(pos, std::make_pair(key, t.number));

    std::vector<std::pair<int, int>> sig;
    for (const auto& [name, value] : t.params) {
      int pid = ParamId(name);
      int did = DistId(t.distributions.at(name));
      raw_value_[static_cast<size_t>(pid)][number] = value;
      raw_dist_[static_cast<size_t>(pid)][number] = did;
      sig.emplace_back(pid, did);
    }
    std::sort(sig.begin(), sig.end());
    auto [it, inserted] = signature_ids_.try_emplace(sig, static_cast<int>(signatures_.size()));
    if (inserted) signatures_.push_back(sig);
    trials_[number].signature = it->second;
    trials_[number].ingested = true;
    trials_[number].oom = IsOomTrial(t);
    any_oom_ = any_oom_ || trials_[number].oom;
    for (auto& [k, col] : columns_) col[number] = Convert(k.first, number, k.second);
    for (auto& [k, sorted] : sorted_columns_) {
      double v = columns_.at(k)[number];
      if (std::isnan(v)) continue;
      auto entry = std::make_pair(v, t.number);
      sorted.insert(std::lower_bound(sorted.begin(), sorted.end(), entry), entry);
    }
  }

  // The values as losses (maximized objectives negated); +inf for a missing value.
  static std::vector<double> Losses(const FrozenTrial& t,
                                    const std::vector<StudyDirection>& directions) {
    std::vector<double> losses(directions.size(), kInf);
    for (size_t k = 0; k < directions.size() && k < t.values.size(); ++k) {
      losses[k] = directions[k] == StudyDirection::kMaximize ? -t.values[k] : t.values[k];
    }
    return losses;
  }

  // Every constraint value <= 0 (Optuna's feasibility in the below weights; a NaN value is not
  // satisfied there); a trial without constraints as options_.constraints_missing_infeasible.
  bool SatisfiesAll(const std::map<std::string, double>& constraints) const {
    if (constraints.empty()) return !options_.constraints_missing_infeasible;
    for (const auto& [name, v] : constraints) {
      if (!(v <= 0.0)) return false;
    }
    return true;
  }

  // Optuna's _get_infeasible_trial_score: the sum of the values > 0 (a NaN counts as
  // satisfied); a trial without constraints is feasible, or with
  // constraints_missing_infeasible (Optuna 4.9's constraints_func), infinitely violating.
  // `constraints`: TrialConstraints of trial `number`.
  double Violation(int64_t number, const std::map<std::string, double>& constraints) {
    if (constraints.empty() && options_.constraints_missing_infeasible) {
      if (!warned_constraints_) {
        spdlog::warn(
            "TPE: trial {} has no constraints (system attributes \"constraints:<name>\" or "
            "\"constraints\"); it is treated as infeasible (preset optuna-4.9 with "
            "\"constraints\": true)",
            number);
        warned_constraints_ = true;
      }
      return kInf;
    }
    return ConstraintViolation(constraints);
  }

  // The joint sample a RUNNING trial shared ("tpe:relative_params:<i>", concatenated), when it is
  // a JSON object (a half-written one, as Optuna, is ignored).
  void ReadShared(const FrozenTrial& t) {
    std::string text;
    for (int i = 0;; ++i) {
      auto it = t.system_attrs.find(RelativeParamsKey(static_cast<size_t>(i)));
      if (it == t.system_attrs.end() || !it->is_string()) break;
      text += it->get<std::string>();
    }
    if (text.empty()) return;
    Json params = Json::parse(text, nullptr, false);
    if (params.is_object()) shared_[t.number] = std::move(params);
  }

  double Convert(int pid, size_t number, int did) const {
    int rd = raw_dist_[static_cast<size_t>(pid)][number];
    if (rd < 0) return kNaN;
    double raw = raw_value_[static_cast<size_t>(pid)][number];
    if (rd == did) {
      const Distribution& d = Dist(did);
      return Contains(d, raw) ? ToParzenSpace(d, raw) : kNaN;
    }
    return ConvertValue(Dist(rd), raw, Dist(did));
  }

  // A value stored under `from` expressed in `to` (through the external value), or NaN.
  static double ConvertValue(const Distribution& from, double internal, const Distribution& to) {
    if (from == to) return Contains(to, internal) ? ToParzenSpace(to, internal) : kNaN;
    Result<double> r = ToInternal(to, ToExternal(from, internal));
    if (!r.ok() || !Contains(to, *r)) return kNaN;
    return ToParzenSpace(to, *r);
  }

  const TpeOptions& options_;
  std::vector<Entry> trials_;                         // by number
  std::vector<std::pair<RankKey, int64_t>> ranking_;  // sorted (key, number)
  std::unordered_map<std::string, int> param_ids_;
  std::vector<std::string> param_names_;
  std::vector<std::vector<double>> raw_value_;  // [param][number], internal representation
  std::vector<std::vector<int>> raw_dist_;      // [param][number], -1 = absent
  std::vector<Distribution> dists_;
  std::map<std::vector<std::pair<int, int>>, int> signature_ids_;
  std::vector<std::vector<std::pair<int, int>>> signatures_;
  std::map<std::pair<int, int>, std::vector<double>> columns_;
  std::map<std::pair<int, int>, std::vector<std::pair<double, int64_t>>> sorted_columns_;
  bool warned_constraints_ = false;
  bool any_oom_ = false;
  std::vector<std::pair<int, std::vector<double>>> weights_cache_;

  // Per snapshot.
  uint64_t last_snapshot_ = 0;
  bool multi_objective_ = false;
  std::vector<char> present_;
  std::vector<std::shared_ptr<const FrozenTrial>> running_;
  std::unordered_map<int64_t, Json> shared_;  // by number: RUNNING trials' shared joint samples
  int n_ = 0;
  std::vector<char> below_;
  std::vector<double> below_weight_;  // several objectives: the l weight of each below trial
  double threshold_ = kInf;           // the value of the best trial above, for EiWeights
  bool below_valid_ = false;
};

// ---------------------------------------------------------------------------------------------

namespace {

struct Param {
  std::string name;
  Distribution distribution;
  int pid;
  int did;
};

}  // namespace

TpeSampler::TpeSampler(TpeOptions options)
    : options_(options), index_(std::make_unique<Index>(options_)) {}

TpeSampler::~TpeSampler() = default;

SamplerRecords TpeSampler::AfterSampleRelative(const SearchSpace& space,
                                               const std::map<std::string, double>& params) const {
  SamplerRecords out;
  if (!options_.constant_liar || params.empty()) return out;
  Json shared = Json::object();
  for (const auto& [name, internal] : params) shared[name] = ToExternal(space.at(name), internal);
  const std::string text = shared.dump(-1, ' ', /*ensure_ascii=*/true);  // as json.dumps
  for (size_t i = 0; i < text.size(); i += kSystemAttrMaxLength) {
    out.trial_system_attrs[RelativeParamsKey(i / kSystemAttrMaxLength)] =
        text.substr(i, kSystemAttrMaxLength);
  }
  return out;
}

namespace {

// The estimators' options from the sampler's (multivariate: the joint kernels' bandwidth).
ParzenOptions ParzenOptionsOf(const TpeOptions& options, bool multivariate) {
  ParzenOptions popt;
  popt.prior_weight = options.prior_weight;
  popt.consider_magic_clip = options.consider_magic_clip;
  popt.min_bandwidth_factor = options.min_bandwidth_factor;
  popt.magic_clip_exponent = options.magic_clip_exponent;
  popt.consider_endpoints = options.consider_endpoints;
  popt.rule = options.bandwidth;
  popt.multivariate = multivariate;
  popt.bandwidth = options.multivariate_bandwidth;
  popt.categorical_prior_weight = options.categorical_prior_weight;
  return popt;
}

struct Observations {
  std::vector<std::vector<double>> below, above;  // [dim][i]
  std::vector<int64_t> below_numbers, above_numbers;
  // Per numerical dimension, the observation indices ascending by value (empty: unknown, the
  // estimator sorts).
  std::vector<std::vector<uint32_t>> below_order, above_order;
};

Observations Collect(TpeSampler::Index& index, const TpeOptions& options,
                     const std::vector<Param>& params, const FrozenTrial& trial);
// The split and the estimators l and g for `params`.
struct Estimators {
  Observations obs;
  ParzenEstimator l, g;
};
Estimators BuildEstimators(TpeSampler::Index& index, const TpeOptions& options,
                           const std::vector<Param>& params, const FrozenTrial& trial);
// Joint TPE proposal for `params` (one of them for independent sampling).
std::map<std::string, double> SampleJoint(TpeSampler::Index& index, const TpeOptions& options,
                                          const std::vector<Param>& params,
                                          const FrozenTrial& trial, Rng& rng);

}  // namespace

double TpeSampler::SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                                     const std::string& name, const Distribution& distribution,
                                     Rng& rng) {
  index_->Sync(history);
  if (index_->n() < options_.n_startup_trials) return SampleUniform(distribution, rng);
  if (options_.Multivariate(history.directions.size()) && options_.warn_independent_sampling) {
    spdlog::warn(
        "Trial {}: parameter '{}' is sampled independently (it is not in the relative "
        "search space)",
        trial.number, name);
  }
  std::vector<Param> params{
      {name, distribution, index_->ParamId(name), index_->DistId(distribution)}};
  return SampleJoint(*index_, options_, params, trial, rng).at(name);
}

TpeSplit TpeSampler::Split(const TrialHistory& history, const FrozenTrial& trial,
                           const std::string& name, const Distribution& distribution) {
  index_->Sync(history);
  std::vector<Param> params{
      {name, distribution, index_->ParamId(name), index_->DistId(distribution)}};
  Observations obs = Collect(*index_, options_, params, trial);
  return {obs.below_numbers, obs.above_numbers};
}

TpeModel TpeSampler::Model(const TrialHistory& history, const FrozenTrial& trial,
                           const SearchSpace& space) {
  index_->Sync(history);
  std::vector<Param> params;
  for (const auto& [name, d] : space) {
    params.push_back({name, d, index_->ParamId(name), index_->DistId(d)});
  }
  Estimators e = BuildEstimators(*index_, options_, params, trial);
  TpeModel model{{std::move(e.obs.below_numbers), std::move(e.obs.above_numbers)},
                 {},
                 std::move(e.l),
                 std::move(e.g)};
  for (const Param& p : params) model.names.push_back(p.name);
  return model;
}

SearchSpace TpeSampler::InferRelativeSearchSpace(const TrialHistory& history) {
  if (!options_.Multivariate(history.directions.size())) return {};
  index_->Sync(history);
  SearchSpace space;
  if (options_.group) {
    for (const SearchSpace& group : GroupSpaces(history)) space.insert(group.begin(), group.end());
    return space;
  }
  // Intersection: parameters with the same distribution in every present trial.
  auto sigs = index_->PresentSignatures();
  if (sigs.empty()) return {};
  std::vector<std::pair<int, int>> common = *sigs[0];
  for (size_t i = 1; i < sigs.size(); ++i) {
    std::vector<std::pair<int, int>> next;
    std::set_intersection(common.begin(), common.end(), sigs[i]->begin(), sigs[i]->end(),
                          std::back_inserter(next));
    common.swap(next);
  }
  for (const auto& [pid, did] : common) {
    if (!IsSingle(index_->Dist(did))) {
      space.emplace(index_->ParamName(pid), index_->Dist(did));
    }
  }
  return space;
}

std::vector<SearchSpace> TpeSampler::GroupSpaces(const TrialHistory& history) {
  index_->Sync(history);
  // Parameters grouped by the set of parameter signatures they occur in (the atoms of Optuna's
  // _GroupDecomposedSearchSpace); a parameter whose distribution varies is left out.
  auto sigs = index_->PresentSignatures();
  std::map<int, std::vector<int>> pattern;  // pid -> signatures containing it
  std::map<int, int> dist_of;               // pid -> did, -1 if inconsistent
  for (size_t s = 0; s < sigs.size(); ++s) {
    for (const auto& [pid, did] : *sigs[s]) {
      pattern[pid].push_back(static_cast<int>(s));
      auto [it, inserted] = dist_of.try_emplace(pid, did);
      if (!inserted && it->second != did) it->second = -1;
    }
  }
  std::map<std::vector<int>, SearchSpace> groups;
  for (const auto& [pid, pat] : pattern) {
    int did = dist_of[pid];
    if (did < 0 || IsSingle(index_->Dist(did))) continue;
    groups[pat].emplace(index_->ParamName(pid), index_->Dist(did));
  }
  std::vector<SearchSpace> out;
  for (auto& [pat, space] : groups) out.push_back(std::move(space));
  std::sort(out.begin(), out.end(), [](const SearchSpace& a, const SearchSpace& b) {
    return a.begin()->first < b.begin()->first;
  });
  return out;
}

std::vector<std::vector<std::string>> TpeSampler::Groups(const TrialHistory& history) {
  std::vector<std::vector<std::string>> out;
  for (const SearchSpace& group : GroupSpaces(history)) {
    out.emplace_back();
    for (const auto& [name, d] : group) out.back().push_back(name);
  }
  return out;
}

std::map<std::string, double> TpeSampler::SampleRelative(const TrialHistory& history,
                                                         const FrozenTrial& trial,
                                                         const SearchSpace& space, Rng& rng) {
  if (space.empty()) return {};
  index_->Sync(history);
  if (index_->n() < options_.n_startup_trials) return {};
  auto make_params = [&](const std::vector<std::string>& names) {
    std::vector<Param> params;
    for (const auto& n : names) {
      auto it = space.find(n);
      if (it == space.end()) continue;
      params.push_back({n, it->second, index_->ParamId(n), index_->DistId(it->second)});
    }
    return params;
  };
  std::map<std::string, double> out;
  if (options_.group) {
    for (const SearchSpace& group : GroupSpaces(history)) {
      std::vector<std::string> names;
      for (const auto& [n, d] : group) names.push_back(n);
      std::vector<Param> params = make_params(names);
      if (params.empty()) continue;
      auto part = SampleJoint(*index_, options_, params, trial, rng);
      out.insert(part.begin(), part.end());
    }
    return out;
  }
  std::vector<std::string> names;
  for (const auto& [n, d] : space) names.push_back(n);
  return SampleJoint(*index_, options_, make_params(names), trial, rng);
}

namespace {

// The split for `params` (docs/tpe.md#gamma-and-the-split): below/above by rank, then trials
// lacking a parameter dropped; chronological within each set; RUNNING (constant liar) above.
Observations Collect(TpeSampler::Index& index, const TpeOptions& options,
                     const std::vector<Param>& params, const FrozenTrial& trial) {
  const size_t dims = params.size();
  std::vector<const std::vector<double>*> cols(dims);
  for (size_t d = 0; d < dims; ++d) cols[d] = &index.Column(params[d].pid, params[d].did);
  const std::vector<char>& below = index.Below();
  const std::vector<char>& present = index.present();
  const auto& running = index.running();

  Observations obs;
  obs.below.resize(dims);
  obs.above.resize(dims);
  std::vector<double> row(dims);
  auto push = [&](bool is_below, int64_t number) {
    auto& sets = is_below ? obs.below : obs.above;
    for (size_t d = 0; d < dims; ++d) sets[d].push_back(row[d]);
    (is_below ? obs.below_numbers : obs.above_numbers).push_back(number);
  };
  auto running_row = [&](const FrozenTrial& t) {
    for (size_t d = 0; d < dims; ++d) {
      row[d] = index.RunningValue(t, params[d].pid, params[d].did);
      if (std::isnan(row[d])) return false;
    }
    return true;
  };
  size_t r = 0;
  bool any_running = false;
  auto take_running_before = [&](int64_t limit) {
    for (; r < running.size() && running[r]->number < limit; ++r) {
      if (running[r]->number != trial.number && running_row(*running[r])) {
        push(false, running[r]->number);
        any_running = true;
      }
    }
  };
  for (size_t number = 0; number < present.size(); ++number) {
    if (options.constant_liar) take_running_before(static_cast<int64_t>(number));
    if (!present[number]) continue;
    bool complete = true;
    for (size_t d = 0; d < dims && complete; ++d) {
      row[d] = (*cols[d])[number];
      complete = !std::isnan(row[d]);
    }
    if (!complete) continue;
    push(below[number] != 0, static_cast<int64_t>(number));
  }
  if (options.constant_liar) take_running_before(std::numeric_limits<int64_t>::max());
  if (any_running) return obs;  // their values are not in the sorted columns
  // Sort orders from the index's sorted columns: O(n) per dimension instead of a sort. Equal
  // values come by trial number, i.e. by ascending observation index, as the estimator wants.
  // slot[number] = index in `below` (>= 0) or -(index in `above`) - 2; -1 = not collected.
  std::vector<int64_t> slot(present.size(), -1);
  for (size_t i = 0; i < obs.below_numbers.size(); ++i) {
    slot[static_cast<size_t>(obs.below_numbers[i])] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < obs.above_numbers.size(); ++i) {
    slot[static_cast<size_t>(obs.above_numbers[i])] = -static_cast<int64_t>(i) - 2;
  }
  obs.below_order.resize(dims);
  obs.above_order.resize(dims);
  for (size_t d = 0; d < dims; ++d) {
    if (std::holds_alternative<CategoricalDistribution>(params[d].distribution)) continue;
    auto& bo = obs.below_order[d];
    auto& ao = obs.above_order[d];
    bo.reserve(obs.below_numbers.size());
    ao.reserve(obs.above_numbers.size());
    for (const auto& [value, number] : index.SortedColumn(params[d].pid, params[d].did)) {
      if (number >= static_cast<int64_t>(slot.size())) continue;
      int64_t s = slot[static_cast<size_t>(number)];
      if (s >= 0) {
        bo.push_back(static_cast<uint32_t>(s));
      } else if (s <= -2) {
        ao.push_back(static_cast<uint32_t>(-s - 2));
      }
    }
  }
  return obs;
}

// oom_feasibility: ln P(fits | x) for each candidate. P comes from the trials that ran and
// those that ran out of memory, as the ratio of two Parzen estimators with product kernels
// (Bayes' rule with the observed class frequencies). The estimators span the sampled
// parameters and, as context fixed at this trial's values, the parameters the trial already
// has: memory depends on model x batch size x length jointly, so when batch size is sampled
// after the model, the model chosen for this trial conditions the estimate. Like c-TPE
// (Watanabe & Hutter 2023) it uses every observation, not the gamma split.
std::vector<double> LogFeasibility(TpeSampler::Index& index, const TpeOptions& options,
                                   const std::vector<Param>& params, const FrozenTrial& trial,
                                   const std::vector<std::vector<double>>& candidates) {
  const size_t n_candidates = candidates.empty() ? 0 : candidates[0].size();
  std::vector<double> log_fits(n_candidates, 0.0);
  if (!options.oom_feasibility || !index.any_oom() || n_candidates == 0) return log_fits;
  std::vector<Param> dims_params = params;
  std::vector<std::vector<double>> points = candidates;
  for (const auto& [name, internal] : trial.params) {
    bool sampled = false;
    for (const Param& p : params) sampled = sampled || p.name == name;
    if (sampled) continue;
    const Distribution& dist = trial.distributions.at(name);
    if (IsSingle(dist)) continue;
    dims_params.push_back({name, dist, index.ParamId(name), index.DistId(dist)});
    points.emplace_back(n_candidates, ToParzenSpace(dist, internal));
  }
  const size_t dims = dims_params.size();
  std::vector<const std::vector<double>*> cols(dims);
  for (size_t d = 0; d < dims; ++d) cols[d] = &index.Column(dims_params[d].pid, dims_params[d].did);
  std::vector<std::vector<double>> ran(dims), oom(dims);
  const std::vector<char>& present = index.present();
  for (size_t number = 0; number < present.size(); ++number) {
    if (!present[number]) continue;
    bool complete = true;
    for (size_t d = 0; d < dims && complete; ++d) complete = !std::isnan((*cols[d])[number]);
    if (!complete) continue;
    auto& set = index.oom(number) ? oom : ran;
    for (size_t d = 0; d < dims; ++d) set[d].push_back((*cols[d])[number]);
  }
  if (ran[0].empty() || oom[0].empty()) return log_fits;
  std::vector<ParzenDimension> pdims(dims);
  for (size_t d = 0; d < dims; ++d) pdims[d] = MakeParzenDimension(dims_params[d].distribution);
  ParzenOptions popt = ParzenOptionsOf(options, dims > 1);
  popt.bandwidth = MultivariateBandwidth::kPerDimension;  // per-dimension bandwidths
  const double n_ran = static_cast<double>(ran[0].size());
  const double n_oom = static_cast<double>(oom[0].size());
  auto lr =
      ParzenEstimator(pdims, ran, std::vector<double>(ran[0].size(), 1.0), popt).LogPdf(points);
  auto lo =
      ParzenEstimator(pdims, oom, std::vector<double>(oom[0].size(), 1.0), popt).LogPdf(points);
  for (size_t j = 0; j < n_candidates; ++j) {
    // ln sigmoid(log-odds), computed stably.
    double z = std::log(n_ran / n_oom) + lr[j] - lo[j];
    log_fits[j] = z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z));
  }
  return log_fits;
}

Estimators BuildEstimators(TpeSampler::Index& index, const TpeOptions& options,
                           const std::vector<Param>& params, const FrozenTrial& trial) {
  const size_t dims = params.size();
  std::vector<ParzenDimension> pdims(dims);
  for (size_t d = 0; d < dims; ++d) pdims[d] = MakeParzenDimension(params[d].distribution);
  Observations obs = Collect(index, options, params, trial);
  const auto& obs_below = obs.below;
  const auto& obs_above = obs.above;

  const ParzenOptions popt =
      ParzenOptionsOf(options, options.Multivariate(index.multi_objective() ? 2 : 1));
  auto weights = [&](const std::vector<std::vector<double>>& set) -> const std::vector<double>& {
    return index.Weights(static_cast<int>(set[0].size()));
  };
  // The below set's weights: several objectives, hypervolume contributions (Optuna's prior
  // weight); expected improvement, with a prior that weighs as their mean; else the ramp.
  ParzenOptions lopt = popt;
  std::vector<double> below_weights;
  if (index.multi_objective()) {
    for (int64_t number : obs.below_numbers) below_weights.push_back(index.BelowWeight(number));
  } else if (options.weights == WeightRule::kExpectedImprovement && !obs.below_numbers.empty()) {
    below_weights = index.EiWeights(obs.below_numbers);
  }
  if (!below_weights.empty() && !index.multi_objective()) {
    double sum = 0.0;
    for (double w : below_weights) sum += w;
    lopt.prior_weight = options.prior_weight * sum / static_cast<double>(below_weights.size());
  }
  ParzenEstimator l(pdims, obs_below, below_weights.empty() ? weights(obs_below) : below_weights,
                    lopt, obs.below_order.empty() ? nullptr : &obs.below_order);
  ParzenEstimator g(pdims, obs_above, weights(obs_above), popt,
                    obs.above_order.empty() ? nullptr : &obs.above_order);
  return {std::move(obs), std::move(l), std::move(g)};
}

std::map<std::string, double> SampleJoint(TpeSampler::Index& index, const TpeOptions& options,
                                          const std::vector<Param>& params,
                                          const FrozenTrial& trial, Rng& rng) {
  const size_t dims = params.size();
  Estimators e = BuildEstimators(index, options, params, trial);
  const ParzenEstimator& l = e.l;
  const ParzenEstimator& g = e.g;
  auto candidates = l.Sample(rng, options.n_ei_candidates);
  std::vector<double> ll = l.LogPdf(candidates);
  std::vector<double> lg = g.LogPdf(candidates);
  const std::vector<double> log_fits = LogFeasibility(index, options, params, trial, candidates);
  size_t best = 0;
  double best_score = -kInf;
  for (size_t j = 0; j < ll.size(); ++j) {
    double score = ll[j] - lg[j] + log_fits[j];
    if (score > best_score) {
      best_score = score;
      best = j;
    }
  }
  std::map<std::string, double> out;
  for (size_t d = 0; d < dims; ++d) {
    out[params[d].name] = FromParzenSpace(params[d].distribution, candidates[d][best]);
  }
  return out;
}

}  // namespace

}  // namespace tune

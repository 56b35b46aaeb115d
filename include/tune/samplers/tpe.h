// TpeSampler: the Tree-structured Parzen Estimator, Optuna's TPESampler (docs/tpe.md) with
// typed, incremental history so that a suggest costs arithmetic over the observations, not a
// re-read of the study.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/samplers/sampler.h"

namespace tune {

// How multivariate TPE sets the bandwidth of its numerical kernels (docs/tpe.md): the univariate
// rule (`bandwidth`) per dimension (Optuna 5.0) or Optuna 3.1-4.9's 0.2 m^(-1/(D+4)) (H - L)
// ("scott" in Optuna's code).
enum class MultivariateBandwidth { kPerDimension, kScott };

// The univariate bandwidth rule of a numerical kernel (docs/tpe.md#numerical-kernels-and-
// bandwidth): the larger gap to a sorted neighbour (Optuna's, the default); the same with the
// prior's centre among the neighbours and the domain ends always counted (Hyperopt's); or Scott's
// rule of thumb 1.059 min(IQR/1.34, std) n^(-1/5) over the observations and the prior's centre.
enum class BandwidthRule { kOptuna, kHyperopt, kScott };

// The weights of the observations of an estimator (docs/tpe.md#weights): Optuna's (the newest
// 25 get 1, older ones ramp up from 1/m), uniform, or, for the below set only, expected
// improvement (the gap to the best trial above; uniform above).
enum class WeightRule { kOptuna, kUniform, kExpectedImprovement };

// A named set of TpeOptions (docs/tpe.md#presets): Optuna 5.0's TPESampler() (the defaults
// below) or Optuna 4.9's, so that a study begun under 4.9's rules continues under them.
enum class TpePreset { kOptuna50, kOptuna49 };
const char* TpePresetName(TpePreset preset);  // "optuna-5.0", "optuna-4.9"

struct TpeOptions {
  // Optuna's names and Optuna 5.0's defaults (TpePresetOptions(kOptuna49) for 4.9's).
  TpePreset preset = TpePreset::kOptuna50;  // the preset these options started from (logs)
  int n_startup_trials = 10;
  int n_ei_candidates = 24;
  // gamma(n) = min(ceil(gamma_ratio * n), gamma_max) ("default": 0.1, 25), or with
  // gamma_hyperopt: min(ceil(gamma_sqrt_beta * sqrt(n)), gamma_max) ("hyperopt": 0.25).
  double gamma_ratio = 0.1;
  int gamma_max = 25;
  bool gamma_hyperopt = false;
  double gamma_sqrt_beta = 0.25;
  // Several objectives: gamma without gamma_max (Optuna 5.0's default_gamma_multiobjective,
  // ceil(0.1 n)); false: with it (4.9, or a "gamma" the config names).
  bool gamma_uncapped_multi_objective = true;
  WeightRule weights = WeightRule::kOptuna;
  // Several objectives: the below set's weights are each trial's hypervolume contribution
  // (Optuna 4.9); false: uniform (5.0).
  bool hypervolume_weights = false;
  double prior_weight = 1.0;
  // sigma_min = (H - L) / min(1 / min_bandwidth_factor, (m + 2)^magic_clip_exponent) with the
  // magic clip (Optuna: 0.01 and 1, i.e. (H - L) / min(100, m + 2)), 1e-12 without it.
  bool consider_magic_clip = true;
  double min_bandwidth_factor = 0.01;
  double magic_clip_exponent = 1.0;
  bool consider_endpoints = false;
  BandwidthRule bandwidth = BandwidthRule::kOptuna;
  // The categorical kernel of an observation: unset, Optuna's (prior_weight / (m + 1) spread
  // over the choices); b in [0, 1]: 1 - b on the observed choice, b / (K - 1) on each other.
  std::optional<double> categorical_prior_weight;
  // Unset: "auto", Optuna 5.0's multivariate=None (joint for one objective, independent for
  // several; joint whenever `group` is on).
  std::optional<bool> multivariate;
  MultivariateBandwidth multivariate_bandwidth = MultivariateBandwidth::kPerDimension;
  bool group = false;         // requires multivariate (true or auto)
  bool constant_liar = true;  // RUNNING trials count as "above"
  // Rank by the trials' constraints (trial_attrs.h: "constraints:<name>" and the old list):
  // feasible trials first, then the least violating. A trial without constraints is feasible
  // (Optuna 5.0), or with constraints_missing_infeasible, infinitely violating (4.9's
  // constraints_func, under which every finished trial has them).
  bool constraints = true;
  bool constraints_missing_infeasible = false;
  bool warn_independent_sampling = false;
  // tune's extension: scale each candidate's score by its estimated probability of fitting in
  // memory, learnt from trials PRUNED with the user attribute oom=true and conditioned on the
  // parameters the trial already has. No effect on studies without OOM trials.
  bool oom_feasibility = true;

  // Whether a study with `n_objectives` is sampled jointly (multivariate, resolved).
  bool Multivariate(size_t n_objectives) const {
    return multivariate.value_or(group || n_objectives <= 1);
  }
};

// The options of a preset (everything else at its default).
TpeOptions TpePresetOptions(TpePreset preset);

// gamma(n) and weights(m) as configured (exposed for tests).
int TpeGamma(const TpeOptions& options, int n, bool multi_objective = false);
std::vector<double> TpeWeights(const TpeOptions& options, int m);

// Trial numbers in the "below" and "above" sets for one parameter (for tests and diagnostics).
struct TpeSplit {
  std::vector<int64_t> below;
  std::vector<int64_t> above;
};

// What TPE builds to sample a set of parameters: the split and the estimators l and g. Defined
// in the private src/samplers/tpe_model.h, for tests and diagnostics (the differential test
// against Optuna, tests/differential/).
struct TpeModel;

// Per suggest (docs/tpe.md#overview): before n_startup_trials finished trials, sampling is
// uniform (RandomSampler). Then trials COMPLETE or PRUNED (plus RUNNING ones with constant_liar)
// are ranked (docs/tpe.md#ranking): COMPLETE by value, then PRUNED by (deepest last step, value
// at it), then PRUNED without reports, with `constraints` those violating theirs after the
// feasible ones; RUNNING always last. The first gamma(n) are "below", the rest "above"; then
// trials lacking the parameter are dropped. l and g are Parzen estimators (parzen_estimator.h) of
// the two sets; n_ei_candidates points drawn from l are scored by ln l - ln g and the best wins.
// Each finished trial is ingested once (finished trials are immutable): its ranking key goes
// into a sorted index and its params into per-parameter columns already in the transformed
// space. Calls are serialised by the study (see sampler.h).
class TpeSampler : public Sampler {
 public:
  explicit TpeSampler(TpeOptions options = {});
  ~TpeSampler() override;
  std::string name() const override { return "tpe"; }
  const TpeOptions& options() const { return options_; }

  SearchSpace InferRelativeSearchSpace(const TrialHistory& history) override;
  std::map<std::string, double> SampleRelative(const TrialHistory& history,
                                               const FrozenTrial& trial, const SearchSpace& space,
                                               Rng& rng) override;
  double SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                           const std::string& name, const Distribution& distribution,
                           Rng& rng) override;
  // With constant_liar: the joint sample as Optuna 5.0 shares it, JSON of the external values in
  // "tpe:relative_params:0", ":1", ... (2045 characters each); RUNNING trials' shared samples
  // count as their values for the constant liar (docs/tpe.md#ranking).
  SamplerRecords AfterSampleRelative(const SearchSpace& space,
                                     const std::map<std::string, double>& params) const override;

  // The split SampleIndependent would use for `name` (chronological numbers).
  TpeSplit Split(const TrialHistory& history, const FrozenTrial& trial, const std::string& name,
                 const Distribution& distribution);
  // The model SampleRelative (all of `space`) or SampleIndependent (`space` of one parameter)
  // builds, whatever the startup phase. REQUIRES: space is not empty.
  TpeModel Model(const TrialHistory& history, const FrozenTrial& trial, const SearchSpace& space);
  // The parameter groups of group=true (names), for tests.
  std::vector<std::vector<std::string>> Groups(const TrialHistory& history);

  class Index;  // the incremental, typed history (implementation detail)

 private:
  // The groups of group=true with their distributions, ordered by first name.
  std::vector<SearchSpace> GroupSpaces(const TrialHistory& history);

  TpeOptions options_;
  std::unique_ptr<Index> index_;
};

}  // namespace tune

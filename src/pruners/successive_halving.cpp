// Asynchronous successive halving: Optuna's pruners/_successive_halving.py (3.1). See
// successive_halving.h for the rule.
#include "tune/pruners/successive_halving.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "pruners/common.h"
#include "util/nonfinite.h"

namespace tune {

std::string CompletedRungKey(int64_t rung) { return "completed_rung_" + std::to_string(rung); }

namespace {

// Optuna's _estimate_min_resource: max(max last step of COMPLETE trials // 100, 1).
std::optional<int64_t> EstimateMinResource(const TrialHistory& history) {
  std::optional<int64_t> last_step;
  for (const auto& t : history.trials) {
    if (t->state != TrialState::kComplete) continue;
    std::optional<int64_t> s = t->last_step();
    if (s && (!last_step || *s > *last_step)) last_step = s;
  }
  if (!last_step) return std::nullopt;
  return std::max<int64_t>(*last_step / 100, 1);
}

// min_resource * reduction_factor^exponent, saturating at INT64_MAX (Python's ints do not
// overflow; no step reaches the saturated value, so decisions are the same).
int64_t PromotionStep(int64_t min_resource, int64_t reduction_factor, int64_t exponent) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t step = min_resource;
  for (int64_t i = 0; i < exponent; ++i) {
    if (step > kMax / reduction_factor) return kMax;
    step *= reduction_factor;
  }
  return step;
}

// A rung attr's value, if it holds a number (values written by tune and Optuna always do).
std::optional<double> RungValue(const Json& system_attrs, const std::string& key) {
  if (!system_attrs.is_object()) return std::nullopt;
  auto it = system_attrs.find(key);
  if (it == system_attrs.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Optuna's _is_trial_promotable_to_next_rung.
bool IsPromotable(double value, std::vector<double> competing, int64_t reduction_factor,
                  bool maximize) {
  int64_t promotable_idx = static_cast<int64_t>(competing.size()) / reduction_factor - 1;
  // Optuna cannot suspend and resume trials, so the first eta - 1 arrivals at a rung are
  // promoted only if they are the best so far.
  if (promotable_idx == -1) promotable_idx = 0;
  std::sort(competing.begin(), competing.end(), NanLastLess);  // numpy's sort: NaN last
  if (maximize) return value >= competing[competing.size() - 1 - promotable_idx];
  return value <= competing[promotable_idx];
}

}  // namespace

SuccessiveHalvingPruner::SuccessiveHalvingPruner(const SuccessiveHalvingOptions& options)
    : options_(options), min_resource_(options.min_resource) {
  assert(!options.min_resource || *options.min_resource >= 1);
  assert(options.reduction_factor >= 2 && options.min_early_stopping_rate >= 0);
  assert(options.bootstrap_count >= 0);
  assert(options.bootstrap_count == 0 || options.min_resource);
}

PruneDecision SuccessiveHalvingPruner::Prune(const TrialHistory& history,
                                             const FrozenTrial& trial) {
  return Prune(history, trial, nullptr);
}

PruneDecision SuccessiveHalvingPruner::Prune(
    const TrialHistory& history, const FrozenTrial& trial,
    const std::function<bool(const FrozenTrial&)>& competes) {
  PruneDecision decision;
  std::optional<StudyDirection> direction = internal::SingleDirection(history);
  std::optional<int64_t> step = trial.last_step();
  if (!direction || !step) return decision;
  const bool maximize = *direction == StudyDirection::kMaximize;

  int64_t rung = 0;  // Optuna's _get_current_rung
  while (trial.system_attrs.is_object() && trial.system_attrs.contains(CompletedRungKey(rung))) {
    ++rung;
  }
  const double value = trial.intermediate_values.rbegin()->second;

  while (true) {
    if (!min_resource_) {
      min_resource_ = EstimateMinResource(history);
      if (!min_resource_) return decision;
    }
    int64_t promotion_step = PromotionStep(*min_resource_, options_.reduction_factor,
                                           options_.min_early_stopping_rate + rung);
    if (*step < promotion_step) return decision;
    if (std::isnan(value)) {
      decision.prune = true;
      return decision;
    }

    const std::string key = CompletedRungKey(rung);
    decision.system_attrs[key] = value;
    // Optuna's _get_competing_values. The trial's own stored copy is skipped: `trial` is the
    // current one, and `value` stands for it.
    std::vector<double> competing;
    for (const auto& t : history.trials) {
      if (t->number == trial.number) continue;
      if (competes && !competes(*t)) continue;
      if (std::optional<double> v = RungValue(t->system_attrs, key)) competing.push_back(*v);
    }
    competing.push_back(value);

    // `competing` includes this trial, hence <=.
    if (static_cast<int64_t>(competing.size()) <= options_.bootstrap_count ||
        !IsPromotable(value, std::move(competing), options_.reduction_factor, maximize)) {
      decision.prune = true;
      return decision;
    }
    ++rung;
  }
}

}  // namespace tune

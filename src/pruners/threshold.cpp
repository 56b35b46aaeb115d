// ThresholdPruner: Optuna's pruners/_threshold.py (3.1). See threshold.h for the rule.
#include "tune/pruners/threshold.h"

#include <cassert>
#include <cmath>

#include "pruners/common.h"

namespace tune {

ThresholdPruner::ThresholdPruner(const ThresholdOptions& options) : options_(options) {
  assert(options.lower || options.upper);
  assert(!options.lower || !options.upper || *options.lower <= *options.upper);
  assert(options.n_warmup_steps >= 0 && options.interval_steps >= 1);
}

PruneDecision ThresholdPruner::Prune(const TrialHistory& /*history*/, const FrozenTrial& trial) {
  std::optional<int64_t> step = trial.last_step();
  if (!step || *step < options_.n_warmup_steps) return {};
  if (!internal::IsFirstInIntervalStep(*step, trial.intermediate_values, options_.n_warmup_steps,
                                       options_.interval_steps)) {
    return {};
  }
  double latest = trial.intermediate_values.rbegin()->second;
  bool prune = std::isnan(latest) || (options_.lower && latest < *options_.lower) ||
               (options_.upper && latest > *options_.upper);
  return {.prune = prune};
}

}  // namespace tune

// ThresholdPruner: prunes a trial whose latest intermediate value leaves [lower, upper] or is NaN.
//
// Mirrors Optuna's ThresholdPruner.prune (optuna/pruners/_threshold.py, 3.1; unchanged in 4.9):
// no pruning before n_warmup_steps, nor unless the latest step is the first report at or after an
// interval boundary (warmup + k * interval_steps, as the percentile pruner); then prune iff the
// latest value is NaN, < lower or > upper. It needs no direction, so it also works in
// multi-objective studies.
//
// Thread safety: no mutable state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tune/pruners/pruner.h"

namespace tune {

struct ThresholdOptions {
  // Prune below this value; unset: no lower bound. Optuna: lower.
  std::optional<double> lower;
  // Prune above this value; unset: no upper bound. Optuna: upper.
  std::optional<double> upper;
  // No pruning before this step. Optuna: n_warmup_steps.
  int64_t n_warmup_steps = 0;
  // After the warmup, check only at the first report of each interval of this many steps.
  // Optuna: interval_steps.
  int64_t interval_steps = 1;
};

class ThresholdPruner : public Pruner {
 public:
  // REQUIRES: lower or upper set, lower <= upper, n_warmup_steps >= 0, interval_steps >= 1.
  explicit ThresholdPruner(const ThresholdOptions& options);

  std::string name() const override { return "threshold"; }
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) override;
  const ThresholdOptions& options() const { return options_; }

 private:
  ThresholdOptions options_;
};

}  // namespace tune

// PercentilePruner and MedianPruner: prune a trial whose best intermediate value so far is worse
// than a percentile of the values the COMPLETE trials reported at the same step, as Optuna's
// (optuna/pruners/_percentile.py, 3.1; unchanged in 4.9).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/pruners/pruner.h"

namespace tune {

struct PercentileOptions {
  // Percentile in [0, 100] of the completed trials' values at a step; a trial worse than it is
  // pruned. Optuna: percentile (required for "percentile"; "median" fixes it at 50).
  double percentile = 50.0;
  // No pruning until this many trials are COMPLETE. Optuna: n_startup_trials.
  int64_t n_startup_trials = 5;
  // No pruning before this step. Optuna: n_warmup_steps.
  int64_t n_warmup_steps = 0;
  // After the warmup, check only at the first report of each interval of this many steps.
  // Optuna: interval_steps.
  int64_t interval_steps = 1;
  // No pruning unless this many COMPLETE trials reported at the step. Optuna: n_min_trials.
  int64_t n_min_trials = 1;
};

// Thread safety: no mutable state; the study serialises Prune calls anyway.
class PercentilePruner : public Pruner {
 public:
  // REQUIRES: 0 <= percentile <= 100, n_startup_trials >= 0, n_warmup_steps >= 0,
  // interval_steps >= 1, n_min_trials >= 1 (config.cpp checks these for configs).
  explicit PercentilePruner(const PercentileOptions& options);

  std::string name() const override { return "percentile"; }
  // Optuna's PercentilePruner.prune. At the trial's latest step s:
  //   1. no pruning for a trial without reports or a study without a single direction;
  //   2. no pruning with no COMPLETE trial, or fewer than n_startup_trials of them;
  //   3. no pruning while s < n_warmup_steps, nor unless s is the first report at or after an
  //      interval boundary (warmup + k * interval_steps);
  //   4. best = nanmin (minimize) / nanmax (maximize) of all this trial's values; all NaN: prune;
  //   5. p = NanPercentile of the COMPLETE trials' values at exactly step s, at percentile
  //      (minimize) or 100 - percentile (maximize); fewer than n_min_trials values, or p NaN:
  //      no pruning;
  //   6. prune iff best is worse than p.
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) override;
  const PercentileOptions& options() const { return options_; }

 private:
  PercentileOptions options_;
};

// Optuna's MedianPruner: the percentile pruner at 50 (options.percentile is ignored).
class MedianPruner : public PercentilePruner {
 public:
  explicit MedianPruner(const PercentileOptions& options = {});
  std::string name() const override { return "median"; }
};

// numpy.nanpercentile(values, q) with the default "linear" method, computed as numpy 1.22+ does
// (virtual index (n - 1) * q / 100, numpy's _lerp), so that results (including NaN from
// infinite values) match. NaN values are ignored; NaN if none remain. REQUIRES: 0 <= q <= 100.
double NanPercentile(std::vector<double> values, double q);

}  // namespace tune

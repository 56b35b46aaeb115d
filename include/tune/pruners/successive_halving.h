// SuccessiveHalvingPruner: asynchronous successive halving (ASHA), as Optuna's
// SuccessiveHalvingPruner (optuna/pruners/_successive_halving.py, 3.1; unchanged in 4.9).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tune/pruners/pruner.h"

namespace tune {

struct SuccessiveHalvingOptions {
  // Steps to the first rung (Optuna's r); nullopt = "auto". Optuna: min_resource. "auto" is
  // fixed at the first Prune call after a COMPLETE trial with reports exists: max(max last step
  // of COMPLETE trials // 100, 1); until then no pruning.
  std::optional<int64_t> min_resource;
  // eta: each rung keeps the top 1/reduction_factor. Optuna: reduction_factor.
  int64_t reduction_factor = 4;
  // s: the first rung is at min_resource * eta^s. Optuna: min_early_stopping_rate.
  int64_t min_early_stopping_rate = 0;
  // A trial is pruned at a rung until more than this many trials reached it.
  // Optuna: bootstrap_count.
  int64_t bootstrap_count = 0;
};

// "completed_rung_<rung>", the system attr recording a trial's value at a rung.
std::string CompletedRungKey(int64_t rung);

// Thread safety: Prune may fix min_resource; the study serialises Prune calls.
class SuccessiveHalvingPruner : public Pruner {
 public:
  // REQUIRES: min_resource unset or >= 1, reduction_factor >= 2, min_early_stopping_rate >= 0,
  // bootstrap_count >= 0, bootstrap_count == 0 if min_resource is unset.
  explicit SuccessiveHalvingPruner(const SuccessiveHalvingOptions& options);

  std::string name() const override { return "successive_halving"; }
  // A trial reaching a rung's promotion step is kept only if its latest value is in the top
  // 1/reduction_factor of all values recorded at that rung so far. As Optuna's prune: a trial
  // without reports, or a study without a single direction, is kept. At the trial's latest step
  // s with latest value v, rung = the number of system attrs "completed_rung_<k>" the trial
  // already has; repeat:
  //   promotion_step = min_resource * reduction_factor^(min_early_stopping_rate + rung);
  //   s < promotion_step: keep. v is NaN: prune. Record "completed_rung_<rung>" = v;
  //   competing = that attr of every other trial of the history (any state) plus v;
  //   len(competing) <= bootstrap_count: prune;
  //   idx = len(competing) // reduction_factor - 1, or 0 when that is -1 (the first
  //   reduction_factor - 1 arrivals are promoted only if best so far); sort ascending (NaN last);
  //   promote iff v <= competing[idx] (minimize) / v >= competing[-(idx + 1)] (maximize), else
  //   prune. On promotion rung += 1 and check again (a step jump may pass several rungs).
  // The recorded attrs come back in PruneDecision::system_attrs; the study stores them.
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) override;

  // Prune, with competitors taken only from the history's trials for which `competes` is true
  // (Hyperband: the trial's bracket). An empty function means all of them.
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial,
                      const std::function<bool(const FrozenTrial&)>& competes);

  // min_resource as fixed so far (nullopt: still "auto" and not yet estimated).
  std::optional<int64_t> min_resource() const { return min_resource_; }
  const SuccessiveHalvingOptions& options() const { return options_; }

 private:
  SuccessiveHalvingOptions options_;
  std::optional<int64_t> min_resource_;
};

}  // namespace tune

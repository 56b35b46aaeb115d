// PatientPruner: tolerates a trial whose intermediate values stopped improving for `patience`
// reports, then prunes it (or lets a wrapped pruner decide), as Optuna's PatientPruner
// (optuna/pruners/_patient.py, 3.1; unchanged in 4.9).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tune/pruners/pruner.h"

namespace tune {

struct PatientOptions {
  // Reports in a row without improvement that are tolerated. Optuna: patience.
  int64_t patience = 0;
  // How much worse than the best before the window the window may be. Optuna: min_delta.
  double min_delta = 0.0;
};

// The wrapped pruner does not filter the sampler's history: as in Optuna (_filter_study checks the
// study's own pruner only), a wrapped Hyperband pruner's brackets do not reach the sampler.
// Thread safety: as the wrapped pruner; the study serialises Prune calls.
class PatientPruner : public Pruner {
 public:
  // `wrapped` may be null (prune whenever the trial stopped improving).
  // REQUIRES: patience >= 0, min_delta >= 0.
  PatientPruner(std::unique_ptr<Pruner> wrapped, const PatientOptions& options);

  std::string name() const override { return "patient"; }
  // Optuna's PatientPruner.prune. Keeps a trial with at most patience + 1 reported steps, or in
  // a study without a single direction. Otherwise, steps sorted: "before" = all but the last
  // patience + 1 values, "after" = the last patience + 1 (the window). Minimize: the trial
  // stalled iff nanmin(before) + min_delta < nanmin(after), i.e. the window's best is worse than
  // the best before it by more than min_delta (equal is not stalled); maximize: nanmax(before) -
  // min_delta > nanmax(after); an all-NaN side is not stalled. Stalled: the wrapped pruner
  // decides, or, without one, prune. Otherwise keep.
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) override;

  // The wrapped pruner, or null.
  const Pruner* wrapped() const { return wrapped_.get(); }
  const PatientOptions& options() const { return options_; }

 private:
  std::unique_ptr<Pruner> wrapped_;
  PatientOptions options_;
};

}  // namespace tune

// Pruner: decides from reported intermediate values whether a running trial should stop.
// Optuna's BasePruner.prune, given data (the history and the trial), never the study.
#pragma once

#include <memory>
#include <string>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

class Pruner {
 public:
  virtual ~Pruner() = default;
  // The name used in configs ("nop", "median", ...).
  virtual std::string name() const = 0;
  // Judge whether `trial` (RUNNING, with its reports so far) should be pruned.
  virtual bool Prune(const TrialHistory& history, const FrozenTrial& trial) = 0;
  // The history the sampler sees when sampling `trial` (Optuna's _filter_study): all of it,
  // except for Hyperband, which gives each bracket its own history.
  virtual std::shared_ptr<const TrialHistory> SamplerHistory(
      std::shared_ptr<const TrialHistory> history, const FrozenTrial& /*trial*/) {
    return history;
  }
};

// Never prunes (Optuna's NopPruner).
class NopPruner : public Pruner {
 public:
  std::string name() const override { return "nop"; }
  bool Prune(const TrialHistory& /*history*/, const FrozenTrial& /*trial*/) override {
    return false;
  }
};

}  // namespace tune

// Pruner: decides from reported intermediate values whether a running trial should stop.
// Optuna's BasePruner.prune, given data (the history and the trial), never the study.
#pragma once

#include <memory>
#include <string>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// What a pruner decided, plus system attributes it wants recorded on the trial (the
// successive-halving pruner records "completed_rung_<k>" as Optuna does). The study stores them.
struct PruneDecision {
  bool prune = false;
  Json system_attrs = Json::object();
};

class Pruner {
 public:
  virtual ~Pruner() = default;
  // The name used in configs ("nop", "median", ...).
  virtual std::string name() const = 0;
  // Judge whether `trial` (RUNNING, with its reports so far) should be pruned.
  // `history` is the study as it is now (it includes `trial` as RUNNING, possibly older than
  // `trial`, which is current).
  virtual PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) = 0;
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
  PruneDecision Prune(const TrialHistory& /*history*/, const FrozenTrial& /*trial*/) override {
    return {};
  }
};

}  // namespace tune

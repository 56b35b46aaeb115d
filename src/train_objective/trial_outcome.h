// How a train trial's epochs end it: the epoch callback (reports, pruning, early stopping, the
// best epoch), user attribute "train", and the trial's outcome with its costs and constraints.
#pragma once

#include <optional>
#include <string>

#include "train/trainer.h"
#include "train_objective/train_objective.h"
#include "tune/status.h"
#include "tune/trial.h"
#include "tune/trial_attrs.h"

namespace tune {

// The epoch callback's state: the best value so far, early stopping and pruning.
class EpochTracker {
 public:
  // `hp`: the job's (a retry changes the batch, not the epochs); it must outlive the tracker.
  // `positive`: the positive class's index (metric "f1").
  EpochTracker(TrialHandle& trial, TrainMetric metric, const TrainHyperparams& hp,
               int64_t positive = 1)
      : trial_(trial), metric_(metric), hp_(hp), positive_(positive) {}

  // Reports the epoch's metric, asks the pruner, and decides: stop (pruned, or `patience`
  // epochs without an improvement larger than `min_delta`, or an infinite metric: `nonfinite`),
  // keep (the best so far) or continue. InvalidArgument for a metric that is undefined on the
  // validation set (NaN: a label without examples, constant targets).
  Result<EpochDecision> OnEpoch(const EpochMetrics& m);
  // Forgets the run (a retry starts over).
  void Reset();
  int64_t positive() const { return positive_; }
  bool by_steps() const { return hp_.eval_strategy == EvalStrategy::kSteps; }

  std::optional<double> best;
  int64_t best_epoch = -1;
  int64_t best_step = -1;  // the best evaluation's optimizer step
  bool pruned = false;
  bool stopped_early = false;
  // Set when an evaluation's metric was infinite (the run stopped there): where, and the message.
  std::optional<NonFiniteAttr> nonfinite;
  std::string nonfinite_message;

 private:
  bool Improves(double value) const;

  TrialHandle& trial_;
  const TrainMetric metric_;
  const TrainHyperparams& hp_;
  const int64_t positive_;
  int64_t since_best_ = 0;
};

// The first line of `s`, at most 300 characters.
std::string FirstLine(const std::string& s);

// A failed trial: fail_reason recorded, FAIL with its first line.
Result<TrialOutcome> FailTrial(TrialHandle& trial, const std::string& reason);

// User attribute "train": how the run ended, its epochs and the best one.
Status RecordTrainSummary(TrialHandle& trial, const TrainObjectiveOptions& options,
                          const TrainResult& result, const EpochTracker& tracker);

// The outcome of a run that completed or stopped: PRUNED when the pruner stopped it, FAIL
// without an evaluated epoch, else COMPLETE with the best epoch's metric and the options' costs
// (and each constraint's value, cost - bound, as the trial system attribute
// "constraints:<cost>").
Result<TrialOutcome> FinishedRunOutcome(TrialHandle& trial, const TrainObjectiveOptions& options,
                                        const TrainResult& result, const EpochTracker& tracker);

}  // namespace tune

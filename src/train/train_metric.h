// What a train trial returns: the metric it reports after every epoch and is judged by, and the
// costs a multi-objective study adds beside it ("objectives": [metric, costs...]). Plain C++.
#pragma once

#include <string>

#include "train/trainer.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

enum class TrainMetric { kMacroF1, kAccuracy, kLoss };

const char* TrainMetricName(TrainMetric metric);
// "macro_f1" (also "f1"), "accuracy", "loss"; InvalidArgument listing them otherwise.
Result<TrainMetric> ParseTrainMetric(const std::string& name);
// maximize for macro_f1 and accuracy, minimize for loss.
StudyDirection TrainMetricDirection(TrainMetric metric);
// The metric's value in an epoch's metrics.
double TrainMetricValue(TrainMetric metric, const EpochMetrics& m);

// A cost the train objective can return beside its metric ("objectives"), each minimised:
// the trial's peak of allocated memory in bytes at the configuration as run (after the guard's
// levers and retries), its training time in seconds (the epochs run) and the model's parameters.
enum class TrainCost { kPeakMemory, kTrainSeconds, kNumParameters };
const char* TrainCostName(TrainCost cost);
// "peak_memory", "train_seconds", "num_parameters"; InvalidArgument listing them otherwise.
Result<TrainCost> ParseTrainCost(const std::string& name);
// The cost of a run as it ran (after the guard's levers and out-of-memory retries).
double TrainCostValue(TrainCost cost, const TrainResult& result);

}  // namespace tune

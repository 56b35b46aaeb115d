// What a train trial returns: the metric it reports after every epoch and is judged by, and the
// costs a multi-objective study adds beside it ("objectives": [metric, costs...]). Plain C++.
#pragma once

#include <string>

#include "train/trainer.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// The metrics a train trial can be judged by (scikit-learn's definitions, metrics.h): macro-,
// micro- and weighted-averaged F1, the positive class's F1 (two labels), accuracy (multi-label:
// subset accuracy), balanced accuracy (single-label), the Matthews correlation, the area under the
// ROC curve, the validation loss; for regression the mean squared error, its root, the mean
// absolute error, R², Pearson's and Spearman's correlations.
enum class TrainMetric {
  kMacroF1,
  kAccuracy,
  kLoss,
  kMicroF1,
  kWeightedF1,
  kF1,
  kMcc,
  kAuroc,
  kMse,
  kRmse,
  kMae,
  kR2,
  kPearson,
  kSpearman,
  kBalancedAccuracy
};

const char* TrainMetricName(TrainMetric metric);
// "macro_f1", "micro_f1", "weighted_f1", "f1", "accuracy", "balanced_accuracy", "mcc", "auroc",
// "mse", "rmse", "mae", "r2", "pearson", "spearman", "loss"; InvalidArgument naming the closest
// otherwise.
Result<TrainMetric> ParseTrainMetric(const std::string& name);
// minimize for loss, mse, rmse and mae, maximize for the others.
StudyDirection TrainMetricDirection(TrainMetric metric);
// The metrics a problem type has (single-label: the classification metrics; multi-label: those
// but f1 and mcc; regression: loss, mse, rmse, mae, r2, pearson, spearman) and its default
// (macro_f1 for classification, mse for regression).
std::vector<TrainMetric> MetricsOf(ProblemType type);
TrainMetric DefaultMetric(ProblemType type);
// InvalidArgument when `metric` does not apply to `type`, listing those that do.
Status CheckMetricFor(TrainMetric metric, ProblemType type);
// The metric's value in an evaluation's metrics (train_metric.cpp's table, one row per metric);
// `positive`: the positive class's index (f1). NaN where the metric is undefined: an AUROC with a
// class on no validation example or on all of them, a correlation of constant values, f1 without
// exactly two classes, and every metric of an evaluation whose outputs were not finite
// (metrics.h). Training, `tune predict` and the trial's summary (which `tune trials` and
// `tune report` read) all take their values from here.
double TrainMetricValue(TrainMetric metric, const EpochMetrics& m, int64_t positive = 1);

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

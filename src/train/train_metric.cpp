#include "train/train_metric.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/text.h"

namespace tune {

namespace {

double OrNan(const std::optional<double>& v) { return v.value_or(std::nan("")); }

// Which problem types a metric applies to.
enum Applies : unsigned { kSingle = 1, kMulti = 2, kRegress = 4 };

// One row per metric: its name, the problem types it applies to, its direction, and its value in
// an evaluation's metrics (metrics.h computes them, with scikit-learn's definitions; NaN where
// the metric is undefined: see the header). The order is the order of MetricsOf and of the
// valid names in messages. Adding a metric is one row here (and its field in metrics.h).
struct MetricRow {
  TrainMetric metric;
  const char* name;
  unsigned applies;
  StudyDirection direction;
  double (*value)(const EpochMetrics& m, int64_t positive);
};

constexpr StudyDirection kMax = StudyDirection::kMaximize;
constexpr StudyDirection kMin = StudyDirection::kMinimize;

const MetricRow kTable[] = {
    {TrainMetric::kMacroF1, "macro_f1", kSingle | kMulti, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.macro_f1; }},
    {TrainMetric::kMicroF1, "micro_f1", kSingle | kMulti, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.micro_f1; }},
    {TrainMetric::kWeightedF1, "weighted_f1", kSingle | kMulti, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.weighted_f1; }},
    {TrainMetric::kF1, "f1", kSingle, kMax,
     [](const EpochMetrics& m, int64_t positive) {
       const std::vector<double>& f1 = m.classification.class_f1;
       return f1.size() == 2 && (positive == 0 || positive == 1) ? f1[static_cast<size_t>(positive)]
                                                                 : std::nan("");
     }},
    {TrainMetric::kAccuracy, "accuracy", kSingle | kMulti, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.accuracy; }},
    {TrainMetric::kBalancedAccuracy, "balanced_accuracy", kSingle, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.balanced_accuracy; }},
    {TrainMetric::kMcc, "mcc", kSingle, kMax,
     [](const EpochMetrics& m, int64_t) { return m.classification.mcc; }},
    {TrainMetric::kAuroc, "auroc", kSingle | kMulti, kMax,
     [](const EpochMetrics& m, int64_t) { return OrNan(m.classification.auroc); }},
    {TrainMetric::kMse, "mse", kRegress, kMin,
     [](const EpochMetrics& m, int64_t) { return m.regression.mse; }},
    {TrainMetric::kRmse, "rmse", kRegress, kMin,
     [](const EpochMetrics& m, int64_t) { return m.regression.rmse; }},
    {TrainMetric::kMae, "mae", kRegress, kMin,
     [](const EpochMetrics& m, int64_t) { return m.regression.mae; }},
    {TrainMetric::kR2, "r2", kRegress, kMax,
     [](const EpochMetrics& m, int64_t) { return m.regression.r2; }},
    {TrainMetric::kPearson, "pearson", kRegress, kMax,
     [](const EpochMetrics& m, int64_t) { return OrNan(m.regression.pearson); }},
    {TrainMetric::kSpearman, "spearman", kRegress, kMax,
     [](const EpochMetrics& m, int64_t) { return OrNan(m.regression.spearman); }},
    {TrainMetric::kLoss, "loss", kSingle | kMulti | kRegress, kMin,
     [](const EpochMetrics& m, int64_t) { return m.validation_loss; }},
};

const MetricRow& RowOf(TrainMetric metric) {
  for (const MetricRow& row : kTable) {
    if (row.metric == metric) return row;
  }
  return kTable[0];  // unreachable: every TrainMetric has a row (MetricTable.EveryMetricHasARow)
}

unsigned AppliesTo(ProblemType type) {
  switch (type) {
    case ProblemType::kSingleLabel:
      return kSingle;
    case ProblemType::kMultiLabel:
      return kMulti;
    case ProblemType::kRegression:
      return kRegress;
  }
  return 0;
}

}  // namespace

const char* TrainMetricName(TrainMetric metric) { return RowOf(metric).name; }

Result<TrainMetric> ParseTrainMetric(const std::string& name) {
  std::vector<std::string> valid;
  for (const MetricRow& row : kTable) {
    if (name == row.name) return row.metric;
    valid.emplace_back(row.name);
  }
  return InvalidArgumentError(fmt::format("unknown metric '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

StudyDirection TrainMetricDirection(TrainMetric metric) { return RowOf(metric).direction; }

std::vector<TrainMetric> MetricsOf(ProblemType type) {
  std::vector<TrainMetric> metrics;
  for (const MetricRow& row : kTable) {
    if ((row.applies & AppliesTo(type)) != 0) metrics.push_back(row.metric);
  }
  return metrics;
}

TrainMetric DefaultMetric(ProblemType type) {
  return type == ProblemType::kRegression ? TrainMetric::kMse : TrainMetric::kMacroF1;
}

Status CheckMetricFor(TrainMetric metric, ProblemType type) {
  if ((RowOf(metric).applies & AppliesTo(type)) != 0) return Status::Ok();
  std::vector<std::string> names;
  for (TrainMetric m : MetricsOf(type)) names.emplace_back(TrainMetricName(m));
  return InvalidArgumentError(
      fmt::format("metric '{}' does not apply to problem_type '{}'; valid: {}",
                  TrainMetricName(metric), ProblemTypeName(type), JoinNames(names)));
}

double TrainMetricValue(TrainMetric metric, const EpochMetrics& m, int64_t positive) {
  return RowOf(metric).value(m, positive);
}

const char* TrainCostName(TrainCost cost) {
  switch (cost) {
    case TrainCost::kPeakMemory:
      return "peak_memory";
    case TrainCost::kTrainSeconds:
      return "train_seconds";
    case TrainCost::kNumParameters:
      return "num_parameters";
  }
  return "?";
}

Result<TrainCost> ParseTrainCost(const std::string& name) {
  for (TrainCost c :
       {TrainCost::kPeakMemory, TrainCost::kTrainSeconds, TrainCost::kNumParameters}) {
    if (name == TrainCostName(c)) return c;
  }
  const std::vector<std::string> valid = {"peak_memory", "train_seconds", "num_parameters"};
  return InvalidArgumentError(fmt::format("unknown cost '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

double TrainCostValue(TrainCost cost, const TrainResult& result) {
  switch (cost) {
    case TrainCost::kPeakMemory:
      return static_cast<double>(result.peak_memory_bytes);
    case TrainCost::kTrainSeconds: {
      double seconds = 0.0;
      for (const EpochMetrics& m : result.epochs) seconds += m.seconds;
      return seconds;
    }
    case TrainCost::kNumParameters:
      return static_cast<double>(result.num_parameters);
  }
  return 0.0;
}

}  // namespace tune

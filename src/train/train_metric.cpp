#include "train/train_metric.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/text.h"

namespace tune {

namespace {

constexpr TrainMetric kMetrics[] = {
    TrainMetric::kMacroF1,  TrainMetric::kMicroF1, TrainMetric::kWeightedF1, TrainMetric::kF1,
    TrainMetric::kAccuracy, TrainMetric::kMcc,     TrainMetric::kAuroc,      TrainMetric::kLoss,
    TrainMetric::kMse,      TrainMetric::kRmse,    TrainMetric::kMae,        TrainMetric::kR2,
    TrainMetric::kPearson,  TrainMetric::kSpearman};

double OrNan(const std::optional<double>& v) { return v.value_or(std::nan("")); }

}  // namespace

const char* TrainMetricName(TrainMetric metric) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return "macro_f1";
    case TrainMetric::kAccuracy:
      return "accuracy";
    case TrainMetric::kLoss:
      return "loss";
    case TrainMetric::kMicroF1:
      return "micro_f1";
    case TrainMetric::kWeightedF1:
      return "weighted_f1";
    case TrainMetric::kF1:
      return "f1";
    case TrainMetric::kMcc:
      return "mcc";
    case TrainMetric::kAuroc:
      return "auroc";
    case TrainMetric::kMse:
      return "mse";
    case TrainMetric::kRmse:
      return "rmse";
    case TrainMetric::kMae:
      return "mae";
    case TrainMetric::kR2:
      return "r2";
    case TrainMetric::kPearson:
      return "pearson";
    case TrainMetric::kSpearman:
      return "spearman";
  }
  return "?";
}

Result<TrainMetric> ParseTrainMetric(const std::string& name) {
  std::vector<std::string> valid;
  for (TrainMetric m : kMetrics) {
    if (name == TrainMetricName(m)) return m;
    valid.emplace_back(TrainMetricName(m));
  }
  return InvalidArgumentError(fmt::format("unknown metric '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

StudyDirection TrainMetricDirection(TrainMetric metric) {
  switch (metric) {
    case TrainMetric::kLoss:
    case TrainMetric::kMse:
    case TrainMetric::kRmse:
    case TrainMetric::kMae:
      return StudyDirection::kMinimize;
    default:
      return StudyDirection::kMaximize;
  }
}

std::vector<TrainMetric> MetricsOf(ProblemType type) {
  switch (type) {
    case ProblemType::kSingleLabel:
      return {TrainMetric::kMacroF1, TrainMetric::kMicroF1,  TrainMetric::kWeightedF1,
              TrainMetric::kF1,      TrainMetric::kAccuracy, TrainMetric::kMcc,
              TrainMetric::kAuroc,   TrainMetric::kLoss};
    case ProblemType::kMultiLabel:
      return {TrainMetric::kMacroF1,  TrainMetric::kMicroF1, TrainMetric::kWeightedF1,
              TrainMetric::kAccuracy, TrainMetric::kAuroc,   TrainMetric::kLoss};
    case ProblemType::kRegression:
      return {TrainMetric::kMse,     TrainMetric::kRmse,     TrainMetric::kMae, TrainMetric::kR2,
              TrainMetric::kPearson, TrainMetric::kSpearman, TrainMetric::kLoss};
  }
  return {};
}

TrainMetric DefaultMetric(ProblemType type) {
  return type == ProblemType::kRegression ? TrainMetric::kMse : TrainMetric::kMacroF1;
}

Status CheckMetricFor(TrainMetric metric, ProblemType type) {
  const std::vector<TrainMetric> valid = MetricsOf(type);
  if (std::find(valid.begin(), valid.end(), metric) != valid.end()) return Status::Ok();
  std::vector<std::string> names;
  for (TrainMetric m : valid) names.emplace_back(TrainMetricName(m));
  return InvalidArgumentError(
      fmt::format("metric '{}' does not apply to problem_type '{}'; valid: {}",
                  TrainMetricName(metric), ProblemTypeName(type), JoinNames(names)));
}

double TrainMetricValue(TrainMetric metric, const EpochMetrics& m, int64_t positive) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return m.macro_f1;
    case TrainMetric::kAccuracy:
      return m.accuracy;
    case TrainMetric::kLoss:
      return m.validation_loss;
    case TrainMetric::kMicroF1:
      return m.micro_f1;
    case TrainMetric::kWeightedF1:
      return m.weighted_f1;
    case TrainMetric::kF1:
      return positive >= 0 && static_cast<size_t>(positive) < m.class_f1.size()
                 ? m.class_f1[static_cast<size_t>(positive)]
                 : 0.0;
    case TrainMetric::kMcc:
      return m.mcc;
    case TrainMetric::kAuroc:
      return OrNan(m.auroc);
    case TrainMetric::kMse:
      return m.regression.mse;
    case TrainMetric::kRmse:
      return m.regression.rmse;
    case TrainMetric::kMae:
      return m.regression.mae;
    case TrainMetric::kR2:
      return m.regression.r2;
    case TrainMetric::kPearson:
      return OrNan(m.regression.pearson);
    case TrainMetric::kSpearman:
      return OrNan(m.regression.spearman);
  }
  return m.macro_f1;
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

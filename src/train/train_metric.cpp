#include "train/train_metric.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "util/text.h"

namespace tune {

namespace {

constexpr TrainMetric kMetrics[] = {
    TrainMetric::kMacroF1,  TrainMetric::kMicroF1, TrainMetric::kWeightedF1, TrainMetric::kF1,
    TrainMetric::kAccuracy, TrainMetric::kMcc,     TrainMetric::kAuroc,      TrainMetric::kLoss};

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
  return metric == TrainMetric::kLoss ? StudyDirection::kMinimize : StudyDirection::kMaximize;
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
      return m.auroc.value_or(std::nan(""));
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

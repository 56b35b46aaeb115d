#include "train/train_metric.h"

#include <fmt/format.h>

#include <vector>

#include "util/text.h"

namespace tune {

const char* TrainMetricName(TrainMetric metric) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return "macro_f1";
    case TrainMetric::kAccuracy:
      return "accuracy";
    case TrainMetric::kLoss:
      return "loss";
  }
  return "?";
}

Result<TrainMetric> ParseTrainMetric(const std::string& name) {
  if (name == "macro_f1" || name == "f1") return TrainMetric::kMacroF1;
  if (name == "accuracy") return TrainMetric::kAccuracy;
  if (name == "loss") return TrainMetric::kLoss;
  const std::vector<std::string> valid = {"macro_f1", "accuracy", "loss"};
  return InvalidArgumentError(fmt::format("unknown metric '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

StudyDirection TrainMetricDirection(TrainMetric metric) {
  return metric == TrainMetric::kLoss ? StudyDirection::kMinimize : StudyDirection::kMaximize;
}

double TrainMetricValue(TrainMetric metric, const EpochMetrics& m) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return m.macro_f1;
    case TrainMetric::kAccuracy:
      return m.accuracy;
    case TrainMetric::kLoss:
      return m.validation_loss;
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

#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tune {

ClassificationMetrics ComputeClassificationMetrics(const std::vector<int64_t>& labels,
                                                   const std::vector<int64_t>& predictions,
                                                   int64_t num_classes) {
  ClassificationMetrics m;
  const size_t n = std::min(labels.size(), predictions.size());
  m.count = static_cast<int64_t>(n);
  if (n == 0 || num_classes <= 0) return m;
  const auto k = static_cast<size_t>(num_classes);
  std::vector<int64_t> tp(k, 0), fp(k, 0), fn(k, 0);
  int64_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto y = static_cast<size_t>(labels[i]);
    const auto p = static_cast<size_t>(predictions[i]);
    if (y == p) {
      ++correct;
      ++tp[y];
    } else {
      ++fn[y];
      ++fp[p];
    }
  }
  m.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  double sum = 0;
  int64_t classes = 0;
  for (size_t c = 0; c < k; ++c) {
    if (tp[c] + fp[c] + fn[c] == 0) continue;  // neither a label nor a prediction
    ++classes;
    const double denom = static_cast<double>(2 * tp[c] + fp[c] + fn[c]);
    sum += denom > 0 ? 2.0 * static_cast<double>(tp[c]) / denom : 0.0;
  }
  m.macro_f1 = classes > 0 ? sum / static_cast<double>(classes) : 0.0;
  return m;
}

double LearningRateAt(Schedule schedule, double base_lr, int64_t step, int64_t total_steps,
                      int64_t warmup_steps) {
  if (step < warmup_steps) {
    return base_lr * static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, warmup_steps));
  }
  if (schedule == Schedule::kConstant) return base_lr;
  const double progress = static_cast<double>(step - warmup_steps) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  if (schedule == Schedule::kLinear) return base_lr * std::max(0.0, 1.0 - progress);
  return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace tune

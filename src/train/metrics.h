// Classification metrics and learning-rate schedules for the trainer (plain C++, pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tune {

struct ClassificationMetrics {
  double accuracy = 0.0;
  // The unweighted mean of the per-class F1 scores over the classes that occur in the labels or
  // the predictions (scikit-learn's f1_score(average="macro") with zero_division=0).
  double macro_f1 = 0.0;
  int64_t count = 0;
};

// REQUIRES: labels.size() == predictions.size(); every value in [0, num_classes).
ClassificationMetrics ComputeClassificationMetrics(const std::vector<int64_t>& labels,
                                                   const std::vector<int64_t>& predictions,
                                                   int64_t num_classes);

enum class Schedule {
  kLinear,    // linear warmup, then linear decay to 0 at the last step (Hugging Face's default)
  kCosine,    // linear warmup, then half a cosine to 0
  kConstant,  // linear warmup, then constant
};

// Hugging Face's schedules (get_linear_schedule_with_warmup and friends): the learning rate of the
// optimizer step that follows `step` completed steps, out of `total_steps`, of which the first
// `warmup_steps` warm up linearly from 0.
double LearningRateAt(Schedule schedule, double base_lr, int64_t step, int64_t total_steps,
                      int64_t warmup_steps);

}  // namespace tune

// What a finished trial shows in MLflow and TensorBoard, read from the trial alone: its metric
// histories (each at its step), its tags (state, reason, ...) and its memory figures. The two
// sinks (mlflow.h, tensorboard.h) write these; the tests compare what MLflow's and TensorBoard's
// own readers return with them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tune/trial.h"

namespace tune {

struct ScalarPoint {
  int64_t step = 0;
  double value = 0;
};

// Metric histories by name:
// - a train trial's evaluations (the user attribute "train"'s history) under the names Hugging
//   Face's Trainer logs, each at its optimizer step: train/loss, train/learning_rate,
//   train/epoch, eval/loss and eval/<metric> (accuracy, macro_f1, ...);
// - every other trial's intermediate values as intermediate_value at their steps;
// - the final value(s): value (several objectives: value_0, value_1, ...) at the last step (0
//   without intermediate values); absent when the trial has none (PRUNED, FAIL).
// Non-finite points are left out (MLflow refuses NaN; TensorBoard would draw nothing).
std::map<std::string, std::vector<ScalarPoint>> TrialScalars(const FrozenTrial& trial);

// The guard's memory figures of the user attribute "memory", in bytes, each known one:
// memory/estimate, memory/predicted, memory/peak, memory/device_memory, memory/usable,
// memory/cap.
std::map<std::string, double> TrialMemoryFigures(const FrozenTrial& trial);

// Why the trial ended as it did, for a tag: the user attribute "reason" (oom, predicted,
// interrupted, timeout, nonfinite), else for a PRUNED trial the pruner that pruned it (system
// attribute pruned_by), else `pruner` (a trial of Optuna or of an older tune), else "".
std::string TrialReasonTag(const FrozenTrial& trial, const std::string& pruner);

}  // namespace tune

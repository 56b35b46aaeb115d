// Helpers shared by the pruners, each a transcription of the Optuna (3.1) function it names.
// Private to tune_core.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "tune/trial.h"

namespace tune::internal {

// The study's single direction, or nullopt for a multi-objective study. Optuna's
// Trial.should_prune raises for multi-objective studies; tune's pruners that need a direction
// never prune there instead (a pruner cannot fail).
std::optional<StudyDirection> SingleDirection(const TrialHistory& history);

// Optuna's pruners/_percentile.py::_is_first_in_interval_step: true if `step` is the first
// report at or after the nearest interval boundary below it, i.e. the trial's previous report
// came before (step - n_warmup_steps) // interval_steps * interval_steps + n_warmup_steps.
// REQUIRES: step >= n_warmup_steps >= 0, interval_steps >= 1.
bool IsFirstInIntervalStep(int64_t step, const std::map<int64_t, double>& intermediate_values,
                           int64_t n_warmup_steps, int64_t interval_steps);

// numpy's nanmin / nanmax of the intermediate values: NaN when all of them are NaN (or none).
double NanMin(const std::map<int64_t, double>& values);
double NanMax(const std::map<int64_t, double>& values);

}  // namespace tune::internal

// The optimize loop: ask, sample the space, run the objective, tell — until the study holds
// n_trials finished trials, the timeout passes, or the user interrupts (Ctrl-C).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "tune/objectives/objective.h"
#include "tune/search_space.h"
#include "tune/status.h"
#include "tune/study.h"

namespace tune {

struct OptimizeOptions {
  // Stop once the study holds this many finished (COMPLETE, PRUNED, FAIL) trials, counting
  // earlier runs: re-running a study resumes toward the same target. Unset: no limit.
  std::optional<int64_t> n_trials;
  // Stop starting trials after this many seconds (Optuna's timeout). Unset: no limit.
  std::optional<double> timeout_seconds;
  // Called after each trial finishes (logging, progress).
  std::function<void(const FrozenTrial& trial, const TrialOutcome& outcome)> on_trial_finished;
};

struct OptimizeResult {
  int64_t trials_run = 0;       // trials finished by this call
  int64_t finished_total = 0;   // finished trials in the study afterwards
  bool interrupted = false;     // stopped by Ctrl-C (the running trial is FAIL)
  bool timed_out = false;
};

// REQUIRES: at least one of n_trials, timeout_seconds is set, or the caller interrupts.
Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options);

}  // namespace tune

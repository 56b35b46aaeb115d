#include "tune/optimize.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "tune/interrupt.h"

namespace tune {

Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options) {
  using SteadyClock = std::chrono::steady_clock;
  const auto start = SteadyClock::now();
  const std::vector<TrialState> finished = {TrialState::kComplete, TrialState::kPruned,
                                            TrialState::kFail};
  OptimizeResult result;
  while (true) {
    // Recounted every time: other workers may share the study.
    TUNE_ASSIGN_OR_RETURN(result.finished_total,
                          study.storage().CountTrials(study.study_id(), finished));
    if (InterruptRequested()) {
      result.interrupted = true;
      break;
    }
    if (options.n_trials && result.finished_total >= *options.n_trials) break;
    if (options.timeout_seconds &&
        std::chrono::duration<double>(SteadyClock::now() - start).count() >=
            *options.timeout_seconds) {
      result.timed_out = true;
      break;
    }
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, study.Ask());
    Result<Json> params = space.Sample(*trial);
    Result<TrialOutcome> outcome =
        params.ok() ? objective.Run(*trial, *params) : Result<TrialOutcome>(params.status());
    if (!outcome.ok()) {
      // tune could not run the trial (bad parameter, program not startable): record why, fail the
      // trial so the study stays consistent, and stop.
      Status st = outcome.status();
      (void)trial->SetUserAttr("fail_reason", st.message());
      (void)study.Tell(*trial, TrialState::kFail);
      return st.WithContext("trial " + std::to_string(trial->number()));
    }
    Result<FrozenTrial> told = study.Tell(*trial, outcome->state, outcome->values);
    if (!told.ok()) {
      // For example the wrong number of values: fail the trial rather than leave it RUNNING.
      (void)trial->SetUserAttr("fail_reason", told.status().message());
      (void)study.Tell(*trial, TrialState::kFail);
      return told.status().WithContext("trial " + std::to_string(trial->number()));
    }
    const FrozenTrial& frozen = *told;
    ++result.trials_run;
    if (options.on_trial_finished) options.on_trial_finished(frozen, *outcome);
  }
  return result;
}

}  // namespace tune

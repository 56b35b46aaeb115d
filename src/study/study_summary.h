// What a study's stored trials add up to: the end-of-run summary and `tune summary`.
//
// Each trial falls in one category, from its state and the user attributes tune writes
// (trial_attrs.h); the summary counts them and the trial time spent in each, measures the
// memory estimator against the peaks trials measured, counts the memory levers the guard
// applied, fits the measured peaks of models outside the catalog, and finds the best trial (single
// objective) or the Pareto front.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "measure/measured_fit.h"
#include "tune/trial.h"

namespace tune {

// What became of a trial, finer than its state.
enum class TrialCategory {
  kComplete,     // COMPLETE
  kPruned,       // PRUNED by the pruner
  kOom,          // PRUNED: ran out of memory at run time (reason "oom")
  kPredicted,    // PRUNED: the memory guard predicted a misfit and did not run it
  kFailed,       // FAIL for any other reason (an error, a crash)
  kInterrupted,  // FAIL: stopped by Ctrl-C or SIGTERM (reason "interrupted")
  kTimeout,      // FAIL: a command trial ran past its timeout (reason "timeout")
  kNonFinite,    // FAIL: a loss, output, weight or value was NaN or infinite (reason "nonfinite")
  kStale,        // FAIL: its worker stopped heartbeating (fail_reason "stale: ...")
  kRunning,      // RUNNING
  kWaiting,      // WAITING
};
inline constexpr int kTrialCategoryCount = 11;
// "complete", "pruned", "oom", "predicted", "failed", "interrupted", "timeout", "nonfinite",
// "stale", "running", "waiting".
const char* TrialCategoryName(TrialCategory category);
// "PRUNED by the pruner", "PRUNED: out of memory at run time", ...
const char* TrialCategoryLabel(TrialCategory category);
TrialCategory TrialCategoryOf(const FrozenTrial& trial);

// Relative errors (predicted - measured) / measured over the trials that measured a peak.
struct ErrorStats {
  int64_t count = 0;
  double median = 0;      // of the signed errors
  double median_abs = 0;  // of their absolute values
  double worst = 0;       // the error of largest absolute value (signed)
  int64_t worst_trial = -1;
  int64_t under = 0;  // trials whose peak was above the prediction
};

struct StudySummary {
  int64_t n_trials = 0;
  struct Row {
    int64_t trials = 0;
    double seconds = 0;  // summed durations of the finished ones
  };
  std::map<TrialCategory, Row> categories;  // only categories that occur
  std::map<TrialState, int64_t> states;
  double trial_seconds = 0;  // all finished trials
  std::optional<TimePoint> first_start, last_complete;

  ErrorStats estimate_error;    // the estimator's device_peak
  ErrorStats prediction_error;  // the guard's prediction (estimate x calibration)
  // Admission verdicts ("run", "run_with_levers", "reject") and levers.
  std::map<std::string, int64_t> admissions;
  int64_t lever_batch = 0;          // trials run at a smaller micro-batch (more accumulation)
  int64_t lever_checkpointing = 0;  // trials run with gradient checkpointing turned on
  int64_t oom_retry_trials = 0;     // trials that ran out of memory and were retried smaller
  int64_t oom_retries = 0;          // ... the retries in all

  // Models outside the catalog whose peaks the trials measured (measured_fit.h), by family.
  struct Measured {
    std::string model, precision;
    std::vector<MemoryPoint> points;  // the exact peaks, one per trial
    std::optional<MeasuredFit> fit;   // once the points can be fitted
    int64_t fitted_trials = 0;        // trials the fit predicted (admitted or rejected)
    int64_t oom_after_fit = 0;        // ... of which ran out of memory at run time
    bool probed = false;              // a TorchScript model's fit from the train objective's probes
  };
  std::map<std::string, Measured> measured;

  std::optional<FrozenTrial> best;    // single objective
  std::vector<int64_t> pareto_front;  // numbers; every study
};

// `system_attrs`: the study's; `measured` then also holds the TorchScript models' fits the train
// objective probed and stored there (MeasuredFitKey of "sha256:<hex>"), each with the trials of
// TorchScript models at its precision that a fit predicted.
StudySummary SummarizeTrials(const std::vector<FrozenTrial>& trials,
                             const std::vector<StudyDirection>& directions,
                             const Json& system_attrs = Json::object());

}  // namespace tune

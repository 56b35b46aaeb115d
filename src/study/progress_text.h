// The text of a run's progress: the counts by outcome, the best trial, what runs (and, with
// several jobs, the memory ledger), the elapsed time and the ETA. apps/tune draws it as a status
// line on a terminal or logs it as a progress line (--progress, docs/cli.md "Progress").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tune/optimize.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// --progress and the config's "progress": kAuto is a bar when stderr is a terminal, else lines.
enum class ProgressMode { kAuto, kBar, kLines, kOff };
// "auto", "bar", "lines" or "off"; InvalidArgument naming the valid ones otherwise.
Result<ProgressMode> ParseProgressMode(const std::string& name);

// Seconds between two progress lines in lines mode (--progress-interval); the last is always
// written.
inline constexpr double kDefaultProgressInterval = 10.0;

struct ProgressCounts {
  int64_t finished = 0;  // finished trials in the study (earlier runs included)
  int64_t run = 0;       // of which this run finished
  int64_t complete = 0, pruned = 0, oom = 0, failed = 0;  // the study's, by outcome
  int64_t retried = 0;  // stale trials this run re-enqueued (each raises the target by one)
  std::optional<double> best_value;
  int64_t best_number = -1;
  std::optional<JobsState> jobs;  // what runs now (with several jobs, the memory ledger)

  // Counts one finished trial: COMPLETE, pruned (by the pruner), OOM (out of memory at run time
  // or predicted not to fit: study_summary.h's categories oom and predicted) or FAIL.
  void Add(const FrozenTrial& trial);
};

struct ProgressTarget {
  std::optional<int64_t> n_trials;        // the study's target of finished trials
  std::optional<double> timeout_seconds;  // this run stops starting trials after this
};

// Seconds until the run ends: with n_trials, this run's wall time per finished trial times the
// trials left; with a timeout, the time left; with both, whichever ends first. Unset when
// neither gives an estimate yet.
std::optional<double> EstimateEtaSeconds(const ProgressCounts& counts, const ProgressTarget& target,
                                         double elapsed_seconds);

// "1:02:03".
std::string ClockText(double seconds);

// "12/60 finished | 8 COMPLETE, 2 pruned, 1 OOM, 1 FAIL | best 0.0123 (trial 7) |
// 3 running, 17.2 GiB of 22.8 GiB reserved, 1 waiting | elapsed 0:01:02 | ETA 0:04:10".
std::string ProgressText(const ProgressCounts& counts, const ProgressTarget& target,
                         double elapsed_seconds);

}  // namespace tune

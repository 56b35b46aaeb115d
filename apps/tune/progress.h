// How a run shows its progress (--progress auto|bar|lines|off): on a terminal, one status line
// kept at the bottom of the screen and redrawn in place while log lines scroll above it;
// elsewhere (CI, nohup, a pipe), plain progress lines at most one every --progress-interval
// seconds. docs/cli.md, "Progress", shows both.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tune/config.h"
#include "tune/optimize.h"
#include "tune/status.h"
#include "tune/study.h"

namespace tune::app {

enum class ProgressMode { kBar, kLines, kOff };
// "auto" (bar when stderr is a terminal, else lines), "bar", "lines", "off".
Result<ProgressMode> ParseProgressMode(const std::string& name);

class StatusLineSink;

// Counts the run's trials, logs each finished one, and shows the progress in `mode`.
class ProgressLog {
 public:
  ProgressLog(Study& study, const StudyConfig& config, ProgressMode mode, double interval_seconds);
  ~ProgressLog();
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  void OnTrialFinished(const FrozenTrial& t, const TrialOutcome& outcome);
  void OnTrialStarted(const Trial& t, const TrialPlan& plan, const JobsState& jobs);
  void OnStaleTrial(const FailedStaleTrial& stale);
  void set_jobs(const JobsState& jobs);
  // Removes the status line (before the summary is printed).
  void Finish();

  double elapsed_seconds() const;
  // The status text: "12/60 finished | 8 COMPLETE, 2 pruned, 1 OOM, 1 FAIL | best ... | ...".
  std::string StatusText() const;

 private:
  void ShowProgress();
  void Redraw() const;
  std::string EtaText(double elapsed) const;

  Study& study_;
  const StudyConfig& config_;
  const ProgressMode mode_;
  const double interval_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;  // guards the counts below (the ticker thread reads them)
  std::optional<std::chrono::steady_clock::time_point> last_line_;
  bool unshown_ = false;  // kLines: a trial finished after the last progress line
  int64_t complete_ = 0, pruned_ = 0, oom_ = 0, failed_ = 0, run_ = 0, retried_ = 0, done_ = 0;
  std::optional<FrozenTrial> best_;
  std::optional<JobsState> jobs_;  // with several jobs
  std::shared_ptr<StatusLineSink> sink_;  // kBar
  struct Ticker;
  std::unique_ptr<Ticker> ticker_;  // kBar: redraws the elapsed time every second
};

}  // namespace tune::app

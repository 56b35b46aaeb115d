// How a run shows its progress (--progress auto|bar|lines|off): on a terminal, one status line
// kept at the bottom of the screen and redrawn in place while log lines scroll above it;
// elsewhere (CI, nohup, a pipe), plain progress lines, at most one every --progress-interval
// seconds. docs/cli.md, "Progress", shows both. The text itself: study/progress_text.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "config/config.h"
#include "study/progress_text.h"
#include "tune/optimize.h"
#include "tune/study.h"

namespace tune::app {

// kAuto becomes kBar when stderr is a terminal, else kLines; the others stay.
ProgressMode ResolveProgressMode(ProgressMode mode);

class StatusLineSink;

// Counts the run's trials, logs each finished one, and shows the progress as config.progress
// says (every config.progress_interval seconds in lines mode).
// The optimize loop's callbacks call it from one thread; in bar mode a ticker thread redraws the
// status line every second, so that elapsed time and ETA move between trials.
class ProgressLog {
 public:
  ProgressLog(Study& study, const StudyConfig& config);
  ~ProgressLog();
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  void OnTrialFinished(const FrozenTrial& t, const TrialOutcome& outcome);
  void OnTrialStarted(const Trial& t, const TrialPlan& plan, const JobsState& jobs);
  void OnStaleTrial(const FailedStaleTrial& stale);
  void set_jobs(const JobsState& jobs);
  // Writes the last progress line (lines mode) or removes the status line (bar mode), before
  // the summary is printed.
  void Finish();

  std::string StatusText() const;

 private:
  void ShowProgress();
  void Redraw() const;
  double elapsed_seconds() const;

  Study& study_;
  const ProgressTarget target_;
  const int64_t retry_failed_;
  const ProgressMode mode_;
  const double interval_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;  // guards counts_ (the ticker thread reads them)
  ProgressCounts counts_;
  std::optional<std::chrono::steady_clock::time_point> last_line_;
  bool unshown_ = false;  // lines mode: the progress changed after the last progress line
  std::shared_ptr<StatusLineSink> sink_;  // bar mode
  struct Ticker;
  std::unique_ptr<Ticker> ticker_;  // bar mode
};

}  // namespace tune::app

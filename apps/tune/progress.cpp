#include "progress.h"

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "app.h"
#include "util/text.h"

namespace tune::app {

// Stands in for the default logger's sinks on a terminal, the one place that writes to it
// while a study runs: before a log line it erases the status line, after it draws the status
// line again, so that log lines scroll above it. Its mutex orders log lines and redraws from
// any thread.
class StatusLineSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit StatusLineSink(std::vector<spdlog::sink_ptr> inner) : inner_(std::move(inner)) {}

  void SetStatus(std::string text) {
    std::lock_guard lock(mutex_);
    status_ = std::move(text);
    Draw();
  }
  // Removes the status line from the screen; log lines are written plainly from now on.
  void Erase() {
    std::lock_guard lock(mutex_);
    if (!status_.empty()) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    status_.clear();
  }
  const std::vector<spdlog::sink_ptr>& inner() const { return inner_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!status_.empty()) std::fputs("\r\033[K", stderr);
    for (auto& sink : inner_) {
      if (sink->should_log(msg.level)) sink->log(msg);
    }
    for (auto& sink : inner_) sink->flush();
    Draw();
  }
  void flush_() override {
    for (auto& sink : inner_) sink->flush();
  }

 private:
  // The status in reverse video, cut to the terminal's width so that it stays on one line.
  void Draw() {
    if (status_.empty()) return;
    winsize ws{};
    size_t width = 100;  // a terminal that does not say its width ($COLUMNS may)
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
      width = ws.ws_col;
    } else if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 1) {
      width = static_cast<size_t>(std::atoi(columns));
    }
    const std::string line = status_.size() < width ? status_ : status_.substr(0, width - 1);
    std::fputs(("\r\033[K\033[7m" + line + "\033[0m").c_str(), stderr);
    std::fflush(stderr);
  }

  std::vector<spdlog::sink_ptr> inner_;
  std::string status_;
};

// Redraws the status line once a second.
struct ProgressLog::Ticker {
  explicit Ticker(const ProgressLog& log)
      : thread([this, &log] {
          std::unique_lock lock(mu);
          while (!cv.wait_for(lock, std::chrono::seconds(1), [this] { return stop; })) {
            lock.unlock();
            log.Redraw();
            lock.lock();
          }
        }) {}
  ~Ticker() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;  // last: starts after the members it uses
};

namespace {

// Wraps the default logger's sinks in a StatusLineSink (before any other thread logs).
std::shared_ptr<StatusLineSink> InstallStatusLine() {
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<StatusLineSink>(logger->sinks());
  sink->set_level(spdlog::level::trace);
  logger->sinks() = {sink};
  return sink;
}

// The study's finished trials so far, and its best value (single objective).
ProgressCounts StoredCounts(Study& study) {
  ProgressCounts counts;
  auto trials = study.Trials();
  if (!trials.ok()) return counts;
  for (const FrozenTrial& t : *trials) {
    if (IsFinished(t.state)) counts.Add(t);
  }
  if (auto best = study.BestTrialOf(*trials); best.ok() && best->values.size() == 1) {
    counts.best_value = best->value();
    counts.best_number = best->number;
  }
  return counts;
}

}  // namespace

ProgressMode ResolveProgressMode(ProgressMode mode) {
  if (mode != ProgressMode::kAuto) return mode;
  return isatty(STDERR_FILENO) ? ProgressMode::kBar : ProgressMode::kLines;
}

ProgressLog::ProgressLog(Study& study, const StudyConfig& config)
    : study_(study),
      target_{config.n_trials, config.timeout_seconds},
      retry_failed_(config.retry_failed),
      mode_(ResolveProgressMode(config.progress)),
      interval_(config.progress_interval),
      counts_(StoredCounts(study)) {
  if (mode_ == ProgressMode::kBar) {
    sink_ = InstallStatusLine();
    Redraw();
    ticker_ = std::make_unique<Ticker>(*this);
  }
}

ProgressLog::~ProgressLog() { Finish(); }

void ProgressLog::Finish() {
  ticker_.reset();
  if (sink_) {
    sink_->Erase();
    spdlog::default_logger()->sinks() = sink_->inner();
    sink_.reset();
    unshown_ = true;
  }
  if (mode_ != ProgressMode::kOff && (unshown_ || !last_line_)) {
    unshown_ = false;
    last_line_ = std::chrono::steady_clock::now();
    spdlog::info("Progress: {}", StatusText());
  }
}

double ProgressLog::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProgressLog::StatusText() const {
  std::lock_guard lock(mu_);
  return ProgressText(counts_, target_, elapsed_seconds());
}

void ProgressLog::Redraw() const {
  if (sink_) sink_->SetStatus(StatusText());
}

void ProgressLog::OnTrialFinished(const FrozenTrial& t, const TrialOutcome& outcome) {
  {
    std::lock_guard lock(mu_);
    ++counts_.run;
    counts_.Add(t);
    if (t.state == TrialState::kComplete && t.values.size() == 1 &&
        (!counts_.best_value || IsBetter(study_.direction(), t.value(), *counts_.best_value))) {
      counts_.best_value = t.value();
      counts_.best_number = t.number;
    }
  }
  const auto d = t.duration_seconds();
  const std::string dur = d ? fmt::format("{:.2f}s", *d) : "-";
  if (t.state == TrialState::kComplete) {
    spdlog::info("Trial {} COMPLETE value={} duration={} params: {}", t.number, ValueText(t), dur,
                 ParamsText(t));
  } else {
    spdlog::log(t.state == TrialState::kFail ? spdlog::level::warn : spdlog::level::info,
                "Trial {} {} ({}) duration={} params: {}", t.number, TrialStateName(t.state),
                outcome.reason, dur, ParamsText(t));
  }
  ShowProgress();
}

void ProgressLog::OnTrialStarted(const Trial& t, const TrialPlan& plan, const JobsState& jobs) {
  {
    std::lock_guard lock(mu_);
    counts_.jobs = jobs;
  }
  spdlog::info(
      "Trial {} started{}: {}; params: {}", t.number(),
      plan.reservation > 0 ? fmt::format(", reserving {}", FormatBytes(plan.reservation)) : "",
      JobsStateText(jobs), plan.params.dump());
}

void ProgressLog::set_jobs(const JobsState& jobs) {
  {
    std::lock_guard lock(mu_);
    counts_.jobs = jobs;
  }
  Redraw();
}

// A stale trial this run re-enqueued raises the target by one (optimize.h).
void ProgressLog::OnStaleTrial(const FailedStaleTrial& stale) {
  std::string retry = "not retried";
  {
    std::lock_guard lock(mu_);
    counts_.Add(stale.failed);
    if (stale.retry) {
      ++counts_.retried;
      const Json& history = stale.retry->system_attrs["retry_history"];
      retry = fmt::format("re-enqueued as trial {} with the same params (retry {} of {})",
                          stale.retry->number, history.size(), retry_failed_);
    } else if (retry_failed_ > 0) {
      retry = fmt::format("not retried: {} retries done", retry_failed_);
    }
  }
  spdlog::warn("Trial {} FAIL (stale: no heartbeat for {:.1f}s; its worker died or hung); {}",
               stale.failed.number, stale.heartbeat_age_seconds, retry);
  ShowProgress();
}

// Bar: redraws the status line. Lines: a progress line, unless one was written less than
// interval_ seconds ago (Finish writes the last one).
void ProgressLog::ShowProgress() {
  if (mode_ == ProgressMode::kBar) {
    Redraw();
    return;
  }
  if (mode_ == ProgressMode::kOff) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_line_ && std::chrono::duration<double>(now - *last_line_).count() < interval_) {
    unshown_ = true;
    return;
  }
  last_line_ = now;
  unshown_ = false;
  spdlog::info("Progress: {}", StatusText());
}

}  // namespace tune::app

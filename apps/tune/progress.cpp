#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "app.h"
#include "tune/text.h"
#include "tune/trial_attrs.h"

namespace tune::app {

// Stands in for the default logger's sinks on a terminal: before a log line it erases the
// status line, after it draws the status line again, so log lines scroll above it.
class StatusLineSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit StatusLineSink(std::vector<spdlog::sink_ptr> inner) : inner_(std::move(inner)) {}

  void SetStatus(std::string text) {
    std::lock_guard lock(mutex_);
    status_ = std::move(text);
    Draw();
  }
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
    Draw();
  }
  void flush_() override {
    for (auto& sink : inner_) sink->flush();
  }

 private:
  // The status, cut to the terminal's width so that it stays on one line.
  void Draw() {
    if (status_.empty()) return;
    winsize ws{};
    size_t width = 100;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
    std::string line = status_.size() < width ? status_ : status_.substr(0, width - 1);
    std::fputs(("\r\033[K\033[7m" + line + "\033[0m").c_str(), stderr);
    std::fflush(stderr);
  }

  std::vector<spdlog::sink_ptr> inner_;
  std::string status_;
};

// Redraws the status line once a second, so that elapsed time and ETA move between trials.
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

std::string Clock(double seconds) {
  auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

// Wraps the default logger's sinks in a StatusLineSink.
std::shared_ptr<StatusLineSink> InstallStatusLine() {
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<StatusLineSink>(logger->sinks());
  sink->set_level(spdlog::level::trace);
  logger->sinks() = {sink};
  return sink;
}

void UninstallStatusLine(const std::shared_ptr<StatusLineSink>& sink) {
  spdlog::default_logger()->sinks() = sink->inner();
}

}  // namespace

Result<ProgressMode> ParseProgressMode(const std::string& name) {
  if (name == "auto") return isatty(STDERR_FILENO) ? ProgressMode::kBar : ProgressMode::kLines;
  if (name == "bar") return ProgressMode::kBar;
  if (name == "lines") return ProgressMode::kLines;
  if (name == "off") return ProgressMode::kOff;
  const std::vector<std::string> valid = {"auto", "bar", "lines", "off"};
  return InvalidArgumentError(fmt::format("--progress: unknown mode '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

ProgressLog::ProgressLog(Study& study, const StudyConfig& config, ProgressMode mode,
                         double interval_seconds)
    : study_(study), config_(config), mode_(mode), interval_(interval_seconds) {
  if (auto prev = study.BestTrial(); prev.ok()) best_ = *prev;
  auto finished = study.storage().CountTrials(study.study_id(), kFinishedStates);
  done_ = finished.ok() ? *finished : 0;
  if (mode_ == ProgressMode::kBar) {
    sink_ = InstallStatusLine();
    Redraw();
    ticker_ = std::make_unique<Ticker>(*this);
  }
}

ProgressLog::~ProgressLog() { Finish(); }

void ProgressLog::Finish() {
  if (mode_ == ProgressMode::kLines && unshown_) {
    unshown_ = false;
    spdlog::info("Progress: {}", StatusText());
  }
  ticker_.reset();
  if (sink_) {
    sink_->Erase();
    UninstallStatusLine(sink_);
    sink_.reset();
  }
}

double ProgressLog::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLog::OnTrialFinished(const FrozenTrial& t, const TrialOutcome& outcome) {
  {
    std::lock_guard lock(mu_);
    ++run_;
    ++done_;
    complete_ += t.state == TrialState::kComplete;
    const bool oom = IsOomTrial(t);
    oom_ += oom;
    pruned_ += t.state == TrialState::kPruned && !oom;
    failed_ += t.state == TrialState::kFail;
    if (t.state == TrialState::kComplete && t.values.size() == 1 &&
        (!best_ || IsBetter(study_.direction(), t.value(), best_->value()))) {
      best_ = t;
    }
  }
  auto d = t.duration_seconds();
  std::string dur = d ? fmt::format("{:.2f}s", *d) : "-";
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
  set_jobs(jobs);
  spdlog::info("Trial {} started{}: {}; params: {}", t.number(),
               plan.reservation > 0 ? fmt::format(", reserving {}", FormatBytes(plan.reservation))
                                    : "",
               JobsStateText(jobs), plan.params.dump());
}

void ProgressLog::set_jobs(const JobsState& jobs) {
  {
    std::lock_guard lock(mu_);
    jobs_ = jobs;
  }
  Redraw();
}

// n_retried: stale trials this run re-enqueued; each raises the target by one (optimize.h).
void ProgressLog::OnStaleTrial(const FailedStaleTrial& stale) {
  std::string retry = "not retried";
  {
    std::lock_guard lock(mu_);
    ++done_;
    if (stale.retry) {
      ++retried_;
      const Json& history = stale.retry->system_attrs["retry_history"];
      retry = fmt::format("re-enqueued as trial {} with the same params (retry {} of {})",
                          stale.retry->number, history.size(), config_.retry_failed);
    } else if (config_.retry_failed > 0) {
      retry = fmt::format("not retried: {} retries done", config_.retry_failed);
    }
  }
  spdlog::warn("Trial {} FAIL (stale: no heartbeat for {:.1f}s; its worker died or hung); {}",
               stale.failed.number, stale.heartbeat_age_seconds, retry);
  Redraw();
}

// With n_trials: this run's wall time per finished trial times the trials left; with a
// timeout: the time left; with both, whichever ends the run first.
std::string ProgressLog::EtaText(double elapsed) const {
  std::optional<double> eta;
  if (config_.n_trials && run_ > 0) {
    const double left =
        static_cast<double>(std::max<int64_t>(0, *config_.n_trials + retried_ - done_));
    eta = elapsed / static_cast<double>(run_) * left;
  }
  if (config_.timeout_seconds) {
    const double left = std::max(0.0, *config_.timeout_seconds - elapsed);
    eta = eta ? std::min(*eta, left) : left;
  }
  return eta ? Clock(*eta) : "?";
}

std::string ProgressLog::StatusText() const {
  std::lock_guard lock(mu_);
  const double elapsed = elapsed_seconds();
  std::string running;
  if (jobs_) {
    running = " | " + JobsStateText(*jobs_);
  }
  return fmt::format(
      "{}/{} finished | {} COMPLETE, {} pruned, {} OOM, {} FAIL this run | best {}{} | elapsed {} "
      "| ETA {}",
      done_, config_.n_trials ? std::to_string(*config_.n_trials + retried_) : "-", complete_,
      pruned_, oom_, failed_,
      best_ ? fmt::format("{} (trial {})", ValueText(*best_), best_->number) : "-", running,
      Clock(elapsed), EtaText(elapsed));
}

void ProgressLog::Redraw() const {
  if (sink_) sink_->SetStatus(StatusText());
}

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

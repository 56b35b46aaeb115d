#include "tune/optimize.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tune/interrupt.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Records a heartbeat for the watched trial every `interval` on its own thread (Optuna's
// HeartbeatThread). A failed heartbeat is logged and retried at the next interval; a trial that
// has finished under it (failed as stale by another worker) is no longer watched.
class HeartbeatThread {
 public:
  HeartbeatThread(Storage& storage, double interval_seconds)
      : storage_(storage),
        interval_(std::chrono::duration_cast<SteadyClock::duration>(
            std::chrono::duration<double>(interval_seconds))),
        thread_([this] { Loop(); }) {}

  ~HeartbeatThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

  // Heartbeats for `trial_id` from one interval from now on (the start recorded the first).
  void Watch(int64_t trial_id) {
    {
      std::lock_guard lock(mu_);
      trial_ = trial_id;
      due_ = SteadyClock::now() + interval_;
    }
    cv_.notify_all();
  }

  void Unwatch() {
    std::lock_guard lock(mu_);
    trial_.reset();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!trial_) {
        cv_.wait(lock);
        continue;
      }
      if (SteadyClock::now() < due_) {
        cv_.wait_until(lock, due_);
        continue;
      }
      const int64_t id = *trial_;
      due_ = SteadyClock::now() + interval_;
      lock.unlock();
      Status s = storage_.RecordHeartbeat(id);
      lock.lock();
      if (s.ok() || trial_ != id) continue;
      if (s.code() == StatusCode::kFailedPrecondition) {
        spdlog::warn("Heartbeat of trial id {} refused ({}); no more heartbeats for it", id,
                     s.message());
        trial_.reset();
      } else {
        spdlog::warn("Heartbeat of trial id {} failed: {}; retrying in the next interval", id,
                     s.message());
      }
    }
  }

  Storage& storage_;
  const SteadyClock::duration interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int64_t> trial_;  // guarded by mu_
  SteadyClock::time_point due_;   // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  std::thread thread_;            // last: starts after the members above exist
};

// True if `status` came from writing to a trial that another worker has failed as stale
// meanwhile; logs it.
bool LostToStaleCheck(Study& study, const Trial& trial, const Status& status) {
  if (status.code() != StatusCode::kFailedPrecondition) return false;
  Result<FrozenTrial> now = study.storage().GetTrial(trial.trial_id());
  if (!now.ok() || now->state != TrialState::kFail) return false;
  spdlog::warn(
      "Trial {} was failed as stale by another worker while it ran (its heartbeats did not reach "
      "the storage within the grace period); its result is dropped",
      trial.number());
  return true;
}

// Sleeps `seconds` in short steps, returning early on Ctrl-C.
void SleepInterruptibly(double seconds) {
  const auto until = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                              std::chrono::duration<double>(seconds));
  while (!InterruptRequested() && SteadyClock::now() < until) {
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(std::chrono::milliseconds(50), until - SteadyClock::now()));
  }
}

}  // namespace

Status CheckHeartbeatSettings(const RunSettings& settings, const std::string& where) {
  if (!(settings.heartbeat_interval >= 0)) {
    return InvalidArgumentError(
        fmt::format("{}: the heartbeat interval must be >= 0 seconds (0: off), got {}", where,
                    settings.heartbeat_interval));
  }
  if (settings.grace_period && !(*settings.grace_period > settings.heartbeat_interval)) {
    return InvalidArgumentError(fmt::format(
        "{}: the grace period ({}s) must be greater than the heartbeat interval ({}s), or running "
        "trials would be failed as stale between two heartbeats",
        where, *settings.grace_period, settings.heartbeat_interval));
  }
  if (settings.retry_failed < 0) {
    return InvalidArgumentError(
        fmt::format("{}: the retry count must be >= 0, got {}", where, settings.retry_failed));
  }
  return Status::Ok();
}

namespace {

// One call of Optimize(): ask, sample, run, tell, with the stale-trial checks and the wait for
// other workers' running trials in between.
class OptimizeLoop {
 public:
  OptimizeLoop(Study& study, const ConditionalSpace& space, Objective& objective,
               const OptimizeOptions& options)
      : study_(study),
        space_(space),
        objective_(objective),
        options_(options),
        interval_(options.heartbeat_interval),
        grace_(options.GracePeriod()) {}

  Result<OptimizeResult> Run() {
    if (heartbeats() && !(grace_ > 0)) {
      return InvalidArgumentError("the grace period must be > 0 seconds");
    }
    if (heartbeats()) heartbeat_.emplace(study_.storage(), interval_);
    while (true) {
      TUNE_RETURN_IF_ERROR(CheckStaleTrials());
      // Recounted every time: other workers may share the study.
      TUNE_ASSIGN_OR_RETURN(result_.finished_total,
                            study_.storage().CountTrials(study_.study_id(), kFinishedStates));
      if (Done()) break;
      StartTrialOptions start_options;
      start_options.max_started = Target();
      start_options.heartbeat = heartbeats();
      TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, study_.Ask(start_options));
      if (!trial) {
        TUNE_ASSIGN_OR_RETURN(bool stop, WaitForRunningTrials());
        if (stop) break;
        continue;
      }
      waiting_ = false;
      TUNE_RETURN_IF_ERROR(RunTrial(*trial));
    }
    return result_;
  }

 private:
  bool heartbeats() const { return interval_ > 0; }

  // n_trials plus the stale trials this worker re-enqueued.
  std::optional<int64_t> Target() const {
    if (!options_.n_trials) return std::nullopt;
    return *options_.n_trials + extra_target_;
  }

  // Ctrl-C, the target reached, or the timeout passed.
  bool Done() {
    if (InterruptRequested()) {
      result_.interrupted = true;
      return true;
    }
    if (Target() && result_.finished_total >= *Target()) return true;
    if (options_.timeout_seconds && SecondsSince(start_) >= *options_.timeout_seconds) {
      result_.timed_out = true;
      return true;
    }
    return false;
  }

  // With heartbeats: at the start, then once per interval (every loop while waiting).
  Status CheckStaleTrials() {
    if (!heartbeats() ||
        (last_stale_check_ && SecondsSince(*last_stale_check_) < interval_ && !waiting_)) {
      return Status::Ok();
    }
    last_stale_check_ = SteadyClock::now();
    TUNE_ASSIGN_OR_RETURN(std::vector<FailedStaleTrial> stale,
                          study_.FailStaleTrials(grace_, options_.retry_failed));
    for (const FailedStaleTrial& s : stale) {
      ++result_.stale_failed;
      if (s.retry) {
        ++result_.stale_retried;
        ++extra_target_;
      }
      if (options_.on_stale_trial) options_.on_stale_trial(s);
    }
    return Status::Ok();
  }

  // The target is taken by running trials (of other workers, or of dead ones). Without
  // heartbeats, or with none running, stop; otherwise wait for them to finish or go stale (a dead
  // worker's trial heartbeated last before now, so it goes stale within the grace period).
  // Returns whether to stop.
  Result<bool> WaitForRunningTrials() {
    const std::optional<int64_t> target = Target();
    TUNE_ASSIGN_OR_RETURN(int64_t running,
                          study_.storage().CountTrials(study_.study_id(), {TrialState::kRunning}));
    const double patience = grace_ + interval_ + 1.0;
    if (!heartbeats() || running == 0) {
      spdlog::info("The target of {} trials is reached counting {} RUNNING trial(s); not "
                   "starting another",
                   *target, running);
      return true;
    }
    if (!waiting_) {
      waiting_ = true;
      waiting_since_ = SteadyClock::now();
      spdlog::info("The target of {} trials is reached counting {} RUNNING trial(s): waiting "
                   "up to {:.0f}s for them to finish (or go stale, if their worker died)",
                   *target, running, patience);
    } else if (SecondsSince(waiting_since_) > patience) {
      spdlog::info("{} trial(s) still RUNNING after {:.0f}s, with live heartbeats: other "
                   "workers will finish them; stopping",
                   running, patience);
      return true;
    }
    SleepInterruptibly(std::min(interval_, 1.0));
    return false;
  }

  // Samples and runs one trial and tells its outcome. A non-OK Status (tune could not run the
  // trial, or not store its outcome) fails the trial, so the study stays consistent, and stops.
  Status RunTrial(Trial& trial) {
    if (heartbeat_) heartbeat_->Watch(trial.trial_id());
    Result<Json> params = space_.Sample(trial);
    Result<TrialOutcome> outcome =
        params.ok() ? objective_.Run(trial, *params) : Result<TrialOutcome>(params.status());
    if (heartbeat_) heartbeat_->Unwatch();
    Result<FrozenTrial> told = outcome.ok() ? study_.Tell(trial, outcome->state, outcome->values)
                                            : Result<FrozenTrial>(outcome.status());
    if (!told.ok()) {
      if (LostToStaleCheck(study_, trial, told.status())) {
        ++result_.trials_lost;
        return Status::Ok();
      }
      (void)trial.SetUserAttr(attrs::kFailReason, told.status().message());
      (void)study_.Tell(trial, TrialState::kFail);
      return told.status().WithContext("trial " + std::to_string(trial.number()));
    }
    ++result_.trials_run;
    if (options_.on_trial_finished) options_.on_trial_finished(*told, *outcome);
    return Status::Ok();
  }

  Study& study_;
  const ConditionalSpace& space_;
  Objective& objective_;
  const OptimizeOptions& options_;
  const double interval_;
  const double grace_;
  const SteadyClock::time_point start_ = SteadyClock::now();
  std::optional<HeartbeatThread> heartbeat_;
  OptimizeResult result_;
  std::optional<SteadyClock::time_point> last_stale_check_;
  bool waiting_ = false;  // for running trials (of others) to finish or go stale
  SteadyClock::time_point waiting_since_{};
  int64_t extra_target_ = 0;  // stale trials this worker re-enqueued
};

}  // namespace

Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options) {
  return OptimizeLoop(study, space, objective, options).Run();
}

}  // namespace tune

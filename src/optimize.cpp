#include "tune/optimize.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tune/interrupt.h"

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

Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options) {
  const auto start = SteadyClock::now();
  const double interval = options.heartbeat_interval;
  const bool heartbeats = interval > 0;
  const double grace = options.GracePeriod();
  if (heartbeats && !(grace > 0)) {
    return InvalidArgumentError("the grace period must be > 0 seconds");
  }
  std::optional<HeartbeatThread> heartbeat;
  if (heartbeats) heartbeat.emplace(study.storage(), interval);

  OptimizeResult result;
  std::optional<SteadyClock::time_point> last_stale_check;
  bool waiting = false;  // for running trials (of others) to finish or go stale
  SteadyClock::time_point waiting_since{};
  int64_t extra_target = 0;  // stale trials this worker re-enqueued
  while (true) {
    if (heartbeats &&
        (!last_stale_check || SecondsSince(*last_stale_check) >= interval || waiting)) {
      last_stale_check = SteadyClock::now();
      TUNE_ASSIGN_OR_RETURN(std::vector<FailedStaleTrial> stale,
                            study.FailStaleTrials(grace, options.retry_failed));
      for (const FailedStaleTrial& s : stale) {
        ++result.stale_failed;
        if (s.retry) {
          ++result.stale_retried;
          ++extra_target;
        }
        if (options.on_stale_trial) options.on_stale_trial(s);
      }
    }
    // Recounted every time: other workers may share the study.
    TUNE_ASSIGN_OR_RETURN(result.finished_total,
                          study.storage().CountTrials(study.study_id(), kFinishedStates));
    if (InterruptRequested()) {
      result.interrupted = true;
      break;
    }
    std::optional<int64_t> target;
    if (options.n_trials) target = *options.n_trials + extra_target;
    if (target && result.finished_total >= *target) break;
    if (options.timeout_seconds && SecondsSince(start) >= *options.timeout_seconds) {
      result.timed_out = true;
      break;
    }
    StartTrialOptions start_options;
    start_options.max_started = target;
    start_options.heartbeat = heartbeats;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, study.Ask(start_options));
    if (!trial) {
      // The target is taken by running trials (of other workers, or of dead ones).
      TUNE_ASSIGN_OR_RETURN(int64_t running,
                            study.storage().CountTrials(study.study_id(), {TrialState::kRunning}));
      // A dead worker's trial heartbeated last before now: it goes stale within `grace`, and
      // the check below runs at least once per interval while waiting.
      const double patience = grace + interval + 1.0;
      if (!heartbeats || running == 0) {
        spdlog::info("The target of {} trials is reached counting {} RUNNING trial(s); not "
                     "starting another",
                     *target, running);
        break;
      }
      if (!waiting) {
        waiting = true;
        waiting_since = SteadyClock::now();
        spdlog::info("The target of {} trials is reached counting {} RUNNING trial(s): waiting "
                     "up to {:.0f}s for them to finish (or go stale, if their worker died)",
                     *target, running, patience);
      } else if (SecondsSince(waiting_since) > patience) {
        spdlog::info("{} trial(s) still RUNNING after {:.0f}s, with live heartbeats: other "
                     "workers will finish them; stopping",
                     running, patience);
        break;
      }
      SleepInterruptibly(std::min(interval, 1.0));
      continue;
    }
    waiting = false;
    if (heartbeat) heartbeat->Watch(trial->trial_id());
    Result<Json> params = space.Sample(*trial);
    Result<TrialOutcome> outcome =
        params.ok() ? objective.Run(*trial, *params) : Result<TrialOutcome>(params.status());
    if (heartbeat) heartbeat->Unwatch();
    if (!outcome.ok()) {
      if (LostToStaleCheck(study, *trial, outcome.status())) {
        ++result.trials_lost;
        continue;
      }
      // tune could not run the trial (bad parameter, program not startable): record why, fail the
      // trial so the study stays consistent, and stop.
      Status st = outcome.status();
      (void)trial->SetUserAttr("fail_reason", st.message());
      (void)study.Tell(*trial, TrialState::kFail);
      return st.WithContext("trial " + std::to_string(trial->number()));
    }
    Result<FrozenTrial> told = study.Tell(*trial, outcome->state, outcome->values);
    if (!told.ok()) {
      if (LostToStaleCheck(study, *trial, told.status())) {
        ++result.trials_lost;
        continue;
      }
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

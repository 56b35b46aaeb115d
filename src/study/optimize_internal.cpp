// The pieces both optimize loops share (optimize_internal.h).
#include "study/optimize_internal.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "tune/trial_attrs.h"
#include "util/interrupt.h"

namespace tune::internal {

HeartbeatThread::HeartbeatThread(Storage& storage, double interval_seconds)
    : storage_(storage),
      interval_(std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(interval_seconds))),
      thread_([this] { Loop(); }) {}

HeartbeatThread::~HeartbeatThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeartbeatThread::Watch(int64_t trial_id) {
  {
    std::lock_guard lock(mu_);
    due_[trial_id] = SteadyClock::now() + interval_;
  }
  cv_.notify_all();
}

void HeartbeatThread::Unwatch(int64_t trial_id) {
  std::lock_guard lock(mu_);
  due_.erase(trial_id);
}

void HeartbeatThread::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto next = std::min_element(due_.begin(), due_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (SteadyClock::now() < next->second) {
      // A copy: wait_until reads its deadline by reference after waking, and Unwatch may erase
      // the entry while the lock is released (AddressSanitizer's heap-use-after-free).
      const SteadyClock::time_point deadline = next->second;
      cv_.wait_until(lock, deadline);
      continue;
    }
    const int64_t id = next->first;
    next->second = SteadyClock::now() + interval_;
    lock.unlock();
    Status s = storage_.RecordHeartbeat(id);
    lock.lock();
    if (s.ok() || !due_.count(id)) continue;
    if (s.code() == StatusCode::kFailedPrecondition) {
      spdlog::warn("Heartbeat of trial id {} refused ({}); no more heartbeats for it", id,
                   s.message());
      due_.erase(id);
    } else {
      spdlog::warn("Heartbeat of trial id {} failed: {}; retrying in the next interval", id,
                   s.message());
    }
  }
}

Status FailStaleTrials(Study& study, const OptimizeOptions& options, double grace,
                       OptimizeResult& result, int64_t& extra_target) {
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
  return Status::Ok();
}

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

namespace {

// Creates the WAITING copy of `told` (marked with the system attribute `mark`); false once its
// retries are used up.
Result<bool> Reenqueue(Study& study, const FrozenTrial& told, int64_t max_retry, const char* mark,
                       const char* what) {
  std::optional<FrozenTrial> retry = RetryOfStaleTrial(told, max_retry);
  if (!retry) {
    spdlog::warn("Trial {} {}; not retried: {} retries done", told.number, what, max_retry);
    return false;
  }
  retry->user_attrs = Json::object();  // a new attempt: no outcome of the old one
  retry->system_attrs[mark] = true;
  TUNE_ASSIGN_OR_RETURN(FrozenTrial created,
                        study.storage().CreateTrial(study.study_id(), &*retry));
  spdlog::info("Trial {} {}; its params are re-enqueued as trial {} (attempt {} of {})",
               told.number, what, created.number, retry->system_attrs["retry_history"].size() + 1,
               max_retry + 1);
  return true;
}

std::string UserAttrText(const FrozenTrial& told, const char* key) {
  const auto it = told.user_attrs.find(key);
  return it != told.user_attrs.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Result<bool> RetryEndedTrial(Study& study, const OptimizeOptions& options,
                             const FrozenTrial& told) {
  const std::string reason = UserAttrText(told, attrs::kReason);
  if (options.retry_oom > 0 && told.state == TrialState::kPruned &&
      reason == EndReasonName(EndReason::kOom)) {
    return Reenqueue(study, told, options.retry_oom, "oom_retry", "ran out of memory");
  }
  if (options.retry_failed > 0 && told.state == TrialState::kFail &&
      reason == EndReasonName(EndReason::kInterrupted) && TerminateRequested()) {
    return Reenqueue(study, told, options.retry_failed, "interrupt_retry",
                     "was stopped by SIGTERM");
  }
  return false;
}

Result<int64_t> CountRetries(Study& study) {
  TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> trials, study.Trials());
  return static_cast<int64_t>(std::count_if(trials.begin(), trials.end(), [](const FrozenTrial& t) {
    return t.system_attrs.is_object() && (t.system_attrs.value("oom_retry", false) ||
                                          t.system_attrs.value("interrupt_retry", false));
  }));
}

void SleepInterruptibly(double seconds) {
  const auto until = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                              std::chrono::duration<double>(seconds));
  while (!InterruptRequested() && SteadyClock::now() < until) {
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(std::chrono::milliseconds(50), until - SteadyClock::now()));
  }
}

}  // namespace tune::internal

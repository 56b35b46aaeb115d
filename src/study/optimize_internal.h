// Pieces the sequential and the parallel (--jobs) optimize loops share [tune_core, private].
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "tune/optimize.h"
#include "tune/status.h"
#include "tune/storages/storage.h"
#include "tune/study.h"

namespace tune::internal {

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Records a heartbeat for each watched trial every `interval` on its own thread (Optuna's
// HeartbeatThread). A failed heartbeat is logged and retried at the next interval; a trial that
// has finished under it (failed as stale by another worker) is no longer watched.
class HeartbeatThread {
 public:
  HeartbeatThread(Storage& storage, double interval_seconds);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

  // Heartbeats for `trial_id` from one interval from now on (the start recorded the first).
  void Watch(int64_t trial_id);
  void Unwatch(int64_t trial_id);

 private:
  void Loop();

  Storage& storage_;
  const SteadyClock::duration interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, SteadyClock::time_point> due_;  // watched trial ids; guarded by mu_
  bool stop_ = false;                               // guarded by mu_
  std::thread thread_;                              // last: starts after the members above exist
};

// True if `status` came from writing to a trial that another worker has failed as stale
// meanwhile; logs it.
bool LostToStaleCheck(Study& study, const Trial& trial, const Status& status);

// Fails the study's trials without a heartbeat for `grace` seconds (Study::FailStaleTrials),
// counts them and their retries in `result`, raises `extra_target` by one per retry (so it runs)
// and calls options.on_stale_trial for each.
Status FailStaleTrials(Study& study, const OptimizeOptions& options, double grace,
                       OptimizeResult& result, int64_t& extra_target);

// Re-enqueues `told` with its params (RetryOfStaleTrial's bookkeeping: failed_trial,
// retry_history) when it did not end on its own merits and may be tried again:
//   - it ran out of memory at run time (reason "oom") and retry_oom > 0: system attr oom_retry;
//   - it was stopped by SIGTERM (a scheduler's preemption, time limit or scancel) and
//     retry_failed > 0, as a stale trial would be: system attr interrupt_retry.
// At most retry_oom / retry_failed retries per original trial. True when it re-enqueued.
Result<bool> RetryEndedTrial(Study& study, const OptimizeOptions& options, const FrozenTrial& told);

// The study's retries that any worker runs (every worker's target counts them): trials with the
// system attribute "oom_retry" or "interrupt_retry" that RetryEndedTrial sets.
Result<int64_t> CountRetries(Study& study);

// Whether the study's retries are worth counting (RetryEndedTrial can make some).
inline bool MakesStudyRetries(const OptimizeOptions& options) {
  return options.retry_oom > 0 || options.retry_failed > 0;
}

// Sleeps `seconds` in short steps, returning early on Ctrl-C.
void SleepInterruptibly(double seconds);

// Optimize() with RunSettings::jobs != 1 (optimize_jobs.cpp).
Result<OptimizeResult> OptimizeWithJobs(Study& study, const ConditionalSpace& space,
                                        Objective& objective, const OptimizeOptions& options);

}  // namespace tune::internal

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

// With options.retry_oom > 0: re-enqueues `told` when it ran out of memory at run time (reason
// "oom") and has been retried fewer than retry_oom times (RetryOfStaleTrial's bookkeeping). True
// when it did.
Result<bool> RetryOutOfMemory(Study& study, const OptimizeOptions& options,
                              const FrozenTrial& told);

// The study's out-of-memory retries (any worker's): trials with the system attribute
// "oom_retry" that RetryOutOfMemory sets.
Result<int64_t> CountRetries(Study& study);

// Sleeps `seconds` in short steps, returning early on Ctrl-C.
void SleepInterruptibly(double seconds);

// Optimize() with RunSettings::jobs != 1 (optimize_jobs.cpp).
Result<OptimizeResult> OptimizeWithJobs(Study& study, const ConditionalSpace& space,
                                        Objective& objective, const OptimizeOptions& options);

}  // namespace tune::internal

// The tracker: hands a study's finished trials to its sinks (MLflow, TensorBoard) on threads of
// its own, so that the study never waits for a tracking server. Each sink has its own queue and
// as many threads as its concurrency(). A sink that fails (a server down, a full disk) costs its
// trials, counted and warned about once per outage, never the study's.
// Thread-safe: Add from any thread; Finish once (the destructor calls it otherwise).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tracking/sink.h"
#include "tracking/tracking_options.h"

namespace tune {

// The sinks `options` names: MLflow (over libcurl), then TensorBoard.
std::vector<std::unique_ptr<TrackingSink>> NewSinks(const TrackingOptions& options,
                                                    const TrackedStudy& study);

// Trials waiting for one sink beyond this are dropped (the oldest first) and counted as missed.
inline constexpr size_t kMaxQueuedTrials = 100000;
// Trials are handed to a sink's threads in batches: the threads are woken when a trial arrives
// at an empty queue, then wait until kTrackingBatch trials are queued or kTrackingBatchDelay has
// passed, whichever is first. A study of fast trials wakes them once per batch rather than once
// per trial (a wake-up is a system call on the study's thread); a trial is recorded at most
// kTrackingBatchDelay later than without batching.
inline constexpr size_t kTrackingBatch = 32;
inline constexpr std::chrono::milliseconds kTrackingBatchDelay{100};

struct SinkCounts {
  std::string sink;      // the sink's name()
  int64_t recorded = 0;  // trials it recorded
  int64_t missed = 0;    // trials it did not (errors, a full queue, Finish's time running out)
  std::string last_error;
};

// The tally of `trials` (finished ones counted, in order).
StudyTally TallyOf(const std::vector<FrozenTrial>& trials,
                   const std::vector<StudyDirection>& directions);

class Tracker {
 public:
  // Starts the threads. `stored`: the study's trials so far; the finished ones start the tally
  // (counts by outcome, best value), and are not recorded again.
  Tracker(std::vector<std::unique_ptr<TrackingSink>> sinks, TrackedStudy study,
          const std::vector<FrozenTrial>& stored);
  ~Tracker();  // Finish(0) unless Finish ran
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Counts a finished trial into the tally and queues it for every sink; returns at once.
  void Add(const FrozenTrial& trial);

  // Records what is still queued, as long as some sink finishes a trial at least every
  // `stall_seconds`; what is left after that is missed. Then each sink that was left nothing
  // records the study's counts: `final_tally()`'s when given and not nullopt (called once the
  // queues are done: the storage's counts, over every worker of the study), else this
  // tracker's own. Logs one line per sink. Idempotent: later calls return the first one's counts.
  std::vector<SinkCounts> Finish(
      double stall_seconds,
      const std::function<std::optional<StudyTally>()>& final_tally = nullptr);

 private:
  struct Item {
    std::shared_ptr<const FrozenTrial> trial;
    std::shared_ptr<const StudyTally> tally;  // with the trial counted
  };
  // One sink's queue and threads; guarded by mu_ but for `sink`, which only its threads call
  // (and Finish, after joining them).
  struct Lane {
    std::unique_ptr<TrackingSink> sink;
    SinkCounts counts;
    bool failing = false;  // its last call failed (warned once per outage)
    std::deque<Item> queue;
    int busy = 0;         // Record calls running
    bool dirty = false;   // recorded since the sink's last Flush
    int64_t dropped = 0;  // by a full queue
    std::vector<std::thread> threads;
  };

  void Work(Lane& lane);
  // Counts one Record's outcome; REQUIRES: mu_ held.
  void Settle(Lane& lane, const FrozenTrial& trial, const Status& st);
  // The sink's Flush, when the lane is drained and nothing is in flight; REQUIRES: `lock` holds
  // mu_ (released during the call).
  void FlushIfDrained(Lane& lane, std::unique_lock<std::mutex>& lock);
  bool Idle() const;  // REQUIRES: mu_ held

  TrackedStudy study_;
  std::vector<std::unique_ptr<Lane>> lanes_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // a trial queued, or finishing
  std::condition_variable done_cv_;  // a Record returned
  StudyTally tally_;
  int64_t settled_ = 0;  // Record calls returned, for Finish's stall check
  bool finishing_ = false;
  bool abandon_ = false;  // Finish's time ran out: leave what is queued
  bool finished_ = false;
};

}  // namespace tune

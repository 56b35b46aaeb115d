// The tracker: hands a study's finished trials to its sinks (MLflow, TensorBoard) on a thread of
// its own, so that the study never waits for a tracking server. A sink that fails (a server
// down, a full disk) costs its trials, counted and warned about once per outage, never the
// study's. Thread-safe: Add from any thread; Finish once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tracking/sink.h"
#include "tracking/tracking_options.h"

namespace tune {

// The sinks `options` names: MLflow (over libcurl), then TensorBoard.
std::vector<std::unique_ptr<TrackingSink>> NewSinks(const TrackingOptions& options,
                                                    const TrackedStudy& study);

// Trials waiting for the sinks beyond this are dropped (the oldest first) and counted as missed.
inline constexpr size_t kMaxQueuedTrials = 100000;

struct SinkCounts {
  std::string sink;      // the sink's name()
  int64_t recorded = 0;  // trials it recorded
  int64_t missed = 0;    // trials it did not (errors, a full queue, Finish's time running out)
  std::string last_error;
};

class Tracker {
 public:
  // Starts the thread. `stored`: the study's trials so far; the finished ones start the tally
  // (counts by outcome, best value), and are not recorded again.
  Tracker(std::vector<std::unique_ptr<TrackingSink>> sinks, TrackedStudy study,
          const std::vector<FrozenTrial>& stored);
  ~Tracker();  // Finish(0) unless Finish ran
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Queues a finished trial for every sink; returns at once.
  void Add(const FrozenTrial& trial);
  // Records what is still queued, as long as a trial leaves the queue at least every
  // `stall_seconds`, then each sink's tally; what is left after that is missed. Logs one warning
  // per sink that missed trials. Idempotent.
  std::vector<SinkCounts> Finish(double stall_seconds);

 private:
  void Run();
  void RecordOne(const FrozenTrial& trial);

  TrackedStudy study_;
  std::vector<std::unique_ptr<TrackingSink>> sinks_;
  std::vector<SinkCounts> counts_;  // one per sink; the thread's until Finish joins it
  std::vector<bool> failing_;       // a sink's last call failed (warned once per outage)
  StudyTally tally_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<FrozenTrial> queue_;
  int64_t dropped_ = 0;  // by a full queue
  bool finishing_ = false;
  bool abandon_ = false;  // Finish's time ran out: count what is left as missed
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace tune

#include "tracking/tracker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>

#include "tracking/mlflow.h"
#include "tracking/tensorboard.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

// The tracker's threads are background work: at a lower priority (nice + 10, this thread only,
// as Linux applies setpriority to a thread id) a tracker thread woken by the study's thread does
// not take that thread's core from it while another core is idle, and under full load it gets a
// small share, not half. Best effort: a failure leaves the priority as it was.
void LowerThisThreadsPriority() {
#ifdef __linux__
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)::setpriority(PRIO_PROCESS, tid, std::min(now + 10, 19));
#endif
}

}  // namespace

std::vector<std::unique_ptr<TrackingSink>> NewSinks(const TrackingOptions& options,
                                                    const TrackedStudy& study) {
  std::vector<std::unique_ptr<TrackingSink>> sinks;
  if (options.mlflow) sinks.push_back(NewMlflowSink(*options.mlflow, study));
  if (options.tensorboard) sinks.push_back(NewTensorBoardSink(*options.tensorboard, study));
  return sinks;
}

bool StudyTally::Add(const FrozenTrial& trial, const std::vector<StudyDirection>& directions) {
  if (trial.state != TrialState::kComplete && trial.state != TrialState::kPruned &&
      trial.state != TrialState::kFail) {
    return false;
  }
  ++by_state[TrialStateName(trial.state)];
  if (trial.state == TrialState::kPruned && IsOomTrial(trial)) {
    const std::optional<EndReason> reason = TrialEndReason(trial);
    (reason == EndReason::kPredicted ? predicted : oom)++;
  }
  if (trial.state != TrialState::kComplete || directions.size() != 1 || trial.values.size() != 1 ||
      !std::isfinite(trial.values[0])) {
    return false;
  }
  const double v = trial.values[0];
  const bool better = !best_value || (directions[0] == StudyDirection::kMaximize ? v > *best_value
                                                                                 : v < *best_value);
  if (better) {
    best_value = v;
    best_trial = trial.number;
  }
  return better;
}

StudyTally TallyOf(const std::vector<FrozenTrial>& trials,
                   const std::vector<StudyDirection>& directions) {
  StudyTally tally;
  for (const FrozenTrial& t : trials) tally.Add(t, directions);
  return tally;
}

Tracker::Tracker(std::vector<std::unique_ptr<TrackingSink>> sinks, TrackedStudy study,
                 const std::vector<FrozenTrial>& stored)
    : study_(std::move(study)), tally_(TallyOf(stored, study_.directions)) {
  for (auto& sink : sinks) {
    auto lane = std::make_unique<Lane>();
    lane->counts.sink = sink->name();
    lane->sink = std::move(sink);
    lanes_.push_back(std::move(lane));
  }
  for (auto& lane : lanes_) {
    const int threads = std::max(1, lane->sink->concurrency());
    for (int i = 0; i < threads; ++i) {
      lane->threads.emplace_back([this, l = lane.get()] { Work(*l); });
    }
  }
}

Tracker::~Tracker() { (void)Finish(0); }

void Tracker::Add(const FrozenTrial& trial) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    tally_.Add(trial, study_.directions);
    Item item{std::make_shared<const FrozenTrial>(trial),
              std::make_shared<const StudyTally>(tally_)};
    for (auto& lane : lanes_) {
      if (lane->queue.size() >= kMaxQueuedTrials) {
        lane->queue.pop_front();
        ++lane->dropped;
      }
      lane->queue.push_back(item);
      // Threads asleep on an empty queue wake for the first trial; those waiting for a batch
      // wake for a full one (or at their delay's end).
      wake = wake || lane->queue.size() == 1 || lane->queue.size() == kTrackingBatch;
    }
  }
  if (wake) work_cv_.notify_all();
}

void Tracker::Settle(Lane& lane, const FrozenTrial& trial, const Status& st) {
  ++settled_;
  SinkCounts& counts = lane.counts;
  if (st.ok()) {
    ++counts.recorded;
    if (lane.failing) spdlog::info("{}: recording again, from trial {}", counts.sink, trial.number);
    lane.failing = false;
    return;
  }
  ++counts.missed;
  counts.last_error = st.message();
  if (!lane.failing) {
    spdlog::warn(
        "{}: trial {} not recorded: {} (the study goes on; later trials are tried "
        "again)",
        counts.sink, trial.number, st.message());
  }
  lane.failing = true;
}

void Tracker::Work(Lane& lane) {
  LowerThisThreadsPriority();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return abandon_ || finishing_ || !lane.queue.empty(); });
    // A trial is queued: wait for a batch of them, unless the study is finishing.
    work_cv_.wait_for(lock, kTrackingBatchDelay, [&] {
      return abandon_ || finishing_ || lane.queue.size() >= kTrackingBatch;
    });
    while (!abandon_ && !lane.queue.empty()) {
      Item item = std::move(lane.queue.front());
      lane.queue.pop_front();
      ++lane.busy;
      lock.unlock();
      const Status st = lane.sink->Record(*item.trial, *item.tally);
      lock.lock();
      --lane.busy;
      lane.dirty = true;
      Settle(lane, *item.trial, st);
      done_cv_.notify_all();
    }
    if (!abandon_) FlushIfDrained(lane, lock);
    if (abandon_ || (finishing_ && lane.queue.empty())) break;
  }
}

void Tracker::FlushIfDrained(Lane& lane, std::unique_lock<std::mutex>& lock) {
  if (!lane.dirty || !lane.queue.empty() || lane.busy > 0) return;
  lane.dirty = false;
  ++lane.busy;  // no other thread of the lane records, or flushes, meanwhile
  lock.unlock();
  const Status st = lane.sink->Flush();
  lock.lock();
  --lane.busy;
  if (!st.ok()) {
    lane.counts.last_error = st.message();
    if (!lane.failing) {
      spdlog::warn("{}: writing out failed: {} (the study goes on)", lane.counts.sink,
                   st.message());
    }
    lane.failing = true;
  }
  done_cv_.notify_all();
}

bool Tracker::Idle() const {
  for (const auto& lane : lanes_) {
    if (!lane->queue.empty() || lane->busy > 0) return false;
  }
  return true;
}

std::vector<SinkCounts> Tracker::Finish(
    double stall_seconds, const std::function<std::optional<StudyTally>()>& final_tally) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) {
    std::vector<SinkCounts> counts;
    for (const auto& lane : lanes_) counts.push_back(lane->counts);
    return counts;
  }
  finished_ = true;
  finishing_ = true;
  work_cv_.notify_all();
  const auto start = std::chrono::steady_clock::now();
  size_t queued = 0;
  for (const auto& lane : lanes_) queued = std::max(queued, lane->queue.size());
  if (queued > 0) spdlog::info("Tracking: recording the {} trial(s) still queued", queued);
  // The threads empty the queues (and exit) unless no Record returns for stall_seconds.
  const auto stall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.0, stall_seconds)));
  int64_t seen = settled_;
  auto deadline = std::chrono::steady_clock::now() + stall;
  while (!Idle()) {
    const bool timed_out = done_cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    if (settled_ != seen) {
      seen = settled_;
      deadline = std::chrono::steady_clock::now() + stall;
    } else if (timed_out) {
      break;
    }
  }
  abandon_ = true;
  work_cv_.notify_all();
  lock.unlock();
  for (auto& lane : lanes_) {
    for (std::thread& t : lane->threads) t.join();
  }
  // The threads are gone (joined: their writes are visible), and Add returns at once while
  // finishing: what follows reads the lanes without the lock, and calls the sinks without it.
  if (queued > 0) {
    spdlog::info("Tracking: the queue took {:.1f}s after the last trial",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::optional<StudyTally> storage_tally;
  if (final_tally) storage_tally = final_tally();
  const StudyTally& tally = storage_tally ? *storage_tally : tally_;
  std::vector<SinkCounts> out;
  for (auto& lane : lanes_) {
    SinkCounts& counts = lane->counts;
    const int64_t left = static_cast<int64_t>(lane->queue.size()) + lane->dropped;
    counts.missed += left;
    lane->queue.clear();
    if (left == 0) {  // it kept up: it has the study's counts too
      if (Status st = lane->sink->RecordTally(tally); !st.ok()) {
        spdlog::warn("{}: the study's counts not recorded: {}", counts.sink, st.message());
      }
    }
    if (counts.missed == 0) {
      spdlog::info("{}: {} trial(s) of this run recorded", counts.sink, counts.recorded);
    } else {
      const std::string hint = lane->sink->MissedHint();
      spdlog::warn(
          "{}: {} of {} trial(s) of this run not recorded{}{}", counts.sink, counts.missed,
          counts.missed + counts.recorded,
          counts.last_error.empty() ? std::string() : " (last error: " + counts.last_error + ")",
          hint.empty() ? std::string() : "; " + hint);
    }
    out.push_back(counts);
  }
  return out;
}

}  // namespace tune

#include "tracking/tracker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "tracking/mlflow.h"
#include "tracking/tensorboard.h"
#include "tune/trial_attrs.h"

namespace tune {

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

Tracker::Tracker(std::vector<std::unique_ptr<TrackingSink>> sinks, TrackedStudy study,
                 const std::vector<FrozenTrial>& stored)
    : study_(std::move(study)), sinks_(std::move(sinks)) {
  for (const auto& sink : sinks_) counts_.push_back({sink->name()});
  failing_.assign(sinks_.size(), false);
  for (const FrozenTrial& t : stored) tally_.Add(t, study_.directions);
  thread_ = std::thread([this] { Run(); });
}

Tracker::~Tracker() { (void)Finish(0); }

void Tracker::Add(const FrozenTrial& trial) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    if (queue_.size() >= kMaxQueuedTrials) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back(trial);
  }
  cv_.notify_one();
}

void Tracker::RecordOne(const FrozenTrial& trial) {
  tally_.Add(trial, study_.directions);
  for (size_t i = 0; i < sinks_.size(); ++i) {
    const Status st = sinks_[i]->Record(trial, tally_);
    if (st.ok()) {
      ++counts_[i].recorded;
      if (failing_[i])
        spdlog::info("{}: recording again, from trial {}", counts_[i].sink, trial.number);
      failing_[i] = false;
      continue;
    }
    ++counts_[i].missed;
    counts_[i].last_error = st.message();
    if (!failing_[i]) {
      spdlog::warn(
          "{}: trial {} not recorded: {} (the study goes on; later trials are tried "
          "again)",
          counts_[i].sink, trial.number, st.message());
    }
    failing_[i] = true;
  }
}

void Tracker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !queue_.empty() || finishing_; });
    if (abandon_ || (queue_.empty() && finishing_)) break;
    FrozenTrial trial = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    RecordOne(trial);
    lock.lock();
  }
}

std::vector<SinkCounts> Tracker::Finish(double stall_seconds) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_) return counts_;
    finished_ = true;
    finishing_ = true;
    cv_.notify_all();
    const auto start = std::chrono::steady_clock::now();
    const size_t queued = queue_.size();
    if (queued > 0) spdlog::info("Tracking: recording the {} trial(s) still queued", queued);
    // The thread empties the queue (and exits) unless it makes no progress for stall_seconds.
    const auto stall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(stall_seconds));
    size_t last_size = queue_.size();
    auto last_progress = std::chrono::steady_clock::now();
    while (!queue_.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (queue_.size() != last_size) {
        last_size = queue_.size();
        last_progress = now;
      } else if (now - last_progress >= stall) {
        break;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      lock.lock();
    }
    abandon_ = true;
    cv_.notify_all();
    lock.unlock();
    thread_.join();
    if (queued > 0) {
      spdlog::info("Tracking: the queue took {:.1f}s after the last trial",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  const int64_t left = static_cast<int64_t>(queue_.size()) + dropped_;
  queue_.clear();
  for (size_t i = 0; i < sinks_.size(); ++i) {
    counts_[i].missed += left;
    if (left == 0) {
      if (Status st = sinks_[i]->RecordTally(tally_); !st.ok()) {
        spdlog::warn("{}: the study's counts not recorded: {}", counts_[i].sink, st.message());
      }
    }
    if (counts_[i].missed == 0) {
      spdlog::info("{}: {} trial(s) of this run recorded", counts_[i].sink, counts_[i].recorded);
    } else {
      const std::string hint = sinks_[i]->MissedHint();
      spdlog::warn("{}: {} of {} trial(s) of this run not recorded{}{}", counts_[i].sink,
                   counts_[i].missed, counts_[i].missed + counts_[i].recorded,
                   counts_[i].last_error.empty() ? std::string()
                                                 : " (last error: " + counts_[i].last_error + ")",
                   hint.empty() ? std::string() : "; " + hint);
    }
  }
  return counts_;
}

}  // namespace tune

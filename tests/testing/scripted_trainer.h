// A Trainer that replays a scripted learning curve instead of training (for tests of the train
// objective without LibTorch). It records every job it was given.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace tune::testing {

class ScriptedTrainer : public Trainer {
 public:
  // Epoch e reports curve[e] as every metric (validation_loss = 1 - curve[e]).
  explicit ScriptedTrainer(std::vector<double> curve) : curve_(std::move(curve)) {}

  // The run ends at `epoch` (before its evaluation) with `end` and `message`.
  void EndAt(int64_t epoch, TrainResult::End end, std::string message,
             Json details = Json::object()) {
    end_epoch_ = epoch;
    end_ = end;
    message_ = std::move(message);
    details_ = std::move(details);
  }

  std::string name() const override { return "scripted"; }

  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) override {
    jobs.push_back(job);
    TrainResult r;
    r.num_parameters = 1234;
    if (peak_per_example > 0) r.peak_memory_bytes = peak_per_example * job.hp.batch_size;
    for (int64_t e = 0; e < job.hp.epochs; ++e) {
      if (end_epoch_ && *end_epoch_ == e) {
        r.end = end_;
        r.message = message_;
        r.details = details_;
        return r;
      }
      EpochMetrics m;
      m.epoch = e;
      const double v = curve_.at(
          static_cast<size_t>(std::min<int64_t>(e, static_cast<int64_t>(curve_.size()) - 1)));
      m.classification.accuracy = m.classification.macro_f1 = v;
      m.validation_loss = 1.0 - v;
      m.train_loss = 1.0 - v;
      m.seconds = epoch_seconds;
      r.epochs.push_back(m);
      auto decision = on_epoch(m);
      if (!decision.ok()) return decision.status();
      if (*decision == EpochDecision::kStop) {
        r.end = TrainResult::End::kStopped;
        return r;
      }
    }
    return r;
  }

  std::vector<TrainJob> jobs;
  // When > 0: the run's measured peak is this many bytes per example of the micro-batch.
  int64_t peak_per_example = 0;
  double epoch_seconds = 0.0;  // each epoch's EpochMetrics::seconds

 private:
  std::vector<double> curve_;
  std::optional<int64_t> end_epoch_;
  TrainResult::End end_ = TrainResult::End::kCompleted;
  std::string message_;
  Json details_;
};

}  // namespace tune::testing

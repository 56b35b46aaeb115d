#include "tracking/tensorboard.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "tracking/event_file.h"
#include "tracking/trial_scalars.h"

namespace tune {
namespace {

double WallTime(const std::optional<TimePoint>& t) {
  const TimePoint when = t.value_or(Clock::now());
  return std::chrono::duration<double>(when.time_since_epoch()).count();
}

class TensorBoardSink : public TrackingSink {
 public:
  TensorBoardSink(std::string dir, const TrackedStudy& study)
      : dir_(std::move(dir) + "/" + TensorBoardRunName(study.name)), study_(study) {}

  std::string name() const override { return "TensorBoard in " + dir_; }

  Status Record(const FrozenTrial& trial, const StudyTally& tally) override {
    TUNE_ASSIGN_OR_RETURN(EventFileWriter writer,
                          EventFileWriter::Open(fmt::format("{}/trial_{}", dir_, trial.number)));
    const double wall_time = WallTime(trial.datetime_complete);
    for (const auto& [tag, points] : TrialScalars(trial)) {
      for (const ScalarPoint& p : points) {
        TUNE_RETURN_IF_ERROR(writer.AddScalar(tag, p.step, static_cast<float>(p.value), wall_time));
      }
    }
    TUNE_RETURN_IF_ERROR(writer.Flush());
    return RecordStudyPoint(trial, tally, wall_time);
  }

  Status RecordTally(const StudyTally& tally) override {
    (void)tally;  // the study's run holds the best value after every trial already
    return Flush();
  }

  // The study's run is written out once per batch of trials (each trial's own file at once).
  Status Flush() override { return study_writer_ ? study_writer_->Flush() : Status::Ok(); }

 private:
  // The study's run: the trial's value(s) and the best value so far at step = trial number.
  Status RecordStudyPoint(const FrozenTrial& trial, const StudyTally& tally, double wall_time) {
    if (trial.state != TrialState::kComplete) return Status::Ok();
    if (!study_writer_) {
      TUNE_ASSIGN_OR_RETURN(EventFileWriter w, EventFileWriter::Open(dir_ + "/study"));
      study_writer_.emplace(std::move(w));
    }
    for (size_t i = 0; i < trial.values.size(); ++i) {
      TUNE_RETURN_IF_ERROR(study_writer_->AddScalar(
          trial.values.size() == 1 ? std::string("value") : fmt::format("value_{}", i),
          trial.number, static_cast<float>(trial.values[i]), wall_time));
    }
    if (tally.best_value) {
      TUNE_RETURN_IF_ERROR(study_writer_->AddScalar(
          "best_value", trial.number, static_cast<float>(*tally.best_value), wall_time));
    }
    return Status::Ok();
  }

  std::string dir_;
  TrackedStudy study_;
  std::optional<EventFileWriter> study_writer_;
};

}  // namespace

std::string TensorBoardRunName(const std::string& name) {
  std::string out = name.empty() ? std::string("study") : name;
  for (char& c : out) {
    if (c == '/' || c == '\\' || c == '\0') c = '_';
  }
  if (out == "." || out == "..") out = "_";
  return out;
}

std::unique_ptr<TrackingSink> NewTensorBoardSink(const std::string& dir,
                                                 const TrackedStudy& study) {
  return std::make_unique<TensorBoardSink>(dir, study);
}

}  // namespace tune

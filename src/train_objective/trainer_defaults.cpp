// The trainer's defaults a study keeps (trainer_defaults.h).
#include "train_objective/trainer_defaults.h"

#include <utility>

namespace tune {

Json TrainerDefaultsToJson(const TrainerDefaults& d) {
  return Json{
      {"precision", PrecisionName(d.precision)}, {"tf32", d.tf32}, {"attention", d.attention}};
}

std::optional<TrainerDefaults> TrainerDefaultsFromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto precision = j.find("precision");
  const auto tf32 = j.find("tf32");
  if (precision == j.end() || !precision->is_string() || tf32 == j.end() || !tf32->is_boolean()) {
    return std::nullopt;
  }
  const Result<Precision> parsed = ParsePrecision(precision->get<std::string>());
  if (!parsed.ok()) return std::nullopt;
  TrainerDefaults d;
  d.precision = *parsed;
  d.tf32 = tf32->get<bool>();
  d.attention = j.value("attention", std::string("eager"));
  return d;
}

TrainerDefaults CurrentTrainerDefaults(const std::string& device,
                                       std::optional<int> compute_major) {
  TrainerDefaults d;
  d.precision = AutoPrecision(device, compute_major);
  return d;
}

TrainerDefaults LegacyTrainerDefaults() {
  TrainerDefaults d;
  d.precision = Precision::kFp32;
  d.tf32 = false;
  return d;
}

Result<StudyDefaults> StudyTrainerDefaults(TrialHandle& trial, const TrainerDefaults& current) {
  TUNE_ASSIGN_OR_RETURN(std::optional<Json> record, trial.GetStudySystemAttr(kTrainerDefaultsAttr));
  if (record) {
    if (std::optional<TrainerDefaults> kept = TrainerDefaultsFromJson(*record)) {
      return StudyDefaults{*kept, StudyDefaults::Source::kRecorded};
    }
  }
  StudyDefaults out{current, StudyDefaults::Source::kNew};
  for (const auto& t : trial.history().trials) {
    if (IsFinished(t->state)) {  // trials ran before tune kept its defaults
      out = StudyDefaults{LegacyTrainerDefaults(), StudyDefaults::Source::kLegacy};
      break;
    }
  }
  TUNE_RETURN_IF_ERROR(
      trial.SetStudySystemAttr(kTrainerDefaultsAttr, TrainerDefaultsToJson(out.defaults)));
  return out;
}

}  // namespace tune

#include "study/study_defaults.h"

#include <spdlog/spdlog.h>

#include "tune/samplers/tpe.h"

namespace tune {
namespace {

const std::string kOptuna50 = TpePresetName(TpePreset::kOptuna50);
const std::string kOptuna49 = TpePresetName(TpePreset::kOptuna49);

// The rules recorded on the study, or those it was begun under.
Result<StudyDefaults> StoredRules(Storage& storage, const std::string& study) {
  Result<int64_t> id = storage.GetStudyId(study);
  if (!id.ok()) {
    if (id.status().code() == StatusCode::kNotFound) return StudyDefaults{kOptuna50};  // new
    return id.status();
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<Json> recorded,
                        storage.GetStudySystemAttr(*id, kStudyDefaultsAttr));
  if (recorded) {
    const std::string rules = recorded->is_string() ? recorded->get<std::string>() : "";
    if (rules == kOptuna50 || rules == kOptuna49) return StudyDefaults{rules, true};
    spdlog::warn("Study '{}': unknown {} {} (written by a newer tune?); using {}", study,
                 kStudyDefaultsAttr, recorded->dump(), kOptuna50);
    return StudyDefaults{kOptuna50, true};
  }
  TUNE_ASSIGN_OR_RETURN(int64_t trials, storage.CountTrials(*id));
  return StudyDefaults{trials == 0 ? kOptuna50 : kOptuna49};
}

}  // namespace

Result<StudyDefaults> ResolveStudyDefaults(Storage& storage, const std::string& study,
                                           SamplerConfig& sampler) {
  TUNE_ASSIGN_OR_RETURN(StudyDefaults defaults, StoredRules(storage, study));
  if (defaults.rules != kOptuna49) return defaults;
  if (!sampler.named) {
    sampler.name = "random";
    spdlog::info(
        "Study '{}' was begun before tune followed Optuna 5.0's defaults and continues under "
        "its own: sampler random (name \"sampler\" in the config to change it)",
        study);
  } else if (sampler.name == "tpe" && !sampler.options.contains("preset")) {
    sampler.options["preset"] = kOptuna49;
    spdlog::info(
        "Study '{}' was begun before tune followed Optuna 5.0's defaults and continues under "
        "its own: TPE preset optuna-4.9 (set \"preset\": \"optuna-5.0\" to change it)",
        study);
  }
  return defaults;
}

Status RecordStudyDefaults(Storage& storage, int64_t study_id, const StudyDefaults& defaults) {
  if (defaults.recorded) return Status::Ok();
  return storage.SetStudySystemAttr(study_id, kStudyDefaultsAttr, Json(defaults.rules));
}

}  // namespace tune

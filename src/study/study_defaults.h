// Which rules a study's unnamed defaults follow (docs/config.md#defaults-and-presets): Optuna
// 5.0's (the default sampler is TPE, TPE's preset optuna-5.0) or, for a study begun before tune
// followed them, Optuna 4.9's as tune had them (the default sampler random, TPE's preset
// optuna-4.9), so that no study switches its search rules mid-way without being told to.
//
// The rules are recorded on the study as the study system attribute "tune:defaults" when tune
// first opens it; a study without the attribute that already holds trials was begun under the
// old rules. Names the config gives ("sampler", "preset") always win. [tune_core, private]
#pragma once

#include <string>

#include "samplers/registry.h"
#include "tune/storages/storage.h"

namespace tune {

inline constexpr const char* kStudyDefaultsAttr = "tune:defaults";

// The rules a study follows: their name ("optuna-5.0" or "optuna-4.9") and whether the study
// records them already.
struct StudyDefaults {
  std::string rules;
  bool recorded = false;
};

// The rules of study `study` in `storage` (a study that does not exist yet: Optuna 5.0's), with
// `sampler` completed by them where the config left it unnamed (sampler.named, the TPE
// "preset"), each change logged.
Result<StudyDefaults> ResolveStudyDefaults(Storage& storage, const std::string& study,
                                           SamplerConfig& sampler);
// Writes the rules on the study unless it records them already.
Status RecordStudyDefaults(Storage& storage, int64_t study_id, const StudyDefaults& defaults);

}  // namespace tune

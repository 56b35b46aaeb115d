// The trainer's defaults a study keeps [tune_train]: what precision "auto" chose, TF32 and the
// attention kernel, as they were when the study's first trial ran. They are the study's system
// attribute "trainer_defaults", read by every later run (a resume, another worker, `--jobs`), so
// that a study does not change kernels, and with them its memory calibration, midway when tune
// or the card changes. A study that has trials but no record was created before tune kept them:
// it keeps what tune ran then, fp32 without TF32. Values the config sets explicitly always win.
#pragma once

#include <optional>
#include <string>

#include "train/hyperparams.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

struct TrainerDefaults {
  Precision precision = Precision::kFp32;  // what precision "auto" means for this study
  bool tf32 = true;
  std::string attention = "eager";  // the only kernel so far
};

// The study system attribute that holds them.
inline constexpr const char* kTrainerDefaultsAttr = "trainer_defaults";

Json TrainerDefaultsToJson(const TrainerDefaults& d);
// nullopt for a malformed record.
std::optional<TrainerDefaults> TrainerDefaultsFromJson(const Json& j);

// This tune's defaults on `device`, `compute_major` the CUDA card's compute capability (NVML).
TrainerDefaults CurrentTrainerDefaults(const std::string& device, std::optional<int> compute_major);

// A study created before tune recorded its defaults: fp32, no TF32.
TrainerDefaults LegacyTrainerDefaults();

// What the study keeps: its record, or, without one, `current` (a new study) or the legacy
// defaults (a study with finished trials), recorded now. `recorded` says which.
struct StudyDefaults {
  TrainerDefaults defaults;
  enum class Source { kRecorded, kNew, kLegacy } source = Source::kNew;
};
Result<StudyDefaults> StudyTrainerDefaults(TrialHandle& trial, const TrainerDefaults& current);

}  // namespace tune

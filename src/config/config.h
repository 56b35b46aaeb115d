// Study configuration: one JSON file per study (configs/NAME.json). docs/config.md documents
// every key. Parsing is strict: an unknown key, a wrong type, an empty choice list, low > high,
// log with low <= 0, a step that does not divide the range, a condition on an unknown parameter
// or an unknown model is an InvalidArgument naming the file, the JSON path and the closest valid
// key or value. Command-line flags override the file's values (apps/tune). Each family
// (samplers, pruners, objectives) is a table next to its code (the registry.h headers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/objective_registry.h"
#include "pruners/registry.h"
#include "samplers/registry.h"
#include "study/progress_text.h"
#include "tracking/tracking_options.h"
#include "tune/model_catalog.h"
#include "tune/objectives/objective.h"
#include "tune/optimize.h"
#include "tune/search_space.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// The storage when neither the config nor --storage names one: a SQLite file in the working
// directory, so a rerun resumes the study.
inline constexpr const char* kDefaultStorage = "sqlite:///tune.db";

// A study config. Its run settings (RunSettings: n_trials, timeout, heartbeats, retries) are
// the config's keys of the same names; the command line overrides them.
struct StudyConfig : RunSettings {
  StudyConfig() { heartbeat_interval = kDefaultHeartbeatInterval; }

  std::string source;  // the file it came from (for messages)
  std::vector<StudyDirection> directions = {StudyDirection::kMinimize};
  std::string storage = kDefaultStorage;  // a storage URL (see docs/config.md)
  SamplerConfig sampler;
  PrunerConfig pruner;
  ConditionalSpace space;
  ObjectiveConfig objective;
  // Enqueued when the study is created (Optuna's study.enqueue_trial(params, user_attrs)).
  struct EnqueuedTrial {
    Json params = Json::object();
    Json user_attrs = Json::object();
  };
  std::vector<EnqueuedTrial> enqueue_trials;
  // How `tune` shows the run's progress ("progress", "progress_interval"; docs/cli.md
  // "Progress").
  ProgressMode progress = ProgressMode::kAuto;
  double progress_interval = kDefaultProgressInterval;
  // Where finished trials are shown besides the storage ("tracking": MLflow, TensorBoard).
  TrackingOptions tracking;
};

// The order in which a config file writes the keys of each "search_space" object, by the
// object's JSON pointer ("/search_space", "/conditional/0/search_space", ...). Json sorts object
// keys; parameters are suggested in the file's order instead, as Optuna's define-by-run code
// suggests them in the order it is written (docs/config.md#search-space). A search_space object
// without an entry (or whose keys differ from its entry's) is read in name order.
using SpaceKeyOrder = std::map<std::string, std::vector<std::string>>;

// The key order of every search_space object of a config's text (empty if it is not JSON).
SpaceKeyOrder SearchSpaceKeyOrder(const std::string& text);

// Parses a config document. Relative paths inside (model_catalog, cwd, work_dir) are resolved
// against `base_dir`.
Result<StudyConfig> ParseStudyConfig(const Json& doc, const std::string& source,
                                     const std::filesystem::path& base_dir,
                                     const SpaceKeyOrder& key_order = {});

// Reads and parses a file (NotFound if it does not exist, InvalidArgument for bad JSON with the
// line and column), with the file's key order.
Result<StudyConfig> LoadStudyConfig(const std::filesystem::path& path);
// What LoadStudyConfig does with the file's text once read: `path` names it in errors and
// resolves its relative paths. InvalidArgument for bad JSON (line and column) or a bad config.
Result<StudyConfig> ParseStudyConfigText(const std::string& text,
                                         const std::filesystem::path& path);

// Parses a space ("search_space" + "conditional") on its own, for tests and tools.
Result<ConditionalSpace> ParseSearchSpace(const Json& search_space, const Json& conditional,
                                          ModelCatalog catalog, const std::string& source,
                                          const SpaceKeyOrder& key_order = {});

// A train objective's precisions against one CUDA card its trials run on: "bf16" as the
// objective's precision, or as a choice of a search-space parameter, on a card without bfloat16
// (CheckPrecisionForCard: compute capability below 8.0) is an InvalidArgument naming the config
// key, the card (`card`: "cuda:0 (Tesla T4)"), its capability and the fix. OK for other
// objectives ("auto" picks fp16 on such a card).
Status CheckTrainPrecisionOnCard(const StudyConfig& config, const std::string& card,
                                 std::pair<int, int> capability);

// The objective of `config` (config/objective_registry.h). The "train" objective needs a Trainer
// (tune_torch's, loaded by the tune binary); without one it is a FailedPrecondition saying
// that tune was built without LibTorch.
Result<std::unique_ptr<Objective>> MakeObjective(const StudyConfig& config,
                                                 std::unique_ptr<Trainer> trainer = nullptr);

}  // namespace tune

// Study configuration: one JSON file per study (configs/NAME.json). docs/config.md documents
// every key. Parsing is strict: an unknown key, a wrong type, an empty choice list, low > high,
// log with low <= 0, a step that does not divide the range, a condition on an unknown parameter
// or an unknown model is an InvalidArgument naming the file, the JSON path and the closest valid
// key or value. Command-line flags override the file's values (apps/tune).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/model_catalog.h"
#include "tune/objectives/command.h"
#include "tune/objectives/functions.h"
#include "tune/objectives/objective.h"
#include "tune/objectives/train.h"
#include "tune/pruners/pruner.h"
#include "tune/samplers/sampler.h"
#include "tune/search_space.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// The storage when neither the config nor --storage names one: a SQLite file in the working
// directory, so a rerun resumes the study.
inline constexpr const char* kDefaultStorage = "sqlite:///tune.db";

// "sampler": {"name": "tpe", "seed": 0, ...options of that sampler}.
struct SamplerConfig {
  std::string name = "random";
  std::optional<uint64_t> seed;  // unset: nondeterministic
  Json options = Json::object();  // the other keys, read by MakeSampler
  std::string source = "<config>";  // file, for error messages
};

// "pruner": {"name": "median", ...options of that pruner}.
struct PrunerConfig {
  std::string name = "nop";
  Json options = Json::object();  // the other keys, read by MakePruner
  std::string source = "<config>";  // file, for error messages
};

// "objective": {"type": "function" | "command" | "train", ...}.
struct ObjectiveConfig {
  std::string type = "function";
  FunctionOptions function;
  CommandOptions command;
  TrainObjectiveOptions train;
};

struct StudyConfig {
  std::string source;  // the file it came from (for messages)
  std::vector<StudyDirection> directions = {StudyDirection::kMinimize};
  std::optional<int64_t> n_trials;        // target number of finished trials
  std::optional<double> timeout_seconds;  // stop starting trials after this long
  std::string storage = kDefaultStorage;  // a storage URL (see docs/config.md)
  // Seconds between heartbeats of a running trial; 0 turns heartbeats and the stale-trial
  // check off. Optuna: RDBStorage(heartbeat_interval=...).
  double heartbeat_interval = 60.0;
  // A RUNNING trial without a heartbeat for longer than this is failed as stale. Unset: twice
  // heartbeat_interval. Must exceed heartbeat_interval. Optuna: RDBStorage(grace_period=...).
  std::optional<double> grace_period;
  // Re-enqueue a stale trial with the same params at most this many times per original trial.
  // Optuna: RetryFailedTrialCallback(max_retry=...).
  int64_t retry_failed = 0;
  SamplerConfig sampler;
  PrunerConfig pruner;
  ConditionalSpace space;
  ObjectiveConfig objective;
  std::vector<Json> enqueue_trials;  // params objects, enqueued when the study is created
};

// Parses a config document. Relative paths inside (model_catalog, cwd, work_dir) are resolved
// against `base_dir`.
Result<StudyConfig> ParseStudyConfig(const Json& doc, const std::string& source,
                                     const std::filesystem::path& base_dir);
// InvalidArgument unless heartbeat_interval >= 0, grace_period (if set) > heartbeat_interval
// and retry_failed >= 0. `where` prefixes the message (a file, or "--grace-period").
Status CheckHeartbeatSettings(const StudyConfig& config, const std::string& where);

// Reads and parses a file (NotFound if it does not exist, InvalidArgument for bad JSON with the
// line and column).
Result<StudyConfig> LoadStudyConfig(const std::filesystem::path& path);

// Parses a space ("search_space" + "conditional") on its own, for tests and tools.
Result<ConditionalSpace> ParseSearchSpace(const Json& search_space, const Json& conditional,
                                          ModelCatalog catalog, const std::string& source);

// Factories, one explicit table per family; unknown names list the valid ones, and options are
// checked strictly (errors name the file, "/sampler/<key>" or "/pruner/<key>", and the closest
// valid key).
std::vector<std::string> SamplerNames();
std::vector<std::string> PrunerNames();
Result<std::unique_ptr<Sampler>> MakeSampler(const SamplerConfig& config);
Result<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& config);
// The "train" objective needs a Trainer (tune_torch's NewTorchTrainer); without one it is a
// FailedPrecondition saying that tune was built without LibTorch.
Result<std::unique_ptr<Objective>> MakeObjective(const StudyConfig& config,
                                                 std::unique_ptr<Trainer> trainer = nullptr);

}  // namespace tune

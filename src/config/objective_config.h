// Parsing of the "objective" section of a study config [tune_config, private]: the objective
// family's table (objective_table.cpp) and the train objective's options (train_config.cpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/objective_registry.h"
#include "util/family_table.h"
#include "util/json_reader.h"

namespace tune::internal {

// What parsing an objective needs from the rest of the config.
struct ObjectiveContext {
  std::vector<std::string> param_names;  // the search space's parameters (command templates)
  std::filesystem::path base_dir;        // relative paths resolve against it
};

// "objective": {"type": ..., ...}: the row of "type" checks the keys and parses its options.
Status ParseObjective(const JsonReader& r, const ObjectiveContext& context, ObjectiveConfig& out);

// The train objective's keys (its own, then every hyperparameter name and alias) and parser.
std::vector<OptionKey> TrainObjectiveKeys();
Status ParseTrainObjective(const JsonReader& r, const ObjectiveContext& context,
                           ObjectiveConfig& out);
// "memory": the memory guard's options (guard.h); `keys` are the caller's own keys besides
// the guard's (a command objective's request templates).
// "devices": the CUDA cards of --jobs (memory/cards.h), a list of indices.
Status ParseDevices(const JsonReader& r, std::vector<int>& out);

Status ParseGuardOptions(const JsonReader& r, GuardOptions& out,
                         std::vector<std::string> keys = {});

// Every parameter of `block` and of its conditional blocks.
void CollectParams(const SpaceBlock& block, std::vector<const ParamSpec*>& out);

// The train objective against the search space and the study direction: every parameter must
// be a training parameter (or ignored) whose values fit; every model must be trainable.
Status CheckTrainObjective(const JsonReader& r, const StudyConfig& config,
                           TrainObjectiveOptions& out);

// The train objective's "init", "models_dir" and "hub_cache" (train_checkpoints.cpp).
struct CheckpointKeys {
  bool pretrained = true;                 // "init": "pretrained" (default) or "scratch"
  std::optional<std::string> models_dir;  // absolute
  std::string hub_cache;  // "hub_cache" (absolute), else HuggingFaceHubCache() when read
};
Result<CheckpointKeys> ReadCheckpointKeys(const JsonReader& objective,
                                          const std::filesystem::path& base_dir);
// The checkpoint directory of `name` (pretrained.h: ResolveCheckpoint, with the catalog entry's
// "checkpoint"), or NotFound listing every place searched.
Result<std::string> ResolveModelCheckpoint(const std::string& name, const ModelCatalog& catalog,
                                           const CheckpointKeys& keys,
                                           const std::filesystem::path& base_dir);
// Every model name of the config that is not in the catalog and names a TorchScript file by its
// extension (LooksLikeTorchScriptFile) put in the catalog as a TorchScript model named as
// written, its file relative to base_dir; NotFound when the file does not exist.
Status AddTorchScriptModels(const JsonReader& r, const std::filesystem::path& base_dir,
                            ModelCatalog& catalog);
// With "init": "pretrained": every model name of the config (`r`: the whole document) resolved
// and read (ReadPretrainedCheckpoint), its config.json put in the catalog under the name.
// NotFound listing each name that resolves nowhere, where it looked, and "init": "scratch";
// InvalidArgument/NotFound naming the file for a checkpoint tune cannot use.
Status ResolveCheckpoints(const JsonReader& r, const std::filesystem::path& base_dir,
                          ModelCatalog& catalog);

}  // namespace tune::internal

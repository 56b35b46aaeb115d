// The objective types a study config can name ("objective": {"type": "train", ...}). One table of
// rows (src/config/objective_table.cpp) drives the names, the allowed keys with their
// defaults, the parsing of each type's options and the construction (config.h: MakeObjective);
// docs/config.md documents each row.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory/guard_planner.h"
#include "train_objective/train_objective.h"
#include "tune/distributions.h"
#include "tune/objectives/command.h"
#include "tune/objectives/functions.h"
#include "tune/status.h"

namespace tune {

enum class ObjectiveType {
  kFunction,  // "function": a built-in test function (functions.h)
  kCommand,   // "command": the user's program, once per trial (command.h)
  kTrain,     // "train": in-process training (train_objective/train_objective.h)
};

// "function", "command", "train".
const char* ObjectiveTypeName(ObjectiveType type);
std::vector<std::string> ObjectiveTypeNames();
// The keys of objective type `type` (besides "type") with their defaults, in documentation order.
std::vector<std::pair<std::string, Json>> ObjectiveOptionKeys(ObjectiveType type);

// "objective": {"type": ..., ...}: the options of the type it names.
struct ObjectiveConfig {
  ObjectiveType type = ObjectiveType::kFunction;
  FunctionOptions function;
  CommandOptions command;
  std::optional<CommandMemoryOptions> command_memory;  // the command objective's "memory"
  TrainObjectiveOptions train;
};

}  // namespace tune

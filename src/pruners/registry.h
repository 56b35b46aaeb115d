// The pruners a study config can name ("pruner": {"name": "median", ...}), made from their JSON
// options. One table of rows (src/pruners/pruner_table.cpp) drives the names, the allowed keys
// with their defaults, the errors and the construction; docs/config.md documents each row.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tune/distributions.h"
#include "tune/pruners/pruner.h"
#include "tune/status.h"

namespace tune {

// "pruner": {"name": "median", ...options of that pruner}.
struct PrunerConfig {
  std::string name = "nop";
  Json options = Json::object();    // the other keys, read by MakePruner
  std::string source = "<config>";  // file, for error messages
};

// "nop", "median", "percentile", "successive_halving", "hyperband", "threshold", "patient".
std::vector<std::string> PrunerNames();
// The option keys of pruner `name` (besides "name") with their defaults, in documentation
// order; empty for an unknown name.
std::vector<std::pair<std::string, Json>> PrunerOptionKeys(const std::string& name);
// InvalidArgument naming the file, "/pruner/<key>" (or "/pruner/wrapped/<key>") and the closest
// valid key or name.
Result<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& config);

}  // namespace tune

// The samplers a study config can name ("sampler": {"name": "tpe", ...}), made from their JSON
// options. One table of rows (src/samplers/sampler_table.cpp) drives the names, the allowed keys
// with their defaults, the errors and the construction; docs/config.md documents each row.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/distributions.h"
#include "tune/samplers/sampler.h"
#include "tune/status.h"

namespace tune {

// "sampler": {"name": "tpe", "seed": 0, ...options of that sampler}.
struct SamplerConfig {
  std::string name = "tpe";         // Optuna 5.0's default (study_defaults.h for older studies)
  bool named = false;               // the config or a flag named the sampler
  std::optional<uint64_t> seed;     // unset: nondeterministic
  Json options = Json::object();    // the other keys, read by MakeSampler
  std::string source = "<config>";  // file, for error messages
};

// "random", "tpe", "nsgaii".
std::vector<std::string> SamplerNames();
// The option keys of sampler `name` (besides "name" and "seed") with their defaults, in
// documentation order; empty for an unknown name.
std::vector<std::pair<std::string, Json>> SamplerOptionKeys(const std::string& name);
// InvalidArgument naming the file, "/sampler/<key>" and the closest valid key or name.
Result<std::unique_ptr<Sampler>> MakeSampler(const SamplerConfig& config);

}  // namespace tune

// SuggestParam: one trial parameter from its config spec ({"type": "float", "low": ...}), for the
// quality benchmarks that drive a Study by ask and tell.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tune/study.h"

namespace tune::bench {

// Suggests one parameter from its config spec; returns the external value.
inline Json SuggestParam(Trial& trial, const std::string& name, const Json& spec) {
  const std::string type = spec.at("type").get<std::string>();
  if (type == "float") {
    std::optional<double> step;
    if (spec.contains("step") && !spec.at("step").is_null()) step = spec.at("step").get<double>();
    return Take(trial.SuggestFloat(name, spec.at("low").get<double>(),
                                   spec.at("high").get<double>(), spec.value("log", false), step),
                name);
  }
  if (type == "int") {
    return Take(
        trial.SuggestInt(name, spec.at("low").get<int64_t>(), spec.at("high").get<int64_t>(),
                         spec.value("log", false), spec.value("step", int64_t{1})),
        name);
  }
  if (type == "categorical" || type == "model") {
    return Take(trial.SuggestCategorical(name, spec.at("choices").get<std::vector<Json>>()), name);
  }
  Die("unsupported parameter type " + type);
}

}  // namespace tune::bench

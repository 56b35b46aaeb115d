// Optimisation quality of TpeSampler on the built-in functions (issue 3). The driver is
// bench/tpe_quality.py: it checks that its Python copies of the functions equal these (--eval),
// reads the spaces from here (--space), runs this program (--run) and Optuna's TPESampler, and
// compares the best values.
//
// Modes:
//   --space FUNCTION          the function's default space as a JSON list of [name, spec] in the
//                             order both tools suggest it
//   --eval FUNCTION [--oom-threshold X]
//                             reads one params JSON object per stdin line, prints
//                             {"value": v} or {"oom": true} and {"proxy": p} for mixed
//   --run [--functions sphere,rosenbrock,branin,hartmann6,mixed,mixed_oom] [--seeds 20]
//         [--trials 200] [--oom-threshold 16000] [--modes independent,multivariate]
//         [--n-startup-trials 10] [--startup FILE]
//                             one JSON line per (mode, function, seed): the value of every
//                             trial in order (null when pruned) and its OOM flag
// "mixed_oom" is "mixed" with --oom-threshold set: an OOM trial is told PRUNED without reports,
// with user attribute oom=true as tune's objectives record it. --startup FILE holds the startup
// points per function and seed ({function: {seed: [params, ...]}}), enqueued before the first
// ask, so that tune and Optuna start from the same trials.

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "tune/model_catalog.h"
#include "tune/objectives/functions.h"
#include "tune/pruners/pruner.h"
#include "tune/samplers/tpe.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune::bench {
namespace {

// The mixed space in the order; the other functions' keys are already in order.
const std::vector<std::string> kMixedOrder = {"model",      "batch_size", "grad_accum",
                                              "max_length", "lr",         "weight_decay"};

FunctionOptions OptionsFor(const std::string& function, double oom_threshold) {
  FunctionOptions options;
  options.name = function == "mixed_oom" ? "mixed" : function;
  if (function == "mixed_oom") options.oom_threshold = oom_threshold;
  return options;
}

// FunctionDefaultSpace as an ordered list of (name, config spec).
std::vector<std::pair<std::string, Json>> OrderedSpace(const FunctionOptions& options) {
  Json space = FunctionDefaultSpace(options);
  if (space.empty()) Die("unknown function " + options.name);
  std::vector<std::pair<std::string, Json>> out;
  if (options.name == "mixed") {
    if (space.size() != kMixedOrder.size()) Die("the mixed default space changed; update bench");
    for (const auto& name : kMixedOrder) {
      if (!space.contains(name)) Die("the mixed default space has no " + name);
      out.emplace_back(name, space.at(name));
    }
  } else {
    for (const auto& [name, spec] : space.items()) out.emplace_back(name, spec);
  }
  return out;
}

// Suggests one parameter from its config spec; returns the external value.
Json SuggestParam(Trial& trial, const std::string& name, const Json& spec) {
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

int PrintSpace(const std::string& function, double oom_threshold) {
  Json out = Json::array();
  for (const auto& [name, spec] : OrderedSpace(OptionsFor(function, oom_threshold))) {
    out.push_back(Json::array({name, spec}));
  }
  fmt::print("{}\n", out.dump());
  return 0;
}

int Eval(const std::string& function, std::optional<double> oom_threshold,
         const ModelCatalog& catalog) {
  FunctionOptions options;
  options.name = function;
  options.oom_threshold = oom_threshold;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json params = Json::parse(line);
    Json out = Json::object();
    Result<double> value = EvaluateFunction(options, catalog, params);
    if (value.ok()) {
      out["value"] = *value;
    } else if (value.status().code() == StatusCode::kResourceExhausted) {
      out["oom"] = true;
    } else {
      Die("eval: " + value.status().ToString());
    }
    if (function == "mixed") out["proxy"] = MixedMemoryProxy(catalog, params);
    fmt::print("{}\n", out.dump());
  }
  return 0;
}

int Run(const Flags& flags, const ModelCatalog& catalog) {
  const auto functions =
      SplitList(flags.Get("functions", "sphere,rosenbrock,branin,hartmann6,mixed,mixed_oom"));
  const auto modes = SplitList(flags.Get("modes", "independent,multivariate"));
  const int64_t seeds = flags.GetInt("seeds", 20);
  const int64_t n_trials = flags.GetInt("trials", 200);
  const double oom_threshold = flags.GetDouble("oom-threshold", 16000);
  const int n_startup = static_cast<int>(flags.GetInt("n-startup-trials", 10));
  // --startup FILE: {function: {seed: [params, ...]}}, enqueued before the first ask.
  Json startup;
  if (flags.Has("startup")) {
    std::ifstream in(flags.Get("startup", ""));
    if (!in) Die("cannot read --startup " + flags.Get("startup", ""));
    startup = Json::parse(in);
  }

  for (const auto& mode : modes) {
    if (mode != "independent" && mode != "multivariate") Die("unknown mode " + mode);
    for (const auto& function : functions) {
      const FunctionOptions options = OptionsFor(function, oom_threshold);
      const auto space = OrderedSpace(options);
      for (int64_t seed = 0; seed < seeds; ++seed) {
        TpeOptions tpe;
        tpe.n_startup_trials = n_startup;
        tpe.multivariate = mode == "multivariate";
        auto study =
            Take(Study::CreateOrLoad(NewInMemoryStorage(), "quality", {StudyDirection::kMinimize},
                                     std::make_unique<TpeSampler>(tpe),
                                     std::make_unique<NopPruner>(), static_cast<uint64_t>(seed)),
                 "create study");
        Json values = Json::array(), oom = Json::array();
        if (!startup.is_null()) {
          const Json& points = startup.at(function).at(std::to_string(seed));
          for (const Json& params : points) Take(study->EnqueueTrial(params), "enqueue");
        }
        auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < n_trials; ++i) {
          auto trial = Take(study->Ask(), "ask");
          Json params = Json::object();
          for (const auto& [name, spec] : space) params[name] = SuggestParam(*trial, name, spec);
          Result<double> value = EvaluateFunction(options, catalog, params);
          if (!value.ok() && value.status().code() == StatusCode::kResourceExhausted) {
            // As tune's objectives and memory guard record an OOM: user attribute oom=true.
            Check(trial->SetUserAttr("oom", true), "set oom");
            Take(study->Tell(*trial, TrialState::kPruned), "tell");
            values.push_back(nullptr);
            oom.push_back(1);
          } else {
            double v = Take(std::move(value), "evaluate");
            Take(study->Tell(*trial, TrialState::kComplete, {v}), "tell");
            values.push_back(v);
            oom.push_back(0);
          }
        }
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Json line = {{"tool", "tune"},   {"mode", mode}, {"function", function}, {"seed", seed},
                     {"values", values}, {"oom", oom},   {"seconds", seconds}};
        fmt::print("{}\n", line.dump());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  const ModelCatalog catalog = Take(ModelCatalog::Builtin(), "built-in catalog");
  if (flags.Has("space")) return PrintSpace(flags.Get("space", ""), 0);
  if (flags.Has("eval")) {
    std::optional<double> threshold;
    if (flags.Has("oom-threshold")) threshold = flags.GetDouble("oom-threshold", 0);
    return Eval(flags.Get("eval", ""), threshold, catalog);
  }
  if (flags.Has("run")) return Run(flags, catalog);
  Die("usage: tune_bench_tpe_quality --space F | --eval F [--oom-threshold X] | --run [...]");
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

// Optimisation quality of TpeSampler on the built-in functions (issues 3 and 19). The driver is
// bench/tpe_quality.py: it checks that its Python copies of the functions equal these (--eval),
// reads the spaces from here (--space), runs this program (--run) and Optuna's TPESampler, and
// compares the best values.
//
// Modes:
//   --space PROBLEM           the problem's space as a JSON list, in the order both tools
//                             suggest it, of {"name", "param", "spec", "when_heavy"}: the trial
//                             parameter `name` feeds the function's parameter `param`, and exists
//                             only when the chosen model's `heavy` equals `when_heavy` (if set)
//   --eval PROBLEM [--oom-threshold X]
//                             reads one object of function parameters per stdin line, prints
//                             {"value": v} or {"oom": true} and {"proxy": p} for mixed problems
//   --run [--functions sphere,...] [--seeds 20] [--first-seed 0] [--trials 200]
//         [--oom-threshold 16000] [--modes independent,multivariate] [--n-startup-trials 10]
//         [--startup FILE] [--sampler JSON] [--label tune]
//                             one JSON line per (mode, problem, seed): the value of every trial in
//                             order (null when it ran out of memory) and its OOM flag
// Problems: sphere, rosenbrock, branin, hartmann6 (their default spaces), rosenbrock10 (10-D),
// sphere20 (20-D), mixed (the function's flat space), mixed_cond (configs/demo.json's space: the
// batch size, accumulation and length ranges depend on whether the model is heavy; each branch
// has its own parameter names, since Optuna rejects a categorical whose choices change), and
// mixed_oom / mixed_cond_oom (the same with --oom-threshold: an OOM trial is told PRUNED
// without reports, with user attribute oom=true as tune's objectives record it).
// --sampler JSON holds the "tpe" sampler's options as a config writes them (e.g.
// {"min_bandwidth_factor": 0.025}); the mode sets "multivariate" and --n-startup-trials
// "n_startup_trials". --startup FILE holds the startup points per problem and seed
// ({problem: {seed: [params, ...]}}), enqueued before the first ask, so that tune and Optuna
// start from the same trials.

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
#include "samplers/registry.h"
#include "suggest.h"
#include "tune/model_catalog.h"
#include "tune/objectives/functions.h"
#include "tune/pruners/pruner.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune::bench {
namespace {

struct SpaceEntry {
  std::string name;   // the trial parameter
  std::string param;  // the function's parameter it feeds
  Json spec;
  std::optional<bool> when_heavy;
};

struct Problem {
  FunctionOptions options;
  std::vector<SpaceEntry> space;
};

// The mixed space in the issue's order.
const std::vector<std::string> kMixedOrder = {"model",      "batch_size", "grad_accum",
                                              "max_length", "lr",         "weight_decay"};

// configs/demo.json's space, its heavy and base branches under their own names.
std::vector<SpaceEntry> ConditionalMixedSpace() {
  const Json top = Json::parse(R"([
    ["model", {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased",
               "roberta-base", "roberta-large", "microsoft/deberta-v3-base",
               "microsoft/deberta-v3-large", "xlm-roberta-base"]}],
    ["lr", {"type": "float", "low": 1e-6, "high": 1e-3, "log": true}],
    ["weight_decay", {"type": "float", "low": 0.0, "high": 0.1}],
    ["warmup_ratio", {"type": "float", "low": 0.0, "high": 0.2}],
    ["dropout", {"type": "float", "low": 0.0, "high": 0.3}],
    ["classifier_layers", {"type": "int", "low": 0, "high": 3}]])");
  const Json heavy = Json::parse(R"([
    ["batch_size", {"type": "categorical", "choices": [8, 12, 16]}],
    ["grad_accum", {"type": "categorical", "choices": [1, 2, 3, 4]}],
    ["max_length", {"type": "int", "low": 128, "high": 384, "step": 32}]])");
  const Json base = Json::parse(R"([
    ["batch_size", {"type": "categorical", "choices": [8, 12, 16, 24, 32, 48, 64]}],
    ["grad_accum", {"type": "categorical", "choices": [1, 2, 3, 4, 6, 8]}],
    ["max_length", {"type": "int", "low": 128, "high": 512, "step": 32}]])");
  std::vector<SpaceEntry> out;
  for (const Json& e : top) out.push_back({e[0], e[0], e[1], std::nullopt});
  for (const Json& e : heavy) out.push_back({"heavy_" + e[0].get<std::string>(), e[0], e[1], true});
  for (const Json& e : base) out.push_back({"base_" + e[0].get<std::string>(), e[0], e[1], false});
  return out;
}

Problem MakeProblem(const std::string& problem, double oom_threshold) {
  Problem p;
  const bool oom = problem == "mixed_oom" || problem == "mixed_cond_oom";
  const bool conditional = problem == "mixed_cond" || problem == "mixed_cond_oom";
  p.options.name = problem;
  if (oom || conditional) p.options.name = "mixed";
  if (problem == "rosenbrock10") p.options = {.name = "rosenbrock", .dims = 10};
  if (problem == "sphere20") p.options = {.name = "sphere", .dims = 20};
  if (oom) p.options.oom_threshold = oom_threshold;
  if (conditional) {
    p.space = ConditionalMixedSpace();
    return p;
  }
  const Json space = FunctionDefaultSpace(p.options);
  if (space.empty()) Die("unknown problem " + problem);
  if (p.options.name == "mixed") {
    if (space.size() != kMixedOrder.size()) Die("the mixed default space changed; update bench");
    for (const auto& name : kMixedOrder) {
      if (!space.contains(name)) Die("the mixed default space has no " + name);
      p.space.push_back({name, name, space.at(name), std::nullopt});
    }
    return p;
  }
  // x0, x1, ..., x10 in numeric order (the JSON object sorts them as strings).
  for (size_t i = 0; i < space.size(); ++i) {
    std::string name =
        p.options.name == "branin" ? fmt::format("x{}", i + 1) : fmt::format("x{}", i);
    if (!space.contains(name)) Die("unexpected space of " + problem);
    p.space.push_back({name, name, space.at(name), std::nullopt});
  }
  return p;
}

int PrintSpace(const std::string& problem) {
  Json out = Json::array();
  for (const SpaceEntry& e : MakeProblem(problem, 0).space) {
    out.push_back({{"name", e.name},
                   {"param", e.param},
                   {"spec", e.spec},
                   {"when_heavy", e.when_heavy ? Json(*e.when_heavy) : Json()}});
  }
  fmt::print("{}\n", out.dump());
  return 0;
}

int Eval(const std::string& problem, std::optional<double> oom_threshold,
         const ModelCatalog& catalog) {
  FunctionOptions options = MakeProblem(problem, 0).options;
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
    if (options.name == "mixed") out["proxy"] = MixedMemoryProxy(catalog, params);
    fmt::print("{}\n", out.dump());
  }
  return 0;
}

// One trial: suggests the active parameters, evaluates and tells. Returns the value (null when
// the trial ran out of memory).
Json RunTrial(Study& study, const Problem& problem, const ModelCatalog& catalog) {
  auto trial = Take(study.Ask(), "ask");
  Json params = Json::object();
  for (const SpaceEntry& e : problem.space) {
    if (e.when_heavy) {
      auto model = catalog.Find(params.at("model").get<std::string>());
      if (!model.ok() || (*model)->heavy != *e.when_heavy) continue;
    }
    params[e.param] = SuggestParam(*trial, e.name, e.spec);
  }
  Result<double> value = EvaluateFunction(problem.options, catalog, params);
  if (!value.ok() && value.status().code() == StatusCode::kResourceExhausted) {
    // As tune's objectives and memory guard record an OOM: user attribute oom=true.
    Check(trial->SetUserAttr("oom", true), "set oom");
    Take(study.Tell(*trial, TrialState::kPruned), "tell");
    return nullptr;
  }
  double v = Take(std::move(value), "evaluate");
  Take(study.Tell(*trial, TrialState::kComplete, {v}), "tell");
  return v;
}

// The startup points of (problem, seed) in the trial parameters' names, from the driver's file.
std::vector<Json> StartupPoints(const Json& startup, const std::string& problem, int64_t seed) {
  std::vector<Json> out;
  if (startup.is_null()) return out;
  for (const Json& params : startup.at(problem).at(std::to_string(seed))) out.push_back(params);
  return out;
}

int Run(const Flags& flags, const ModelCatalog& catalog) {
  const auto problems = SplitList(flags.Get("functions", "sphere,rosenbrock,branin,hartmann6"));
  const auto modes = SplitList(flags.Get("modes", "independent,multivariate"));
  const int64_t seeds = flags.GetInt("seeds", 20);
  const int64_t first_seed = flags.GetInt("first-seed", 0);
  const int64_t n_trials = flags.GetInt("trials", 200);
  const double oom_threshold = flags.GetDouble("oom-threshold", 16000);
  const int64_t n_startup = flags.GetInt("n-startup-trials", 10);
  const std::string label = flags.Get("label", "tune");
  const Json sampler_options = Json::parse(flags.Get("sampler", "{}"));
  Json startup;
  if (flags.Has("startup")) {
    std::ifstream in(flags.Get("startup", ""));
    if (!in) Die("cannot read --startup " + flags.Get("startup", ""));
    startup = Json::parse(in);
  }

  for (const auto& mode : modes) {
    if (mode != "independent" && mode != "multivariate") Die("unknown mode " + mode);
    for (const auto& name : problems) {
      const Problem problem = MakeProblem(name, oom_threshold);
      for (int64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
        SamplerConfig config;
        config.name = "tpe";
        config.options = sampler_options;
        config.options["multivariate"] = mode == "multivariate";
        config.options["n_startup_trials"] = n_startup;
        config.source = "--sampler";
        auto study =
            Take(Study::CreateOrLoad(NewInMemoryStorage(), "quality", {StudyDirection::kMinimize},
                                     Take(MakeSampler(config), "sampler"),
                                     std::make_unique<NopPruner>(), static_cast<uint64_t>(seed)),
                 "create study");
        for (const Json& params : StartupPoints(startup, name, seed)) {
          Take(study->EnqueueTrial(params), "enqueue");
        }
        Json values = Json::array(), oom = Json::array();
        auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < n_trials; ++i) {
          Json v = RunTrial(*study, problem, catalog);
          oom.push_back(v.is_null() ? 1 : 0);
          values.push_back(std::move(v));
        }
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Json line = {{"tool", label},    {"mode", mode}, {"function", name},  {"seed", seed},
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
  if (flags.Has("space")) return PrintSpace(flags.Get("space", ""));
  if (flags.Has("eval")) {
    std::optional<double> threshold;
    if (flags.Has("oom-threshold")) threshold = flags.GetDouble("oom-threshold", 0);
    return Eval(flags.Get("eval", ""), threshold, catalog);
  }
  if (flags.Has("run")) return Run(flags, catalog);
  Die("usage: tune_bench_tpe_quality --space P | --eval P [--oom-threshold X] | --run [...]");
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

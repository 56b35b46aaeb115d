// Multi-objective optimisation quality and speed of tune's samplers (issue 34). The driver is
// bench/mo_quality.py: it checks that its Python copies of the problems equal these (--eval),
// reads the spaces from here (--space), runs this program (--run) and Optuna 4.9's samplers on
// the same problems, and compares hypervolumes.
//
// Modes:
//   --space PROBLEM     the problem's space as a JSON list of {"name", "spec"} in suggest order
//   --eval PROBLEM      one object of parameters per stdin line -> {"values": [...]} or
//                       {"oom": true}
//   --run [--problems zdt1,...] [--samplers tpe,nsgaii] [--seeds 20] [--first-seed 0]
//         [--trials 500] [--oom-threshold 16000] [--sampler-options JSON]
//                       (JSON: options given to every sampler, e.g. {"oom_feasibility": false})
//                       one JSON line per (sampler, problem, seed): every trial's values in order
//                       (null when it ran out of memory) and each trial's wall time in ms
// Problems: zdt1, zdt2, zdt3, dtlz2, wfg4 (the `function` objective's, their default spaces)
// and mixed_memory (error and memory proxy over the mixed space; above --oom-threshold a trial
// runs out of memory: told PRUNED without values, user attribute oom=true, as tune records it).
// Every sampler runs with its defaults (Optuna's), the study seeded with the seed.

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
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

const std::vector<std::string> kMixedOrder = {"model",      "batch_size", "grad_accum",
                                              "max_length", "lr",         "weight_decay"};

struct Problem {
  FunctionOptions options;
  std::vector<std::pair<std::string, Json>> space;  // suggest order
};

Problem MakeProblem(const std::string& name, double oom_threshold) {
  Problem p;
  p.options.name = name;
  if (name == "mixed_memory") p.options.oom_threshold = oom_threshold;
  const Json space = FunctionDefaultSpace(p.options);
  if (space.empty() || FunctionObjectives(name) < 2) Die("not a multi-objective problem: " + name);
  if (name == "mixed_memory") {
    for (const auto& n : kMixedOrder) p.space.emplace_back(n, space.at(n));
    return p;
  }
  for (size_t i = 0; i < space.size(); ++i) {
    const std::string n = fmt::format("x{}", i);
    p.space.emplace_back(n, space.at(n));
  }
  return p;
}

int PrintSpace(const std::string& name) {
  Json out = Json::array();
  for (const auto& [n, spec] : MakeProblem(name, 16000).space) {
    out.push_back({{"name", n}, {"spec", spec}});
  }
  fmt::print("{}\n", out.dump());
  return 0;
}

Json Evaluate(const Problem& problem, const ModelCatalog& catalog, const Json& params) {
  Result<std::vector<double>> values = EvaluateFunctionValues(problem.options, catalog, params);
  if (!values.ok() && values.status().code() == StatusCode::kResourceExhausted) return nullptr;
  return Take(std::move(values), "evaluate");
}

int Eval(const std::string& name, const ModelCatalog& catalog) {
  const Problem problem = MakeProblem(name, 16000);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json v = Evaluate(problem, catalog, Json::parse(line));
    fmt::print("{}\n", (v.is_null() ? Json{{"oom", true}} : Json{{"values", v}}).dump());
  }
  return 0;
}

Json RunTrial(Study& study, const Problem& problem, const ModelCatalog& catalog) {
  auto trial = Take(study.Ask(), "ask");
  Json params = Json::object();
  for (const auto& [n, spec] : problem.space) params[n] = SuggestParam(*trial, n, spec);
  Json v = Evaluate(problem, catalog, params);
  if (v.is_null()) {
    Check(trial->SetUserAttr("oom", true), "set oom");
    Take(study.Tell(*trial, TrialState::kPruned), "tell");
  } else {
    Take(study.Tell(*trial, TrialState::kComplete, v.get<std::vector<double>>()), "tell");
  }
  return v;
}

Json RunOne(const std::string& sampler, const Json& options, const std::string& name, int64_t seed,
            int64_t n_trials, double oom_threshold, const ModelCatalog& catalog) {
  const Problem problem = MakeProblem(name, oom_threshold);
  SamplerConfig config;
  config.name = sampler;
  config.source = "--samplers";
  config.options = options;
  const std::vector<StudyDirection> directions(
      static_cast<size_t>(FunctionObjectives(problem.options.name)), StudyDirection::kMinimize);
  auto study = Take(Study::CreateOrLoad(NewInMemoryStorage(), "quality", directions,
                                        Take(MakeSampler(config), "sampler"),
                                        std::make_unique<NopPruner>(), static_cast<uint64_t>(seed)),
                    "create study");
  Json values = Json::array(), ms = Json::array();
  for (int64_t i = 0; i < n_trials; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    values.push_back(RunTrial(*study, problem, catalog));
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return {{"tool", "tune"}, {"sampler", sampler}, {"problem", name},
          {"seed", seed},   {"values", values},   {"ms", ms}};
}

int Run(const Flags& flags, const ModelCatalog& catalog) {
  const auto problems = SplitList(flags.Get("problems", "zdt1,zdt2,zdt3,dtlz2,wfg4,mixed_memory"));
  const auto samplers = SplitList(flags.Get("samplers", "tpe"));
  const int64_t seeds = flags.GetInt("seeds", 20);
  const int64_t first_seed = flags.GetInt("first-seed", 0);
  const int64_t n_trials = flags.GetInt("trials", 500);
  const double oom_threshold = flags.GetDouble("oom-threshold", 16000);
  const Json options = Json::parse(flags.Get("sampler-options", "{}"));
  for (const auto& sampler : samplers) {
    for (const auto& name : problems) {
      for (int64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
        fmt::print("{}\n",
                   RunOne(sampler, options, name, seed, n_trials, oom_threshold, catalog).dump());
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
  if (flags.Has("eval")) return Eval(flags.Get("eval", ""), catalog);
  if (flags.Has("run")) return Run(flags, catalog);
  Die("usage: tune_bench_mo_quality --space P | --eval P | --run [...]");
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

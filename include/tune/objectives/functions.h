// Built-in test functions ("objective": {"type": "function", "name": ...}) for tests, demos and
// sampler benchmarks. All are minimised.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/model_catalog.h"
#include "tune/objectives/objective.h"

namespace tune {

struct FunctionOptions {
  //  sphere      sum x_i^2 over x0..x{dims-1} in [-5, 5]; minimum 0 at the origin.
  //  rosenbrock  sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2, x_i in [-5, 10]; minimum 0 at 1.
  //  branin      x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887.
  //  hartmann6   x0..x5 in [0, 1]; minimum -3.32237.
  //  mixed       a validation error surface over the user reports' transformer space: model
  //              (categorical of catalog names), batch_size, grad_accum, max_length, lr (log),
  //              weight_decay (+ optional warmup_ratio, dropout, classifier_layers). Minimum
  //              about 0.11.
  //  zdt1, zdt2, zdt3, dtlz2, wfg4
  //              multi-objective test problems (2, 2, 2, 3 and 2 objectives over 10, 10, 10, 12
  //              and 10 variables x0, x1, ...; see docs/config.md#function).
  //  mixed_memory
  //              2 objectives over mixed's space: its error and its memory proxy
  //              (MixedMemoryProxy), with the same out-of-memory region when oom_threshold is set.
  std::string name = "sphere";
  int64_t dims = 2;  // sphere, rosenbrock
  // > 0: every single-objective function reports a learning curve at steps 0..n_steps-1 that ends
  // at the final value, so pruners have something to judge.
  int64_t n_steps = 0;
  // mixed, mixed_memory: configs whose memory proxy exceeds it "run out of memory": the trial is
  // PRUNED with oom attributes, like a real OOM.
  std::optional<double> oom_threshold;
};

std::vector<std::string> FunctionNames();
// The function's own search space, in config form ({"x0": {"type": "float", ...}, ...}).
Json FunctionDefaultSpace(const FunctionOptions& options);
// How many values the function returns (the study needs as many directions).
int FunctionObjectives(const std::string& name);
// The function's value at `params` (mixed_memory: mixed's, its first value); ResourceExhausted
// for the mixed functions' OOM region; InvalidArgument for an unknown name, a missing or
// non-numeric param, or a multi-objective test problem.
Result<double> EvaluateFunction(const FunctionOptions& options, const ModelCatalog& catalog,
                                const Json& params);
// The function's values at `params` (one per objective), as EvaluateFunction otherwise.
Result<std::vector<double>> EvaluateFunctionValues(const FunctionOptions& options,
                                                   const ModelCatalog& catalog, const Json& params);
// The mixed function's memory proxy for `params`: batch_size * max_length * (layers * hidden) /
// (12 * 768) of the model the params name (batch_size 16, max_length 256 and a factor of 1 when
// unset or not in the catalog).
double MixedMemoryProxy(const ModelCatalog& catalog, const Json& params);

std::unique_ptr<Objective> NewFunctionObjective(FunctionOptions options, ModelCatalog catalog);

}  // namespace tune

// The memory guard for command objectives [tune_train]: the "memory" section of a command
// objective maps a trial's params to an estimator request through templates, and the guard then
// admits, shrinks (levers) or rejects each trial as it does for the train objective, reserves
// its predicted peak with --jobs, and learns from the peak the program reports.
//
// The request: every hyperparameter name of the train objective (hyperparams.h: model,
// batch_size, max_length, grad_accum, precision, gradient_checkpointing, ...) plus num_labels,
// each a template over the params ("{batch_size}") or a plain value ("bf16"). A lever changes
// a field only when its template is exactly one placeholder; the program then receives the new
// value through the same parameter (argv templates, TUNE_PARAM_*, the params file).
//
// A model the estimator does not know is measured instead: its first trial runs alone (on an
// idle device), later ones reserve a fit of the measured peaks against tokens per batch
// (B = batch_size, T = max_length): the largest measured peak scaled by B·T with one or two
// points, peak = a + b·(B·T) + c·(B·T)² by least squares with three or more, times 1.1.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "memory/guard.h"
#include "tune/distributions.h"
#include "tune/memory_guard.h"
#include "tune/model_catalog.h"

namespace tune {

struct CommandMemoryOptions {
  GuardOptions guard;
  // Request fields (hyperparameter names and num_labels) -> a template or a value.
  std::map<std::string, Json> request;
  // The device model of the estimates: "cuda" (the caching allocator, a context) or "cpu".
  std::string device = "cuda";
};

// REQUIRES: options.guard.device_memory is set.
std::unique_ptr<MemoryPlanner> NewGuardPlanner(CommandMemoryOptions options, ModelCatalog catalog);

// The tokens-per-batch fit for models the estimator does not know (see the header comment):
// the peak predicted for `tokens` from measured (tokens, peak) points; nullopt without points.
std::optional<int64_t> EmpiricalPeak(const std::vector<std::pair<double, double>>& points,
                                     double tokens);

}  // namespace tune

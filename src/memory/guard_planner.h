// The memory guard for command objectives [tune_train]: the "memory" section of a command
// objective maps a trial's params to an estimator request through templates, and the guard then
// admits, shrinks (levers) or rejects each trial as it does for the train objective, reserves
// its predicted peak with --jobs, and learns from the peak the program reports.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "measure/measured_fit.h"
#include "memory/guard.h"
#include "tune/distributions.h"
#include "tune/memory_guard.h"
#include "tune/model_catalog.h"

namespace tune {

struct CommandMemoryOptions {
  GuardOptions guard;
  // Request fields -> a template or a value: every hyperparameter name of the train objective
  // (hyperparams.h: model, batch_size, max_length, grad_accum, precision,
  // gradient_checkpointing, ...) plus num_labels, each a template over the params
  // ("{batch_size}") or a plain value ("bf16"). A lever changes a field only when its template is
  // exactly one placeholder; the program then receives the new value through the same parameter
  // (argv templates, TUNE_PARAM_*, the params file).
  std::map<std::string, Json> request;
  // The device model of the estimates: "cuda" (the caching allocator, a context) or "cpu".
  std::string device = "cuda";
  // A run enqueues the first trials of each model outside the catalog at the space's boundary
  // shapes (config/boundary_probes.h).
  bool boundary_probes = true;
};

// With options.guard.oom_retry > 0: InvalidArgument unless memory.batch_size and memory.grad_accum
// are each exactly one parameter ("{batch_size}"), which a retry halves and doubles
// (MemoryPlanner::RetryAfterOom) and the program receives.
Status CheckOomRetry(const CommandMemoryOptions& options);

// The planner. A model the estimator does not know (not in the catalog: the user's own script)
// is measured instead: its first trial runs alone, later ones reserve the whole card until the
// peaks the trials measured can be fitted (measured_fit.h: four shapes, two values of T), and
// from then on the fit predicts each trial through the same admission, levers and reservations
// as the formulas (memory_model.h). A shape that ran out of memory with the whole card rules out
// every shape at least as large in B and T (PRUNED, reason "predicted").
// REQUIRES: options.guard.device_memory is set. InvalidArgument when its cards cannot be
// honoured (Cards::Resolve, memory/cards.h).
Result<std::unique_ptr<MemoryPlanner>> NewGuardPlanner(CommandMemoryOptions options,
                                                       ModelCatalog catalog);

}  // namespace tune

// MemoryPlanner: the memory guard's interface for objectives that run external programs (the
// command objective's "memory" section, tune/objectives/command.h). The command objective
// (tune_core) asks it; tune_train's guard implements it (NewGuardPlanner,
// src/memory/guard_planner.h), so the core needs no estimator. A program embedding tune_core may
// implement its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/cards.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// A program's measured peak: bytes (-1: unknown), where they came from (MemoryAttr's
// peak_source: "reported", "device_sampled", "max_rss") and, when the program reported it, the
// CUDA caching allocator's reserved peak (-1: not reported).
struct ProgramPeak {
  int64_t bytes = -1;
  std::string source;
  int64_t reserved = -1;
};

class MemoryPlanner {
 public:
  virtual ~MemoryPlanner() = default;
  // The cards trials share, as they are now (Objective::CardsNow): each one's budget is its
  // device_memory less what other processes hold, times (1 - margin).
  virtual std::vector<Card> CardsNow() const = 0;
  // Before the trial runs, against the largest budget now (tune/cards.h): its reservation and the
  // params it runs with (memory levers applied), or, when it cannot fit, its outcome (recorded:
  // PRUNED with reason "predicted").
  virtual Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) = 0;
  // Objective::PlanToFit: the trial at a smaller micro-batch that fits `room`, or nullopt.
  virtual Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                                     int64_t room) = 0;
  // After it ran: its measured peak and whether it ran out of memory, for the trial's "memory"
  // attribute and the next predictions.
  virtual Status Record(TrialHandle& trial, const TrialPlan& plan, const ProgramPeak& peak,
                        bool oom) = 0;
  // After the program run with `ran` ran out of memory (`error`; `peak`: what it measured), the
  // plan of the next attempt at half the micro-batch: `ran` with the params of batch_size halved
  // and of grad_accum doubled (the effective batch kept), on the same card with the same
  // reservation and cap. nullopt when the trial may not be retried: the guard's oom_retry is
  // spent, or the batch size is odd or 1. The failed attempt is kept for the "memory" attribute
  // that Record writes (its oom_retries). Default: never retried.
  virtual Result<std::optional<TrialPlan>> RetryAfterOom(TrialHandle& trial, const TrialPlan& ran,
                                                         const ProgramPeak& peak,
                                                         const std::string& error) {
    (void)trial, (void)ran, (void)peak, (void)error;
    return std::optional<TrialPlan>();
  }
  // Variables for the program's environment on card plan.card (CUDA_VISIBLE_DEVICES, a simulated
  // card).
  virtual std::vector<std::string> Environment(const TrialPlan& plan) const = 0;
  // --jobs: what the program may use (TUNE_MEMORY_BUDGET) for a plan that reserves
  // plan.reservation; by default the reservation itself.
  virtual int64_t ProgramCap(const TrialPlan& plan) const { return plan.reservation; }
};

}  // namespace tune

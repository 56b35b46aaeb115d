// Objective: evaluates one trial. Kinds: "function" (built-in test functions, functions.h),
// "command" (a user's program per trial, command.h) and "train" (in-process training with
// LibTorch, which tune_train provides).
//
// Run() receives the live trial (to report intermediate values, ask the pruner and set
// attributes) and its sampled params. It returns the trial's outcome; pruning and failure are
// outcomes, not errors. A non-OK Status means tune itself could not run the objective (for
// example the program cannot be started): the trial is failed and the study stops.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/trial.h"
#include "tune/trial_attrs.h"

namespace tune {

// Records a trial stopped by Ctrl-C (interrupted=true, reason="interrupted", fail_reason) and
// returns its FAIL outcome.
Result<TrialOutcome> RecordInterrupted(TrialHandle& trial);

// A trial running in a child process (--jobs), started by Objective::Start and driven by the
// run's loop in the parent, which alone owns the study: the process forwards the child's
// reports, pruning questions and attributes to the trial.
class TrialProcess {
 public:
  virtual ~TrialProcess() = default;
  // Handles the child's output for up to `wait`.
  virtual Status Poll(std::chrono::milliseconds wait) = 0;
  virtual bool finished() const = 0;
  // Ctrl-C: stops the child; the trial then finishes as interrupted.
  virtual void Interrupt() = 0;
  // REQUIRES: finished(). The trial's outcome; its user attributes are recorded.
  virtual Result<TrialOutcome> Finish() = 0;
};

class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::string name() const = 0;
  // Runs the trial in this process and returns its outcome.
  virtual Result<TrialOutcome> Run(TrialHandle& trial, const Json& params) = 0;

  // --jobs: the cards the trials share, numbered 0..CardCount()-1 (every card of the machine, or
  // those named; simulated cards). 1: one device, or no device to share.
  virtual int64_t CardCount() const { return 1; }
  // Card `card`'s name for logs, the status line and the trial's system attribute "card"
  // ("cuda:2", "card 1"); "" with one card.
  virtual std::string CardName(int64_t card) const {
    (void)card;
    return "";
  }
  // The memory of card `card` that trials may reserve (bytes), when this objective predicts
  // trials' memory; nullopt: nothing to reserve (--jobs N runs N at once).
  virtual std::optional<int64_t> DeviceCapacity(int64_t card) const {
    (void)card;
    return std::nullopt;
  }
  // What computes on that card now, when the objective can see it; nullopt: unknown.
  virtual std::optional<DeviceBusy> DeviceBusyNow(int64_t card) const {
    (void)card;
    return std::nullopt;
  }
  // That card's utilisation as its driver reports it now (NVML, a real CUDA device), in
  // [0, 1]; nullopt: no such reading.
  virtual std::optional<double> DeviceUtilizationNow(int64_t card) const {
    (void)card;
    return std::nullopt;
  }
  // Plans a trial before it starts (--jobs), against the largest card: a trial that fits no card
  // even alone is decided here. Default: it runs with its params, reserving nothing.
  virtual Result<TrialPlan> Plan(TrialHandle& trial, const Json& params);
  // --jobs, a waiting trial that does not fit beside the running ones: its plan at a smaller
  // micro-batch (batch_size halved, grad_accum doubled: the same effective batch) that fits the
  // `room` bytes left, to start now instead of waiting; nullopt when none fits or the objective
  // does not shrink trials (memory.shrink_to_start). Default: nullopt.
  virtual Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                                     int64_t room);
  // Starts a planned trial in its own process (--jobs), on card plan.card. Default: runs it here
  // and now, and returns it finished (objectives that take microseconds, like the test
  // functions).
  virtual Result<std::unique_ptr<TrialProcess>> Start(TrialHandle& trial, const TrialPlan& plan);
};

}  // namespace tune

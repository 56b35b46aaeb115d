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

#include "tune/cards.h"
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

  // --jobs: the cards the trials share (every card of the machine, or those named; simulated
  // cards), numbered as TrialPlan::card, as they are now: at least one. Each call reads their
  // budgets, busy shares and utilisation again (other processes come and go); the scheduler's
  // fields (Card::running and below) are left at their defaults. Default: one card, nothing
  // tracked (--jobs N runs N at once).
  virtual std::vector<Card> CardsNow() const { return {Card{}}; }
  // Plans a trial before it starts (--jobs), against the largest budget now (tune/cards.h): a
  // trial that fits no card
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

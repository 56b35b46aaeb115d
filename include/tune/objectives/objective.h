// Objective: evaluates one trial. Kinds: "function" (built-in test functions, functions.h),
// "command" (a user's program per trial, command.h) and "train" (in-process training, train.h).
//
// Run() receives the live trial (to report intermediate values, ask the pruner and set
// attributes) and its sampled params. It returns the trial's outcome; pruning and failure are
// outcomes, not errors. A non-OK Status means tune itself could not run the objective (for
// example the program cannot be started): the trial is failed and the study stops.
#pragma once

#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/study.h"
#include "tune/trial.h"
#include "tune/trial_attrs.h"

namespace tune {

struct TrialOutcome {
  TrialState state = TrialState::kComplete;  // kComplete, kPruned or kFail
  std::vector<double> values;                // kComplete: one per objective
  std::string reason;                        // kPruned / kFail: why (also in user attrs)
};

// Records an out-of-memory trial the way every objective and the memory guard do (user
// attributes of trial_attrs.h): oom=true, reason=`oom_reason` (kOom: it ran out of memory;
// kPredicted: the memory guard did not run it) and oom_config = the params, their effective
// batch size (batch_size * grad_accum, when both are numbers) and `details`. Returns the PRUNED
// outcome with `reason`.
Result<TrialOutcome> RecordOom(Trial& trial, const Json& params, const Json& details,
                               const std::string& reason, EndReason oom_reason = EndReason::kOom);

// Records a trial stopped by Ctrl-C (interrupted=true, reason="interrupted", fail_reason) and
// returns its FAIL outcome.
Result<TrialOutcome> RecordInterrupted(Trial& trial);

class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::string name() const = 0;
  virtual Result<TrialOutcome> Run(Trial& trial, const Json& params) = 0;
};

}  // namespace tune

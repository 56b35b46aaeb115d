// The attributes tune writes on trials, in one place: their names and (de)serialisation. Objectives
// and the storages write them; TPE's oom_feasibility, the memory guard's calibration and the
// management commands read them back. Optuna and optuna-dashboard show them as ordinary user
// attributes, so every value is plain JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tune/distributions.h"
#include "tune/trial.h"

namespace tune {

class TrialHandle;  // trial.h
namespace attrs {
// Why a trial is not COMPLETE, when tune knows more than its state (EndReason).
inline constexpr const char* kReason = "reason";
// True: the trial ran, or would have run, out of memory (PRUNED).
inline constexpr const char* kOom = "oom";
// The configuration that did not fit: params, effective batch size, estimate, ...
inline constexpr const char* kOomConfig = "oom_config";
// What the trial taught about memory (MemoryAttr).
inline constexpr const char* kMemory = "memory";
// A FAIL trial's message.
inline constexpr const char* kFailReason = "fail_reason";
// Where a value that is not finite ended the trial (NonFiniteAttr): FAIL, reason "nonfinite".
inline constexpr const char* kNonFinite = "nonfinite";
// True: stopped by Ctrl-C or SIGTERM (FAIL).
inline constexpr const char* kInterrupted = "interrupted";
// Where a sticky CUDA error struck (phase, epoch, step, batch shape, device): the trial FAIL; the
// study went on in a fresh process.
inline constexpr const char* kDeviceLost = "device_lost";
// True: a command trial ran past its timeout (FAIL).
inline constexpr const char* kTimeout = "timeout";
// A command trial's program (FAIL): its exit status, the signal that ended it, its stderr's tail.
inline constexpr const char* kExitStatus = "exit_status";
inline constexpr const char* kSignal = "signal";
inline constexpr const char* kStderrTail = "stderr_tail";
// The train objective's summary: epochs, best epoch, per-epoch metrics.
inline constexpr const char* kTrain = "train";
// With --jobs: when the trial was queued, started and ended, the memory it reserved, the job
// limit and, with several cards, the card.
inline constexpr const char* kSchedule = "schedule";
// A system attribute: with --jobs over several cards, the card the trial ran on ("cuda:2",
// "card 1").
inline constexpr const char* kCard = "card";
// A system attribute: the name of the pruner that pruned the trial ("median", "hyperband", ...),
// set when Trial::ShouldPrune says prune. The trackers tag the trial with it (a stored study
// does not otherwise keep its pruner).
inline constexpr const char* kPrunedBy = "pruned_by";
// Set false on an enqueued trial (enqueue_trials user_attrs): it runs without admission.
inline constexpr const char* kAdmission = "admission";
}  // namespace attrs

// The values of the user attribute "reason".
enum class EndReason {
  kOom,          // "oom": ran out of memory at run time (PRUNED, oom=true)
  kPredicted,    // "predicted": the memory guard predicted it would not fit and did not run it
  kInterrupted,  // "interrupted": stopped by Ctrl-C or SIGTERM (FAIL)
  kTimeout,      // "timeout": a command trial ran past its timeout (FAIL)
  kNonFinite,    // "nonfinite": a loss, output, weight or value was NaN or infinite (FAIL)
};
const char* EndReasonName(EndReason reason);
// nullopt for a trial without a known "reason".
std::optional<EndReason> TrialEndReason(const FrozenTrial& trial);

// A PRUNED trial with oom=true: it ran out of memory, or the guard predicted it would.
bool IsOomTrial(const FrozenTrial& trial);

// The user attribute "nonfinite": where a value that is not finite (NaN, +inf, -inf) ended a
// trial. docs/config.md ("Non-finite values") lists what each `where` means.
struct NonFiniteAttr {
  // "training_loss", "validation_loss", "logits" (the evaluation's outputs), "metric",
  // "weights" (the pretrained checkpoint's), "value" (the objective's returned value)
  std::string where;
  int64_t epoch = -1;  // 1-based; -1: not in an epoch (weights, value)
  int64_t step = -1;   // the optimizer step it was found at; -1: none
  int64_t count = 0;   // the non-finite values (logits: the validation rows holding one)
  int64_t total = 0;   // ... of how many (0: not counted)
  std::string name;    // the tensor (weights) or metric it was found in; "" if none
  std::string value;   // an example: "NaN", "inf" or "-inf"
};
Json NonFiniteAttrToJson(const NonFiniteAttr& attr);
// nullopt unless `j` is an object with a string "where".
std::optional<NonFiniteAttr> NonFiniteAttrFromJson(const Json& j);

// Records a trial ended by a non-finite value the way every objective does: fail_reason =
// `message`, reason = "nonfinite", nonfinite = `attr`. Returns the FAIL outcome with `message`'s
// first line.
Result<TrialOutcome> RecordNonFinite(TrialHandle& trial, const NonFiniteAttr& attr,
                                     const std::string& message);

// Constraints (trial system attributes, Optuna 5.0's trial.set_constraint): one attribute
// "constraints:<name>" per constraint, a number; the trial is feasible when every value is <= 0.
// Optuna 4.x's list "constraints" (written by its constraints_func) is read too, its entries
// named "0", "1", ... (a named one of the same name wins, as in Optuna 5.0).
inline constexpr const char* kConstraintsKey = "constraints";
std::string ConstraintKey(const std::string& name);  // "constraints:<name>"
// The trial's constraint values by name (a non-number reads as NaN); empty when it has none.
std::map<std::string, double> TrialConstraints(const FrozenTrial& trial);
// The sum of the positive values (Optuna's violation); 0 for a feasible trial. A NaN value
// counts as satisfied, as in Optuna's _get_infeasible_trial_score.
double ConstraintViolation(const std::map<std::string, double>& constraints);

// One out-of-memory attempt that oom_retry shrank and ran again ("memory"/"oom_retries").
struct OomAttempt {
  int64_t batch_size = 0;
  int64_t grad_accum = 0;
  std::string phase;                // setup, forward, backward, optimizer_step, evaluation; ""
                                    // unknown (a command trial's program)
  std::string error;                // the first line of the error
  int64_t peak_memory_bytes = -1;   // measured; -1: not measured
  std::optional<int64_t> estimate;  // device_peak estimated for the attempt
};

// The user attribute "memory" of a train trial (bytes throughout; -1: not measured).
struct MemoryAttr {
  std::string family;    // calibration key: model_type[/precision]
  int64_t estimate = 0;  // device_peak estimated for the configuration that ran
  // The memory the trial could use (device_memory, less what other processes held on the card);
  // 0: no limit.
  int64_t device_memory = 0;
  int64_t others = 0;  // what other processes held on the card at admission (card_others.h)
  std::string model;   // the model's name (per-model calibration); "" when not recorded
  int64_t cap = 0;     // --jobs: the reservation it was capped at; 0: none
  int64_t peak = -1;   // measured: allocated bytes above the level at the start
  // CUDA: the context (and kernels) outside the caching allocator that `estimate` counted; with
  // run->peak_reserved it gives the measured counterpart of `estimate`. -1: not recorded.
  int64_t context = -1;
  // Command trials: where the peak came from: "reported" (the program's {"memory_peak": ...}),
  // "device_sampled" (NVML's samples: a lower bound), "max_rss" (the resident set, on a CPU
  // device), "host_max_rss" (the resident set of a program on a CUDA device); "" unknown.
  std::string peak_source;
  bool oom = false;  // ran out of memory at run time
  // Admission, when it ran: its verdict ("run", "run_with_levers", "reject"), the prediction
  // (estimate x correction), the correction and the usable memory, and the levers applied.
  std::optional<std::string> admission;
  int64_t predicted = 0;
  double correction = 1.0;
  int64_t usable = 0;
  std::string levers;
  // What the trainer measured; unset for a trial that did not run.
  struct Run {
    int64_t peak_reserved = -1;  // CUDA: the caching allocator's peak
    int64_t before = -1;         // allocated when the run started and after it was released
    int64_t after = -1;
    int64_t rss = -1;  // the process's resident set and malloc's in-use bytes after it
    int64_t heap = -1;
    int64_t batch_size = 0;  // the batch as it ran (levers and retries applied)
    int64_t grad_accum = 0;
    int64_t max_length = 0;  // command trials: the request's tokens per example
    bool gradient_checkpointing = false;
    std::vector<OomAttempt> oom_retries;
  };
  std::optional<Run> run;
};
Json MemoryAttrToJson(const MemoryAttr& memory);
// nullopt unless `j` has at least a string "family" and an integer "estimate".
std::optional<MemoryAttr> MemoryAttrFromJson(const Json& j);
// What `estimate` (a device peak) is measured against: on CUDA, when both were recorded, the
// caching allocator's reserved peak plus the context the estimate counted (what a --jobs cap
// limits); else `peak` (-1: not measured).
int64_t MeasuredDevicePeak(const MemoryAttr& m);

// Records an out-of-memory trial the way every objective and the memory guard do (user
// attributes of trial_attrs.h): oom=true, reason=`oom_reason` (kOom: it ran out of memory;
// kPredicted: the memory guard did not run it) and oom_config = the params, their effective
// batch size (batch_size * grad_accum, when both are numbers) and `details`. Returns the PRUNED
// outcome with `reason`.
Result<TrialOutcome> RecordOom(TrialHandle& trial, const Json& params, const Json& details,
                               const std::string& reason, EndReason oom_reason = EndReason::kOom);

}  // namespace tune

// The command objective: runs a user's program once per trial, without a shell.
//
// Parameters reach the program three ways:
//  - argv templates: "{lr}" is replaced by the value ("--lr={lr}"). "{{" and "}}" are literal
//    braces. An argv element that names a parameter not active in this trial (a conditional one)
//    is left out. Special names: {trial.number}, {study.name}, {trial.dir}, {trial.params_file},
//    {trial.result_file}.
//  - environment: TUNE_PARAM_<NAME> (name upper-cased, other characters -> '_'), plus
//    TUNE_TRIAL_NUMBER, TUNE_STUDY_NAME, TUNE_TRIAL_DIR, TUNE_PARAMS_FILE, TUNE_RESULT_FILE.
//  - a JSON file of all params ($TUNE_PARAMS_FILE).
// The program reports JSON lines on stdout: {"step": 3, "value": 0.81} (intermediate, checked by
// the pruner; a pruned trial's process is terminated) and {"value": 0.9} (final; {"values": [..]}
// for several objectives), or writes {"value": 0.9} to $TUNE_RESULT_FILE. Other lines are logged
// at debug level. NaN/Infinity tokens are accepted.
//
// Outcomes: a value and exit status 0 -> COMPLETE. Exit status != 0, death by signal, the
// per-trial timeout, or no value -> FAIL, with fail_reason, exit_status and stderr_tail in the
// trial's user attributes. Stderr matching an out-of-memory pattern (CUDA/PyTorch OOM) ->
// PRUNED with user attrs oom=true, reason="oom", oom_config (the params, effective batch size and
// the matched line), so samplers learn to avoid the region. With a memory guard whose oom_retry
// allows it, such a run is first run again at half the micro-batch (MemoryPlanner::RetryAfterOom:
// batch_size halved, grad_accum doubled in what the program receives); the trial keeps the steps
// the earlier runs reported, and its timeout counts all of them.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/memory_guard.h"
#include "tune/objectives/objective.h"

namespace tune {

struct CommandOptions {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH
  std::map<std::string, std::string> env;  // extra variables (templated like argv)
  std::optional<std::string> cwd;          // working directory of the program
  std::optional<double> timeout_seconds;   // per trial; unset = none
  std::optional<std::string> work_dir;     // keep trial dirs here (<work_dir>/trial_<N>);
                                           // unset = a temporary dir removed afterwards
  std::vector<std::string> oom_patterns;   // added to the built-in patterns
  size_t stderr_tail_bytes = 4096;         // how much stderr is kept in user attrs
  double kill_grace_seconds = 5.0;         // SIGTERM -> SIGKILL delay
};

// The out-of-memory patterns matched in stderr (CUDA, cuBLAS, cuDNN, HIP, MPS).
const std::vector<std::string>& DefaultOomPatterns();

// Names usable in templates besides the parameters.
const std::vector<std::string>& CommandSpecialNames();

// TUNE_PARAM_<NAME> for a parameter name.
std::string ParamEnvName(const std::string& param);

// `planner`: the memory guard of the objective's "memory" section (null: none). With it every
// trial is planned (admission, levers applied to the params the program receives, its
// reservation with --jobs) and its measured peak recorded: the program's {"memory_peak": BYTES}
// line, else its largest resident set.
std::unique_ptr<Objective> NewCommandObjective(CommandOptions options,
                                               std::unique_ptr<MemoryPlanner> planner = nullptr);

}  // namespace tune

// The command objective: runs a user's program once per trial, without a shell, giving it the
// trial's params (argv templates, environment, a JSON file) and reading back its reports.
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
  // argv[0] is looked up in PATH. Templates: "{lr}" is replaced by the value ("--lr={lr}"); "{{"
  // and "}}" are literal braces; an element that names a parameter not active in this trial (a
  // conditional one) is left out (argv[0]: the trial's run is InvalidArgument). Besides the params,
  // CommandSpecialNames.
  std::vector<std::string> argv;
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

// Names usable in templates besides the parameters: {trial.number}, {study.name}, {trial.dir},
// {trial.params_file}, {trial.result_file}.
const std::vector<std::string>& CommandSpecialNames();

// TUNE_PARAM_<NAME> for a parameter name (upper-cased, other characters -> '_'): the program's
// environment holds one per param, plus TUNE_TRIAL_NUMBER, TUNE_STUDY_NAME, TUNE_TRIAL_DIR,
// TUNE_PARAMS_FILE (a JSON file of all params) and TUNE_RESULT_FILE.
std::string ParamEnvName(const std::string& param);

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
//
// `planner`: the memory guard of the objective's "memory" section (null: none). With it every
// trial is planned (admission, levers applied to the params the program receives, its
// reservation with --jobs) and its measured peak recorded: the program's {"memory_peak": BYTES}
// line, else its largest resident set.
std::unique_ptr<Objective> NewCommandObjective(CommandOptions options,
                                               std::unique_ptr<MemoryPlanner> planner = nullptr);

}  // namespace tune

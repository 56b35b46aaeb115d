// Process-wide interrupt flag (Ctrl-C, SIGTERM). The app's signal handler calls
// RequestInterrupt(signal); the optimize loop and running objectives poll InterruptRequested() and
// wind down: the running trial is marked FAIL and the study stays consistent. Async-signal-safe
// (lock-free atomics).
#pragma once

#include <string>

namespace tune {

// `signal`: the signal that asked (SIGINT, SIGTERM), or 0 (a caller of the library).
void RequestInterrupt(int signal = 0);
bool InterruptRequested();
void ResetInterrupt();
// The signal of the first request; 0 when none came from a signal.
int InterruptSignal();
// Whether the request came from SIGTERM: what a scheduler (Slurm's preemption, time limit or
// scancel) or `kill` sends; the run then ends as a clean stop, not a user's interruption.
bool TerminateRequested();
// A trial's fail_reason when it was stopped by the request: "interrupted by the user" (Ctrl-C),
// or "stopped by SIGTERM (...)".
std::string InterruptReason();

}  // namespace tune

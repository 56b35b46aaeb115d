// Process-wide interrupt flag (Ctrl-C). The app's signal handler calls RequestInterrupt(); the
// optimize loop and running objectives poll InterruptRequested() and wind down: the running
// trial is marked FAIL and the study stays consistent. Async-signal-safe (a lock-free atomic).
#pragma once

namespace tune {

void RequestInterrupt();
bool InterruptRequested();
void ResetInterrupt();

}  // namespace tune

#include "util/interrupt.h"

#include <atomic>
#include <csignal>

namespace tune {
namespace {
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);
}  // namespace

void RequestInterrupt(int signal) {
  int none = 0;
  if (signal != 0) g_signal.compare_exchange_strong(none, signal);
  g_interrupted.store(true);
}
bool InterruptRequested() { return g_interrupted.load(); }
void ResetInterrupt() {
  g_interrupted.store(false);
  g_signal.store(0);
}
int InterruptSignal() { return g_signal.load(); }
bool TerminateRequested() { return g_signal.load() == SIGTERM; }

std::string InterruptReason() {
  if (TerminateRequested()) {
    return "stopped by SIGTERM: the worker was told to end (a scheduler's preemption, time limit "
           "or scancel, or a kill)";
  }
  return "interrupted by the user";
}

}  // namespace tune

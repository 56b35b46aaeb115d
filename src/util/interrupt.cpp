#include "util/interrupt.h"

#include <atomic>

namespace tune {
namespace {
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
}  // namespace

void RequestInterrupt() { g_interrupted.store(true); }
bool InterruptRequested() { return g_interrupted.load(); }
void ResetInterrupt() { g_interrupted.store(false); }

}  // namespace tune

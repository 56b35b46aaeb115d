// The order in which waiting trials start (jobs_queue.h).
#include "study/jobs_queue.h"

namespace tune::internal {

bool FitsNow(const JobsLedger& ledger, const WaitingTrial& trial) {
  if (ledger.running >= ledger.limit) return false;
  if (ledger.running == 0) return true;
  if (trial.exclusive || ledger.compute_full) return false;
  return !ledger.capacity || ledger.reserved + trial.reservation <= *ledger.capacity;
}

std::optional<size_t> NextToStart(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                                  int64_t max_passes) {
  if (queue.empty()) return std::nullopt;
  if (FitsNow(ledger, queue.front())) return 0;
  if (queue.front().passed >= max_passes) return std::nullopt;
  for (size_t i = 1; i < queue.size(); ++i) {
    if (FitsNow(ledger, queue[i])) return i;
  }
  return std::nullopt;
}

void MarkStarted(std::vector<WaitingTrial>& queue, size_t started) {
  for (size_t i = 0; i < started; ++i) ++queue[i].passed;
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(started));
}

bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                      int64_t max_passes) {
  if (ledger.running + static_cast<int64_t>(queue.size()) >= ledger.limit) return false;
  if (queue.empty()) return true;
  if (ledger.compute_full && ledger.running > 0) return false;
  return queue.front().passed < max_passes && !NextToStart(queue, ledger, max_passes);
}

}  // namespace tune::internal

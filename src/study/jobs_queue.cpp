// The order in which waiting trials start (jobs_queue.h).
#include "study/jobs_queue.h"

#include <algorithm>
#include <tuple>

#include "tune/optimize.h"

namespace tune::internal {

bool FitsNow(const JobsLedger& ledger, const WaitingTrial& trial) {
  if (ledger.running >= ledger.limit) return false;
  if (ledger.running > 0 && (trial.exclusive || ledger.compute_full)) return false;
  if (trial.exclusive && !ledger.largest) return false;
  if (!ledger.capacity) return true;
  if (*ledger.capacity <= 0) return false;  // full: another process holds it all
  if (ledger.reserved + trial.reservation <= *ledger.capacity) return true;
  return ledger.running == 0 && ledger.largest && trial.planned_against &&
         *ledger.capacity >= *trial.planned_against;
}

int64_t CardsLedger::running() const {
  int64_t n = 0;
  for (const JobsLedger& card : cards) n += card.running;
  return n;
}

std::optional<size_t> CardFor(const CardsLedger& ledger, const WaitingTrial& trial) {
  if (ledger.running() >= ledger.limit) return std::nullopt;
  std::optional<size_t> best;
  std::tuple<int64_t, int64_t> best_key;  // (running, room left after it)
  for (size_t c = 0; c < ledger.cards.size(); ++c) {
    const JobsLedger& card = ledger.cards[c];
    if (!FitsNow(card, trial)) continue;
    const int64_t room =
        card.capacity ? *card.capacity - card.reserved - trial.reservation : INT64_MAX;
    const std::tuple<int64_t, int64_t> key{card.running, room};
    if (!best || key < best_key) {
      best = c;
      best_key = key;
    }
  }
  return best;
}

void MarkLargest(CardsLedger& ledger) {
  std::optional<int64_t> largest;
  for (const JobsLedger& card : ledger.cards) {
    if (card.capacity) largest = std::max(largest.value_or(INT64_MIN), *card.capacity);
  }
  for (JobsLedger& card : ledger.cards) card.largest = !largest || card.capacity == largest;
}

std::optional<ShrinkRoom> CardToShrinkFor(const CardsLedger& ledger) {
  std::optional<ShrinkRoom> best;
  for (size_t c = 0; c < ledger.cards.size(); ++c) {
    const JobsLedger& l = ledger.cards[c];
    if (!l.capacity || l.running >= l.limit || (l.running > 0 && l.compute_full)) continue;
    const int64_t room = *l.capacity - l.reserved;
    if (room > 0 && (!best || room > best->room)) best = ShrinkRoom{c, room};
  }
  return best;
}

JobLimits JobLimitsFor(int64_t jobs, int64_t max_jobs, int64_t cards) {
  const int64_t per_card = jobs == kJobsAuto ? max_jobs : jobs;
  const int64_t total = jobs == kJobsAuto ? max_jobs * std::max<int64_t>(1, cards) : jobs;
  return {per_card, total, per_card};
}

std::optional<Placement> NextPlacement(const std::vector<WaitingTrial>& queue,
                                       const CardsLedger& ledger, int64_t max_passes) {
  if (queue.empty()) return std::nullopt;
  if (auto card = CardFor(ledger, queue.front())) return Placement{0, *card};
  if (queue.front().passed >= max_passes) return std::nullopt;
  for (size_t i = 1; i < queue.size(); ++i) {
    if (auto card = CardFor(ledger, queue[i])) return Placement{i, *card};
  }
  return std::nullopt;
}

bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const CardsLedger& ledger,
                      int64_t max_passes) {
  const int64_t running = ledger.running();
  if (running + static_cast<int64_t>(queue.size()) >= ledger.limit) return false;
  if (queue.empty()) return true;
  bool compute_full = running > 0;  // every card that runs a trial is full, and none is idle
  for (const JobsLedger& card : ledger.cards) {
    compute_full = compute_full && card.running > 0 && card.compute_full;
  }
  if (compute_full) return false;
  return queue.front().passed < max_passes && !NextPlacement(queue, ledger, max_passes);
}

// One card.
std::optional<size_t> NextToStart(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                                  int64_t max_passes) {
  const auto placed = NextPlacement(queue, CardsLedger{{ledger}, ledger.limit}, max_passes);
  return placed ? std::make_optional(placed->index) : std::nullopt;
}

void MarkStarted(std::vector<WaitingTrial>& queue, size_t started) {
  for (size_t i = 0; i < started; ++i) ++queue[i].passed;
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(started));
}

bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                      int64_t max_passes) {
  return ShouldAskAnother(queue, CardsLedger{{ledger}, ledger.limit}, max_passes);
}

}  // namespace tune::internal

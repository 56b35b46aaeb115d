// The order in which waiting trials start (jobs_queue.h).
#include "study/jobs_queue.h"

#include <algorithm>
#include <tuple>

#include "tune/optimize.h"

namespace tune::internal {

bool FitsNow(const Card& card, const WaitingTrial& trial) {
  if (card.running >= card.limit) return false;
  if (card.running > 0 && (trial.exclusive || card.compute_full)) return false;
  if (trial.exclusive && !card.largest) return false;
  if (!card.budget) return true;
  if (*card.budget <= 0) return false;  // full: another process holds it all
  if (card.reserved + trial.reservation <= *card.budget) return true;
  return card.running == 0 && card.largest && trial.planned_against &&
         *card.budget >= *trial.planned_against;
}

int64_t Running(const std::vector<Card>& cards) {
  int64_t n = 0;
  for (const Card& card : cards) n += card.running;
  return n;
}

std::optional<size_t> CardFor(const std::vector<Card>& cards, int64_t limit,
                              const WaitingTrial& trial) {
  if (Running(cards) >= limit) return std::nullopt;
  std::optional<size_t> best;
  std::tuple<int64_t, int64_t> best_key;  // (running, room left after it)
  for (size_t c = 0; c < cards.size(); ++c) {
    const Card& card = cards[c];
    if (!FitsNow(card, trial)) continue;
    const int64_t room = card.budget ? *card.budget - card.reserved - trial.reservation : INT64_MAX;
    const std::tuple<int64_t, int64_t> key{card.running, room};
    if (!best || key < best_key) {
      best = c;
      best_key = key;
    }
  }
  return best;
}

std::optional<ShrinkRoom> CardToShrinkFor(const std::vector<Card>& cards) {
  std::optional<ShrinkRoom> best;
  for (size_t c = 0; c < cards.size(); ++c) {
    const Card& card = cards[c];
    if (!card.budget || card.running >= card.limit || (card.running > 0 && card.compute_full)) {
      continue;
    }
    const int64_t room = *card.budget - card.reserved;
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
                                       const std::vector<Card>& cards, const JobLimits& limits) {
  if (queue.empty()) return std::nullopt;
  if (auto card = CardFor(cards, limits.total, queue.front())) return Placement{0, *card};
  if (queue.front().passed >= limits.max_passes) return std::nullopt;
  for (size_t i = 1; i < queue.size(); ++i) {
    if (auto card = CardFor(cards, limits.total, queue[i])) return Placement{i, *card};
  }
  return std::nullopt;
}

bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const std::vector<Card>& cards,
                      const JobLimits& limits) {
  const int64_t running = Running(cards);
  if (running + static_cast<int64_t>(queue.size()) >= limits.total) return false;
  if (queue.empty()) return true;
  bool compute_full = running > 0;  // every card that runs a trial is full, and none is idle
  for (const Card& card : cards)
    compute_full = compute_full && card.running > 0 && card.compute_full;
  if (compute_full) return false;
  return queue.front().passed < limits.max_passes && !NextPlacement(queue, cards, limits);
}

void MarkStarted(std::vector<WaitingTrial>& queue, size_t started) {
  for (size_t i = 0; i < started; ++i) ++queue[i].passed;
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(started));
}

std::optional<size_t> NextToStart(const std::vector<WaitingTrial>& queue, const Card& card,
                                  int64_t max_passes) {
  const auto placed = NextPlacement(queue, {card}, {card.limit, card.limit, max_passes});
  return placed ? std::make_optional(placed->index) : std::nullopt;
}

bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const Card& card,
                      int64_t max_passes) {
  return ShouldAskAnother(queue, {card}, {card.limit, card.limit, max_passes});
}

}  // namespace tune::internal

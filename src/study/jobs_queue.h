// Which waiting trial starts when, and on which card, with several trials at once (--jobs)
// [tune_core, private]: first come, first served, with backfilling and a bound on overtaking, as
// pure functions of the cards (tune/cards.h; each rule on its declaration below); optimize_jobs.cpp
// reads the cards and applies the answers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/cards.h"

namespace tune::internal {

// A trial waiting to start.
struct WaitingTrial {
  int64_t reservation = 0;  // bytes it holds while it runs
  bool exclusive = false;   // its memory is unknown: it starts only on an idle device
  int64_t passed = 0;       // later trials that started before it
  // The largest budget when it was planned (Objective::Plan plans against it); none: unknown. A
  // plan may reserve more than that (admission off, a model being measured): such a trial takes
  // the idle largest card as long as its budget is not short of this.
  std::optional<int64_t> planned_against;
};

// True if a trial with this reservation may start on this card beside the running ones: fewer
// than the card's limit run, the compute is not full (or nothing runs), and its reservation fits
// the budget left (none known: it fits). An exclusive trial fits only the idle largest card
// (MarkLargest, tune/cards.h). A trial planned to reserve more than any card holds fits the idle
// largest card while that card's budget is at least what it was planned against. Idle or not, a
// card whose budget now is short is never a fit: another process may have filled it since the
// trial was planned.
bool FitsNow(const Card& card, const WaitingTrial& trial);

// The trials running on all the cards.
int64_t Running(const std::vector<Card>& cards);

// The card to start `trial` on now, if it fits any (FitsNow) and fewer than `limit` trials run
// over all the cards: the one running the fewest trials
// (trials on one card share its compute; an idle card runs a trial at full speed), among those
// the best fit, the card its reservation leaves the least room on (large holes stay free for
// the large trials that fit nowhere else), then the lowest index.
std::optional<size_t> CardFor(const std::vector<Card>& cards, int64_t limit,
                              const WaitingTrial& trial);

// Shrink-to-start's card (memory.shrink_to_start): of the cards that may take one more trial
// (below their limit, compute not full while running, budget known), the one with the most
// room left beside its running trials (the lowest index of them); nullopt when none has room.
struct ShrinkRoom {
  size_t card = 0;
  int64_t room = 0;  // bytes left on it, > 0
};
std::optional<ShrinkRoom> CardToShrinkFor(const std::vector<Card>& cards);

// The limits of a run with `jobs` (an integer, or kJobsAuto with `max_jobs` per card) over
// `cards` cards. `max_passes` is its own quantity, per card: a waiting trial waits for the
// trials of one card to end, so it may be overtaken by at most as many trials as one card runs
// at once, whatever the number of cards (with one card: the job limit, as before).
struct JobLimits {
  int64_t per_card = 1;    // the most trials at once on one card
  int64_t total = 1;       // ... on all of them
  int64_t max_passes = 1;  // the most times a waiting trial is overtaken
};
JobLimits JobLimitsFor(int64_t jobs, int64_t max_jobs, int64_t cards);

// Which waiting trial starts now, and on which card.
struct Placement {
  size_t index = 0;  // in the queue
  size_t card = 0;
};

// The trial of `queue` (oldest first) to start now, and its card (CardFor, with limits.total):
// the head when it fits a card; else, while the head has been passed fewer than
// limits.max_passes times, the oldest later trial that fits one (backfilling: the memory beside
// the running trials does not sit idle while the head waits; the bound keeps a large trial from
// starving behind a stream of small ones). Nullopt: none starts now.
std::optional<Placement> NextPlacement(const std::vector<WaitingTrial>& queue,
                                       const std::vector<Card>& cards, const JobLimits& limits);

// Records that queue[started] starts: the trials before it were passed once more. Removes it.
void MarkStarted(std::vector<WaitingTrial>& queue, size_t started);

// Whether to ask (sample and plan) one more trial now, so that there is a trial to backfill
// with: the queue is empty, or none of it can start now and the head may still be passed; and
// the running and waiting trials together stay within limits.total. While every card that runs
// a trial has its compute full and none is idle, only an empty queue asks (one trial ready to
// start when compute frees).
bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const std::vector<Card>& cards,
                      const JobLimits& limits);

// The two rules above on one card, whose limit is the total: the index of the trial to start,
// and whether to ask another.
std::optional<size_t> NextToStart(const std::vector<WaitingTrial>& queue, const Card& card,
                                  int64_t max_passes);
bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const Card& card, int64_t max_passes);

}  // namespace tune::internal

// Which waiting trial starts when, and on which card, with several trials at once (--jobs)
// [tune_core, private]: first come, first served, with backfilling and a bound on overtaking, as
// pure functions of the ledgers (each rule on its declaration below); optimize_jobs.cpp reads
// the cards and applies the answers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tune::internal {

// What runs now on one card (the device, with one): how many trials, what they reserve, and
// the limits. optimize_jobs.cpp keeps one per card as the run goes.
struct JobsLedger {
  int64_t running = 0;
  int64_t reserved = 0;             // bytes the running trials reserve
  std::optional<int64_t> capacity;  // bytes usable by reservations; none: unlimited
  int64_t limit = 1;                // the most trials at once (jobs, or max_jobs with auto)
  // The running trials already use the compute allowed (RunSettings::max_busy): no other starts
  // beside them, whatever its memory.
  bool compute_full = false;
  // The card trials are planned against (Objective::Plan: the largest budget now, MarkLargest):
  // only it takes a trial whose memory is unknown, and only while idle. With one card, that card.
  bool largest = true;
  std::string name;  // Objective::CardName ("" with one card)
};

// A trial waiting to start.
struct WaitingTrial {
  int64_t reservation = 0;  // bytes it holds while it runs
  bool exclusive = false;   // its memory is unknown: it starts only on an idle device
  int64_t passed = 0;       // later trials that started before it
  // The largest card's capacity when it was planned (Objective::Plan plans against it); none:
  // unknown. A plan may reserve more than that (admission off, a model being measured): such a
  // trial takes the idle largest card as long as its budget is not short of this.
  std::optional<int64_t> planned_against;
};

// True if a trial with this reservation may start on this card beside the running ones: fewer
// than the limit run, the compute is not full (or nothing runs), and its reservation fits the
// capacity left (none known: it fits). An exclusive trial fits only the idle largest card. A
// trial planned to reserve more than any card holds fits the idle largest card while that card's
// capacity is at least what it was planned against. Idle or not, a card whose capacity (its
// budget now) is short is never a fit: another process may have filled it since the trial was
// planned.
bool FitsNow(const JobsLedger& ledger, const WaitingTrial& trial);

// Several cards: the ledgers, and the most trials at once over all of them.
struct CardsLedger {
  std::vector<JobsLedger> cards;
  int64_t limit = 1;
  int64_t running() const;
};

// The card to start `trial` on now, if it fits any (FitsNow): the one running the fewest trials
// (trials on one card share its compute; an idle card runs a trial at full speed), among those
// the best fit, the card its reservation leaves the least room on (large holes stay free for
// the large trials that fit nowhere else), then the lowest index.
std::optional<size_t> CardFor(const CardsLedger& ledger, const WaitingTrial& trial);

// Sets each card's `largest`: those whose capacity (the budget now) is the largest known, every
// card when none is known. The one meaning of "largest" the scheduler uses; called on every
// ledger built, so it follows other processes as they come and go.
void MarkLargest(CardsLedger& ledger);

// Shrink-to-start's card (memory.shrink_to_start): of the cards that may take one more trial
// (below their limit, compute not full while running, capacity known), the one with the most
// room left beside its running trials (the lowest index of them); nullopt when none has room.
struct ShrinkRoom {
  size_t card = 0;
  int64_t room = 0;  // bytes left on it, > 0
};
std::optional<ShrinkRoom> CardToShrinkFor(const CardsLedger& ledger);

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
std::optional<Placement> NextPlacement(const std::vector<WaitingTrial>& queue,
                                       const CardsLedger& ledger, int64_t max_passes);
bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const CardsLedger& ledger,
                      int64_t max_passes);

// The index in `queue` (oldest first) of the trial to start now, if any: the head when it fits;
// else, while the head has been passed fewer than `max_passes` times, the oldest later trial
// that fits (backfilling: the memory beside the running trials does not sit idle while the head
// waits; the bound keeps a large trial from starving behind a stream of small ones).
std::optional<size_t> NextToStart(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                                  int64_t max_passes);

// Records that queue[started] starts: the trials before it were passed once more. Removes it.
void MarkStarted(std::vector<WaitingTrial>& queue, size_t started);

// Whether to ask (sample and plan) one more trial now, so that there is a trial to backfill
// with: the queue is empty, or none of it can start now and the head may still be passed; and
// the running and waiting trials together stay within the limit. While the compute is full, only
// an empty queue asks (one trial ready to start when compute frees).
bool ShouldAskAnother(const std::vector<WaitingTrial>& queue, const JobsLedger& ledger,
                      int64_t max_passes);

}  // namespace tune::internal

// The order in which trials waiting for memory start with several trials at once (--jobs)
// [tune_core, private]: first come, first served, with backfilling and a bound on overtaking.
//
// The oldest waiting trial (the head) starts as soon as its reservation fits. While it does not
// fit, a later waiting trial that fits now starts in its place (backfilling: the memory beside
// the running trials does not sit idle while the head waits for a large trial to end). Each time
// a trial is overtaken like that it counts one pass; once a trial has been passed `max_passes`
// times, no later trial starts before it, so the head starts when the running trials have
// released enough memory: a large trial never starves behind a stream of small ones.
//
// Several cards (--jobs over every card of the machine): one ledger per card, and the rule above
// over all of them: a trial "fits now" when it fits some card, and it starts on the card
// CardFor() picks. Which card: the one running the fewest trials (trials on one card share its
// compute and slow each other down; an idle card runs a trial at full speed), and among those the
// best fit, the card its reservation leaves the least room on (the large holes stay free for the
// large trials that fit nowhere else: on cards of different sizes a small trial does not take the
// large card's memory while a small card has room), then the lowest index.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tune::internal {

// What runs now on one card (the device, with one): how many trials, what they reserve, and
// the limits.
struct JobsLedger {
  int64_t running = 0;
  int64_t reserved = 0;             // bytes the running trials reserve
  std::optional<int64_t> capacity;  // bytes usable by reservations; none: unlimited
  int64_t limit = 1;                // the most trials at once (jobs, or max_jobs with auto)
  // The running trials already use the compute allowed (RunSettings::max_busy): no other starts
  // beside them, whatever its memory.
  bool compute_full = false;
  // The card trials are planned against (Objective::Plan: the largest): an idle one takes any
  // trial, and only it takes a trial whose memory is unknown. With one card, that card.
  bool largest = true;
};

// A trial waiting to start.
struct WaitingTrial {
  int64_t reservation = 0;  // bytes it holds while it runs
  bool exclusive = false;   // its memory is unknown: it starts only on an idle device
  int64_t passed = 0;       // later trials that started before it
};

// True if a trial with this reservation may start on this card beside the running ones: fewer
// than the limit run, the compute is not full, and its reservation fits the capacity left (an
// exclusive trial: nothing runs, on the largest card). A trial always fits the idle largest card
// (one that cannot fit it alone was planned not to run), and an idle smaller card when its
// reservation fits the card's capacity.
bool FitsNow(const JobsLedger& ledger, const WaitingTrial& trial);

// Several cards: the ledgers, and the most trials at once over all of them.
struct CardsLedger {
  std::vector<JobsLedger> cards;
  int64_t limit = 1;
  int64_t running() const;
};

// The card to start `trial` on now (the header's rule), if it fits any.
std::optional<size_t> CardFor(const CardsLedger& ledger, const WaitingTrial& trial);

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
// that fits.
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

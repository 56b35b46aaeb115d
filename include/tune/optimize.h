// The optimize loop: ask, sample the space, run the objective, tell — until the study holds
// n_trials finished trials, the timeout passes, or the user interrupts (Ctrl-C).
//
// With heartbeats (Optuna's RDBStorage(heartbeat_interval, grace_period) inside
// study.optimize): a background thread records a heartbeat for the running trial every
// heartbeat interval, and RUNNING trials of the study whose heartbeat is older than the grace
// period (their worker died) are failed as stale when the loop starts and then at most once per
// interval before asking for a trial. With retry_failed = K, each stale trial is re-enqueued
// as WAITING with the same params, at most K times per original trial (Optuna's
// RetryFailedTrialCallback(max_retry=K)).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tune/cards.h"
#include "tune/objectives/objective.h"
#include "tune/search_space.h"
#include "tune/status.h"
#include "tune/study.h"

namespace tune {

// RunSettings::jobs for "auto".
inline constexpr int64_t kJobsAuto = 0;

// A study config's heartbeat interval when it sets none (seconds). Optimize() itself defaults to
// no heartbeats (RunSettings).
inline constexpr double kDefaultHeartbeatInterval = 60.0;

// How long a run goes and how it watches its trials: a study config's settings (config.h, which
// the command line overrides) and what Optimize() takes.
struct RunSettings {
  // Stop once the study holds this many finished (COMPLETE, PRUNED, FAIL) trials, counting
  // earlier runs: re-running a study resumes toward the same target. Trials are started only
  // while the study holds fewer than this many started (RUNNING or finished) trials, so several
  // workers end with exactly n_trials finished trials. A worker that cannot start one stops;
  // with heartbeats it first waits for the running trials to finish, for at most the grace
  // period plus one interval (long enough for a dead worker's trial to go stale and be
  // failed). A stale trial that this worker re-enqueues raises its target by one, so the retry
  // runs. Unset: no limit.
  std::optional<int64_t> n_trials;
  // Stop starting trials after this many seconds (Optuna's timeout). Unset: no limit.
  std::optional<double> timeout_seconds;
  // Seconds between heartbeats of the running trial; 0: no heartbeats and no stale-trial check.
  // Optuna: RDBStorage(heartbeat_interval=...).
  double heartbeat_interval = 0.0;
  // A RUNNING trial whose last heartbeat is older than this is stale. Unset: twice the
  // heartbeat interval (Optuna's default; GracePeriod()). Must exceed heartbeat_interval.
  // Optuna: RDBStorage(grace_period=...).
  std::optional<double> grace_period;
  // Re-enqueue a stale trial at most this many times per original trial (0: never). Optuna:
  // RetryFailedTrialCallback(max_retry=...).
  int64_t retry_failed = 0;
  // Re-enqueue a trial that ran out of memory at run time (PRUNED, user attribute reason "oom")
  // with the same params, at most this many times per original trial (0: never), as users
  // re-run such a trial by hand once the card has room: the retry runs after the trials already
  // waiting. It records "failed_trial" and "retry_history" as retry_failed does, and "oom_retry".
  // An out-of-memory retry does not count toward n_trials for any worker of the study, so every
  // retry runs before the workers stop.
  int64_t retry_oom = 0;
  // --jobs auto with a device that reports its busy share (a simulated card): start another trial
  // only while the running trials' summed busy share, each trial still starting up counted at
  // the mean busy share seen so far (1 before any), stays below this. 0: memory alone decides.
  double max_busy = 0.0;
  // Trials running at once. 1: one at a time, in this process. N > 1: up to N, each in its own
  // process (Objective::Start), packed by the memory each reserves when the objective predicts
  // it (Card::budget), over every card (Objective::CardsNow). kJobsAuto: as many as each card's
  // memory holds, at most max_jobs per card.
  int64_t jobs = 1;
  int64_t max_jobs = 8;

  double GracePeriod() const { return grace_period.value_or(2 * heartbeat_interval); }
};

// "auto" (kJobsAuto) or an integer in 1..256 (--jobs, the config's "jobs"); InvalidArgument
// otherwise.
Result<int64_t> ParseJobsValue(const std::string& text);

// InvalidArgument unless heartbeat_interval >= 0, grace_period (if set) > heartbeat_interval
// and retry_failed >= 0. `where` prefixes the message (a file, or "--grace-period").
Status CheckHeartbeatSettings(const RunSettings& settings, const std::string& where);

// What runs now. With jobs != 1 the cards' budgets are shared by reservations: a trial starts
// when its reservation fits beside the running ones' (see docs/cli.md, "Several trials at once").
struct JobsState {
  int64_t running = 0;
  int64_t waiting = 0;                // asked and planned, waiting for memory
  int64_t reserved = 0;               // bytes the running trials reserve
  std::optional<int64_t> budget;      // bytes they may reserve (Card::budget); unset: not tracked
  std::optional<double> busy;         // their summed busy share (a simulated card); unset: unknown
  std::optional<double> utilization;  // the device's utilisation (NVML, CUDA); unset: unknown
  // Several cards: each one (the fields above are then the sums, and the mean utilisation; an
  // idle card's busy share is left unset: it says nothing).
  std::vector<Card> cards;
};
// "3 running, 17.2 GiB of 22.8 GiB reserved, GPU 87% utilized, 1 waiting"; several cards:
// "5 running, 1 waiting: cuda:0 3 running, 17.2 GiB of 22.8 GiB reserved; cuda:1 2 running, ...".
std::string JobsStateText(const JobsState& state);

struct OptimizeOptions : RunSettings {
  // Called after each trial finishes (logging, progress).
  std::function<void(const FrozenTrial& trial, const TrialOutcome& outcome)> on_trial_finished;
  // With jobs != 1: called when a trial starts in its process, with its plan and what runs now.
  std::function<void(const Trial& trial, const TrialPlan& plan, const JobsState& jobs)>
      on_trial_started;
  // What runs now, after every start and finish (with one job: 1 running while its trial runs,
  // no reservation).
  std::function<void(const JobsState& jobs)> on_jobs_changed;
  // Called for each stale trial this worker failed (and its retry, if any).
  std::function<void(const FailedStaleTrial& stale)> on_stale_trial;
};

struct OptimizeResult {
  int64_t trials_run = 0;      // trials finished by this call
  int64_t finished_total = 0;  // finished trials in the study afterwards
  int64_t stale_failed = 0;    // stale trials this call failed
  int64_t stale_retried = 0;   // ... of which it re-enqueued
  int64_t trials_lost = 0;     // own trials failed as stale by another worker while running
  bool interrupted = false;    // stopped by Ctrl-C (the running trial is FAIL)
  bool timed_out = false;
};

// REQUIRES: at least one of n_trials, timeout_seconds is set, or the caller interrupts.
// With jobs != 1 the trials run in their own processes (OptimizeWithJobs, optimize_jobs.cpp).
Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options);

}  // namespace tune

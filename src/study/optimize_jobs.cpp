// The optimize loop with several trials at once (RunSettings::jobs != 1): each trial runs in its
// own process (Objective::Start); this process alone owns the study, the sampler, the storage,
// the heartbeats and the ledgers. A trial is asked, sampled and planned (Objective::Plan), waits
// in the queue, and starts when and where jobs_queue.h's rules say; the functions below say what
// each step adds (re-planning after calibration, shrink-to-start, exclusive trials, re-planning a
// trial that fits no card, several cards).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <list>

#include "study/jobs_queue.h"
#include "study/optimize_internal.h"
#include "tune/optimize.h"
#include "tune/trial_attrs.h"
#include "util/interrupt.h"
#include "util/text.h"

namespace tune {

namespace {

// "2 running, 17.2 GiB of 22.8 GiB reserved, busy 0.93, GPU 87% utilized".
std::string LedgerText(int64_t running, int64_t reserved, std::optional<int64_t> budget,
                       std::optional<double> busy, std::optional<double> utilization) {
  std::string text = fmt::format("{} running", running);
  if (budget) {
    text += fmt::format(", {} of {} reserved", FormatBytes(reserved), FormatBytes(*budget));
  }
  if (busy) text += fmt::format(", busy {:.2f}", *busy);
  if (utilization) text += fmt::format(", GPU {:.0f}% utilized", *utilization * 100.0);
  return text;
}

}  // namespace

std::string JobsStateText(const JobsState& s) {
  if (!s.cards.empty()) {
    std::string text = fmt::format("{} running", s.running);
    if (s.waiting > 0) text += fmt::format(", {} waiting", s.waiting);
    const char* sep = ": ";
    for (const Card& c : s.cards) {
      const std::optional<double> busy =
          c.busy ? std::make_optional(c.busy->sum_busy) : std::nullopt;
      text += sep + c.name + " " + LedgerText(c.running, c.reserved, c.budget, busy, c.utilization);
      sep = "; ";
    }
    return text;
  }
  std::string text = LedgerText(s.running, s.reserved, s.budget, s.busy, s.utilization);
  if (s.waiting > 0) text += fmt::format(", {} waiting", s.waiting);
  return text;
}

namespace internal {
namespace {

using Clock = std::chrono::system_clock;

struct Job {
  std::unique_ptr<Trial> trial;
  Json sampled;  // the sampled params, before the plan's levers
  TrialPlan plan;
  int64_t planned_at = 0;                 // JobsLoop::told_ when it was planned
  std::unique_ptr<TrialProcess> process;  // set once started
  Clock::time_point queued, started;
  int64_t shrink_tried_at = -1;  // JobsLoop::ledger_version_ of the last PlanToFit
  int64_t planned_version = -1;  // JobsLoop::ledger_version_ when it was last planned
};

// The per-trial busy shares seen on one card, summed over samples (RunSettings::max_busy).
struct BusySeen {
  double sum = 0.0;
  int64_t samples = 0;
};

class JobsLoop {
 public:
  JobsLoop(Study& study, const ConditionalSpace& space, Objective& objective,
           const OptimizeOptions& options)
      : study_(study),
        space_(space),
        objective_(objective),
        options_(options),
        cards_(Idle(objective.CardsNow())),
        limits_(JobLimitsFor(options.jobs, options.max_jobs, static_cast<int64_t>(cards_.size()))),
        busy_seen_(cards_.size()) {
    for (Card& card : cards_) card.limit = limits_.per_card;
  }

  Result<OptimizeResult> Run() {
    if (options_.heartbeat_interval > 0 && !(options_.GracePeriod() > 0)) {
      return InvalidArgumentError("the grace period must be > 0 seconds");
    }
    if (options_.heartbeat_interval > 0) {
      heartbeat_.emplace(study_.storage(), options_.heartbeat_interval);
    }
    while (true) {
      Result<bool> more = Step();
      if (!more.ok()) {
        Drain();
        return more.status();
      }
      if (!*more) break;
    }
    return result_;
  }

 private:
  // n_trials plus the retries (as OptimizeLoop counts them).
  std::optional<int64_t> Target() const {
    if (!options_.n_trials) return std::nullopt;
    return *options_.n_trials + extra_target_ + study_retries_;
  }

  // Recounts the study's retries when the target looks reached and trials finished since.
  Status CountStudyRetries() {
    if (!MakesStudyRetries(options_) || retries_counted_at_ == result_.finished_total) {
      return Status::Ok();
    }
    retries_counted_at_ = result_.finished_total;
    TUNE_ASSIGN_OR_RETURN(study_retries_, CountRetries(study_));
    return Status::Ok();
  }
  bool TargetReached() const { return Target() && result_.finished_total >= *Target(); }
  bool TimedOut() {
    if (!options_.timeout_seconds || SecondsSince(start_) < *options_.timeout_seconds) return false;
    result_.timed_out = true;
    return true;
  }

  // The objective's cards as read now (at least one), before any trial runs on them.
  static std::vector<Card> Idle(std::vector<Card> cards) {
    if (cards.empty()) cards.emplace_back();
    return cards;
  }

  // The largest budget now (tune/cards.h): what a plan made now is planned against
  // (WaitingTrial::planned_against).
  std::optional<int64_t> LargestBudgetNow() const { return LargestBudget(objective_.CardsNow()); }

  bool Tracked() const { return cards_.front().budget.has_value(); }

  // One round: heartbeats, the running trials, then start or plan the next. False when done.
  Result<bool> Step() {
    TUNE_RETURN_IF_ERROR(CheckStaleTrials());
    TUNE_RETURN_IF_ERROR(PollRunning());
    if (InterruptRequested() && !result_.interrupted) TUNE_RETURN_IF_ERROR(InterruptAll());
    TUNE_ASSIGN_OR_RETURN(result_.finished_total,
                          study_.storage().CountTrials(study_.study_id(), kFinishedStates));
    if (TargetReached()) TUNE_RETURN_IF_ERROR(CountStudyRetries());
    const bool stopping = result_.interrupted || TargetReached() || TimedOut();
    if (result_.timed_out && !queue_.empty()) TUNE_RETURN_IF_ERROR(EndQueuedAtTimeout());
    if (stopping && running_.empty() && queue_.empty()) return false;
    RefreshBudgets();
    TUNE_RETURN_IF_ERROR(StartThoseThatFit());
    if (!stopping && ShouldAskAnother(waiting_, Ledger(), limits_)) {
      TUNE_ASSIGN_OR_RETURN(bool asked, AskAndPlan());
      if (!asked && running_.empty() && queue_.empty()) return false;  // others took the target
      RefreshBudgets(/*now=*/true);
      TUNE_RETURN_IF_ERROR(StartThoseThatFit());
    }
    if (!queue_.empty() && !NextPlacement(waiting_, Ledger(), limits_)) {
      internal::SleepInterruptibly(running_.empty() ? 0.0 : 0.02);
    }
    return true;
  }

  // The budgets again, once a trial started or ended and else at most once a second: other
  // processes on the cards (card_others.h) take and give back memory while the study runs.
  // With `now`: at once (a plan was just admitted against what the others leave).
  void RefreshBudgets(bool now = false) {
    const int64_t version = ledger_version_ + told_;
    if (!Tracked() || (!now && version == budget_version_ && SecondsSince(budget_read_) < 1.0)) {
      return;
    }
    budget_read_ = SteadyClock::now();
    budget_version_ = version;
    const std::vector<Card> read = objective_.CardsNow();
    for (size_t c = 0; c < cards_.size() && c < read.size(); ++c) {
      if (read[c].budget == cards_[c].budget) continue;
      cards_[c].budget = read[c].budget;
      ++ledger_version_;  // what fits beside the running trials changed
    }
  }

  // The cards as the rules of jobs_queue.h see them now: the budgets last read, whose compute is
  // full, which is largest.
  std::vector<Card> Ledger() {
    std::vector<Card> ledger = cards_;
    std::vector<Card> now;
    if (options_.max_busy > 0 && Running(cards_) > 0) now = objective_.CardsNow();
    for (size_t c = 0; c < ledger.size(); ++c) {
      ledger[c].compute_full = c < now.size() && ComputeFull(c, now[c].busy);
    }
    MarkLargest(ledger);
    return ledger;
  }

  // RunSettings::max_busy: the running trials' summed busy share on card `c` (`now`: what
  // computes there now), each one still starting up counted at the mean busy share seen so far,
  // has reached max_busy.
  bool ComputeFull(size_t c, const std::optional<DeviceBusy>& now) {
    const Card& card = cards_[c];
    BusySeen& seen = busy_seen_[c];
    if (options_.max_busy <= 0 || card.running == 0 || !now) return false;
    if (now->busy > 0) {
      seen.sum += now->sum_busy / static_cast<double>(now->busy);
      ++seen.samples;
    }
    const double mean = seen.samples > 0 ? seen.sum / static_cast<double>(seen.samples) : 1.0;
    const int64_t starting = std::max<int64_t>(0, card.running - now->busy);
    return now->sum_busy + static_cast<double>(starting) * mean >= options_.max_busy;
  }

  JobsState State() const {
    JobsState s;
    s.running = static_cast<int64_t>(running_.size());
    s.waiting = static_cast<int64_t>(queue_.size());
    const std::vector<Card> now = objective_.CardsNow();
    double utilization = 0.0;
    int64_t utilization_read = 0;
    for (size_t c = 0; c < cards_.size(); ++c) {
      Card card = cards_[c];
      if (c < now.size()) {
        card.busy = now[c].busy;
        card.utilization = now[c].utilization;
      }
      s.reserved += card.reserved;
      if (card.budget) s.budget = s.budget.value_or(0) + *card.budget;
      if (card.busy) s.busy = s.busy.value_or(0.0) + card.busy->sum_busy;
      if (card.utilization) {
        utilization += *card.utilization;
        ++utilization_read;
      }
      if (card.running == 0) card.busy.reset();  // an idle card's busy share says nothing
      s.cards.push_back(std::move(card));
    }
    if (utilization_read > 0) s.utilization = utilization / static_cast<double>(utilization_read);
    if (cards_.size() == 1) s.cards.clear();
    return s;
  }

  Status CheckStaleTrials() {
    const double interval = options_.heartbeat_interval;
    if (interval <= 0 || (last_stale_check_ && SecondsSince(*last_stale_check_) < interval)) {
      return Status::Ok();
    }
    last_stale_check_ = SteadyClock::now();
    return FailStaleTrials(study_, options_, options_.GracePeriod(), result_, extra_target_);
  }

  // Asks the next trial, samples and plans it: it waits for memory, or its plan already decided
  // its outcome (told here). False when no trial could be started (the target is taken).
  Result<bool> AskAndPlan() {
    StartTrialOptions start_options;
    start_options.max_started = Target();
    start_options.heartbeat = options_.heartbeat_interval > 0;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, study_.Ask(start_options));
    if (!trial) {
      const std::optional<int64_t> before = Target();
      retries_counted_at_ = -1;
      TUNE_RETURN_IF_ERROR(CountStudyRetries());
      if (Target() != before) return true;  // a retry is waiting: ask again
      if (running_.empty()) {
        spdlog::info(
            "The target of {} trials is reached counting RUNNING trials of other "
            "workers; not starting another",
            *Target());
      }
      internal::SleepInterruptibly(0.05);
      return false;
    }
    if (heartbeat_) heartbeat_->Watch(trial->trial_id());
    auto job = std::make_unique<Job>();
    job->queued = Clock::now();
    Result<Json> params = space_.Sample(*trial);
    Result<TrialPlan> plan =
        params.ok() ? objective_.Plan(*trial, *params) : Result<TrialPlan>(params.status());
    job->trial = std::move(trial);
    if (!plan.ok()) return Fail(*job, plan.status());
    job->sampled = *params;
    job->plan = std::move(plan).value();
    job->planned_at = told_;
    if (job->plan.outcome) {
      TUNE_RETURN_IF_ERROR(Tell(*job, *job->plan.outcome));
      return true;
    }
    job->planned_version = ledger_version_;
    waiting_.push_back({job->plan.reservation, job->plan.exclusive, 0, LargestBudgetNow()});
    queue_.push_back(std::move(job));
    return true;
  }

  // Starts the waiting trials that may start now, in NextJob()'s order.
  Status StartThoseThatFit() {
    if (result_.interrupted) return Status::Ok();
    while (true) {
      TUNE_ASSIGN_OR_RETURN(std::optional<Placement> next, NextJob());
      if (!next) break;
      if (queue_[next->index]->planned_at != told_) {
        TUNE_RETURN_IF_ERROR(Replan(next->index));
        continue;
      }
      MarkStarted(waiting_, next->index);
      std::unique_ptr<Job> job = std::move(queue_[next->index]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(next->index));
      job->plan.card = static_cast<int64_t>(next->card);
      TUNE_RETURN_IF_ERROR(StartJob(std::move(job)));
    }
    return Status::Ok();
  }

  // The waiting trial to start now and its card: the head as it is, else the head at a smaller
  // micro-batch that fits beside the running trials of a card (Objective::PlanToFit), else,
  // while the head may still be passed, the oldest later trial that fits as it is, else the
  // oldest that fits shrunk.
  Result<std::optional<Placement>> NextJob() {
    RefreshBudgets();
    const std::vector<Card> ledger = Ledger();
    if (waiting_.empty() || CardFor(ledger, limits_.total, waiting_.front())) {
      return NextPlacement(waiting_, ledger, limits_);
    }
    if (HeadIsStale()) {
      TUNE_RETURN_IF_ERROR(Replan(0));
      return NextJob();
    }
    TUNE_ASSIGN_OR_RETURN(std::optional<size_t> head_card, ShrinkToFit(0, ledger));
    if (head_card) return std::optional<Placement>(Placement{0, *head_card});
    if (auto backfill = NextPlacement(waiting_, ledger, limits_)) return backfill;
    if (waiting_.front().passed >= limits_.max_passes) return std::optional<Placement>();
    for (size_t i = 1; i < queue_.size(); ++i) {
      TUNE_ASSIGN_OR_RETURN(std::optional<size_t> card, ShrinkToFit(i, ledger));
      if (card) return std::optional<Placement>(Placement{i, *card});
    }
    return std::optional<Placement>();
  }

  // Nothing runs and the head fits no card, and the ledger changed since it was planned: other
  // processes took memory, so it is planned again against the budgets now (it shrinks, or ends
  // as fitting nowhere) instead of waiting for memory that may never come back.
  bool HeadIsStale() const {
    return Tracked() && running_.empty() && !queue_.empty() &&
           queue_.front()->planned_version != ledger_version_;
  }

  // Plans queue_[i] at a smaller micro-batch that fits the memory left beside the running trials
  // of the card jobs_queue.h's CardToShrinkFor picks, if the objective can; tried once per change
  // of the ledger. The card when it fits there now.
  Result<std::optional<size_t>> ShrinkToFit(size_t i, const std::vector<Card>& ledger) {
    Job& job = *queue_[i];
    if (!Tracked() || running_.empty() || Running(ledger) >= limits_.total ||
        waiting_[i].exclusive || job.shrink_tried_at == ledger_version_) {
      return std::optional<size_t>();
    }
    job.shrink_tried_at = ledger_version_;
    const std::optional<ShrinkRoom> to = CardToShrinkFor(ledger);
    if (!to) return std::optional<size_t>();
    TUNE_ASSIGN_OR_RETURN(std::optional<TrialPlan> plan,
                          objective_.PlanToFit(*job.trial, job.sampled, to->room));
    if (!plan || plan->outcome || plan->exclusive || plan->reservation > to->room) {
      return std::optional<size_t>();
    }
    spdlog::info("Trial {} shrunk to start beside {} running{}: {}", job.trial->number(),
                 ledger[to->card].running,
                 cards_.size() > 1 ? " on " + cards_[to->card].name : std::string(), plan->summary);
    job.plan = std::move(plan).value();
    job.planned_at = told_;
    waiting_[i].reservation = job.plan.reservation;
    return std::optional<size_t>(to->card);
  }

  // Plans queue_[i] again with what the trials finished since it was planned taught calibration:
  // its reservation changes, or it is pruned without running after all.
  Status Replan(size_t i) {
    Job& job = *queue_[i];
    Result<TrialPlan> plan = objective_.Plan(*job.trial, job.sampled);
    if (plan.ok() && !plan->outcome) {
      job.plan = std::move(plan).value();
      job.planned_at = told_;
      job.planned_version = ledger_version_;
      waiting_[i].reservation = job.plan.reservation;
      waiting_[i].exclusive = job.plan.exclusive;
      waiting_[i].planned_against = LargestBudgetNow();
      return Status::Ok();
    }
    std::unique_ptr<Job> taken = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (!plan.ok()) return Fail(*taken, plan.status());
    taken->plan = std::move(plan).value();
    return Tell(*taken, *taken->plan.outcome);
  }

  Status StartJob(std::unique_ptr<Job> job) {
    job->started = Clock::now();
    Card& card = cards_[static_cast<size_t>(job->plan.card)];
    if (cards_.size() > 1) {
      if (Status s = job->trial->SetSystemAttr(attrs::kCard, card.name); !s.ok()) {
        return Fail(*job, s);
      }
    }
    Result<std::unique_ptr<TrialProcess>> process = objective_.Start(*job->trial, job->plan);
    if (!process.ok()) return Fail(*job, process.status());
    job->process = std::move(process).value();
    card.reserved += job->plan.reservation;
    ++card.running;
    ++ledger_version_;
    running_.push_back(std::move(job));
    if (options_.on_trial_started) {
      options_.on_trial_started(*running_.back()->trial, running_.back()->plan, State());
    }
    if (options_.on_jobs_changed) options_.on_jobs_changed(State());
    return Status::Ok();
  }

  // Polls every running trial's process for a short while; tells the finished ones.
  Status PollRunning() {
    if (running_.empty()) return Status::Ok();
    const auto wait =
        std::chrono::milliseconds(std::max<int64_t>(5, 50 / static_cast<int64_t>(running_.size())));
    for (auto it = running_.begin(); it != running_.end();) {
      Job& job = **it;
      Status polled = job.process->Poll(wait);
      if (!polled.ok() || !job.process->finished()) {
        if (!polled.ok()) return Fail(*Take(it), polled);
        ++it;
        continue;
      }
      std::unique_ptr<Job> done = Take(it++);
      if (options_.on_jobs_changed) options_.on_jobs_changed(State());
      Result<TrialOutcome> outcome = done->process->Finish();
      if (!outcome.ok()) return Fail(*done, outcome.status());
      TUNE_RETURN_IF_ERROR(Tell(*done, *outcome));
    }
    return Status::Ok();
  }

  // Ctrl-C: the running trials' processes are stopped (they finish as interrupted); the trials
  // waiting for memory are failed as interrupted at once.
  Status InterruptAll() {
    result_.interrupted = true;
    for (auto& job : running_) job->process->Interrupt();
    std::vector<std::unique_ptr<Job>> waiting = TakeQueue();
    for (auto& job : waiting) {
      TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome, RecordInterrupted(*job->trial));
      TUNE_RETURN_IF_ERROR(Tell(*job, outcome));
    }
    return Status::Ok();
  }

  // --timeout: the trials still waiting never start; they end FAIL with reason "timeout".
  Status EndQueuedAtTimeout() {
    for (auto& job : TakeQueue()) {
      const std::string message = "the study's timeout came before it could start; it never ran";
      TUNE_RETURN_IF_ERROR(
          job->trial->SetUserAttr(attrs::kReason, EndReasonName(EndReason::kTimeout)));
      TUNE_RETURN_IF_ERROR(job->trial->SetUserAttr(attrs::kFailReason, message));
      TUNE_RETURN_IF_ERROR(Tell(*job, {TrialState::kFail, {}, message}));
    }
    return Status::Ok();
  }

  std::vector<std::unique_ptr<Job>> TakeQueue() {
    waiting_.clear();
    return std::move(queue_);
  }

  // Records when the trial was queued, started and ended and what it reserved, and tells it.
  Status Tell(Job& job, const TrialOutcome& outcome) {
    if (heartbeat_) heartbeat_->Unwatch(job.trial->trial_id());
    Json schedule{{"queued", FormatDatetime(job.queued)},
                  {"ended", FormatDatetime(Clock::now())},
                  {"reservation", job.plan.reservation},
                  {"jobs", limits_.total}};
    if (job.process) schedule["started"] = FormatDatetime(job.started);
    if (job.process && cards_.size() > 1) {
      schedule["card"] = cards_[static_cast<size_t>(job.plan.card)].name;
    }
    Status attr = job.trial->SetUserAttr(attrs::kSchedule, schedule);
    Result<FrozenTrial> told = attr.ok() ? study_.Tell(*job.trial, outcome.state, outcome.values)
                                         : Result<FrozenTrial>(attr);
    if (!told.ok()) {
      if (LostToStaleCheck(study_, *job.trial, told.status())) {
        ++result_.trials_lost;
        return Status::Ok();
      }
      return Fail(job, told.status());
    }
    ++result_.trials_run;
    ++told_;
    ++ledger_version_;
    if (options_.on_trial_finished) options_.on_trial_finished(*told, outcome);
    return RetryEndedTrial(study_, options_, *told).status();
  }

  // Removes a running job from the list (its reservation released) and hands it over.
  std::unique_ptr<Job> Take(std::list<std::unique_ptr<Job>>::iterator it) {
    std::unique_ptr<Job> job = std::move(*it);
    running_.erase(it);
    Card& card = cards_[static_cast<size_t>(job->plan.card)];
    card.reserved -= job->plan.reservation;
    --card.running;
    ++ledger_version_;
    return job;
  }

  // tune could not run or record `job`: fail it, so the study stays consistent, and return
  // `status` with the trial's number (Run() then drains the other trials).
  Status Fail(Job& job, const Status& status) {
    if (heartbeat_) heartbeat_->Unwatch(job.trial->trial_id());
    (void)job.trial->SetUserAttr(attrs::kFailReason, status.message());
    (void)study_.Tell(*job.trial, TrialState::kFail);
    return status.WithContext("trial " + std::to_string(job.trial->number()));
  }

  // After an error: stops every other trial and records how each ended, best effort.
  void Drain() {
    for (auto& job : running_) job->process->Interrupt();
    for (auto& job : TakeQueue()) {
      if (RecordInterrupted(*job->trial).ok()) (void)Tell(*job, {TrialState::kFail, {}, ""});
    }
    while (!running_.empty()) {
      for (auto it = running_.begin(); it != running_.end();) {
        if (!(*it)->process->Poll(std::chrono::milliseconds(20)).ok() ||
            (*it)->process->finished()) {
          std::unique_ptr<Job> job = Take(it++);
          Result<TrialOutcome> outcome =
              job->process->finished()
                  ? job->process->Finish()
                  : Result<TrialOutcome>(TrialOutcome{TrialState::kFail, {}, ""});
          (void)Tell(*job, outcome.ok() ? *outcome : TrialOutcome{TrialState::kFail, {}, ""});
        } else {
          ++it;
        }
      }
    }
  }

  Study& study_;
  const ConditionalSpace& space_;
  Objective& objective_;
  const OptimizeOptions& options_;
  std::vector<Card> cards_;  // the budgets last read; compute_full and largest are set in Ledger()
  const JobLimits limits_;
  std::vector<BusySeen> busy_seen_;
  SteadyClock::time_point budget_read_ = SteadyClock::now();
  int64_t budget_version_ = 0;  // ledger_version_ + told_ when they were read
  const SteadyClock::time_point start_ = SteadyClock::now();
  std::optional<HeartbeatThread> heartbeat_;
  std::list<std::unique_ptr<Job>> running_;
  std::vector<std::unique_ptr<Job>> queue_;  // waiting to start, oldest first
  std::vector<WaitingTrial> waiting_;        // queue_'s place in the order, one per job
  int64_t told_ = 0;  // trials told so far: a queued trial planned before the last is re-planned
  int64_t ledger_version_ = 0;  // changes when a trial starts, ends or is told
  OptimizeResult result_;
  std::optional<SteadyClock::time_point> last_stale_check_;
  int64_t extra_target_ = 0;
  int64_t study_retries_ = 0;        // the study's out-of-memory retries, when last counted
  int64_t retries_counted_at_ = -1;  // finished_total then
};

}  // namespace

Result<OptimizeResult> OptimizeWithJobs(Study& study, const ConditionalSpace& space,
                                        Objective& objective, const OptimizeOptions& options) {
  return JobsLoop(study, space, objective, options).Run();
}

}  // namespace internal
}  // namespace tune

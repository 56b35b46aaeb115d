// The optimize loop with several trials at once (RunSettings::jobs != 1): each trial runs in its
// own process (Objective::Start); this process alone owns the study, the sampler, the storage,
// the heartbeats and the memory ledger.
//
// Scheduling: a trial is asked, sampled and planned (Objective::Plan: its reservation, or its
// outcome when it cannot fit even alone) and joins the queue of waiting trials. Which waiting
// trial starts when is jobs_queue.h's rule: the oldest first when it fits; while it does not, a
// later one that fits now (backfilling), until the oldest has been passed `limit` times. More
// trials are asked while nothing waiting can start, so that there is one to backfill with, as
// long as the running and waiting trials together stay within the limit. A waiting trial is
// planned again before it starts when trials have finished since it was planned (calibration may
// have learned). A trial that does not fit beside the running ones may start at once at a
// smaller micro-batch that does (Objective::PlanToFit, memory.shrink_to_start), before any
// later trial is backfilled in its place. A trial whose memory is unknown (TrialPlan::exclusive)
// starts only on an idle device.
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

std::string JobsStateText(const JobsState& s) {
  std::string text = fmt::format("{} running", s.running);
  if (s.capacity) {
    text += fmt::format(", {} of {} reserved", FormatBytes(s.reserved), FormatBytes(*s.capacity));
  }
  if (s.busy) text += fmt::format(", busy {:.2f}", *s.busy);
  if (s.utilization) text += fmt::format(", GPU {:.0f}% utilized", *s.utilization * 100.0);
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
};

class JobsLoop {
 public:
  JobsLoop(Study& study, const ConditionalSpace& space, Objective& objective,
           const OptimizeOptions& options)
      : study_(study),
        space_(space),
        objective_(objective),
        options_(options),
        capacity_(objective.DeviceCapacity()),
        limit_(options.jobs == kJobsAuto ? options.max_jobs : options.jobs) {}

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
    RefreshCapacity();
    TUNE_RETURN_IF_ERROR(StartThoseThatFit());
    if (!stopping && ShouldAskAnother(waiting_, Ledger(), limit_)) {
      TUNE_ASSIGN_OR_RETURN(bool asked, AskAndPlan());
      if (!asked && running_.empty() && queue_.empty()) return false;  // others took the target
      RefreshCapacity(/*now=*/true);
      TUNE_RETURN_IF_ERROR(StartThoseThatFit());
    }
    if (!queue_.empty() && !NextToStart(waiting_, Ledger(), limit_)) {
      internal::SleepInterruptibly(running_.empty() ? 0.0 : 0.02);
    }
    return true;
  }

  // The capacity again, once a trial started or ended and else at most once a second: other
  // processes on the card (card_others.h) take and give back memory while the study runs.
  // With `now`: at once (a plan was just admitted against what the others leave).
  void RefreshCapacity(bool now = false) {
    const int64_t version = ledger_version_ + told_;
    if (!capacity_ ||
        (!now && version == capacity_version_ && SecondsSince(capacity_read_) < 1.0)) {
      return;
    }
    capacity_read_ = SteadyClock::now();
    capacity_version_ = version;
    const std::optional<int64_t> read = objective_.DeviceCapacity();
    if (read == capacity_) return;
    capacity_ = read;
    ++ledger_version_;  // what fits beside the running trials changed
  }

  JobsLedger Ledger() {
    JobsLedger ledger{static_cast<int64_t>(running_.size()), reserved_, capacity_, limit_};
    ledger.compute_full = ComputeFull();
    return ledger;
  }

  // RunSettings::max_busy: the running trials' summed busy share, each one still starting up
  // counted at the mean busy share seen so far, has reached max_busy.
  bool ComputeFull() {
    if (options_.max_busy <= 0 || running_.empty()) return false;
    const std::optional<DeviceBusy> now = objective_.DeviceBusyNow();
    if (!now) return false;
    busy_ = now;
    if (now->busy > 0) {
      seen_busy_ += now->sum_busy / static_cast<double>(now->busy);
      ++busy_samples_;
    }
    const double mean = busy_samples_ > 0 ? seen_busy_ / static_cast<double>(busy_samples_) : 1.0;
    const int64_t starting =
        std::max<int64_t>(0, static_cast<int64_t>(running_.size()) - now->busy);
    return now->sum_busy + static_cast<double>(starting) * mean >= options_.max_busy;
  }

  JobsState State() const {
    JobsState s;
    s.running = static_cast<int64_t>(running_.size());
    s.waiting = static_cast<int64_t>(queue_.size());
    s.reserved = reserved_;
    s.capacity = capacity_;
    if (const std::optional<DeviceBusy> busy = objective_.DeviceBusyNow()) s.busy = busy->sum_busy;
    s.utilization = objective_.DeviceUtilizationNow();
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
    waiting_.push_back({job->plan.reservation, job->plan.exclusive, 0});
    queue_.push_back(std::move(job));
    return true;
  }

  // Starts the waiting trials that may start now, in NextJob()'s order.
  Status StartThoseThatFit() {
    if (result_.interrupted) return Status::Ok();
    while (true) {
      TUNE_ASSIGN_OR_RETURN(std::optional<size_t> next, NextJob());
      if (!next) break;
      if (queue_[*next]->planned_at != told_) {
        TUNE_RETURN_IF_ERROR(Replan(*next));
        continue;
      }
      MarkStarted(waiting_, *next);
      std::unique_ptr<Job> job = std::move(queue_[*next]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(*next));
      TUNE_RETURN_IF_ERROR(StartJob(std::move(job)));
    }
    return Status::Ok();
  }

  // The waiting trial to start now: the head as it is, else the head at a smaller micro-batch
  // that fits beside the running trials (Objective::PlanToFit), else, while the head may still
  // be passed, the oldest later trial that fits as it is, else the oldest that fits shrunk.
  Result<std::optional<size_t>> NextJob() {
    RefreshCapacity();
    const JobsLedger ledger = Ledger();
    if (waiting_.empty() || FitsNow(ledger, waiting_.front())) {
      return NextToStart(waiting_, ledger, limit_);
    }
    TUNE_ASSIGN_OR_RETURN(bool head_shrunk, ShrinkToFit(0));
    if (head_shrunk) return std::optional<size_t>(0);
    if (std::optional<size_t> backfill = NextToStart(waiting_, ledger, limit_)) return backfill;
    if (waiting_.front().passed >= limit_) return std::optional<size_t>();
    for (size_t i = 1; i < queue_.size(); ++i) {
      TUNE_ASSIGN_OR_RETURN(bool shrunk, ShrinkToFit(i));
      if (shrunk) return std::optional<size_t>(i);
    }
    return std::optional<size_t>();
  }

  // Plans queue_[i] at a smaller micro-batch that fits the memory left beside the running
  // trials, if the objective can; tried once per change of the ledger. True: it fits now.
  Result<bool> ShrinkToFit(size_t i) {
    Job& job = *queue_[i];
    if (!capacity_ || running_.empty() || static_cast<int64_t>(running_.size()) >= limit_ ||
        waiting_[i].exclusive || job.shrink_tried_at == ledger_version_) {
      return false;
    }
    job.shrink_tried_at = ledger_version_;
    const int64_t room = *capacity_ - reserved_;
    if (room <= 0) return false;
    TUNE_ASSIGN_OR_RETURN(std::optional<TrialPlan> plan,
                          objective_.PlanToFit(*job.trial, job.sampled, room));
    if (!plan || plan->outcome || plan->exclusive || plan->reservation > room) return false;
    spdlog::info("Trial {} shrunk to start beside {} running: {}", job.trial->number(),
                 running_.size(), plan->summary);
    job.plan = std::move(plan).value();
    job.planned_at = told_;
    waiting_[i].reservation = job.plan.reservation;
    return true;
  }

  // Plans queue_[i] again with what the trials finished since it was planned taught calibration:
  // its reservation changes, or it is pruned without running after all.
  Status Replan(size_t i) {
    Job& job = *queue_[i];
    Result<TrialPlan> plan = objective_.Plan(*job.trial, job.sampled);
    if (plan.ok() && !plan->outcome) {
      job.plan = std::move(plan).value();
      job.planned_at = told_;
      waiting_[i].reservation = job.plan.reservation;
      waiting_[i].exclusive = job.plan.exclusive;
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
    Result<std::unique_ptr<TrialProcess>> process = objective_.Start(*job->trial, job->plan);
    if (!process.ok()) return Fail(*job, process.status());
    job->process = std::move(process).value();
    reserved_ += job->plan.reservation;
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
                  {"jobs", limit_}};
    if (job.process) schedule["started"] = FormatDatetime(job.started);
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
    reserved_ -= job->plan.reservation;
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
  std::optional<int64_t> capacity_;
  SteadyClock::time_point capacity_read_ = SteadyClock::now();
  int64_t capacity_version_ = 0;  // ledger_version_ + told_ when it was read
  const int64_t limit_;
  const SteadyClock::time_point start_ = SteadyClock::now();
  std::optional<HeartbeatThread> heartbeat_;
  std::list<std::unique_ptr<Job>> running_;
  std::vector<std::unique_ptr<Job>> queue_;  // waiting to start, oldest first
  std::vector<WaitingTrial> waiting_;        // queue_'s place in the order, one per job
  int64_t reserved_ = 0;
  int64_t told_ = 0;  // trials told so far: a queued trial planned before the last is re-planned
  int64_t ledger_version_ = 0;  // changes when a trial starts, ends or is told
  OptimizeResult result_;
  std::optional<SteadyClock::time_point> last_stale_check_;
  int64_t extra_target_ = 0;
  int64_t study_retries_ = 0;        // the study's out-of-memory retries, when last counted
  int64_t retries_counted_at_ = -1;  // finished_total then
  std::optional<DeviceBusy> busy_;   // the device's busy trials, when last seen
  double seen_busy_ = 0.0;           // per-trial busy shares seen, summed over samples
  int64_t busy_samples_ = 0;
};

}  // namespace

Result<OptimizeResult> OptimizeWithJobs(Study& study, const ConditionalSpace& space,
                                        Objective& objective, const OptimizeOptions& options) {
  return JobsLoop(study, space, objective, options).Run();
}

}  // namespace internal
}  // namespace tune

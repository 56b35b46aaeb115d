#include "tune/optimize.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "study/optimize_internal.h"
#include "tune/trial_attrs.h"
#include "util/interrupt.h"

namespace tune {
namespace {

using internal::HeartbeatThread;
using internal::LostToStaleCheck;
using internal::SecondsSince;
using internal::SleepInterruptibly;
using internal::SteadyClock;

}  // namespace

Result<int64_t> ParseJobsValue(const std::string& text) {
  if (text == "auto") return kJobsAuto;
  int64_t jobs = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), jobs);
  if (ec != std::errc() || end != text.data() + text.size() || jobs < 1 || jobs > 256) {
    return InvalidArgumentError(
        fmt::format("expected \"auto\" or a number of trials from 1 to 256, got {}", text));
  }
  return jobs;
}

Status CheckHeartbeatSettings(const RunSettings& settings, const std::string& where) {
  if (!(settings.heartbeat_interval >= 0)) {
    return InvalidArgumentError(
        fmt::format("{}: the heartbeat interval must be >= 0 seconds (0: off), got {}", where,
                    settings.heartbeat_interval));
  }
  if (settings.grace_period && !(*settings.grace_period > settings.heartbeat_interval)) {
    return InvalidArgumentError(fmt::format(
        "{}: the grace period ({}s) must be greater than the heartbeat interval ({}s), or running "
        "trials would be failed as stale between two heartbeats",
        where, *settings.grace_period, settings.heartbeat_interval));
  }
  if (settings.retry_failed < 0) {
    return InvalidArgumentError(
        fmt::format("{}: the retry count must be >= 0, got {}", where, settings.retry_failed));
  }
  return Status::Ok();
}

namespace {

// One call of Optimize(): ask, sample, run, tell, with the stale-trial checks and the wait for
// other workers' running trials in between.
class OptimizeLoop {
 public:
  OptimizeLoop(Study& study, const ConditionalSpace& space, Objective& objective,
               const OptimizeOptions& options)
      : study_(study),
        space_(space),
        objective_(objective),
        options_(options),
        interval_(options.heartbeat_interval),
        grace_(options.GracePeriod()) {}

  Result<OptimizeResult> Run() {
    if (heartbeats() && !(grace_ > 0)) {
      return InvalidArgumentError("the grace period must be > 0 seconds");
    }
    if (heartbeats()) heartbeat_.emplace(study_.storage(), interval_);
    while (true) {
      TUNE_RETURN_IF_ERROR(CheckStaleTrials());
      // Recounted every time: other workers may share the study.
      TUNE_ASSIGN_OR_RETURN(result_.finished_total,
                            study_.storage().CountTrials(study_.study_id(), kFinishedStates));
      if (TargetTaken()) TUNE_RETURN_IF_ERROR(CountStudyRetries());
      if (Done()) break;
      StartTrialOptions start_options;
      start_options.max_started = Target();
      start_options.heartbeat = heartbeats();
      TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, study_.Ask(start_options));
      if (!trial) {
        const std::optional<int64_t> before = Target();
        TUNE_RETURN_IF_ERROR(CountStudyRetries());
        if (Target() != before) continue;  // another worker's retry is waiting
        TUNE_ASSIGN_OR_RETURN(bool stop, WaitForRunningTrials());
        if (stop) break;
        continue;
      }
      waiting_ = false;
      TUNE_RETURN_IF_ERROR(RunTrial(*trial));
    }
    return result_;
  }

 private:
  bool heartbeats() const { return interval_ > 0; }

  // n_trials plus this worker's stale retries and the study's out-of-memory retries (any
  // worker's, when last counted).
  std::optional<int64_t> Target() const {
    if (!options_.n_trials) return std::nullopt;
    return *options_.n_trials + extra_target_ + study_retries_;
  }
  bool TargetTaken() const { return Target() && result_.finished_total >= *Target(); }

  // Recounts the study's retries (only worth it when the target looks reached).
  Status CountStudyRetries() {
    if (!internal::MakesStudyRetries(options_)) return Status::Ok();
    TUNE_ASSIGN_OR_RETURN(study_retries_, internal::CountRetries(study_));
    return Status::Ok();
  }

  // Ctrl-C, the target reached, or the timeout passed.
  bool Done() {
    if (InterruptRequested()) {
      result_.interrupted = true;
      return true;
    }
    if (TargetTaken()) return true;
    if (options_.timeout_seconds && SecondsSince(start_) >= *options_.timeout_seconds) {
      result_.timed_out = true;
      return true;
    }
    return false;
  }

  // With heartbeats: at the start, then once per interval (every loop while waiting).
  Status CheckStaleTrials() {
    if (!heartbeats() ||
        (last_stale_check_ && SecondsSince(*last_stale_check_) < interval_ && !waiting_)) {
      return Status::Ok();
    }
    last_stale_check_ = SteadyClock::now();
    return internal::FailStaleTrials(study_, options_, grace_, result_, extra_target_);
  }

  // The target is taken by running trials (of other workers, or of dead ones). Without
  // heartbeats, or with none running, stop; otherwise wait for them to finish or go stale (a dead
  // worker's trial heartbeated last before now, so it goes stale within the grace period).
  // Returns whether to stop.
  Result<bool> WaitForRunningTrials() {
    const std::optional<int64_t> target = Target();
    TUNE_ASSIGN_OR_RETURN(int64_t running,
                          study_.storage().CountTrials(study_.study_id(), {TrialState::kRunning}));
    const double patience = grace_ + interval_ + 1.0;
    if (!heartbeats() || running == 0) {
      // Another worker may have finished its last trial since the loop counted.
      TUNE_ASSIGN_OR_RETURN(result_.finished_total,
                            study_.storage().CountTrials(study_.study_id(), kFinishedStates));
      spdlog::info(
          "The target of {} trials is reached counting {} RUNNING trial(s); not "
          "starting another",
          *target, running);
      return true;
    }
    if (!waiting_) {
      waiting_ = true;
      waiting_since_ = SteadyClock::now();
      spdlog::info(
          "The target of {} trials is reached counting {} RUNNING trial(s): waiting "
          "up to {:.0f}s for them to finish (or go stale, if their worker died)",
          *target, running, patience);
    } else if (SecondsSince(waiting_since_) > patience) {
      spdlog::info(
          "{} trial(s) still RUNNING after {:.0f}s, with live heartbeats: other "
          "workers will finish them; stopping",
          running, patience);
      return true;
    }
    SleepInterruptibly(std::min(interval_, 1.0));
    return false;
  }

  // Samples and runs one trial and tells its outcome. A non-OK Status (tune could not run the
  // trial, or not store its outcome) fails the trial, so the study stays consistent, and stops.
  Status RunTrial(Trial& trial) {
    if (heartbeat_) heartbeat_->Watch(trial.trial_id());
    if (options_.on_jobs_changed) options_.on_jobs_changed(JobsState{1, 0, 0, std::nullopt});
    Result<Json> params = space_.Sample(trial);
    Result<TrialOutcome> outcome =
        params.ok() ? objective_.Run(trial, *params) : Result<TrialOutcome>(params.status());
    if (heartbeat_) heartbeat_->Unwatch(trial.trial_id());
    if (options_.on_jobs_changed) options_.on_jobs_changed(JobsState{});
    Result<FrozenTrial> told = outcome.ok() ? study_.Tell(trial, outcome->state, outcome->values)
                                            : Result<FrozenTrial>(outcome.status());
    if (!told.ok()) {
      if (LostToStaleCheck(study_, trial, told.status())) {
        ++result_.trials_lost;
        return Status::Ok();
      }
      (void)trial.SetUserAttr(attrs::kFailReason, told.status().message());
      (void)study_.Tell(trial, TrialState::kFail);
      return told.status().WithContext("trial " + std::to_string(trial.number()));
    }
    ++result_.trials_run;
    if (options_.on_trial_finished) options_.on_trial_finished(*told, *outcome);
    return internal::RetryEndedTrial(study_, options_, *told).status();
  }

  Study& study_;
  const ConditionalSpace& space_;
  Objective& objective_;
  const OptimizeOptions& options_;
  const double interval_;
  const double grace_;
  const SteadyClock::time_point start_ = SteadyClock::now();
  std::optional<HeartbeatThread> heartbeat_;
  OptimizeResult result_;
  std::optional<SteadyClock::time_point> last_stale_check_;
  bool waiting_ = false;  // for running trials (of others) to finish or go stale
  SteadyClock::time_point waiting_since_{};
  int64_t extra_target_ = 0;   // stale trials this worker re-enqueued
  int64_t study_retries_ = 0;  // the study's out-of-memory retries, when last counted
};

}  // namespace

Result<OptimizeResult> Optimize(Study& study, const ConditionalSpace& space, Objective& objective,
                                const OptimizeOptions& options) {
  if (options.jobs != 1) return internal::OptimizeWithJobs(study, space, objective, options);
  return OptimizeLoop(study, space, objective, options).Run();
}

}  // namespace tune

#include "tune/objectives/objective.h"

#include "tune/trial_attrs.h"
#include "util/interrupt.h"

namespace tune {

Result<TrialOutcome> RecordInterrupted(TrialHandle& trial) {
  const std::string message = InterruptReason();
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kInterrupted, true));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kReason, EndReasonName(EndReason::kInterrupted)));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, message));
  return TrialOutcome{TrialState::kFail, {}, message};
}

namespace {

// A trial that ran to its end in Start().
class FinishedTrialProcess : public TrialProcess {
 public:
  explicit FinishedTrialProcess(Result<TrialOutcome> outcome) : outcome_(std::move(outcome)) {}
  Status Poll(std::chrono::milliseconds) override { return Status::Ok(); }
  bool finished() const override { return true; }
  void Interrupt() override {}
  Result<TrialOutcome> Finish() override { return outcome_; }

 private:
  Result<TrialOutcome> outcome_;
};

}  // namespace

Result<TrialPlan> Objective::Plan(TrialHandle&, const Json& params) {
  TrialPlan plan;
  plan.params = params;
  return plan;
}

Result<std::optional<TrialPlan>> Objective::PlanToFit(TrialHandle&, const Json&, int64_t) {
  return std::optional<TrialPlan>();
}

Result<std::unique_ptr<TrialProcess>> Objective::Start(TrialHandle& trial, const TrialPlan& plan) {
  return std::unique_ptr<TrialProcess>(
      std::make_unique<FinishedTrialProcess>(Run(trial, plan.params)));
}

}  // namespace tune

#include "tune/objectives/objective.h"

#include "tune/trial_attrs.h"

namespace tune {

Result<TrialOutcome> RecordOom(TrialHandle& trial, const Json& params, const Json& details,
                               const std::string& reason, EndReason oom_reason) {
  Json oom_config = params;
  auto bs = params.find("batch_size");
  auto ga = params.find("grad_accum");
  if (bs != params.end() && ga != params.end() && bs->is_number() && ga->is_number()) {
    oom_config["effective_batch_size"] = bs->get<double>() * ga->get<double>();
  }
  for (const auto& [k, v] : details.items()) oom_config[k] = v;
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kOom, true));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kReason, EndReasonName(oom_reason)));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kOomConfig, oom_config));
  return TrialOutcome{TrialState::kPruned, {}, reason};
}

Result<TrialOutcome> RecordInterrupted(TrialHandle& trial) {
  const std::string message = "interrupted by the user";
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

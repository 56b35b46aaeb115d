#include "tune/objectives/objective.h"

#include "tune/trial_attrs.h"

namespace tune {

Result<TrialOutcome> RecordOom(Trial& trial, const Json& params, const Json& details,
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

Result<TrialOutcome> RecordInterrupted(Trial& trial) {
  const std::string message = "interrupted by the user";
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kInterrupted, true));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kReason, EndReasonName(EndReason::kInterrupted)));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, message));
  return TrialOutcome{TrialState::kFail, {}, message};
}

}  // namespace tune

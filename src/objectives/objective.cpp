#include "tune/objectives/objective.h"

namespace tune {

Result<TrialOutcome> RecordOom(Trial& trial, const Json& params, const Json& details,
                               const std::string& reason, const std::string& oom_reason) {
  Json oom_config = params;
  auto bs = params.find("batch_size");
  auto ga = params.find("grad_accum");
  if (bs != params.end() && ga != params.end() && bs->is_number() && ga->is_number()) {
    oom_config["effective_batch_size"] = bs->get<double>() * ga->get<double>();
  }
  for (const auto& [k, v] : details.items()) oom_config[k] = v;
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr("oom", true));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr("reason", oom_reason));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr("oom_config", oom_config));
  return TrialOutcome{TrialState::kPruned, {}, reason};
}

}  // namespace tune

#include "tune/storages/storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/text.h"

namespace tune {

Status StudyNotFoundError(const std::string& name, const std::vector<std::string>& existing) {
  return NotFoundError(fmt::format("study '{}' not found{}{}", name, DidYouMean(name, existing),
                                   existing.empty()
                                       ? " (the storage has no studies)"
                                       : "; existing studies: " + JoinNames(existing)));
}

Status TrialNotRunningError(int64_t number, TrialState state) {
  return FailedPreconditionError(fmt::format(
      "Trial#{} is {}: only a RUNNING trial records heartbeats", number, TrialStateName(state)));
}

Status CheckTrialValues(const std::vector<double>& values) {
  for (double v : values) {
    if (std::isnan(v)) {
      return InvalidArgumentError(
          "a trial value cannot be NaN (Optuna's schema has no NaN value); fail the trial "
          "instead");
    }
  }
  return Status::Ok();
}

std::optional<FrozenTrial> RetryOfStaleTrial(const FrozenTrial& failed, int64_t max_retry) {
  // Optuna: {"failed_trial": trial.number, "retry_history": [], **trial.system_attrs}, then
  // retry_history.append(trial.number); no retry once max_retry < len(retry_history).
  Json system_attrs = {{"failed_trial", failed.number}, {"retry_history", Json::array()}};
  for (const auto& [key, value] : failed.system_attrs.items()) system_attrs[key] = value;
  if (!system_attrs["retry_history"].is_array()) system_attrs["retry_history"] = Json::array();
  system_attrs["retry_history"].push_back(failed.number);
  if (max_retry < static_cast<int64_t>(system_attrs["retry_history"].size())) return std::nullopt;
  FrozenTrial retry;
  retry.state = TrialState::kWaiting;
  retry.params = failed.params;
  retry.distributions = failed.distributions;
  retry.user_attrs = failed.user_attrs.is_object() ? failed.user_attrs : Json::object();
  retry.user_attrs.erase("fail_reason");
  retry.system_attrs = std::move(system_attrs);
  return retry;
}

std::string StaleFailReason(double heartbeat_age_seconds, double grace_period_seconds) {
  return fmt::format("stale: no heartbeat for {:.1f}s (grace period {}s); its worker died or hung",
                     heartbeat_age_seconds, grace_period_seconds);
}

Result<Json> Storage::GetStudySystemAttrs(int64_t study_id) {
  TUNE_ASSIGN_OR_RETURN(StudyInfo info, GetStudy(study_id));
  return std::move(info.system_attrs);
}

Result<std::optional<Json>> Storage::GetStudySystemAttr(int64_t study_id, const std::string& key) {
  TUNE_ASSIGN_OR_RETURN(Json attrs, GetStudySystemAttrs(study_id));
  if (!attrs.is_object() || !attrs.contains(key)) return std::optional<Json>();
  return std::optional<Json>(std::move(attrs.at(key)));
}

Result<std::vector<FrozenTrial>> Storage::GetTrialsSince(int64_t study_id, int64_t first_number,
                                                         const std::vector<int64_t>& numbers) {
  TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> all, GetAllTrials(study_id));
  std::vector<FrozenTrial> out;
  for (FrozenTrial& t : all) {
    if (t.number >= first_number ||
        std::find(numbers.begin(), numbers.end(), t.number) != numbers.end()) {
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace tune

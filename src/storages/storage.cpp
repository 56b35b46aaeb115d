#include "tune/storages/storage.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tune/text.h"

namespace tune {

Status StudyNotFoundError(const std::string& name, const std::vector<std::string>& existing) {
  return NotFoundError(fmt::format("study '{}' not found{}{}", name, DidYouMean(name, existing),
                                   existing.empty()
                                       ? " (the storage has no studies)"
                                       : "; existing studies: " + JoinNames(existing)));
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

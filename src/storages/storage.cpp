#include "tune/storages/storage.h"

#include <algorithm>

namespace tune {

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

// PatientPruner: Optuna's pruners/_patient.py (3.1). See patient.h for the rule.
#include "tune/pruners/patient.h"

#include <cassert>
#include <cmath>
#include <map>

#include "pruners/common.h"

namespace tune {

PatientPruner::PatientPruner(std::unique_ptr<Pruner> wrapped, const PatientOptions& options)
    : wrapped_(std::move(wrapped)), options_(options) {
  assert(options.patience >= 0 && options.min_delta >= 0);
}

PruneDecision PatientPruner::Prune(const TrialHistory& history, const FrozenTrial& trial) {
  std::optional<StudyDirection> direction = internal::SingleDirection(history);
  const auto& values = trial.intermediate_values;  // sorted by step
  if (!direction || values.empty()) return {};
  if (static_cast<int64_t>(values.size()) <= options_.patience + 1) return {};

  auto split = values.begin();
  std::advance(split, static_cast<int64_t>(values.size()) - options_.patience - 1);
  const std::map<int64_t, double> before(values.begin(), split);
  const std::map<int64_t, double> after(split, values.end());

  // With all-NaN windows numpy gives NaN and the comparison is false: keep.
  bool maybe_prune;
  if (*direction == StudyDirection::kMaximize) {
    maybe_prune = internal::NanMax(before) - options_.min_delta > internal::NanMax(after);
  } else {
    maybe_prune = internal::NanMin(before) + options_.min_delta < internal::NanMin(after);
  }
  if (!maybe_prune) return {};
  if (wrapped_) return wrapped_->Prune(history, trial);
  return {.prune = true};
}

}  // namespace tune

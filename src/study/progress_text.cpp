#include "study/progress_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "study/study_summary.h"
#include "tune/trial_attrs.h"
#include "util/text.h"

namespace tune {

Result<ProgressMode> ParseProgressMode(const std::string& name) {
  if (name == "auto") return ProgressMode::kAuto;
  if (name == "bar") return ProgressMode::kBar;
  if (name == "lines") return ProgressMode::kLines;
  if (name == "off") return ProgressMode::kOff;
  const std::vector<std::string> valid = {"auto", "bar", "lines", "off"};
  return InvalidArgumentError(fmt::format("unknown progress mode '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

void ProgressCounts::Add(const FrozenTrial& trial) {
  ++finished;
  const TrialCategory category = TrialCategoryOf(trial);
  oom += category == TrialCategory::kOom || category == TrialCategory::kPredicted;
  complete += trial.state == TrialState::kComplete;
  pruned += category == TrialCategory::kPruned;
  failed += trial.state == TrialState::kFail;
}

std::optional<double> EstimateEtaSeconds(const ProgressCounts& counts, const ProgressTarget& target,
                                         double elapsed_seconds) {
  std::optional<double> eta;
  if (target.n_trials && counts.run > 0) {
    const int64_t left = std::max<int64_t>(0, *target.n_trials + counts.retried - counts.finished);
    eta = elapsed_seconds / static_cast<double>(counts.run) * static_cast<double>(left);
  } else if (target.n_trials && counts.finished >= *target.n_trials + counts.retried) {
    eta = 0.0;
  }
  if (target.timeout_seconds) {
    const double left = std::max(0.0, *target.timeout_seconds - elapsed_seconds);
    eta = eta ? std::min(*eta, left) : left;
  }
  return eta;
}

std::string ClockText(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

std::string ProgressText(const ProgressCounts& counts, const ProgressTarget& target,
                         double elapsed_seconds) {
  const std::string of =
      target.n_trials ? std::to_string(*target.n_trials + counts.retried) : std::string("-");
  const std::string best =
      counts.best_value ? fmt::format("{:.6g} (trial {})", *counts.best_value, counts.best_number)
                        : std::string("-");
  const std::string running = counts.jobs ? " | " + JobsStateText(*counts.jobs) : std::string();
  const std::optional<double> eta = EstimateEtaSeconds(counts, target, elapsed_seconds);
  return fmt::format(
      "{}/{} finished | {} COMPLETE, {} pruned, {} OOM, {} FAIL | best {}{} | elapsed {} | "
      "ETA {}",
      counts.finished, of, counts.complete, counts.pruned, counts.oom, counts.failed, best, running,
      ClockText(elapsed_seconds), eta ? ClockText(*eta) : std::string("?"));
}

}  // namespace tune

// PercentilePruner / MedianPruner: Optuna's pruners/_percentile.py (3.1). See percentile.h.
#include "tune/pruners/percentile.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "pruners/common.h"

namespace tune {

double NanPercentile(std::vector<double> values, double q) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  // numpy/lib/function_base.py: _quantile with method "linear".
  const auto n = static_cast<int64_t>(values.size());
  double quantile = q / 100.0;
  double virtual_index = static_cast<double>(n - 1) * quantile;
  double previous_index = std::floor(virtual_index);
  int64_t prev = static_cast<int64_t>(previous_index);
  int64_t next = prev + 1;
  if (virtual_index >= static_cast<double>(n - 1)) {  // numpy: index -1, the last value
    previous_index = -1;
    prev = next = n - 1;
  }
  double gamma = virtual_index - previous_index;
  double a = values[static_cast<size_t>(prev)];
  double b = values[static_cast<size_t>(next)];
  // numpy's _lerp: a + (b - a) * t, or b - (b - a) * (1 - t) when t >= 0.5.
  double diff_b_a = b - a;
  if (gamma >= 0.5) return b - diff_b_a * (1 - gamma);
  return a + diff_b_a * gamma;
}

PercentilePruner::PercentilePruner(const PercentileOptions& options) : options_(options) {
  assert(options.percentile >= 0 && options.percentile <= 100);
  assert(options.n_startup_trials >= 0 && options.n_warmup_steps >= 0);
  assert(options.interval_steps >= 1 && options.n_min_trials >= 1);
}

PruneDecision PercentilePruner::Prune(const TrialHistory& history, const FrozenTrial& trial) {
  std::optional<StudyDirection> direction = internal::SingleDirection(history);
  std::optional<int64_t> step = trial.last_step();
  if (!direction || !step) return {};

  int64_t n_completed = 0;
  for (const auto& t : history.trials) n_completed += t->state == TrialState::kComplete;
  if (n_completed == 0 || n_completed < options_.n_startup_trials) return {};
  if (*step < options_.n_warmup_steps) return {};
  if (!internal::IsFirstInIntervalStep(*step, trial.intermediate_values, options_.n_warmup_steps,
                                       options_.interval_steps)) {
    return {};
  }

  bool maximize = *direction == StudyDirection::kMaximize;
  double best = maximize ? internal::NanMax(trial.intermediate_values)
                         : internal::NanMin(trial.intermediate_values);
  if (std::isnan(best)) return {.prune = true};

  std::vector<double> at_step;
  for (const auto& t : history.trials) {
    if (t->state != TrialState::kComplete) continue;
    auto it = t->intermediate_values.find(*step);
    if (it != t->intermediate_values.end()) at_step.push_back(it->second);
  }
  if (static_cast<int64_t>(at_step.size()) < options_.n_min_trials) return {};
  double q = maximize ? 100.0 - options_.percentile : options_.percentile;
  double p = NanPercentile(std::move(at_step), q);
  if (std::isnan(p)) return {};
  return {.prune = maximize ? best < p : best > p};
}

namespace {

PercentileOptions AtMedian(PercentileOptions options) {
  options.percentile = 50.0;
  return options;
}

}  // namespace

MedianPruner::MedianPruner(const PercentileOptions& options)
    : PercentilePruner(AtMedian(options)) {}

}  // namespace tune

#include "pruners/common.h"

#include <cmath>
#include <limits>

namespace tune::internal {

std::optional<StudyDirection> SingleDirection(const TrialHistory& history) {
  if (history.directions.size() != 1) return std::nullopt;
  return history.directions[0];
}

bool IsFirstInIntervalStep(int64_t step, const std::map<int64_t, double>& intermediate_values,
                           int64_t n_warmup_steps, int64_t interval_steps) {
  int64_t nearest_lower_pruning_step =
      (step - n_warmup_steps) / interval_steps * interval_steps + n_warmup_steps;
  int64_t second_last_step = -1;
  for (const auto& [s, value] : intermediate_values) {
    if (s > second_last_step && s != step) second_last_step = s;
  }
  return second_last_step < nearest_lower_pruning_step;
}

namespace {

template <typename Better>
double NanBest(const std::map<int64_t, double>& values, Better better) {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [step, v] : values) {
    if (std::isnan(v)) continue;
    if (std::isnan(best) || better(v, best)) best = v;
  }
  return best;
}

}  // namespace

double NanMin(const std::map<int64_t, double>& values) {
  return NanBest(values, [](double a, double b) { return a < b; });
}

double NanMax(const std::map<int64_t, double>& values) {
  return NanBest(values, [](double a, double b) { return a > b; });
}

}  // namespace tune::internal

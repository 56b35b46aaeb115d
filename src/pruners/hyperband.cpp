// Hyperband over successive-halving brackets: Optuna's pruners/_hyperband.py (3.1). See
// hyperband.h for the rule.
#include "tune/pruners/hyperband.h"

#include <array>
#include <cassert>
#include <cmath>
#include <limits>

namespace tune {

namespace {

constexpr std::array<uint32_t, 256> MakeCrc32Table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32Table = MakeCrc32Table();

// ceil(n_brackets * eta^s / (s + 1)) in exact integer arithmetic, saturating (far beyond any
// real step count) instead of overflowing.
int64_t TrialAllocationBudget(int64_t n_brackets, int64_t eta, int64_t s) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 2;
  int64_t numerator = n_brackets;
  for (int64_t i = 0; i < s && numerator < kMax; ++i) {
    numerator = numerator > kMax / eta ? kMax : numerator * eta;
  }
  return (numerator + s) / (s + 1);
}

}  // namespace

uint32_t Crc32(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : bytes) c = kCrc32Table[(c ^ static_cast<uint8_t>(ch)) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

HyperbandPruner::HyperbandPruner(const HyperbandOptions& options)
    : options_(options), max_resource_(options.max_resource) {
  assert(options.min_resource >= 1 && options.reduction_factor >= 2);
  assert(options.bootstrap_count >= 0);
  assert(!options.max_resource || *options.max_resource >= options.min_resource);
  assert(options.bootstrap_count == 0 || options.max_resource);
}

void HyperbandPruner::TryInitialize(const TrialHistory& history) {
  if (!max_resource_) {
    std::optional<int64_t> last_step;
    for (const auto& t : history.trials) {
      if (t->state != TrialState::kComplete) continue;
      std::optional<int64_t> s = t->last_step();
      if (s && (!last_step || *s > *last_step)) last_step = s;
    }
    if (!last_step) return;
    max_resource_ = *last_step + 1;
  }
  initialized_ = true;
  // As Python's math.floor(math.log(max / min, eta)) + 1, i.e. log(max / min) / log(eta): the
  // same rounding (math.log(243, 3) is 4.999..., so 243 steps give 5 brackets, not 6).
  double ratio = static_cast<double>(*max_resource_) / static_cast<double>(options_.min_resource);
  auto n_brackets = static_cast<int64_t>(
      std::floor(std::log(ratio) / std::log(static_cast<double>(options_.reduction_factor))) + 1);
  // n_brackets < 1 happens only for an "auto" max_resource below min_resource: no brackets, and
  // no pruning, as in Optuna.
  for (int64_t b = 0; b < n_brackets; ++b) {
    int64_t budget =
        TrialAllocationBudget(n_brackets, options_.reduction_factor, n_brackets - 1 - b);
    budgets_.push_back(budget);
    total_budget_ += budget;
    SuccessiveHalvingOptions sh;
    sh.min_resource = options_.min_resource;
    sh.reduction_factor = options_.reduction_factor;
    sh.min_early_stopping_rate = b;
    sh.bootstrap_count = options_.bootstrap_count;
    pruners_.push_back(std::make_unique<SuccessiveHalvingPruner>(sh));
  }
}

int HyperbandPruner::BracketId(const std::string& study_name, int64_t number) const {
  if (pruners_.empty()) return 0;
  int64_t n = static_cast<int64_t>(Crc32(study_name + "_" + std::to_string(number)) %
                                   static_cast<uint64_t>(total_budget_));
  for (size_t b = 0; b < budgets_.size(); ++b) {
    n -= budgets_[b];
    if (n < 0) return static_cast<int>(b);
  }
  assert(false && "unreachable: n < total budget");
  return 0;
}

PruneDecision HyperbandPruner::Prune(const TrialHistory& history, const FrozenTrial& trial) {
  if (pruners_.empty()) {
    if (!initialized_) TryInitialize(history);
    if (pruners_.empty()) return {};
  }
  const int bracket = BracketId(history.study_name, trial.number);
  return pruners_[static_cast<size_t>(bracket)]->Prune(
      history, trial, [this, &history, bracket](const FrozenTrial& t) {
        return BracketId(history.study_name, t.number) == bracket;
      });
}

std::shared_ptr<const TrialHistory> HyperbandPruner::SamplerHistory(
    std::shared_ptr<const TrialHistory> history, const FrozenTrial& trial) {
  if (pruners_.empty()) return history;  // every trial is in bracket 0
  const int bracket = BracketId(history->study_name, trial.number);
  auto filtered = std::make_shared<TrialHistory>();
  filtered->study_name = history->study_name;
  filtered->directions = history->directions;
  // A different id from the unfiltered snapshot's (samplers cache by id).
  filtered->snapshot_id = history->snapshot_id != 0 ? history->snapshot_id | (1ull << 63) : 0;
  for (const auto& t : history->trials) {
    if (BracketId(history->study_name, t->number) == bracket) filtered->trials.push_back(t);
  }
  return filtered;
}

}  // namespace tune

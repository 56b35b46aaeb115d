// HyperbandPruner: several successive-halving brackets side by side, each with a different
// first rung, as Optuna's HyperbandPruner (optuna/pruners/_hyperband.py, 3.1; unchanged in 4.9).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tune/pruners/pruner.h"
#include "tune/pruners/successive_halving.h"

namespace tune {

struct HyperbandOptions {
  // Steps to the first rung of the most aggressive bracket. Optuna: min_resource.
  int64_t min_resource = 1;
  // The steps a trial may run at most; nullopt = "auto". Optuna: max_resource. "auto" is fixed
  // at the first Prune call that finds a COMPLETE trial with reports, as max(last step of
  // COMPLETE trials) + 1; until then nothing is pruned and every trial is in bracket 0. Fixed
  // below min_resource, it gives no brackets, and nothing is ever pruned, as in Optuna.
  std::optional<int64_t> max_resource;
  // eta of every bracket. Optuna: reduction_factor.
  int64_t reduction_factor = 3;
  // As for successive halving. Optuna: bootstrap_count.
  int64_t bootstrap_count = 0;
};

// zlib's CRC-32 (Python's binascii.crc32 / zlib.crc32): reflected polynomial 0xEDB88320, initial
// value and final xor 0xFFFFFFFF. Crc32("123456789") == 0xCBF43926.
uint32_t Crc32(std::string_view bytes);

// The brackets (Optuna's, with eta = reduction_factor), built at the first Prune call that can:
//   n_brackets = floor(log_eta(max_resource / min_resource)) + 1;
//   bracket b has the budget ceil(n_brackets * eta^s / (s + 1)), s = n_brackets - 1 - b, and is
//   a SuccessiveHalvingPruner(min_resource, eta, min_early_stopping_rate = b, bootstrap_count).
// A trial competes only with trials of its bracket (BracketId), and the sampler sees only those
// trials (SamplerHistory; Optuna's _BracketStudy / pruners._filter_study).
// Thread safety: Prune may fix the brackets; the study serialises Prune and SamplerHistory calls.
class HyperbandPruner : public Pruner {
 public:
  // REQUIRES: min_resource >= 1, reduction_factor >= 2, bootstrap_count >= 0, max_resource unset
  // or >= min_resource, bootstrap_count == 0 if max_resource is unset.
  explicit HyperbandPruner(const HyperbandOptions& options);

  std::string name() const override { return "hyperband"; }
  // The decision of `trial`'s bracket's SuccessiveHalvingPruner among the trials of that bracket;
  // never prunes before the brackets are fixed.
  PruneDecision Prune(const TrialHistory& history, const FrozenTrial& trial) override;
  // Only the trials of `trial`'s bracket (all trials until the brackets are fixed).
  std::shared_ptr<const TrialHistory> SamplerHistory(std::shared_ptr<const TrialHistory> history,
                                                     const FrozenTrial& trial) override;

  // Optuna's _get_bracket_id: crc32("{study_name}_{number}") % (sum of budgets), then the first
  // bracket whose cumulative budget exceeds it; 0 until the brackets are fixed.
  int BracketId(const std::string& study_name, int64_t number) const;
  // 0 until the brackets are fixed.
  int n_brackets() const { return static_cast<int>(budgets_.size()); }
  // Per-bracket trial allocation budgets (empty until fixed).
  const std::vector<int64_t>& budgets() const { return budgets_; }
  // max_resource as fixed so far (nullopt: "auto", not yet fixed).
  std::optional<int64_t> max_resource() const { return max_resource_; }

 private:
  // Optuna's _try_initialization: fixes max_resource and builds the brackets, if possible.
  void TryInitialize(const TrialHistory& history);

  HyperbandOptions options_;
  std::optional<int64_t> max_resource_;
  bool initialized_ = false;
  std::vector<int64_t> budgets_;
  int64_t total_budget_ = 0;
  std::vector<std::unique_ptr<SuccessiveHalvingPruner>> pruners_;
};

}  // namespace tune

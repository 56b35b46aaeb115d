// Pruner tests: hand-computed cases for each rule of Optuna 3.1's pruners (see the pruner
// headers), config parsing, and pruning through a Study. Where a number needed a computer
// (CRC-32, bracket ids, numpy percentiles), the comment says how it was obtained. The decisions
// of the percentile, successive-halving, hyperband, patient and threshold cases were also checked
// once against optuna 3.1.0 (pruner.prune on a study built with create_trial/add_trial).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "tune/pruners/hyperband.h"
#include "tune/pruners/patient.h"
#include "tune/pruners/percentile.h"
#include "tune/pruners/pruner.h"
#include "tune/pruners/successive_halving.h"
#include "tune/pruners/threshold.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr StudyDirection kMin = StudyDirection::kMinimize;
constexpr StudyDirection kMax = StudyDirection::kMaximize;

// ---------------------------------------------------------------------------------------------
// History builders

// Steps 0, 1, ... with these values.
std::map<int64_t, double> Curve(const std::vector<double>& values) {
  std::map<int64_t, double> curve;
  for (size_t i = 0; i < values.size(); ++i) curve[static_cast<int64_t>(i)] = values[i];
  return curve;
}

FrozenTrial MakeTrial(int64_t number, TrialState state, std::map<int64_t, double> intermediate,
                      Json system_attrs = Json::object()) {
  FrozenTrial t;
  t.trial_id = number;
  t.number = number;
  t.state = state;
  t.intermediate_values = std::move(intermediate);
  if (state == TrialState::kComplete && !t.intermediate_values.empty()) {
    t.values = {t.intermediate_values.rbegin()->second};
  }
  t.system_attrs = std::move(system_attrs);
  return t;
}

FrozenTrial Complete(int64_t number, std::map<int64_t, double> intermediate) {
  return MakeTrial(number, TrialState::kComplete, std::move(intermediate));
}

FrozenTrial Running(int64_t number, std::map<int64_t, double> intermediate,
                    Json system_attrs = Json::object()) {
  return MakeTrial(number, TrialState::kRunning, std::move(intermediate), std::move(system_attrs));
}

// A trial of any state that reached rung 0 with `value` (successive halving's record).
FrozenTrial AtRung0(int64_t number, double value, TrialState state = TrialState::kComplete) {
  return MakeTrial(number, state, {{1, value}}, Json{{"completed_rung_0", value}});
}

// The history as the study hands it over: `others` plus the current trial (RUNNING), by number.
TrialHistory MakeHistory(std::vector<FrozenTrial> trials, StudyDirection direction = kMin,
                         const std::string& study_name = "study") {
  std::sort(trials.begin(), trials.end(),
            [](const FrozenTrial& a, const FrozenTrial& b) { return a.number < b.number; });
  TrialHistory h;
  h.study_name = study_name;
  h.directions = {direction};
  h.snapshot_id = 7;
  for (auto& t : trials) h.trials.push_back(std::make_shared<const FrozenTrial>(std::move(t)));
  return h;
}

// Asks `pruner` about `current`, with the history `others` + `current`.
PruneDecision Ask(Pruner& pruner, std::vector<FrozenTrial> others, const FrozenTrial& current,
                  StudyDirection direction = kMin, const std::string& study_name = "study") {
  others.push_back(current);
  return pruner.Prune(MakeHistory(std::move(others), direction, study_name), current);
}

// Five COMPLETE trials whose value at every step 0..4 is 1, 2, 3, 4, 5 (median 3).
std::vector<FrozenTrial> FiveCompleted() {
  std::vector<FrozenTrial> trials;
  for (int i = 0; i < 5; ++i) {
    double v = i + 1;
    trials.push_back(Complete(i, Curve({v, v, v, v, v})));
  }
  return trials;
}

// ---------------------------------------------------------------------------------------------
// Percentile / median

TEST(PercentilePruner, NanPercentileMatchesNumpy) {
  // Expected values: numpy 1.24 np.nanpercentile(np.array(values, dtype=float), q).
  EXPECT_EQ(NanPercentile({1, 2, 3, 4, 5}, 50), 3.0);
  EXPECT_EQ(NanPercentile({8, 1, 4, 2}, 75), 5.0);     // index 2.25: 4 + 0.25 * (8 - 4)
  EXPECT_EQ(NanPercentile({8, 1, 4, 2}, 25), 1.75);    // index 0.75: 1 + 0.75 * (2 - 1)
  EXPECT_EQ(NanPercentile({3, 1, 2, kNaN}, 50), 2.0);  // NaN ignored
  EXPECT_EQ(NanPercentile({1, 2, 3}, 100), 3.0);
  EXPECT_EQ(NanPercentile({1, 2, 3}, 0), 1.0);
  EXPECT_EQ(NanPercentile({0.1, 0.7, 0.2, 0.9, 0.3}, 33.3), 0.2332);
  EXPECT_TRUE(std::isnan(NanPercentile({kNaN}, 50)));
  EXPECT_TRUE(std::isnan(NanPercentile({}, 50)));
  // numpy's interpolation turns infinities into NaN (inf - inf); Optuna then does not prune.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(NanPercentile({1, inf}, 50)));
  EXPECT_TRUE(std::isnan(NanPercentile({1, inf}, 0)));
  EXPECT_TRUE(std::isnan(NanPercentile({inf}, 50)));
}

TEST(MedianPruner, PrunesWhenBestSoFarIsWorseThanTheMedian) {
  MedianPruner pruner;  // n_startup_trials=5, n_warmup_steps=0, interval_steps=1
  EXPECT_EQ(pruner.name(), "median");
  // Median at step 2 is 3. Best of the trial's own values (nanmin) is compared, not the latest.
  EXPECT_TRUE(Ask(pruner, FiveCompleted(), Running(5, Curve({10, 9, 3.5}))).prune);
  EXPECT_FALSE(Ask(pruner, FiveCompleted(), Running(5, Curve({10, 9, 3}))).prune);  // 3 > 3: no
  EXPECT_FALSE(Ask(pruner, FiveCompleted(), Running(5, Curve({10, 2.5, 9}))).prune);
  // Never any attrs.
  EXPECT_TRUE(Ask(pruner, FiveCompleted(), Running(5, Curve({10}))).system_attrs.empty());
}

TEST(MedianPruner, StartupTrialsOnlyCountCompleteTrials) {
  MedianPruner pruner;
  auto others = FiveCompleted();
  others.pop_back();  // 4 COMPLETE < n_startup_trials = 5
  others.push_back(MakeTrial(4, TrialState::kPruned, Curve({0, 0, 0})));
  others.push_back(MakeTrial(6, TrialState::kRunning, Curve({0, 0, 0})));
  EXPECT_FALSE(Ask(pruner, others, Running(5, Curve({10, 10, 10}))).prune);
  // With n_startup_trials = 0, the four COMPLETE ones (median 2.5 at step 2) decide; the PRUNED
  // and RUNNING trials' zeros are not competitors.
  MedianPruner eager({.n_startup_trials = 0});
  EXPECT_TRUE(Ask(eager, others, Running(5, Curve({10, 10, 2.6}))).prune);
  EXPECT_FALSE(Ask(eager, others, Running(5, Curve({10, 10, 2.5}))).prune);
  // No COMPLETE trial at all: never prune, whatever n_startup_trials.
  EXPECT_FALSE(Ask(eager, {}, Running(0, Curve({10}))).prune);
}

TEST(MedianPruner, WarmupAndIntervalGate) {
  // Checks happen at the first report at or after steps 1, 4, 7, ... (warmup 1, interval 3).
  MedianPruner pruner({.n_startup_trials = 5, .n_warmup_steps = 1, .interval_steps = 3});
  std::vector<FrozenTrial> others;
  for (int i = 0; i < 5; ++i) {
    std::vector<double> curve(10, i + 1.0);
    others.push_back(Complete(i, Curve(curve)));
  }
  auto bad = [](int64_t last_step) {  // a trial worse than every other one, reported 0..last_step
    std::map<int64_t, double> curve;
    for (int64_t s = 0; s <= last_step; ++s) curve[s] = 100;
    return Running(5, curve);
  };
  EXPECT_FALSE(Ask(pruner, others, bad(0)).prune);  // step 0 < n_warmup_steps
  EXPECT_TRUE(Ask(pruner, others, bad(1)).prune);   // first report at boundary 1
  EXPECT_FALSE(Ask(pruner, others, bad(2)).prune);  // boundary 1 was already checked at step 1
  EXPECT_FALSE(Ask(pruner, others, bad(3)).prune);
  EXPECT_TRUE(Ask(pruner, others, bad(4)).prune);   // boundary 4
  EXPECT_FALSE(Ask(pruner, others, bad(5)).prune);  // previous report 4 >= boundary 4: gated
  // A jump: reports at 0 and 6; boundary 4 was never checked, so step 6 is.
  EXPECT_TRUE(Ask(pruner, others, Running(5, {{0, 100}, {6, 100}})).prune);
  // Reports at 4 and 6: step 6 is gated (the nearest boundary, 4, had its check).
  EXPECT_FALSE(Ask(pruner, others, Running(5, {{4, 100}, {6, 100}})).prune);
}

TEST(MedianPruner, NMinTrialsAtTheStep) {
  MedianPruner pruner({.n_startup_trials = 0, .n_min_trials = 3});
  // Two COMPLETE trials reported at step 3; the third stopped at step 1.
  std::vector<FrozenTrial> others = {Complete(0, Curve({1, 1, 1, 1})),
                                     Complete(1, Curve({2, 2, 2, 2})), Complete(2, Curve({3, 3}))};
  EXPECT_FALSE(Ask(pruner, others, Running(3, Curve({9, 9, 9, 9}))).prune);  // 2 < 3 values
  others.push_back(Complete(4, Curve({4, 4, 4, 4})));
  EXPECT_TRUE(Ask(pruner, others, Running(3, Curve({9, 9, 9, 9}))).prune);  // median 2 at step 3
  // A step no COMPLETE trial reported: no value to compare with.
  MedianPruner one({.n_startup_trials = 0});
  EXPECT_FALSE(Ask(one, others, Running(3, {{0, 9}, {17, 9}})).prune);
}

TEST(MedianPruner, AllNanValuesArePruned) {
  MedianPruner pruner;
  EXPECT_TRUE(Ask(pruner, FiveCompleted(), Running(5, Curve({kNaN, kNaN}))).prune);
  // One real value is enough to be compared (nanmin).
  EXPECT_FALSE(Ask(pruner, FiveCompleted(), Running(5, Curve({1, kNaN}))).prune);
}

TEST(PercentilePruner, MaximizeUsesTheMirroredPercentile) {
  // percentile 25, maximize: compare with the 75th percentile (q = 100 - 25) and nanmax.
  PercentilePruner pruner({.percentile = 25, .n_startup_trials = 4});
  EXPECT_EQ(pruner.name(), "percentile");
  std::vector<FrozenTrial> others = {Complete(0, Curve({1, 1})), Complete(1, Curve({2, 8})),
                                     Complete(2, Curve({4, 2})), Complete(3, Curve({8, 4}))};
  // Values at step 1: 1, 8, 2, 4 -> 75th percentile 5 (index 2.25 between 4 and 8).
  EXPECT_TRUE(Ask(pruner, others, Running(4, Curve({0, 4.9})), kMax).prune);
  EXPECT_FALSE(Ask(pruner, others, Running(4, Curve({0, 5})), kMax).prune);
  EXPECT_FALSE(Ask(pruner, others, Running(4, Curve({6, 0})), kMax).prune);  // nanmax = 6
  // Minimizing, the same trials' 25th percentile at step 1 is 1.75.
  EXPECT_TRUE(Ask(pruner, others, Running(4, Curve({9, 1.8})), kMin).prune);
  EXPECT_FALSE(Ask(pruner, others, Running(4, Curve({9, 1.75})), kMin).prune);
}

TEST(PercentilePruner, MultiObjectiveNeverPrunes) {
  MedianPruner pruner;
  auto others = FiveCompleted();
  auto current = Running(5, Curve({100}));
  others.push_back(current);
  TrialHistory h = MakeHistory(others);
  h.directions = {kMin, kMin};
  EXPECT_FALSE(pruner.Prune(h, current).prune);
}

// ---------------------------------------------------------------------------------------------
// Successive halving

TEST(SuccessiveHalvingPruner, RungKey) { EXPECT_EQ(CompletedRungKey(3), "completed_rung_3"); }

TEST(SuccessiveHalvingPruner, FirstArrivalIsPromotedAndRecorded) {
  // r = 1, eta = 2: rungs at steps 1, 2, 4, 8, ...
  SuccessiveHalvingPruner pruner({.min_resource = 1, .reduction_factor = 2});
  EXPECT_EQ(pruner.name(), "successive_halving");
  PruneDecision before = Ask(pruner, {}, Running(0, {{0, 0.5}}));  // step 0 < 1
  EXPECT_FALSE(before.prune);
  EXPECT_TRUE(before.system_attrs.empty());
  // Step 1: alone at rung 0 (competing = [0.5]): promoted; rung 1 is at step 2.
  PruneDecision d = Ask(pruner, {}, Running(0, {{0, 0.9}, {1, 0.5}}));
  EXPECT_FALSE(d.prune);
  EXPECT_EQ(d.system_attrs, (Json{{"completed_rung_0", 0.5}}));
}

TEST(SuccessiveHalvingPruner, FirstEtaMinusOneArrivalsMustBeBestSoFar) {
  // eta = 4: with fewer than 4 values at the rung, idx = -1 -> 0: only a new best is promoted.
  SuccessiveHalvingPruner pruner({.min_resource = 1});
  std::vector<FrozenTrial> others = {AtRung0(0, 1.0), AtRung0(1, 2.0)};
  PruneDecision d = Ask(pruner, others, Running(2, {{1, 1.5}}));
  // competing [1, 1.5, 2]: 1.5 > 1.
  EXPECT_TRUE(d.prune);
  EXPECT_EQ(d.system_attrs, (Json{{"completed_rung_0", 1.5}}));  // recorded even when pruned
  EXPECT_FALSE(Ask(pruner, others, Running(2, {{1, 0.5}})).prune);
  EXPECT_FALSE(Ask(pruner, others, Running(2, {{1, 1.0}})).prune);  // ties promote (<=)
  // Maximize: only a value >= the largest is promoted.
  EXPECT_TRUE(Ask(pruner, others, Running(2, {{1, 1.5}}), kMax).prune);
  EXPECT_FALSE(Ask(pruner, others, Running(2, {{1, 2.5}}), kMax).prune);
}

TEST(SuccessiveHalvingPruner, TopOneOverEtaIsPromoted) {
  SuccessiveHalvingPruner pruner({.min_resource = 1, .reduction_factor = 2});
  // Competitors of any state: COMPLETE, PRUNED, RUNNING.
  std::vector<FrozenTrial> others = {AtRung0(0, 1.0), AtRung0(1, 2.0, TrialState::kPruned),
                                     AtRung0(2, 3.0, TrialState::kRunning)};
  // 4 values: idx = 4 // 2 - 1 = 1. Minimize: promote iff value <= sorted[1].
  EXPECT_TRUE(Ask(pruner, others, Running(3, {{1, 2.5}})).prune);   // [1, 2, 2.5, 3]: 2.5 > 2
  EXPECT_FALSE(Ask(pruner, others, Running(3, {{1, 1.5}})).prune);  // [1, 1.5, 2, 3]
  // Maximize: promote iff value >= sorted[-(idx + 1)] = sorted[2].
  EXPECT_FALSE(Ask(pruner, others, Running(3, {{1, 2.5}}), kMax).prune);  // 2.5 >= 2.5
  EXPECT_TRUE(Ask(pruner, others, Running(3, {{1, 1.5}}), kMax).prune);   // 1.5 < 2
  // Trials without the rung's attr do not compete: alone again.
  std::vector<FrozenTrial> unranked = {Complete(0, {{1, 0.1}}), Complete(1, {{1, 0.2}})};
  EXPECT_FALSE(Ask(pruner, unranked, Running(3, {{1, 9}})).prune);
}

TEST(SuccessiveHalvingPruner, LatestValueNotBestIsUsed) {
  SuccessiveHalvingPruner pruner({.min_resource = 1});
  std::vector<FrozenTrial> others = {AtRung0(0, 1.0)};
  PruneDecision d = Ask(pruner, others, Running(1, {{0, 0.1}, {1, 5.0}}));
  EXPECT_TRUE(d.prune);  // 5.0 (latest) > 1.0, although 0.1 was better
  EXPECT_EQ(d.system_attrs, (Json{{"completed_rung_0", 5.0}}));
}

TEST(SuccessiveHalvingPruner, StepJumpPassesSeveralRungs) {
  SuccessiveHalvingPruner pruner({.min_resource = 1, .reduction_factor = 2});
  // Rungs at 1, 2, 4, 8: reporting step 5 first passes rungs 0, 1 and 2 in one call.
  PruneDecision d = Ask(pruner, {}, Running(0, {{5, 0.3}}));
  EXPECT_FALSE(d.prune);
  EXPECT_EQ(
      d.system_attrs,
      (Json{{"completed_rung_0", 0.3}, {"completed_rung_1", 0.3}, {"completed_rung_2", 0.3}}));
  // The trial already holds rung 0 and 1: it starts at rung 2 (step 4), then stops at 8.
  PruneDecision from2 = Ask(
      pruner, {},
      Running(0, {{1, 0.5}, {5, 0.3}}, Json{{"completed_rung_0", 0.5}, {"completed_rung_1", 0.5}}));
  EXPECT_FALSE(from2.prune);
  EXPECT_EQ(from2.system_attrs, (Json{{"completed_rung_2", 0.3}}));
  // Promoted at rung 0 but not at rung 1: pruned, with both rungs recorded.
  std::vector<FrozenTrial> others = {
      MakeTrial(1, TrialState::kComplete, {{8, 0.1}},
                Json{{"completed_rung_1", 0.1}, {"completed_rung_0", 9.0}})};
  PruneDecision d2 = Ask(pruner, others, Running(0, {{3, 0.3}}));
  EXPECT_TRUE(d2.prune);  // rung 0: [0.3, 9] promoted; rung 1: [0.1, 0.3] -> 0.3 > 0.1
  EXPECT_EQ(d2.system_attrs, (Json{{"completed_rung_0", 0.3}, {"completed_rung_1", 0.3}}));
}

TEST(SuccessiveHalvingPruner, MinEarlyStoppingRateShiftsTheFirstRung) {
  // r = 2, eta = 3, s = 1: rung 0 at 2 * 3 = 6.
  SuccessiveHalvingPruner pruner(
      {.min_resource = 2, .reduction_factor = 3, .min_early_stopping_rate = 1});
  EXPECT_TRUE(Ask(pruner, {}, Running(0, {{5, 1.0}})).system_attrs.empty());
  EXPECT_EQ(Ask(pruner, {}, Running(0, {{6, 1.0}})).system_attrs,
            (Json{{"completed_rung_0", 1.0}}));
}

TEST(SuccessiveHalvingPruner, BootstrapCount) {
  SuccessiveHalvingPruner pruner({.min_resource = 1, .reduction_factor = 2, .bootstrap_count = 2});
  // Pruned while the rung holds <= 2 values, this one included.
  EXPECT_TRUE(Ask(pruner, {}, Running(0, {{1, 0.1}})).prune);
  EXPECT_TRUE(Ask(pruner, {AtRung0(0, 0.5)}, Running(1, {{1, 0.1}})).prune);
  // Three values: the usual rule (idx = 3 // 2 - 1 = 0).
  EXPECT_FALSE(Ask(pruner, {AtRung0(0, 0.5), AtRung0(1, 0.7)}, Running(2, {{1, 0.1}})).prune);
}

TEST(SuccessiveHalvingPruner, NanIsPrunedAtAPromotionStep) {
  SuccessiveHalvingPruner pruner({.min_resource = 2});
  EXPECT_FALSE(Ask(pruner, {}, Running(0, {{1, kNaN}})).prune);  // before the rung: kept
  PruneDecision d = Ask(pruner, {}, Running(0, {{2, kNaN}}));
  EXPECT_TRUE(d.prune);
  EXPECT_TRUE(d.system_attrs.empty());
}

TEST(SuccessiveHalvingPruner, AutoMinResource) {
  SuccessiveHalvingPruner pruner({});  // min_resource "auto"
  // No COMPLETE trial with reports: never prune, nothing fixed.
  std::vector<FrozenTrial> others = {MakeTrial(0, TrialState::kPruned, {{500, 9.0}}),
                                     MakeTrial(1, TrialState::kComplete, {})};
  EXPECT_FALSE(Ask(pruner, others, Running(2, {{1, 100.0}})).prune);
  EXPECT_FALSE(pruner.min_resource().has_value());
  // A COMPLETE trial with last step 250: r = max(250 // 100, 1) = 2.
  others.push_back(Complete(3, {{250, 0.1}}));
  PruneDecision d = Ask(pruner, others, Running(2, {{1, 100.0}}));
  EXPECT_FALSE(d.prune);  // step 1 < 2
  EXPECT_EQ(pruner.min_resource(), 2);
  EXPECT_EQ(Ask(pruner, others, Running(2, {{2, 100.0}})).system_attrs,
            (Json{{"completed_rung_0", 100.0}}));
  // Fixed once: a longer COMPLETE trial later changes nothing.
  others.push_back(Complete(4, {{1000, 0.1}}));
  Ask(pruner, others, Running(2, {{2, 100.0}}));
  EXPECT_EQ(pruner.min_resource(), 2);
  // Short trials: max(50 // 100, 1) = 1.
  SuccessiveHalvingPruner short_trials({});
  Ask(short_trials, {Complete(0, {{50, 0.1}})}, Running(1, {{0, 1.0}}));
  EXPECT_EQ(short_trials.min_resource(), 1);
}

// ---------------------------------------------------------------------------------------------
// Hyperband

TEST(HyperbandPruner, Crc32IsZlibs) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(Crc32(""), 0u);
  // /usr/bin/python3 -c 'import zlib;print([zlib.crc32(f"study_{i}".encode()) for i in
  // range(4)], zlib.crc32(b"s_0"))'
  EXPECT_EQ(Crc32("study_0"), 368277276u);
  EXPECT_EQ(Crc32("study_1"), 1660176266u);
  EXPECT_EQ(Crc32("study_2"), 4227667504u);
  EXPECT_EQ(Crc32("study_3"), 2365204134u);
  EXPECT_EQ(Crc32("s_0"), 2987163180u);
}

// Initialises `pruner` (brackets are built at the first Prune call, as in Optuna).
void Initialize(HyperbandPruner& pruner, const std::string& study_name = "hb") {
  Ask(pruner, {}, Running(0, {{0, 1.0}}), kMin, study_name);
}

TEST(HyperbandPruner, BracketsAndBudgets) {
  // max 9, eta 3: n_brackets = floor(log_3 9) + 1 = 3; budgets ceil(3 * 3^s / (s + 1)) for
  // s = 2, 1, 0: 9, 5, 3.
  HyperbandPruner pruner({.max_resource = 9});
  EXPECT_EQ(pruner.name(), "hyperband");
  EXPECT_EQ(pruner.n_brackets(), 0);
  Initialize(pruner);
  EXPECT_EQ(pruner.n_brackets(), 3);
  EXPECT_EQ(pruner.budgets(), (std::vector<int64_t>{9, 5, 3}));
  // max 81: 5 brackets, budgets 81, ceil(5*27/4) = 34, 15, ceil(15/2) = 8, 5.
  HyperbandPruner p81({.max_resource = 81});
  Initialize(p81);
  EXPECT_EQ(p81.budgets(), (std::vector<int64_t>{81, 34, 15, 8, 5}));
  // Python's math.log(243, 3) is 4.999999999999999, so Optuna makes 5 brackets, not 6.
  HyperbandPruner p243({.max_resource = 243});
  Initialize(p243);
  EXPECT_EQ(p243.n_brackets(), 5);
  // min_resource scales: 27 / 3 = 9 -> 3 brackets.
  HyperbandPruner p27({.min_resource = 3, .max_resource = 27});
  Initialize(p27);
  EXPECT_EQ(p27.n_brackets(), 3);
}

TEST(HyperbandPruner, BracketOfATrial) {
  HyperbandPruner pruner({.max_resource = 9});
  EXPECT_EQ(pruner.BracketId("hb", 2), 0);  // not initialised: everyone is in bracket 0
  Initialize(pruner);
  // crc32("hb_<n>") % 17 for n = 0..9 is 7, 0, 16, 16, 9, 11, 11, 14, 13, 5 (zlib.crc32); the
  // cumulative budgets 9, 14, 17 map 0..8 -> 0, 9..13 -> 1, 14..16 -> 2. Same as Optuna's
  // HyperbandPruner._get_bracket_id (run with optuna 3.1).
  std::vector<int> expected = {0, 0, 2, 2, 1, 1, 1, 2, 1, 0};
  for (int n = 0; n < 10; ++n) EXPECT_EQ(pruner.BracketId("hb", n), expected[n]) << n;
  // max 81 (total budget 143), from Optuna as above.
  HyperbandPruner p81({.max_resource = 81});
  Initialize(p81);
  std::vector<int> expected81 = {0, 1, 0, 3, 0, 0, 0, 1, 1, 1, 1, 0, 3, 3, 0, 0, 0, 2, 0, 0};
  for (int n = 0; n < 20; ++n) EXPECT_EQ(p81.BracketId("hb", n), expected81[n]) << n;
}

TEST(HyperbandPruner, CompetitorsComeFromTheSameBracket) {
  // max 9: bracket 0 holds trials 0, 1, 9; bracket 1 holds 4, 5, 6, 8; bracket 2 holds 2, 3, 7.
  // Bracket 0 is SH(min_resource 1, eta 3, min_early_stopping_rate 0): rung 0 at step 1.
  HyperbandPruner pruner({.max_resource = 9});
  std::vector<FrozenTrial> others = {AtRung0(0, 1.0), AtRung0(4, 0.1), AtRung0(5, 0.2)};
  // Bracket 0 only: competing [0.5, 1] -> promoted. With trials 4 and 5 (bracket 1) it would be
  // [0.1, 0.2, 0.5, 1] -> idx 0 -> pruned.
  PruneDecision d = Ask(pruner, others, Running(1, {{1, 0.5}}), kMin, "hb");
  EXPECT_FALSE(d.prune);
  EXPECT_EQ(d.system_attrs, (Json{{"completed_rung_0", 0.5}}));
  EXPECT_TRUE(Ask(pruner, others, Running(1, {{1, 1.5}}), kMin, "hb").prune);
  // Trial 4 is in bracket 1, whose first rung is at 1 * 3^1 = 3: no check at step 1.
  PruneDecision d4 = Ask(pruner, {AtRung0(0, 0.1)}, Running(4, {{1, 9.0}}), kMin, "hb");
  EXPECT_FALSE(d4.prune);
  EXPECT_TRUE(d4.system_attrs.empty());
  // Trial 2 is in bracket 2: first rung at 9.
  EXPECT_TRUE(Ask(pruner, {}, Running(2, {{8, 9.0}}), kMin, "hb").system_attrs.empty());
  EXPECT_EQ(Ask(pruner, {}, Running(2, {{9, 9.0}}), kMin, "hb").system_attrs,
            (Json{{"completed_rung_0", 9.0}}));
}

TEST(HyperbandPruner, SamplerHistoryKeepsTheBracket) {
  HyperbandPruner pruner({.max_resource = 9});
  std::vector<FrozenTrial> trials;
  for (int n = 0; n < 10; ++n) trials.push_back(Complete(n, Curve({1.0})));
  auto history = std::make_shared<const TrialHistory>(MakeHistory(trials, kMin, "hb"));
  // Before the first Prune call (Optuna: _get_bracket_id is 0 for all): the whole history.
  EXPECT_EQ(pruner.SamplerHistory(history, Running(2, {})), history);

  Initialize(pruner);
  auto filtered = pruner.SamplerHistory(history, Running(2, {}));  // bracket 2: 2, 3, 7
  std::vector<int64_t> numbers;
  for (const auto& t : filtered->trials) numbers.push_back(t->number);
  EXPECT_EQ(numbers, (std::vector<int64_t>{2, 3, 7}));
  EXPECT_EQ(filtered->study_name, "hb");
  EXPECT_EQ(filtered->directions, history->directions);
  EXPECT_EQ(filtered->snapshot_id, 7u | (1ull << 63));
  // The filtered history shares the trial objects.
  EXPECT_EQ(filtered->trials[0], history->trials[2]);

  auto unknown = std::make_shared<TrialHistory>(*history);
  unknown->snapshot_id = 0;
  EXPECT_EQ(pruner.SamplerHistory(unknown, Running(10, {}))->snapshot_id, 0u);
}

TEST(HyperbandPruner, AutoMaxResource) {
  HyperbandPruner pruner({});  // max_resource "auto"
  // No COMPLETE trial with reports yet: no brackets, no pruning.
  EXPECT_FALSE(
      Ask(pruner, {AtRung0(0, 0.1, TrialState::kPruned)}, Running(1, {{1, 9.0}}), kMin, "hb")
          .prune);
  EXPECT_EQ(pruner.n_brackets(), 0);
  EXPECT_FALSE(pruner.max_resource().has_value());
  // A COMPLETE trial with last step 8: max_resource = 9 -> 3 brackets.
  std::vector<FrozenTrial> others = {Complete(0, Curve({1, 1, 1, 1, 1, 1, 1, 1, 1}))};
  Ask(pruner, others, Running(1, {{0, 1.0}}), kMin, "hb");
  EXPECT_EQ(pruner.max_resource(), 9);
  EXPECT_EQ(pruner.budgets(), (std::vector<int64_t>{9, 5, 3}));
  // Fixed: later, longer trials change nothing.
  others.push_back(Complete(2, Curve(std::vector<double>(100, 1.0))));
  Ask(pruner, others, Running(1, {{0, 1.0}}), kMin, "hb");
  EXPECT_EQ(pruner.max_resource(), 9);
}

// ---------------------------------------------------------------------------------------------
// Patient

// Counts calls and answers `prune`.
class SpyPruner : public Pruner {
 public:
  explicit SpyPruner(bool prune, int* calls) : prune_(prune), calls_(calls) {}
  std::string name() const override { return "spy"; }
  PruneDecision Prune(const TrialHistory&, const FrozenTrial&) override {
    ++*calls_;
    return {.prune = prune_, .system_attrs = Json{{"spy", true}}};
  }

 private:
  bool prune_;
  int* calls_;
};

TEST(PatientPruner, PrunesAfterPatienceWithoutImprovement) {
  PatientPruner pruner(nullptr, {.patience = 2});
  EXPECT_EQ(pruner.name(), "patient");
  // patience 2: needs > 3 steps. Window = the last 3 values, "before" = the rest.
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({3, 4, 5}))).prune);  // only 3 steps
  // before [3], window [4, 4.5, 4.2]: 3 + 0 < 4 -> no improvement -> prune.
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({3, 4, 4.5, 4.2}))).prune);
  // before [5], window min 4 < 5: improved -> keep.
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({5, 4, 4.5, 4.2}))).prune);
  // Equal is not worse (strict <): keep.
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({4, 4, 4.5, 4.2}))).prune);
  // Steps are sorted: before = steps 0..2, window = steps 3..5.
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({9, 1, 9, 2, 3, 2}))).prune);
  // Maximize: nanmax(before) - min_delta > nanmax(window).
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({5, 4, 4.5, 4.2})), kMax).prune);
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({3, 4, 4.5, 4.2})), kMax).prune);
}

TEST(PatientPruner, MinDeltaToleratesSmallDegradation) {
  // Minimize: prune iff the window's best exceeds the earlier best by more than min_delta.
  PatientPruner pruner(nullptr, {.patience = 1, .min_delta = 0.1});
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({5, 5.05, 5.08}))).prune);        // 5.1 < 5.05? no
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({5, 5.2, 5.3}))).prune);           // 5.1 < 5.2
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({5, 4.95, 5.08})), kMax).prune);  // 4.9 > 5.08?
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({5, 4.8, 4.85})), kMax).prune);    // 4.9 > 4.85
  // All-NaN window: numpy's NaN makes the comparison false: keep.
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({5, kNaN, kNaN}))).prune);
}

TEST(PatientPruner, WrappedPrunerDecidesOnlyWithoutImprovement) {
  int calls = 0;
  PatientPruner keep(std::make_unique<SpyPruner>(false, &calls), {.patience = 1});
  // Improving: the wrapped pruner is not asked.
  EXPECT_FALSE(Ask(keep, {}, Running(0, Curve({5, 4, 3}))).prune);
  EXPECT_EQ(calls, 0);
  // Not improving: the wrapped pruner's answer (and attrs) is the answer.
  PruneDecision d = Ask(keep, {}, Running(0, Curve({3, 4, 5})));
  EXPECT_FALSE(d.prune);
  EXPECT_EQ(d.system_attrs, (Json{{"spy", true}}));
  EXPECT_EQ(calls, 1);
  PatientPruner prune(std::make_unique<SpyPruner>(true, &calls), {.patience = 1});
  EXPECT_TRUE(Ask(prune, {}, Running(0, Curve({3, 4, 5}))).prune);
  EXPECT_EQ(calls, 2);
  // A wrapped NopPruner never prunes.
  PatientPruner nop(std::make_unique<NopPruner>(), {.patience = 0});
  EXPECT_FALSE(Ask(nop, {}, Running(0, Curve({1, 9}))).prune);
}

// ---------------------------------------------------------------------------------------------
// Threshold

TEST(ThresholdPruner, BoundsAndNan) {
  ThresholdPruner pruner({.lower = 0.0, .upper = 1.0});
  EXPECT_EQ(pruner.name(), "threshold");
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({0.5}))).prune);
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({0.0}))).prune);  // bounds are inclusive
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({1.0}))).prune);
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({1.5}))).prune);
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({-0.1}))).prune);
  EXPECT_TRUE(Ask(pruner, {}, Running(0, Curve({kNaN}))).prune);
  // Only the latest value counts.
  EXPECT_FALSE(Ask(pruner, {}, Running(0, Curve({9, 0.5}))).prune);
  // One bound only.
  ThresholdPruner upper({.upper = 1.0});
  EXPECT_FALSE(Ask(upper, {}, Running(0, Curve({-1e9}))).prune);
  EXPECT_TRUE(Ask(upper, {}, Running(0, Curve({2}))).prune);
  // No direction needed: works in a multi-objective study.
  TrialHistory h = MakeHistory({Running(0, Curve({2}))});
  h.directions = {kMin, kMax};
  EXPECT_TRUE(upper.Prune(h, Running(0, Curve({2}))).prune);
}

TEST(ThresholdPruner, WarmupAndInterval) {
  ThresholdPruner warm({.upper = 1.0, .n_warmup_steps = 2});
  EXPECT_FALSE(Ask(warm, {}, Running(0, Curve({5, 5}))).prune);  // step 1 < 2
  EXPECT_TRUE(Ask(warm, {}, Running(0, Curve({5, 5, 5}))).prune);
  ThresholdPruner every2({.upper = 1.0, .interval_steps = 2});
  EXPECT_TRUE(Ask(every2, {}, Running(0, Curve({5}))).prune);        // boundary 0
  EXPECT_FALSE(Ask(every2, {}, Running(0, Curve({0, 5}))).prune);    // step 1: gated
  EXPECT_TRUE(Ask(every2, {}, Running(0, Curve({0, 0, 5}))).prune);  // boundary 2
  EXPECT_TRUE(Ask(every2, {}, Running(0, {{0, 0}, {3, 5}})).prune);  // 2 never checked
}

// ---------------------------------------------------------------------------------------------
// Config

Result<std::unique_ptr<Pruner>> FromConfig(const std::string& json) {
  Json doc = Json::parse(json);
  PrunerConfig config;
  config.name = doc.at("name").get<std::string>();
  doc.erase("name");
  config.options = doc;
  config.source = "study.json";
  return MakePruner(config);
}

void ExpectConfigError(const std::string& json, const std::vector<std::string>& parts) {
  auto r = FromConfig(json);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  for (const auto& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "missing '" << p << "' in: " << r.status().message();
  }
}

TEST(PrunerConfig, NamesAndOptions) {
  EXPECT_EQ(PrunerNames(),
            (std::vector<std::string>{"nop", "median", "percentile", "successive_halving",
                                      "hyperband", "threshold", "patient"}));
  auto median = FromConfig(R"({"name": "median", "n_startup_trials": 3, "n_warmup_steps": 2,
                               "interval_steps": 4, "n_min_trials": 2})");
  ASSERT_TRUE(median.ok()) << median.status().ToString();
  EXPECT_EQ((*median)->name(), "median");
  const auto& mo = dynamic_cast<const MedianPruner&>(**median).options();
  EXPECT_EQ(mo.percentile, 50);
  EXPECT_EQ(mo.n_startup_trials, 3);
  EXPECT_EQ(mo.n_warmup_steps, 2);
  EXPECT_EQ(mo.interval_steps, 4);
  EXPECT_EQ(mo.n_min_trials, 2);

  auto percentile = FromConfig(R"({"name": "percentile", "percentile": 25})");
  ASSERT_TRUE(percentile.ok()) << percentile.status().ToString();
  const auto& po = dynamic_cast<const PercentilePruner&>(**percentile).options();
  EXPECT_EQ(po.percentile, 25);
  EXPECT_EQ(po.n_startup_trials, 5);  // Optuna's defaults
  EXPECT_EQ(po.n_warmup_steps, 0);
  EXPECT_EQ(po.interval_steps, 1);
  EXPECT_EQ(po.n_min_trials, 1);

  auto sh = FromConfig(R"({"name": "successive_halving"})");
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  const auto& so = dynamic_cast<const SuccessiveHalvingPruner&>(**sh).options();
  EXPECT_FALSE(so.min_resource.has_value());  // "auto"
  EXPECT_EQ(so.reduction_factor, 4);
  EXPECT_EQ(so.min_early_stopping_rate, 0);
  EXPECT_EQ(so.bootstrap_count, 0);
  auto sh2 = FromConfig(R"({"name": "successive_halving", "min_resource": 3, "bootstrap_count": 1,
                            "reduction_factor": 2, "min_early_stopping_rate": 1})");
  ASSERT_TRUE(sh2.ok()) << sh2.status().ToString();
  EXPECT_EQ(dynamic_cast<const SuccessiveHalvingPruner&>(**sh2).options().min_resource, 3);
  ASSERT_TRUE(FromConfig(R"({"name": "successive_halving", "min_resource": "auto"})").ok());

  auto hb = FromConfig(R"({"name": "hyperband", "min_resource": 2, "max_resource": 100})");
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_EQ(dynamic_cast<const HyperbandPruner&>(**hb).max_resource(), 100);
  auto hb_auto = FromConfig(R"({"name": "hyperband"})");
  ASSERT_TRUE(hb_auto.ok());
  EXPECT_FALSE(dynamic_cast<const HyperbandPruner&>(**hb_auto).max_resource().has_value());

  auto threshold = FromConfig(R"({"name": "threshold", "lower": -1, "n_warmup_steps": 3})");
  ASSERT_TRUE(threshold.ok()) << threshold.status().ToString();
  const auto& to = dynamic_cast<const ThresholdPruner&>(**threshold).options();
  EXPECT_EQ(to.lower, -1.0);
  EXPECT_FALSE(to.upper.has_value());
  EXPECT_EQ(to.n_warmup_steps, 3);

  auto patient = FromConfig(R"({"name": "patient", "patience": 3, "min_delta": 0.5,
                                "wrapped": {"name": "median", "n_startup_trials": 1}})");
  ASSERT_TRUE(patient.ok()) << patient.status().ToString();
  const auto& pa = dynamic_cast<const PatientPruner&>(**patient);
  EXPECT_EQ(pa.options().patience, 3);
  EXPECT_EQ(pa.options().min_delta, 0.5);
  ASSERT_NE(pa.wrapped(), nullptr);
  EXPECT_EQ(pa.wrapped()->name(), "median");
  auto alone = FromConfig(R"({"name": "patient", "patience": 0, "wrapped": null})");
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(dynamic_cast<const PatientPruner&>(**alone).wrapped(), nullptr);
}

TEST(PrunerConfig, Errors) {
  ExpectConfigError(R"({"name": "medain"})", {"study.json: /pruner/name", "unknown pruner 'medain'",
                                              "did you mean 'median'?", "valid: nop, median"});
  ExpectConfigError(R"({"name": "median", "n_warmup_step": 1})",
                    {"/pruner/n_warmup_step", "did you mean 'n_warmup_steps'?"});
  ExpectConfigError(R"({"name": "median", "percentile": 40})",
                    {"/pruner/percentile", "unknown key"});
  ExpectConfigError(R"({"name": "median", "interval_steps": 0})",
                    {"/pruner/interval_steps", "must be an integer >= 1, got 0"});
  ExpectConfigError(R"({"name": "median", "n_startup_trials": -1})",
                    {"/pruner/n_startup_trials", ">= 0"});
  ExpectConfigError(R"({"name": "median", "n_warmup_steps": 1.5})",
                    {"/pruner/n_warmup_steps", "expected an integer"});
  ExpectConfigError(R"({"name": "median", "n_min_trials": 0})", {"/pruner/n_min_trials", ">= 1"});
  ExpectConfigError(R"({"name": "percentile"})", {"missing required key 'percentile'"});
  ExpectConfigError(R"({"name": "percentile", "percentile": 101})",
                    {"/pruner/percentile", "between 0 and 100"});
  ExpectConfigError(R"({"name": "successive_halving", "min_resource": "automatic"})",
                    {"/pruner/min_resource", "must be \"auto\" or an integer >= 1"});
  ExpectConfigError(R"({"name": "successive_halving", "min_resource": 0})",
                    {"/pruner/min_resource", "must be \"auto\" or an integer >= 1, got 0"});
  ExpectConfigError(R"({"name": "successive_halving", "reduction_factor": 1})",
                    {"/pruner/reduction_factor", ">= 2"});
  ExpectConfigError(R"({"name": "successive_halving", "bootstrap_count": 2})",
                    {"/pruner/bootstrap_count", "min_resource is \"auto\""});
  ExpectConfigError(R"({"name": "hyperband", "bootstrap_count": 2})",
                    {"/pruner/bootstrap_count", "max_resource is \"auto\""});
  ExpectConfigError(R"({"name": "hyperband", "min_resource": 10, "max_resource": 5})",
                    {"/pruner/max_resource", ">= min_resource (10), got 5"});
  ExpectConfigError(R"({"name": "hyperband", "max_resource": [1]})",
                    {"/pruner/max_resource", "must be \"auto\" or an integer"});
  ExpectConfigError(R"({"name": "threshold"})", {"/pruner", "'lower', 'upper' or both"});
  ExpectConfigError(R"({"name": "threshold", "lower": 2, "upper": 1})",
                    {"/pruner/lower", "must be <= upper"});
  ExpectConfigError(R"({"name": "threshold", "upper": "1"})",
                    {"/pruner/upper", "expected a number"});
  ExpectConfigError(R"({"name": "patient"})", {"missing required key 'patience'"});
  ExpectConfigError(R"({"name": "patient", "patience": -1})", {"/pruner/patience", ">= 0"});
  ExpectConfigError(R"({"name": "patient", "patience": 1, "min_delta": -0.1})",
                    {"/pruner/min_delta", "must be a number >= 0"});
  ExpectConfigError(R"({"name": "patient", "patience": 1, "wrapped": "median"})",
                    {"/pruner/wrapped", "expected an object"});
  ExpectConfigError(R"({"name": "patient", "patience": 1, "wrapped": {}})",
                    {"/pruner/wrapped", "missing required key 'name'"});
  ExpectConfigError(R"({"name": "patient", "patience": 1, "wrapped": {"name": "medain"}})",
                    {"/pruner/wrapped/name", "did you mean 'median'?"});
  ExpectConfigError(
      R"({"name": "patient", "patience": 1, "wrapped": {"name": "median", "n_startup": 1}})",
      {"/pruner/wrapped/n_startup", "did you mean 'n_startup_trials'?"});
  ExpectConfigError(R"({"name": "nop", "patience": 1})", {"/pruner/patience", "unknown key"});
}

TEST(PrunerConfig, StudyConfigForm) {
  Json doc = Json::parse(R"({
    "direction": "minimize",
    "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
    "objective": {"type": "function", "name": "mixed"},
    "pruner": {"name": "median", "n_startup_trials": 5, "n_warmup_steps": 2}
  })");
  auto config = ParseStudyConfig(doc, "study.json", ".");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->pruner.name, "median");
  auto pruner = MakePruner(config->pruner);
  ASSERT_TRUE(pruner.ok()) << pruner.status().ToString();
  EXPECT_EQ(dynamic_cast<const MedianPruner&>(**pruner).options().n_warmup_steps, 2);

  doc["pruner"] = Json{{"name", "median"}, {"n_warmup_step", 2}};
  auto bad = ParseStudyConfig(doc, "study.json", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("study.json: /pruner/n_warmup_step"), std::string::npos)
      << bad.status().message();
}

// ---------------------------------------------------------------------------------------------
// Through a Study

TEST(PrunerStudy, MedianPrunesBadCurvesAndKeepsTheLastValue) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = Study::CreateOrLoad(
      storage, "e2e", {kMin}, std::make_unique<RandomSampler>(),
      std::make_unique<MedianPruner>(PercentileOptions{.n_startup_trials = 2, .n_warmup_steps = 1}),
      /*seed=*/1);
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  Study& s = **study;
  // Runs a trial reporting `curve`, asking the pruner after each report as an objective would.
  auto run = [&s](const std::vector<double>& curve) {
    auto trial = std::move(s.Ask()).value();
    EXPECT_TRUE(trial->SuggestFloat("x", 0, 1).ok());
    for (size_t step = 0; step < curve.size(); ++step) {
      EXPECT_TRUE(trial->Report(curve[step], static_cast<int64_t>(step)).ok());
      auto prune = trial->ShouldPrune();
      EXPECT_TRUE(prune.ok());
      if (*prune) return *s.Tell(*trial, TrialState::kPruned);
    }
    return *s.Tell(*trial, TrialState::kComplete, {curve.back()});
  };
  // Two good curves complete (startup); median at step 1 is 0.85, at step 2 0.75.
  EXPECT_EQ(run({1.0, 0.9, 0.8}).state, TrialState::kComplete);
  EXPECT_EQ(run({1.0, 0.8, 0.7}).state, TrialState::kComplete);
  // A bad curve: step 0 is warmup, step 1 (best 2.0 > 0.85) prunes it.
  FrozenTrial bad = run({2.0, 2.5, 0.1});
  EXPECT_EQ(bad.state, TrialState::kPruned);
  EXPECT_EQ(bad.values, std::vector<double>{2.5});  // the last intermediate value
  EXPECT_EQ(bad.intermediate_values.size(), 2u);
  // A curve as good as the others is not pruned.
  EXPECT_EQ(run({1.0, 0.8, 0.6}).state, TrialState::kComplete);
  auto pruned = s.Trials({TrialState::kPruned});
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned->size(), 1u);
}

TEST(PrunerStudy, SuccessiveHalvingRungAttrsAreStored) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study =
      Study::CreateOrLoad(storage, "asha", {kMin}, std::make_unique<RandomSampler>(),
                          std::make_unique<SuccessiveHalvingPruner>(
                              SuccessiveHalvingOptions{.min_resource = 1, .reduction_factor = 2}),
                          /*seed=*/1);
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  Study& s = **study;
  auto first = std::move(s.Ask()).value();
  ASSERT_TRUE(first->Report(0.5, 2).ok());  // passes the rungs at steps 1 and 2
  EXPECT_FALSE(*first->ShouldPrune());
  FrozenTrial stored = *first->Snapshot();
  EXPECT_EQ(stored.system_attrs.value("completed_rung_0", -1.0), 0.5);
  EXPECT_EQ(stored.system_attrs.value("completed_rung_1", -1.0), 0.5);
  EXPECT_FALSE(stored.system_attrs.contains("completed_rung_2"));
  EXPECT_FALSE(stored.system_attrs.contains(attrs::kPrunedBy));  // kept: no pruner named
  ASSERT_TRUE(s.Tell(*first, TrialState::kComplete, {0.5}).ok());
  // A worse second trial at rung 0: competing [0.5, 0.9], idx 0 -> pruned.
  auto second = std::move(s.Ask()).value();
  ASSERT_TRUE(second->Report(0.9, 1).ok());
  EXPECT_TRUE(*second->ShouldPrune());
  EXPECT_EQ(second->Snapshot()->system_attrs.value("completed_rung_0", -1.0), 0.9);
  // The pruner that said prune is recorded on the trial, in the storage (the trackers' tag).
  EXPECT_EQ(second->Snapshot()->system_attrs.value(attrs::kPrunedBy, ""), "successive_halving");
  auto reread = storage->GetTrial(second->trial_id());
  ASSERT_TRUE(reread.ok());
  EXPECT_EQ(reread->system_attrs.value(attrs::kPrunedBy, ""), "successive_halving");
}

}  // namespace
}  // namespace tune

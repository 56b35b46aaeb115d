// PED-ANOVA importances on hand-made trial lists. (Against Optuna 4.9 on real studies:
// tests/report/importance_test.py.)
#include "tune/importance.h"

#include <gtest/gtest.h>

#include <random>

namespace tune {
namespace {

FrozenTrial Complete(int64_t number, double value, std::map<std::string, double> params,
                     std::map<std::string, Distribution> dists) {
  FrozenTrial t;
  t.number = number;
  t.state = TrialState::kComplete;
  t.values = {value};
  t.params = std::move(params);
  t.distributions = std::move(dists);
  return t;
}

const std::map<std::string, Distribution> kSpace = {
    {"x", FloatDistribution{0, 1}},
    {"n", IntDistribution{1, 64, /*log=*/true}},
    {"opt", CategoricalDistribution{{"adam", "sgd"}}},
    {"fixed", FloatDistribution{2, 2}}};

// x decides the value; n and opt are noise; fixed is a single value.
std::vector<FrozenTrial> Trials(int count) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<FrozenTrial> trials;
  for (int i = 0; i < count; ++i) {
    double x = u(rng), n = std::floor(1 + 63 * u(rng)), opt = u(rng) < 0.5 ? 0 : 1;
    trials.push_back(Complete(i, x * x, {{"x", x}, {"n", n}, {"opt", opt}, {"fixed", 2}}, kSpace));
  }
  return trials;
}

TEST(PedAnova, TheParameterThatDecidesTheValueComesFirst) {
  const auto imp = PedAnovaImportances(Trials(200), StudyDirection::kMinimize);
  ASSERT_EQ(imp.size(), 4u);
  EXPECT_EQ(imp[0].name, "x");
  EXPECT_GT(imp[0].importance, 0.8);
  double sum = 0;
  for (const auto& p : imp) sum += p.importance;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(imp.back().name, "fixed");
  EXPECT_EQ(imp.back().importance, 0.0);
  // Maximising the same values looks at the other end of x: x still decides.
  EXPECT_EQ(PedAnovaImportances(Trials(200), StudyDirection::kMaximize)[0].name, "x");
}

TEST(PedAnova, NeedsThreeCompleteTrialsAndSkipsConditionalParams) {
  EXPECT_TRUE(PedAnovaImportances(Trials(2), StudyDirection::kMinimize).empty());
  auto trials = Trials(50);
  trials[7].params.erase("opt");
  trials[7].distributions.erase("opt");
  FrozenTrial pruned = trials[8];
  pruned.state = TrialState::kPruned;
  pruned.params.erase("n");
  pruned.distributions.erase("n");
  trials.push_back(pruned);  // not COMPLETE: does not narrow the search space
  const auto imp = PedAnovaImportances(trials, StudyDirection::kMinimize);
  ASSERT_EQ(imp.size(), 3u);
  for (const auto& p : imp) EXPECT_NE(p.name, "opt");
}

}  // namespace
}  // namespace tune

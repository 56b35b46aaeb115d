// samplers/multi_objective.h on populations small enough to check by hand (the differential test
// tests/differential/multi_objective_diff.py compares the same functions with Optuna 4.9).
#include "samplers/multi_objective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(NondominationRank, PeelsFrontsAndStopsAfterNBelow) {
  // Fronts: {a, b} (a = (0, 2), b = (2, 0)), then c = (1, 3) and d = (3, 1), then e = (4, 4).
  const LossPoints p{{0, 2}, {2, 0}, {1, 3}, {3, 1}, {4, 4}};
  EXPECT_EQ(NondominationRank(p), (std::vector<int>{0, 0, 1, 1, 2}));
  // Two fronts rank 4 points; everything after gets the next rank.
  EXPECT_EQ(NondominationRank(p, 3), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(NondominationRank(p, 2), (std::vector<int>{0, 0, 1, 1, 1}));
  // Copies share a rank.
  EXPECT_EQ(NondominationRank({{1, 1}, {1, 1}, {2, 2}}), (std::vector<int>{0, 0, 1}));
}

TEST(NondominationRank, PenaltiesRankFeasibleThenInfeasibleThenUnknown) {
  const LossPoints p{{0, 0}, {1, 1}, {5, 5}, {-1, -1}, {2, 2}};
  // Feasible: 1 and 2 (ranks 0, 1); infeasible by penalty: 3 (0.5) before 0 (2.0); NaN: 4.
  const std::vector<int> r = FastNondominationRank(p, {2.0, 0.0, -1.0, 0.5, kNaN});
  EXPECT_EQ(r, (std::vector<int>{3, 0, 1, 2, 4}));
}

TEST(IsParetoFront, KeepsEveryCopyOfAFrontPoint) {
  const std::vector<char> f = IsParetoFront({{1, 2}, {2, 1}, {1, 2}, {2, 2}});
  EXPECT_EQ(f, (std::vector<char>{1, 1, 1, 0}));
}

TEST(ReferencePoint, ScalesTheWorstValueAwayFromTheFront) {
  const std::vector<double> r = ReferencePoint({{1.0, -2.0, 0.0}, {3.0, -4.0, 0.0}});
  EXPECT_DOUBLE_EQ(r[0], 3.3);   // 1.1 * 3
  EXPECT_DOUBLE_EQ(r[1], -1.8);  // 0.9 * -2: above -2 as well
  EXPECT_DOUBLE_EQ(r[2], 1e-12);
}

TEST(SolveHssp, TwoObjectivesPicksTheLargestContributionsGreedily) {
  // Reference (10, 10): (1, 9) adds 9, (5, 5) adds 25, (9, 1) adds 9; after (5, 5) the ends
  // add 4 each, and the first of equal contributions wins.
  const LossPoints p{{1, 9}, {5, 5}, {9, 1}};
  EXPECT_EQ(SolveHssp(p, {10, 11, 12}, 1, {10, 10}), (std::vector<int64_t>{11}));
  EXPECT_EQ(SolveHssp(p, {10, 11, 12}, 2, {10, 10}), (std::vector<int64_t>{11, 10}));
  // Fewer distinct points than asked: every distinct point, then the first copies.
  EXPECT_EQ(SolveHssp({{1, 1}, {1, 1}, {2, 0}}, {7, 8, 9}, 3, {3, 3}).size(), 3u);
}

TEST(SplitBelowMultiObjective, WholeFrontsThenHsspOnTheNext) {
  // Front 0 = {0, 1}; front 1 = {2, 3, 4}: one of it by hypervolume, the middle point (1, 1)
  // (relative to front 1's reference (3.3, 3.3) it adds the most).
  const LossPoints p{{0, 0.5}, {0.5, 0}, {0.2, 3}, {1, 1}, {3, 0.2}};
  EXPECT_EQ(SplitBelowMultiObjective(p, 3), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(SplitBelowMultiObjective(p, 2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(SplitBelowMultiObjective(p, 5).size(), 5u);
}

TEST(BelowWeightsMultiObjective, ContributionsOverTheLargest) {
  // Reference (3.3, 3.3) from the worst (3, 3): (0, 3) and (3, 0) each add 0.3 * 3.3 alone, (1, 1)
  // adds 2 * 2 + ... ; the dominated (2, 2) and the infeasible point get the floor.
  const LossPoints p{{0, 3}, {1, 1}, {3, 0}, {2, 2}, {0, 0}};
  const std::vector<double> w = BelowWeightsMultiObjective(p, {1, 1, 1, 1, 0});
  EXPECT_DOUBLE_EQ(w[1], 1.0);
  EXPECT_NEAR(w[0], w[2], 1e-15);
  EXPECT_GT(w[0], 1e-3);
  EXPECT_LT(w[0], 1.0);
  EXPECT_EQ(w[3], 1e-12);
  EXPECT_EQ(w[4], 1e-12);
  // One feasible point: weight 1.
  EXPECT_EQ(BelowWeightsMultiObjective({{1, 1}, {0, 0}}, {1, 0}), (std::vector<double>{1, 1e-12}));
}

TEST(CrowdingDistance, EndsAreInfiniteInnerPointsSumNormalisedGaps) {
  const LossPoints p{{0, 4}, {1, 3}, {3, 1}, {4, 0}};
  std::vector<size_t> order;
  const std::vector<double> d = CrowdingDistance(p, &order);
  EXPECT_TRUE(std::isinf(d[0]) && std::isinf(d[3]));
  EXPECT_DOUBLE_EQ(d[1], 3.0 / 4 + 3.0 / 4);
  EXPECT_DOUBLE_EQ(d[2], 3.0 / 4 + 3.0 / 4);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_TRUE(std::isinf(d[order[0]]) && std::isinf(d[order[1]]));
}

}  // namespace
}  // namespace tune

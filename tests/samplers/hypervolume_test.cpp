#include "samplers/hypervolume.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tune {
namespace {

using Points = std::vector<std::vector<double>>;

// The unit cells [c, c + 1) of the grid {0..side-1}^d below the reference (side, ..., side)
// that some point dominates (p <= c in every coordinate): the hypervolume of integer points.
double CountDominatedCells(const Points& points, int d, int side) {
  int64_t cells = 1;
  for (int k = 0; k < d; ++k) cells *= side;
  double n = 0;
  for (int64_t index = 0; index < cells; ++index) {
    std::vector<double> c(static_cast<size_t>(d));
    for (int64_t k = 0, rest = index; k < d; ++k, rest /= side) {
      c[static_cast<size_t>(k)] = static_cast<double>(rest % side);
    }
    for (const auto& p : points) {
      bool below = true;
      for (int k = 0; k < d; ++k)
        below = below && p[static_cast<size_t>(k)] <= c[static_cast<size_t>(k)];
      if (below) {
        n += 1;
        break;
      }
    }
  }
  return n;
}

TEST(Hypervolume, TwoDimensionsIsAStaircaseOfRectangles) {
  // Boxes up to (4, 4): 3 x 1 + 2 x 1 + 1 x 1.
  EXPECT_DOUBLE_EQ(*Hypervolume({{1, 3}, {2, 2}, {3, 1}}, {4, 4}), 6.0);
  // A dominated point and a duplicate change nothing.
  EXPECT_DOUBLE_EQ(*Hypervolume({{2, 3}, {1, 3}, {3, 1}, {2, 2}, {1, 3}}, {4, 4}), 6.0);
  EXPECT_EQ(ParetoFront({{2, 3}, {1, 3}, {3, 1}, {2, 2}, {1, 3}}),
            (Points{{1, 3}, {2, 2}, {3, 1}}));
}

TEST(Hypervolume, TwoBoxesAreTheirSumLessTheirIntersection) {
  // 0.5 + 0.25 - 0.125 in 3-d (the O(n^2) sweep) and in 4-d (WFG).
  EXPECT_DOUBLE_EQ(*Hypervolume({{0, 0, 0.5}, {0.5, 0.5, 0}}, {1, 1, 1}), 0.625);
  EXPECT_DOUBLE_EQ(*Hypervolume({{0, 0, 0, 0.5}, {0.5, 0.5, 0, 0}}, {1, 1, 1, 1}), 0.625);
  EXPECT_DOUBLE_EQ(*Hypervolume({{0.25}}, {1}), 0.75);
}

TEST(Hypervolume, EqualsTheCountOfDominatedCellsOnAGrid) {
  std::mt19937 rng(7);
  for (int d = 2; d <= 5; ++d) {
    for (int rep = 0; rep < 30; ++rep) {
      std::uniform_int_distribution<int> coordinate(0, 3), count(1, 12);
      Points points(static_cast<size_t>(count(rng)));
      for (auto& p : points) {
        for (int k = 0; k < d; ++k) p.push_back(coordinate(rng));
      }
      const std::vector<double> reference(static_cast<size_t>(d), 4.0);
      EXPECT_DOUBLE_EQ(*Hypervolume(points, reference), CountDominatedCells(points, d, 4))
          << "d=" << d << " rep=" << rep;
    }
  }
}

TEST(Hypervolume, OfAFrontEqualsTheCheckedVolumeInAnyOrder) {
  // FrontHypervolume skips the checks and the filtering for points of one front (HSSP's subsets):
  // on such points, in any order, it must give exactly Hypervolume's value.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int d = 2; d <= 4; ++d) {
    for (int rep = 0; rep < 20; ++rep) {
      Points points;  // on the positive unit sphere: no point dominates another
      const int n = 1 + rep * 3;
      for (int i = 0; i < n; ++i) {
        std::vector<double> p(static_cast<size_t>(d));
        double norm = 0.0;
        for (double& v : p) {
          v = unit(rng) + 1e-3;
          norm += v * v;
        }
        for (double& v : p) v /= std::sqrt(norm);
        points.push_back(p);
      }
      const std::vector<double> reference(static_cast<size_t>(d), 1.5);
      const double checked = *Hypervolume(points, reference);
      std::shuffle(points.begin(), points.end(), rng);
      EXPECT_EQ(FrontHypervolume(points, reference), checked) << "d=" << d << " n=" << n;
    }
  }
  EXPECT_EQ(FrontHypervolume({}, {1, 1, 1}), 0.0);
  EXPECT_TRUE(
      std::isinf(FrontHypervolume({{0, 0, 0}}, {1, 1, std::numeric_limits<double>::infinity()})));
}

TEST(Hypervolume, RefusesPointsBeyondTheReferenceAndHandlesTheEdges) {
  EXPECT_FALSE(Hypervolume({{1, 5}}, {4, 4}).ok());
  EXPECT_FALSE(Hypervolume({{1, 2, 3}}, {4, 4}).ok());
  EXPECT_EQ(*Hypervolume({}, {4, 4}), 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(*Hypervolume({{1, 1}}, {inf, 4}), inf);
  EXPECT_EQ(*Hypervolume({{-inf, 1}}, {4, 4}), inf);
}

}  // namespace
}  // namespace tune

#include "util/nonfinite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

namespace tune {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// NanLastLess is a strict weak order on every pair and triple of these values (irreflexive,
// asymmetric, transitive, and its incomparability transitive), which `<` is not once a NaN is
// among them.
TEST(NonFinite, NanLastLessIsAStrictWeakOrder) {
  const std::vector<double> v = {kNan, -kInf, -1.0, 0.0, -0.0, 2.5, kInf, kNan};
  auto equiv = [](double a, double b) { return !NanLastLess(a, b) && !NanLastLess(b, a); };
  for (double a : v) {
    EXPECT_FALSE(NanLastLess(a, a));
    for (double b : v) {
      EXPECT_FALSE(NanLastLess(a, b) && NanLastLess(b, a));
      EXPECT_EQ(equiv(a, b), SameValue(a, b)) << a << " " << b;
      for (double c : v) {
        if (NanLastLess(a, b) && NanLastLess(b, c)) {
          EXPECT_TRUE(NanLastLess(a, c));
        }
        if (equiv(a, b) && equiv(b, c)) {
          EXPECT_TRUE(equiv(a, c));
        }
      }
    }
  }
}

TEST(NonFinite, SortingPutsNanAfterInfinity) {
  std::mt19937 rng(3);
  std::vector<double> v;
  for (int i = 0; i < 2000; ++i) {
    const int k = static_cast<int>(rng() % 5);
    v.push_back(k == 0 ? kNan : k == 1 ? kInf : k == 2 ? -kInf : static_cast<double>(rng() % 9));
  }
  std::sort(v.begin(), v.end(), NanLastLess);
  const auto first_nan = std::find_if(v.begin(), v.end(), [](double x) { return std::isnan(x); });
  EXPECT_TRUE(std::is_sorted(v.begin(), first_nan));
  EXPECT_TRUE(std::all_of(first_nan, v.end(), [](double x) { return std::isnan(x); }));
  EXPECT_NE(first_nan, v.begin());
  EXPECT_EQ(*(first_nan - 1), kInf);
}

TEST(NonFinite, RowsAndText) {
  EXPECT_TRUE(AllFinite(std::vector<float>{}));
  EXPECT_FALSE(AllFinite(std::vector<double>{1.0, -kInf}));
  const std::vector<float> table = {1, 2, NAN, 4, 5, 6, INFINITY, -INFINITY};  // 4 rows of 2
  EXPECT_EQ(NonFiniteRows(table, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(NonFiniteRows(table, 0), (std::vector<int64_t>{2, 6, 7}));
  EXPECT_EQ(FormatNumber(kNan), "NaN");
  EXPECT_EQ(FormatNumber(-kInf), "-inf");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
  EXPECT_EQ(ShortList({3, 5, 9}), "3, 5, 9");
  EXPECT_EQ(ShortList({1, 2, 3, 4}, 2), "1, 2 and 2 more");
}

}  // namespace
}  // namespace tune

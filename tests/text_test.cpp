// Text helpers (tune/text.h): did-you-mean suggestions and URL %-decoding.
#include "util/text.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

TEST(Text, ClosestMatchSuggestsTyposOnly) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(ClosestMatch("n_startup", {"n_startup_trials", "seed"}), "n_startup_trials");
  EXPECT_EQ(ClosestMatch("tpee", {"tpe", "random"}), "tpe");
  EXPECT_EQ(ClosestMatch("zzzzzz", {"tpe", "random"}), std::nullopt);
  EXPECT_EQ(DidYouMean("radnom", {"tpe", "random"}), " (did you mean 'random'?)");
  EXPECT_EQ(JoinNames({"a", "b", "c"}), "a, b, c");
}

TEST(Text, PercentDecode) {
  EXPECT_EQ(PercentDecode("p%40ss%2Fw%20rd"), "p@ss/w rd");
  EXPECT_EQ(PercentDecode("plain"), "plain");
  EXPECT_EQ(PercentDecode(""), "");
  EXPECT_EQ(PercentDecode("%41%4a"), "AJ");
  EXPECT_EQ(PercentDecode("bad%2"), std::nullopt);
  EXPECT_EQ(PercentDecode("bad%zz"), std::nullopt);
  EXPECT_EQ(PercentDecode("%"), std::nullopt);
}

}  // namespace
}  // namespace tune

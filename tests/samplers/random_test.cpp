#include "tune/samplers/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace tune {
namespace {

TEST(RandomSampler, StaysOnTheGridAndCoversIt) {
  Rng rng(11);
  auto ints = *MakeIntDistribution(128, 512, false, 32);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 5000; ++i) {
    double v = SampleUniform(ints, rng);
    ASSERT_TRUE(Contains(ints, v)) << v;
    ++seen[static_cast<int64_t>(v)];
  }
  EXPECT_EQ(seen.size(), 13u);                             // 128..512 step 32
  for (const auto& [v, n] : seen) EXPECT_GT(n, 250) << v;  // ~385 expected each

  auto floats = *MakeFloatDistribution(0, 1, false, 0.25);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Contains(floats, SampleUniform(floats, rng)));

  auto cats = *MakeCategoricalDistribution({"a", "b", "c"});
  std::map<double, int> c;
  for (int i = 0; i < 3000; ++i) ++c[SampleUniform(cats, rng)];
  EXPECT_EQ(c.size(), 3u);
}

TEST(RandomSampler, LogUniformIsUniformInLogSpace) {
  Rng rng(5);
  auto d = *MakeFloatDistribution(1e-6, 1e-2, true);
  int below_1e4 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double v = SampleUniform(d, rng);
    ASSERT_GE(v, 1e-6);
    ASSERT_LE(v, 1e-2);
    below_1e4 += v < 1e-4;
  }
  EXPECT_NEAR(static_cast<double>(below_1e4) / n, 0.5, 0.02);  // half the decades
  auto il = *MakeIntDistribution(1, 1024, true);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Contains(il, SampleUniform(il, rng)));
}

TEST(RandomSampler, SeededIsReproducible) {
  RandomSampler s;
  TrialHistory h;
  FrozenTrial t;
  auto d = *MakeFloatDistribution(0, 1);
  Rng a(9), b(9);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(s.SampleIndependent(h, t, "x", d, a), s.SampleIndependent(h, t, "x", d, b));
}

}  // namespace
}  // namespace tune

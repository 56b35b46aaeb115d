// Boundary probe shapes (probe_shapes.h): the shapes chosen from the space's batch_size and
// max_length distributions (int, int with a step, log, categorical).
#include "measure/probe_shapes.h"

#include <gtest/gtest.h>

namespace tune {

static void PrintTo(const ProbeShape& s, std::ostream* os) {  // gtest messages
  *os << "(B=" << s.batch_size << ",T=" << s.max_length << ")";
}

namespace {

using Shapes = std::vector<ProbeShape>;

IntDistribution Int(int64_t low, int64_t high, bool log = false, int64_t step = 1) {
  return MakeIntDistribution(low, high, log, step).value();
}
CategoricalDistribution Choices(std::vector<Json> choices) {
  return MakeCategoricalDistribution(std::move(choices)).value();
}
Shapes ShapesOf(const Distribution& b, const Distribution& t) {
  auto shapes = BoundaryProbeShapes(b, t);
  EXPECT_TRUE(shapes.ok()) << shapes.status().ToString();
  return shapes.ok() ? *shapes : Shapes{};
}

TEST(ProbeShapes, IntDistributionsGiveTheSmallestBatchesAtTheLongestLengths) {
  // T_mid: sqrt(32 · 512) = 128.
  EXPECT_EQ(ShapesOf(Int(1, 64), Int(32, 512)), (Shapes{{1, 512}, {1, 128}, {2, 512}, {1, 32}}));
  // On a step grid: the second batch is low + step; sqrt(64 · 1024) = 256 = 64 + 3 · 64.
  EXPECT_EQ(ShapesOf(Int(8, 64, false, 8), Int(64, 1024, false, 64)),
            (Shapes{{8, 1024}, {8, 256}, {16, 1024}, {8, 64}}));
  // The grid point nearest the geometric mean: sqrt(100 · 500) = 223.6 -> 200 (100 + k · 100).
  EXPECT_EQ(ShapesOf(Int(2, 6, false, 2), Int(100, 500, false, 100)),
            (Shapes{{2, 500}, {2, 200}, {4, 500}, {2, 100}}));
  // A range from 0: batch sizes start at the first positive value.
  EXPECT_EQ(ShapesOf(Int(0, 32, false, 8), Int(32, 512)),
            (Shapes{{8, 512}, {8, 128}, {16, 512}, {8, 32}}));
}

TEST(ProbeShapes, LogDistributionsTakeTheIntegerNearestTheGeometricMean) {
  // sqrt(16 · 2048) = 181.02.
  EXPECT_EQ(ShapesOf(Int(1, 128, true), Int(16, 2048, true)),
            (Shapes{{1, 2048}, {1, 181}, {2, 2048}, {1, 16}}));
}

TEST(ProbeShapes, CategoricalsUseTheirSortedIntegerChoices) {
  // Unsorted choices; sqrt(64 · 1024) = 256 lies nearer 128 than 512.
  EXPECT_EQ(ShapesOf(Choices({32, 4, 8, 16}), Choices({128, 512, 64, 1024})),
            (Shapes{{4, 1024}, {4, 128}, {8, 1024}, {4, 64}}));
  // Choices that are not positive integers are not probed; 8.0 is the integer 8.
  EXPECT_EQ(ShapesOf(Choices({"auto", 8.0, 0.5, 2, 0}), Choices({512, "long", 128, 32})),
            (Shapes{{2, 512}, {2, 128}, {8, 512}, {2, 32}}));
  // Mixed: a categorical batch size with an int length.
  EXPECT_EQ(ShapesOf(Choices({16, 1}), Int(64, 256, false, 64)),
            (Shapes{{1, 256}, {1, 128}, {16, 256}, {1, 64}}));
}

TEST(ProbeShapes, TwoLengthsOrOneBatchSizeGiveFewerDuplicates) {
  // Two lengths: T_mid (sqrt(256 · 512) = 362 -> 256) is T_min; (B_2nd, T_mid) stands in.
  EXPECT_EQ(ShapesOf(Choices({1, 2, 4}), Choices({256, 512})),
            (Shapes{{1, 512}, {1, 256}, {2, 512}, {2, 256}}));
  // One batch size: three shapes, three lengths.
  EXPECT_EQ(ShapesOf(Choices({8}), Int(32, 512)), (Shapes{{8, 512}, {8, 128}, {8, 32}}));
}

TEST(ProbeShapes, SpacesWithoutTwoIntegerLengthsAreErrors) {
  auto one = BoundaryProbeShapes(Int(1, 8), Choices({512}));
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(one.status().message().find("max_length has one value (512)"), std::string::npos);
  auto floats = BoundaryProbeShapes(MakeFloatDistribution(1, 8).value(), Int(32, 512));
  ASSERT_FALSE(floats.ok());
  EXPECT_EQ(floats.status().message(), "batch_size: a float distribution");
  auto names = BoundaryProbeShapes(Int(1, 8), Choices({"short", "long"}));
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().message(), "max_length: no choice is a positive integer");
  EXPECT_EQ(ProbeShapesText({{1, 512}, {2, 64}}), "(B=1,T=512), (B=2,T=64)");
}

}  // namespace
}  // namespace tune

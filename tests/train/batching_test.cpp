#include "train/batching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace tune {
namespace {

std::vector<int64_t> Lengths(size_t n) {
  std::vector<int64_t> l;
  for (size_t i = 0; i < n; ++i) l.push_back(static_cast<int64_t>((i * 37) % 100 + 2));
  return l;
}

// Padded token count: the sum over batches of size * longest.
int64_t PaddedTokens(const std::vector<std::vector<int64_t>>& batches,
                     const std::vector<int64_t>& l) {
  int64_t total = 0;
  for (const auto& b : batches) {
    int64_t longest = 0;
    for (int64_t i : b) longest = std::max(longest, l[i]);
    total += longest * static_cast<int64_t>(b.size());
  }
  return total;
}

TEST(Batching, EveryExampleOnceAndDeterministic) {
  auto l = Lengths(103);
  for (int64_t bucket : {0, 1, 4}) {
    std::mt19937_64 a(7), b(7), c(8);
    auto x = MakeTrainBatches(l, 10, bucket, a);
    auto y = MakeTrainBatches(l, 10, bucket, b);
    auto z = MakeTrainBatches(l, 10, bucket, c);
    EXPECT_EQ(x, y);
    EXPECT_NE(x, z);
    std::multiset<int64_t> seen;
    for (const auto& batch : x) {
      EXPECT_LE(batch.size(), 10u);
      seen.insert(batch.begin(), batch.end());
    }
    EXPECT_EQ(seen.size(), 103u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 103u);
  }
}

TEST(Batching, BucketingCutsPadding) {
  auto l = Lengths(1000);
  std::mt19937_64 a(1), b(1);
  auto plain = MakeTrainBatches(l, 16, 0, a);
  auto bucketed = MakeTrainBatches(l, 16, 20, b);
  EXPECT_LT(PaddedTokens(bucketed, l), PaddedTokens(plain, l) * 7 / 10);
  // The bucketed batch order is still shuffled: lengths do not simply rise.
  std::vector<int64_t> firsts;
  for (const auto& batch : bucketed) firsts.push_back(l[batch[0]]);
  EXPECT_FALSE(std::is_sorted(firsts.begin(), firsts.end()));
}

TEST(Batching, EvalBatchesAreSortedByLength) {
  std::vector<int64_t> l = {5, 3, 9, 3, 7};
  auto b = MakeEvalBatches(l, 2);
  EXPECT_EQ(b, (std::vector<std::vector<int64_t>>{{1, 3}, {0, 4}, {2}}));
}

TEST(Batching, BuildTokenBatchAddsSpecialsTruncatesAndPads) {
  std::vector<std::vector<int32_t>> ids = {{10, 11, 12, 13, 14}, {20}, {}};
  std::vector<int64_t> labels = {1, 0, 2};
  auto b = BuildTokenBatch(ids, labels, {0, 1, 2}, 5, Padding::kLongest, 0, 101, 102);
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.cols, 5);
  EXPECT_EQ(b.input_ids, (std::vector<int64_t>{101, 10, 11, 12, 102,  //
                                               101, 20, 102, 0, 0,    //
                                               101, 102, 0, 0, 0}));
  EXPECT_EQ(b.attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{1, 0, 2}));
  auto shortest = BuildTokenBatch(ids, labels, {1, 2}, 64, Padding::kLongest, 0, 101, 102);
  EXPECT_EQ(shortest.cols, 3);
  auto fixed = BuildTokenBatch(ids, labels, {1, 2}, 64, Padding::kMaxLength, 0, 101, 102);
  EXPECT_EQ(fixed.cols, 64);
  EXPECT_EQ(fixed.input_ids.size(), 128u);
}

}  // namespace
}  // namespace tune

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

// SDPA's memory-efficient CUDA kernel takes a mask whose width is a multiple of 16 without a copy:
// a padded batch is widened to the next one, unless that passes the position table.
TEST(Batching, SdpaMaskWidthIsTheNextMultipleOf16WithinTheLimit) {
  EXPECT_EQ(SdpaMaskWidth(1, 512), 16);
  EXPECT_EQ(SdpaMaskWidth(16, 512), 16);
  EXPECT_EQ(SdpaMaskWidth(17, 512), 32);
  EXPECT_EQ(SdpaMaskWidth(500, 512), 512);
  EXPECT_EQ(SdpaMaskWidth(500, 510), 500);  // 512 would pass the limit: left as it is
  EXPECT_EQ(SdpaMaskWidth(512, 512), 512);
}

// CUDA graphs' length buckets: rows widened with padding tokens, mask 0 and type 0; a narrower
// width leaves the batch as it is.
TEST(Batching, PadTokenBatchToWidensEveryRow) {
  TokenBatch b;
  b.rows = 2;
  b.cols = 3;
  b.input_ids = {101, 7, 102, 101, 102, 0};
  b.attention_mask = {1, 1, 1, 1, 1, 0};
  b.token_type_ids = {0, 1, 1, 0, 0, 0};
  b.labels = {1, 0};
  PadTokenBatchTo(b, 5, 9);
  EXPECT_EQ(b.cols, 5);
  EXPECT_EQ(b.input_ids, (std::vector<int64_t>{101, 7, 102, 9, 9, 101, 102, 0, 9, 9}));
  EXPECT_EQ(b.attention_mask, (std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(b.token_type_ids, (std::vector<int64_t>{0, 1, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{1, 0}));
  PadTokenBatchTo(b, 4, 9);
  EXPECT_EQ(b.cols, 5);
  TokenBatch no_types = BuildTokenBatch({{5}}, {0}, {0}, 8, Padding::kLongest, 0, 101, 102);
  PadTokenBatchTo(no_types, 4, 0);
  EXPECT_TRUE(no_types.token_type_ids.empty());
  EXPECT_EQ(no_types.input_ids, (std::vector<int64_t>{101, 5, 102, 0}));
}

// Hugging Face tokenizers' pair truncation with a room of 7: its own unit test's table (lengths
// 0, 2, 4, 8 on each side), and the strategies that cut one side.
TEST(Batching, PairKeepFollowsHuggingFaceTokenizers) {
  const int64_t sizes[] = {0, 2, 4, 8};
  // expected[i][j]: what (sizes[i], sizes[j]) keeps with longest_first in a room of 7.
  const std::pair<int64_t, int64_t> expected[4][4] = {
      {{0, 0}, {0, 2}, {0, 4}, {0, 7}},
      {{2, 0}, {2, 2}, {2, 4}, {2, 5}},
      {{4, 0}, {4, 2}, {3, 4}, {3, 4}},
      {{7, 0}, {5, 2}, {4, 3}, {3, 4}},
  };
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(PairKeep(sizes[i], sizes[j], 7, Truncation::kLongestFirst), expected[i][j])
          << sizes[i] << " + " << sizes[j];
    }
  }
  EXPECT_EQ(PairKeep(8, 2, 7, Truncation::kOnlyFirst), std::make_pair(int64_t{5}, int64_t{2}));
  EXPECT_EQ(PairKeep(2, 8, 7, Truncation::kOnlySecond), std::make_pair(int64_t{2}, int64_t{5}));
  // Where Hugging Face raises (the named side is too short), that side goes and the other is cut.
  EXPECT_EQ(PairKeep(2, 8, 7, Truncation::kOnlyFirst), std::make_pair(int64_t{0}, int64_t{7}));
  EXPECT_EQ(PairKeep(9, 1, 7, Truncation::kOnlySecond), std::make_pair(int64_t{7}, int64_t{0}));
  EXPECT_EQ(PairKeep(3, 4, 7, Truncation::kOnlyFirst), std::make_pair(int64_t{3}, int64_t{4}));
}

TEST(Batching, PairBatchesJoinBothTextsWithEachFamilysSeparatorsAndTokenTypes) {
  std::vector<std::vector<int32_t>> a = {{10, 11, 12, 13}, {20}};
  std::vector<std::vector<int32_t>> b = {{30, 31, 32, 33, 34}, {40, 41}};
  std::vector<std::pair<int64_t, int64_t>> counts = {{4, 5}, {1, 2}};
  std::vector<int64_t> labels = {1, 0};
  PairSplit bert{&b, &counts, PairLayout{1, Truncation::kLongestFirst}, /*token_types=*/true};
  // max_length 9: room 6 for (4, 5): 3 and 3.
  auto t = BuildTokenBatch(a, labels, {0, 1}, 9, Padding::kLongest, 0, 101, 102, &bert);
  EXPECT_EQ(t.cols, 9);
  EXPECT_EQ(t.input_ids, (std::vector<int64_t>{101, 10, 11, 12, 102, 30, 31, 32, 102,  //
                                               101, 20, 102, 40, 41, 102, 0, 0, 0}));
  EXPECT_EQ(t.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1, 1,  //
                                                    0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(t.attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                    1, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(PairSequenceLength(counts[1], 9, bert.layout), 6);
  // RoBERTa's <s> a </s></s> b </s>, only_second, no token types.
  PairSplit roberta{&b, &counts, PairLayout{2, Truncation::kOnlySecond}, false};
  auto r = BuildTokenBatch(a, labels, {0}, 10, Padding::kLongest, 1, 0, 2, &roberta);
  EXPECT_EQ(r.input_ids, (std::vector<int64_t>{0, 10, 11, 12, 13, 2, 2, 30, 31, 2}));
  EXPECT_TRUE(r.token_type_ids.empty());
}

}  // namespace
}  // namespace tune

// Batching for the trainer (plain C++, no LibTorch): deterministic shuffles, length bucketing and
// padded id matrices.
//
// Length bucketing: the shuffled examples are cut into chunks of `bucket_batches` batches, each
// chunk is sorted by length and cut into batches, and the batch order is shuffled again. A batch
// then holds examples of similar length, so with padding to the longest example of the batch
// ("longest", the default) short batches cost less, while every epoch still sees a new order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "tokenizers/pairs.h"

namespace tune {

// Fisher-Yates with a portable draw (std::shuffle's result differs between standard libraries).
void DeterministicShuffle(std::vector<int64_t>& v, std::mt19937_64& rng);

// Training batches over examples 0..lengths.size()-1: shuffled, with length bucketing when
// bucket_batches > 1. Every example appears exactly once; the last batch of a chunk may be
// smaller. REQUIRES: batch_size >= 1.
std::vector<std::vector<int64_t>> MakeTrainBatches(const std::vector<int64_t>& lengths,
                                                   int64_t batch_size, int64_t bucket_batches,
                                                   std::mt19937_64& rng);
// Evaluation batches: examples sorted by length (stable), cut into batches.
std::vector<std::vector<int64_t>> MakeEvalBatches(const std::vector<int64_t>& lengths,
                                                  int64_t batch_size);

// A row-major [rows x cols] batch of token ids with its attention mask (1 = token, 0 = padding),
// and for sentence pairs whose model has token types, the token type ids (0: the first text with
// [CLS] and its [SEP]; 1: the second text and its [SEP]; 0 for padding), else empty.
struct TokenBatch {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> token_type_ids;
  std::vector<int64_t> labels;
};

enum class Padding {
  kLongest,    // pad to the longest sequence of the batch
  kMaxLength,  // pad every batch to max_length (fixed shapes, the worst-case memory)
};

// The second texts of a split's sentence pairs: their ids (without special tokens, cut as the
// first texts' are) and both texts' token counts before any cut (truncation compares them).
struct PairSplit {
  const std::vector<std::vector<int32_t>>* second = nullptr;
  const std::vector<std::pair<int64_t, int64_t>>* counts = nullptr;
  PairLayout layout;
  bool token_types = false;  // fill TokenBatch::token_type_ids (models with token types)
};

// Builds [CLS] ids [SEP] rows for `indices`: `ids[i]` are an example's token ids without special
// tokens, truncated here to max_length - 2. With `pairs`, [CLS] a [SEP] b [SEP] rows (two
// separators for RoBERTa's layout), the texts cut by PairKeep. REQUIRES: max_length >= 2 (pairs:
// >= the layout's specials).
TokenBatch BuildTokenBatch(const std::vector<std::vector<int32_t>>& ids,
                           const std::vector<int64_t>& labels, const std::vector<int64_t>& indices,
                           int64_t max_length, Padding padding, int32_t pad_id, int32_t cls_id,
                           int32_t sep_id, const PairSplit* pairs = nullptr);

// Widens every row of `batch` to `cols` columns (no change when it has as many or more): pad_id
// tokens, attention mask 0, token type 0. The trainer's CUDA graphs pad a batch to its length
// bucket this way, so that batches of nearby lengths share one graph.
void PadTokenBatchTo(TokenBatch& batch, int64_t cols, int32_t pad_id);

// SDPA's memory-efficient CUDA kernel takes a key-padding mask as a bias whose last dimension
// must be a multiple of this; LibTorch copies any other into a full [B, heads, T, T'] bias
// (preprocess_mask's pad_bias), which the kernel then saves for backward.
inline constexpr int64_t kSdpaMaskAlignment = 16;

// The width a padded batch of `cols` columns is widened to for that kernel: the next multiple of
// kSdpaMaskAlignment when it is at most `limit` (the model's position table), else `cols`.
inline int64_t SdpaMaskWidth(int64_t cols, int64_t limit) {
  const int64_t aligned = (cols + kSdpaMaskAlignment - 1) / kSdpaMaskAlignment * kSdpaMaskAlignment;
  return aligned <= limit ? aligned : cols;
}

// The length of an example in a batch: min(ids + 2, max_length).
inline int64_t SequenceLength(size_t num_ids, int64_t max_length) {
  return std::min<int64_t>(static_cast<int64_t>(num_ids) + 2, max_length);
}
// The length of a pair of `first` and `second` tokens (before any cut) in a batch: every token
// and the special ones, at most max_length (truncation fills the room exactly).
inline int64_t PairSequenceLength(std::pair<int64_t, int64_t> counts, int64_t max_length,
                                  const PairLayout& layout) {
  return std::min<int64_t>(counts.first + counts.second + layout.specials(), max_length);
}

}  // namespace tune

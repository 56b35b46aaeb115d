#include "train/batching.h"

#include <algorithm>
#include <numeric>

namespace tune {

void DeterministicShuffle(std::vector<int64_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    // Unbiased enough for data order: the 64-bit draw dwarfs any data set.
    size_t j = static_cast<size_t>(rng() % i);
    std::swap(v[i - 1], v[j]);
  }
}

std::vector<std::vector<int64_t>> MakeTrainBatches(const std::vector<int64_t>& lengths,
                                                   int64_t batch_size, int64_t bucket_batches,
                                                   std::mt19937_64& rng) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  DeterministicShuffle(order, rng);
  std::vector<std::vector<int64_t>> batches;
  const auto bs = static_cast<size_t>(std::max<int64_t>(batch_size, 1));
  const size_t chunk = bucket_batches > 1 ? bs * static_cast<size_t>(bucket_batches) : bs;
  for (size_t start = 0; start < order.size(); start += chunk) {
    const size_t end = std::min(order.size(), start + chunk);
    if (bucket_batches > 1) {
      std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(start),
                       order.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
    }
    for (size_t b = start; b < end; b += bs) {
      batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(b),
                           order.begin() + static_cast<std::ptrdiff_t>(std::min(end, b + bs)));
    }
  }
  if (bucket_batches > 1) {
    // Shuffle the batch order so that lengths do not rise within each chunk.
    std::vector<int64_t> perm(batches.size());
    std::iota(perm.begin(), perm.end(), 0);
    DeterministicShuffle(perm, rng);
    std::vector<std::vector<int64_t>> shuffled;
    shuffled.reserve(batches.size());
    for (int64_t p : perm) shuffled.push_back(std::move(batches[p]));
    batches = std::move(shuffled);
  }
  return batches;
}

std::vector<std::vector<int64_t>> MakeEvalBatches(const std::vector<int64_t>& lengths,
                                                  int64_t batch_size) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<int64_t>> batches;
  const auto bs = static_cast<size_t>(std::max<int64_t>(batch_size, 1));
  for (size_t b = 0; b < order.size(); b += bs) {
    batches.emplace_back(
        order.begin() + static_cast<std::ptrdiff_t>(b),
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + bs)));
  }
  return batches;
}

namespace {

// Row r of `batch`: [CLS] a [SEP] (separators) b [SEP], a and b cut by PairKeep.
void FillPairRow(TokenBatch& batch, size_t r, const std::vector<int32_t>& a,
                 const std::vector<int32_t>& b, std::pair<int64_t, int64_t> counts,
                 int64_t max_length, int32_t cls_id, int32_t sep_id, const PairSplit& pairs) {
  const PairLayout& layout = pairs.layout;
  const auto [keep_a, keep_b] =
      PairKeep(counts.first, counts.second, max_length - layout.specials(), layout.truncation);
  const auto cols = static_cast<size_t>(batch.cols);
  size_t second_starts = 0;
  const size_t k = JoinPair(a, keep_a, b, keep_b, cls_id, sep_id, layout.separators,
                            batch.input_ids.data() + r * cols, &second_starts);
  std::fill(batch.attention_mask.data() + r * cols, batch.attention_mask.data() + r * cols + k, 1);
  if (pairs.token_types) {
    int64_t* types = batch.token_type_ids.data() + r * cols;
    std::fill(types + second_starts, types + k, 1);
  }
}

}  // namespace

TokenBatch BuildTokenBatch(const std::vector<std::vector<int32_t>>& ids,
                           const std::vector<int64_t>& labels, const std::vector<int64_t>& indices,
                           int64_t max_length, Padding padding, int32_t pad_id, int32_t cls_id,
                           int32_t sep_id, const PairSplit* pairs) {
  TokenBatch batch;
  if (pairs != nullptr) {
    batch.rows = static_cast<int64_t>(indices.size());
    batch.cols = padding == Padding::kMaxLength ? max_length : 0;
    for (int64_t i : indices) {
      batch.cols =
          std::max(batch.cols, PairSequenceLength((*pairs->counts)[i], max_length, pairs->layout));
    }
    const auto cells = indices.size() * static_cast<size_t>(batch.cols);
    batch.input_ids.assign(cells, pad_id);
    batch.attention_mask.assign(cells, 0);
    if (pairs->token_types) batch.token_type_ids.assign(cells, 0);
    for (size_t r = 0; r < indices.size(); ++r) {
      const auto i = static_cast<size_t>(indices[r]);
      FillPairRow(batch, r, ids[i], (*pairs->second)[i], (*pairs->counts)[i], max_length, cls_id,
                  sep_id, *pairs);
      if (!labels.empty()) batch.labels.push_back(labels[i]);
    }
    return batch;
  }
  batch.rows = static_cast<int64_t>(indices.size());
  if (padding == Padding::kMaxLength) {
    batch.cols = max_length;
  } else {
    for (int64_t i : indices)
      batch.cols = std::max(batch.cols, SequenceLength(ids[i].size(), max_length));
  }
  const auto cols = static_cast<size_t>(batch.cols);
  batch.input_ids.assign(indices.size() * cols, pad_id);
  batch.attention_mask.assign(indices.size() * cols, 0);
  batch.labels.reserve(indices.size());
  for (size_t r = 0; r < indices.size(); ++r) {
    const auto& seq = ids[indices[r]];
    const size_t body = static_cast<size_t>(SequenceLength(seq.size(), max_length)) - 2;
    int64_t* row = batch.input_ids.data() + r * cols;
    int64_t* mask = batch.attention_mask.data() + r * cols;
    row[0] = cls_id;
    for (size_t k = 0; k < body; ++k) row[k + 1] = seq[k];
    row[body + 1] = sep_id;
    std::fill(mask, mask + body + 2, 1);
    if (!labels.empty()) batch.labels.push_back(labels[indices[r]]);
  }
  return batch;
}

void PadTokenBatchTo(TokenBatch& batch, int64_t cols, int32_t pad_id) {
  if (cols <= batch.cols) return;
  auto widen = [&](std::vector<int64_t>& v, int64_t fill) {
    if (v.empty()) return;
    std::vector<int64_t> wide(static_cast<size_t>(batch.rows * cols), fill);
    for (int64_t r = 0; r < batch.rows; ++r) {
      std::copy_n(v.begin() + r * batch.cols, batch.cols, wide.begin() + r * cols);
    }
    v = std::move(wide);
  };
  widen(batch.input_ids, pad_id);
  widen(batch.attention_mask, 0);
  widen(batch.token_type_ids, 0);
  batch.cols = cols;
}

}  // namespace tune

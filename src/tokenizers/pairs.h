// Sentence pairs: how a tokenizer family joins two texts and how a pair is cut to a length, as
// Hugging Face's tokenizers do it (plain C++).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

// How a sentence pair is cut to fit max_length (Hugging Face's `truncation` strategies).
enum class Truncation {
  kLongestFirst,  // "longest_first": the longer text loses tokens first (the default)
  kOnlyFirst,     // "only_first": only the first text is cut
  kOnlySecond,    // "only_second": only the second text is cut
};
const char* TruncationName(Truncation truncation);
// "longest_first", "only_first", "only_second"; InvalidArgument naming the closest otherwise.
Result<Truncation> ParseTruncation(const std::string& name);

// How the two texts of a pair join: [CLS] a [SEP] b [SEP] (BERT, DeBERTa: one separator) or
// <s> a </s></s> b </s> (RoBERTa, XLM-RoBERTa: two), as each family's tokenizer builds it.
struct PairLayout {
  int32_t separators = 1;
  Truncation truncation = Truncation::kLongestFirst;
  // The special tokens of a pair: [CLS], the separators and the last [SEP].
  int64_t specials() const { return 2 + separators; }
};

// The tokens each text of a pair keeps when `room` tokens (max_length less the special tokens)
// are left for both: all of them when they fit, else Hugging Face tokenizers' rule (its
// truncate_pair). longest_first: a shorter text that fits in half the room stays whole and the
// longer is cut to the rest; else both are cut to half the room, the longer text (the second on
// a tie) keeping the odd token. only_first / only_second: the named text loses what does not
// fit. Where Hugging Face raises an error (the named text is too short to make room), the named
// text is emptied and the other is cut too, so that the pair still fits.
std::pair<int64_t, int64_t> PairKeep(int64_t first, int64_t second, int64_t room,
                                     Truncation truncation);

// Writes a pair with `separators` separators into `ids` (room for 2 + separators + keep_a +
// keep_b cells): [CLS], the first keep_a ids of `a`, the separators, the first keep_b of `b`,
// [SEP]. Returns the length, and in `second_starts` where BERT's token type 1 begins (b's first
// token; with two separators, the second one). The tokenizer and the trainer's batches both join
// pairs with it.
template <typename Id>
size_t JoinPair(const std::vector<int32_t>& a, int64_t keep_a, const std::vector<int32_t>& b,
                int64_t keep_b, int32_t cls_id, int32_t sep_id, int32_t separators, Id* ids,
                size_t* second_starts) {
  size_t k = 0;
  ids[k++] = cls_id;
  for (int64_t i = 0; i < keep_a; ++i) ids[k++] = a[static_cast<size_t>(i)];
  for (int32_t s = 0; s < separators; ++s) ids[k++] = sep_id;
  *second_starts = separators == 1 ? k : k - 1;
  for (int64_t i = 0; i < keep_b; ++i) ids[k++] = b[static_cast<size_t>(i)];
  ids[k++] = sep_id;
  return k;
}

}  // namespace tune

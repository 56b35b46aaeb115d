// SentencePiece models as Hugging Face's tokenizers runs them [tune_train, private]: the Unigram
// model (its Viterbi segmentation), the Precompiled normalizer (SentencePiece's character map)
// and the Metaspace pre-tokenizer. transformers' DebertaV2Tokenizer and XLMRobertaTokenizer
// convert an spm.model or sentencepiece.bpe.model into these; the tokenizer composes them as each
// class does (tokenizer.h).
//
// Thread safety: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune::internal {

// tokenizers' Unigram model (`encode_optimized`): the segmentation of a word into pieces with
// the largest sum of scores, found left to right over byte positions, ties kept by the first
// candidate (the shorter piece); a character no piece starts with is unknown, scored the lowest
// piece score less 10, and runs of unknown characters fuse into one unknown token.
class Unigram {
 public:
  // `vocab`: each id's piece and score, in id order. REQUIRES: 0 <= unk_id < vocab.size().
  Unigram(const std::vector<std::pair<std::string, double>>& vocab, int32_t unk_id);
  // Appends the ids of `word` (UTF-8) to `ids`, and its pieces to `pieces` when set.
  void Encode(std::string_view word, std::vector<int32_t>& ids,
              std::vector<std::string>* pieces = nullptr) const;

 private:
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<double> scores_;
  size_t longest_ = 0;  // the longest piece, in bytes
  double min_score_ = 0.0;
  int32_t unk_id_ = 0;
};

// tokenizers' Precompiled normalizer: SentencePiece's precompiled character map (a darts-clone
// double array of UTF-8 keys and the NUL-terminated strings they map to), applied as the library
// applies it: each extended grapheme cluster shorter than 6 bytes is looked up whole, and mapped
// to the target of its shortest key prefix when it has one; other clusters, and clusters without
// a match, character by character.
class PrecompiledCharsmap {
 public:
  // InvalidArgument (naming `source`) for a map that is truncated or malformed.
  static Result<PrecompiledCharsmap> Parse(std::string_view map, const std::string& source);
  std::u32string Normalize(std::u32string_view text) const;

 private:
  // The target of the shortest key that is a prefix of `chunk`, if any.
  std::optional<std::string_view> Transform(std::string_view chunk) const;
  std::vector<uint32_t> units_;
  std::string targets_;
};

// How the Metaspace pre-tokenizer prepends its "▁" (tokenizers' prepend_scheme).
enum class PrependScheme { kAlways, kFirst, kNever };

// tokenizers' Metaspace (replacement "▁", split): spaces become "▁", a "▁" is prepended as
// `scheme` says (kFirst: only to the text's first piece, `first`), and the piece is split before
// each "▁" (the "▁" starts the next word). Appends the words to `out`.
void MetaspaceSplit(std::u32string_view piece, PrependScheme scheme, bool first,
                    std::vector<std::u32string>& out);

}  // namespace tune::internal

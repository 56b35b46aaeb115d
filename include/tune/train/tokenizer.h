// Tokenizer: text -> token ids for the transformer classifiers (plain C++, no LibTorch).
//
// Three vocabularies. Byte-level BPE (RoBERTa, GPT-2): FromVocabFile with a vocab.json, the
// merges.txt beside it; the text is pre-tokenized as GPT-2 does (src/train/byte_bpe.h), each
// piece's UTF-8 bytes are mapped to GPT-2's byte alphabet and merged by rank; the special tokens
// are <s>, </s>, <pad> and <unk>, and the text is never lowercased (the models are cased).
// The other two share one algorithm (BERT's):
//  - FromVocabFile: a BERT WordPiece vocab.txt (one token per line, id = line number), as shipped
//    with bert-base-uncased and friends. It must contain [PAD], [UNK], [CLS] and [SEP].
//  - Build: a vocabulary built from the training text, for models trained from scratch:
//    ids 0-3 are [PAD], [UNK], [CLS], [SEP]; then the characters of the training text, each as a
//    word start ("e") and as a continuation ("##e"), most frequent first, at most a quarter of the
//    vocabulary; then whole words, most frequent first (ties in byte order), seen at least
//    min_count times, until vocab_size entries. A word outside the vocabulary is thus spelled
//    with characters instead of becoming [UNK]; only characters never seen in training are [UNK].
//
// Text processing (BERT's BasicTokenizer): control characters, NUL and U+FFFD are removed; the text
// is split on whitespace; with `lowercase`, letters are lowercased and accents stripped (ASCII,
// Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts are kept as they are, a documented
// simplification of BERT's Unicode NFD); punctuation (ASCII and the Unicode punctuation blocks)
// and CJK ideographs become tokens of their own. Then WordPiece: each word is split greedily into
// the longest vocabulary pieces, continuations prefixed with "##"; a word that cannot be split,
// or is longer than 100 characters, is [UNK]. Invalid UTF-8 bytes are dropped.
//
// Thread safety: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tune/status.h"

namespace tune {

namespace internal {
class ByteBpe;
}  // namespace internal

struct TokenizerOptions {
  // Lowercase and strip accents (uncased models). BERT: do_lower_case.
  bool lowercase = true;
  // Build: the largest vocabulary, the 4 special tokens included.
  int64_t vocab_size = 8000;
  // Build: words seen fewer times in the training text are left out.
  int64_t min_count = 1;
};

class Tokenizer {
 public:
  // Reads a WordPiece vocab.txt, or, when `path` ends in ".json", a byte-level BPE vocab.json
  // with the merges.txt of its directory (`lowercase` does not apply). NotFound if a file is
  // missing; InvalidArgument if it is empty or malformed (naming the line or key) or lacks a
  // special token.
  static Result<Tokenizer> FromVocabFile(const std::string& path, bool lowercase);
  // Builds a vocabulary from `texts` (see the file comment).
  // REQUIRES: options.vocab_size >= 4 + 2, options.min_count >= 1.
  static Tokenizer Build(const std::vector<std::string>& texts, const TokenizerOptions& options);

  // The words and punctuation tokens of `text` after cleaning and lowercasing.
  std::vector<std::string> SplitWords(std::string_view text) const;
  // The WordPiece ids of `text`, without special tokens, at most `max_tokens` of them (the first
  // ones; the rest of the text is not processed).
  std::vector<int32_t> Encode(std::string_view text, size_t max_tokens = SIZE_MAX) const;
  // [CLS] ids [SEP], with the ids truncated so the whole is at most `max_length` long.
  // REQUIRES: max_length >= 2.
  std::vector<int32_t> EncodeForClassification(std::string_view text, int64_t max_length) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  bool lowercase() const { return lowercase_; }
  // The token with this id ("" when out of range).
  const std::string& TokenText(int32_t id) const;
  // The id of `token`, or -1.
  int32_t TokenId(std::string_view token) const;
  // "WordPiece vocab.txt PATH (30522 tokens)", "byte-level BPE PATH (50265 tokens, 50000
  // merges)" or "vocabulary built from the training text (N tokens)".
  const std::string& description() const { return description_; }

 private:
  Tokenizer() = default;
  void Index();
  void WordPiece(const std::u32string& word, std::vector<int32_t>& out) const;
  std::vector<std::u32string> SplitWordsU32(std::string_view text) const;

  static Result<Tokenizer> FromBpeFiles(const std::string& vocab_json);
  void BytePairEncode(std::string_view text, size_t max_tokens, std::vector<int32_t>& out) const;

  std::shared_ptr<const internal::ByteBpe> bpe_;  // set: byte-level BPE
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t pad_id_ = 0, unk_id_ = 1, cls_id_ = 2, sep_id_ = 3;
  bool lowercase_ = true;
  std::string description_;
};

namespace internal {
// UTF-8 helpers shared by the data readers and the tokenizer.
// The byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and
// code points above U+10FFFF are invalid), or npos.
size_t FindInvalidUtf8(std::string_view s);
// Decodes `s`; invalid bytes are skipped.
std::u32string DecodeUtf8(std::string_view s);
void AppendUtf8(char32_t c, std::string& out);
}  // namespace internal

}  // namespace tune

// Tokenizer: text -> token ids for the transformer classifiers [tune_train] (plain C++, no
// LibTorch), as Hugging Face's AutoTokenizer.from_pretrained(DIR) computes them for the same files
// (the `tokenizers` library's code and Unicode tables, unicode.h); tests/tokenizer_parity/
// compares them.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/pairs.h"
#include "tokenizers/unigram.h"
#include "tune/status.h"

namespace tune {

namespace internal {
class ByteBpe;
}  // namespace internal

// A token split off the raw text before tokenization (a special token written in the text), as
// Hugging Face's AddedToken.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool lstrip = false;       // the white space before it is part of it
  bool rstrip = false;       // the white space after it is part of it
  bool single_word = false;  // only where no word character touches it
};

struct TokenizerOptions {
  // WordPiece: lowercase (uncased models). BERT: do_lower_case.
  bool lowercase = true;
  // WordPiece: strip accents; unset: as `lowercase`. BERT: strip_accents.
  std::optional<bool> strip_accents;
  // WordPiece: every CJK ideograph is a word of its own. BERT: tokenize_chinese_chars.
  bool tokenize_chinese_chars = true;
  // Build: the largest vocabulary, the 4 special tokens included.
  int64_t vocab_size = 8000;
  // Build: words seen fewer times in the training text are left out.
  int64_t min_count = 1;
};

// Thread safety: const methods may be called concurrently.
class Tokenizer {
 public:
  // The tokenizer of a Hugging Face checkpoint directory, from the first tokenizer file present
  // (CheckpointTokenizerFile):
  //  - vocab.txt: BERT's WordPiece (BertTokenizer). do_lower_case, strip_accents and
  //    tokenize_chinese_chars come from tokenizer_config.json when it has them. Specials [PAD],
  //    [UNK], [CLS], [SEP] (and [MASK]) are the lines of those tokens.
  //  - vocab.json + merges.txt: byte-level BPE (RoBERTa, GPT-2; RobertaTokenizer): GPT-2's
  //    pre-tokenizer pattern, each piece's UTF-8 bytes in GPT-2's byte alphabet merged by rank;
  //    specials <s>, </s>, <pad>, <unk> (and <mask>); never lowercased; add_prefix_space from
  //    tokenizer_config.json.
  //  - spm.model: DeBERTa-v2/v3's SentencePiece model (DebertaV2Tokenizer): ids are the model's
  //    own; [PAD], [CLS], [SEP], [UNK] are its pieces of those names; [MASK] is its piece, or the
  //    id after the last piece when the model has none. As transformers 5 converts it: the text
  //    lowercased if do_lower_case, each run of two or more white-space characters (and each \n,
  //    \r, \t) made one space, NFC, trailing white space stripped, punctuation split off if
  //    split_by_punct, then Metaspace ("▁" for spaces and before each word) and the Unigram
  //    model on the pieces' scores (unigram.h). The model's own normalizer is not used.
  //  - sentencepiece.bpe.model: XLM-RoBERTa's SentencePiece model (XLMRobertaTokenizer), with
  //    fairseq's ids: <s>=0, <pad>=1, </s>=2, <unk>=3, every other piece its SentencePiece id + 1,
  //    and <mask> the last id (pieces + 1). The model's precompiled character map normalizes the
  //    text, white space splits it, then Metaspace and the Unigram model.
  //  - tokenizer.json, when none of the above is present: a Hugging Face tokenizers file whose
  //    model is WordPiece (with a BertNormalizer) or BPE (with a ByteLevel pre-tokenizer).
  // `options` gives the WordPiece settings that tokenizer_config.json does not. NotFound when no
  // tokenizer file is there (listing those looked for); InvalidArgument naming the file (and
  // line or key) for a malformed one.
  static Result<Tokenizer> FromCheckpointDir(const std::string& dir,
                                             const TokenizerOptions& options);
  // The tokenizer file FromCheckpointDir reads in `dir`: vocab.txt, vocab.json,
  // spm.model, sentencepiece.bpe.model or tokenizer.json, the first that exists; dir/vocab.txt
  // when none does.
  static std::string CheckpointTokenizerFile(const std::string& dir);
  // Reads a WordPiece vocab.txt, or, when `path` ends in ".json", a byte-level BPE vocab.json
  // with the merges.txt of its directory (`lowercase` does not apply). NotFound if a file is
  // missing; InvalidArgument if it is empty or malformed (naming the line or key) or lacks a
  // special token.
  static Result<Tokenizer> FromVocabFile(const std::string& path, bool lowercase);
  // A WordPiece tokenizer for a model trained from scratch, its vocabulary built from `texts`:
  // ids 0-3 are [PAD], [UNK], [CLS], [SEP]; then the characters seen at least min_count times,
  // each as a word start ("e") and as a continuation ("##e"), most frequent first, at most a
  // quarter of the vocabulary; then whole words, most frequent first (ties in byte order), seen
  // at least min_count times, until vocab_size entries. A word outside the vocabulary is thus
  // spelled with characters instead of becoming [UNK]; only characters left out of the
  // vocabulary (unseen, rarer than min_count, or past the quarter) are [UNK].
  // REQUIRES: options.vocab_size >= 4 + 2, options.min_count >= 1.
  static Tokenizer Build(const std::vector<std::string>& texts, const TokenizerOptions& options);

  // How the methods below (SplitWords, Encode, Encode*ForClassification) read text.
  //
  // Special tokens written in the text are the special tokens, as in Hugging Face's tokenizers:
  // the family's specials ([CLS] ... or <s> ...), with the flags tokenizer_config.json's
  // added_tokens_decoder (or tokenizer.json's added_tokens) gives them (AddedToken), are split
  // off the raw text first, leftmost and longest first; each piece between them is tokenized on
  // its own.
  //
  // WordPiece text processing is tokenizers' BertNormalizer and BertPreTokenizer: NUL, U+FFFD
  // and control characters (Cc, Co, Cs, and Cf of Unicode 8.0; not tab, newline and return) are
  // removed; white space (the White_Space property) becomes a space; CJK ideographs are
  // surrounded by spaces (tokenize_chinese_chars); accents are stripped (NFD, then nonspacing
  // marks removed) and the text lowercased (each character's full mapping on its own) as the
  // options say; the text is split on white space and every punctuation character (P* of
  // Unicode 8.0, and all non-alphanumeric ASCII) becomes a token of its own. Then WordPiece:
  // each word is split greedily into the longest vocabulary pieces, continuations prefixed with
  // "##"; a word that cannot be split, or is longer than 100 characters (a tokenizer.json's
  // max_input_chars_per_word), is [UNK]. Invalid UTF-8 bytes are dropped.

  // What the model segments `text` into: WordPiece's words and punctuation tokens after cleaning
  // and lowercasing, byte-level BPE's pre-tokens, SentencePiece's pieces; the special tokens
  // written in the text as they are.
  std::vector<std::string> SplitWords(std::string_view text) const;
  // The ids of `text` (special tokens written in it among them), without the class and separator
  // tokens the classifier adds, at most `max_tokens` of them (the first ones).
  std::vector<int32_t> Encode(std::string_view text, size_t max_tokens = SIZE_MAX) const;
  // [CLS] ids [SEP], with the ids truncated so the whole is at most `max_length` long.
  // REQUIRES: max_length >= 2.
  std::vector<int32_t> EncodeForClassification(std::string_view text, int64_t max_length) const;

  // The separators between the two texts of a pair, as the family's tokenizer joins them: 2 for
  // byte-level BPE and XLM-RoBERTa's SentencePiece (<s> a </s></s> b </s>), else 1 ([CLS] a [SEP]
  // b [SEP]: WordPiece, DeBERTa's SentencePiece, a vocabulary built from the data).
  int32_t PairSeparators() const { return bpe_ || (unigram_ && spm_offset_ == 1) ? 2 : 1; }
  // [CLS] a [SEP] b [SEP] (PairSeparators' layout) with the texts cut by `truncation` so that the
  // whole is at most `max_length` long (Hugging Face's tokenizer(a, b, truncation=...,
  // max_length=...)); `token_types`, when set, receives BERT's token type ids (0: [CLS] a [SEP];
  // 1: b [SEP]). REQUIRES: max_length >= 2 + PairSeparators().
  std::vector<int32_t> EncodePairForClassification(
      std::string_view a, std::string_view b, int64_t max_length, Truncation truncation,
      std::vector<int32_t>* token_types = nullptr) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  // [MASK] or <mask>; -1 when the vocabulary has none.
  int32_t mask_id() const { return mask_id_; }
  bool lowercase() const { return lowercase_; }
  // The token with this id ("" when out of range).
  const std::string& TokenText(int32_t id) const;
  // The id of `token`, or -1.
  int32_t TokenId(std::string_view token) const;
  // "WordPiece vocab.txt PATH (30522 tokens)", "byte-level BPE PATH (50265 tokens, 50000
  // merges)", "SentencePiece PATH (...)" or "vocabulary built from the training text (N tokens)".
  const std::string& description() const { return description_; }

 private:
  Tokenizer() = default;
  void Index();
  void WordPiece(const std::u32string& word, std::vector<int32_t>& out) const;
  std::vector<std::u32string> SplitWordsU32(std::string_view text) const;
  // One piece of text between special tokens: ids appended to `ids`, or words to `words`.
  // `first`: the piece starts the text.
  void EncodePiece(std::string_view piece, bool first, size_t max_tokens, std::vector<int32_t>* ids,
                   std::vector<std::string>* words) const;
  // The SentencePiece words of a piece (normalized, split, Metaspace'd; UTF-8).
  std::vector<std::string> UnigramWords(std::string_view piece, bool first) const;
  // Calls `piece(text, first)` for each piece between special tokens and `special(token)` for
  // each special token, in order.
  template <typename Piece, typename Special>
  void SplitSpecials(std::string_view text, Piece&& piece, Special&& special) const;
  // The family's special tokens, then tokenizer_config.json's added_tokens_decoder or else
  // tokenizer.json's added_tokens (their flags) in `dir`.
  Status ReadAddedTokens(const std::string& dir);
  Status AddTokensFromJson(const nlohmann::json& tokens, const std::string& where);
  void AddFamilySpecials();
  void SortAddedTokens();

  // FromCheckpointDir without its catch of nlohmann's exceptions.
  static Result<Tokenizer> ReadCheckpointDir(const std::string& dir,
                                             const TokenizerOptions& options);
  static Result<Tokenizer> FromBpeFiles(const std::string& vocab_json,
                                        const std::string& merges_txt);
  // fairseq: XLM-RoBERTa's ids (sentencepiece.bpe.model); else DeBERTa's (spm.model).
  static Result<Tokenizer> FromSentencePiece(const std::string& path, bool fairseq);
  static Result<Tokenizer> FromTokenizerJson(const std::string& path,
                                             const TokenizerOptions& options);
  Status ReadWordPieceJson(const nlohmann::json& doc, const std::string& path,
                           const TokenizerOptions& options);
  Status ReadBpeJson(const nlohmann::json& doc, const std::string& path);
  Status ReadTokenizerConfig(const std::string& dir, const TokenizerOptions& options);
  Status ReadSentencePieceConfig(const std::string& dir);
  Status ReadBpeConfig(const std::string& dir);
  Status FindSpecials(const std::string& path, const char* const names[4], const char* mask,
                      const char* expected);
  std::u32string BpeInput(std::string_view text) const;
  void BytePairEncode(std::string_view text, size_t max_tokens, std::vector<int32_t>& out) const;

  std::shared_ptr<const internal::ByteBpe> bpe_;                   // set: byte-level BPE
  std::shared_ptr<const internal::Unigram> unigram_;               // set: SentencePiece
  std::shared_ptr<const internal::PrecompiledCharsmap> charsmap_;  // XLM-R's normalizer
  int32_t spm_offset_ = 0;       // HF id = SentencePiece id + offset (1: fairseq, XLM-R)
  bool split_by_punct_ = false;  // DebertaV2Tokenizer split_by_punct
  internal::PrependScheme prepend_ = internal::PrependScheme::kAlways;  // Metaspace's
  bool bpe_prefix_space_ = false;    // ByteLevel add_prefix_space
  std::vector<AddedToken> added_;    // special tokens split off the text, longest first
  bool clean_text_ = true;           // BertNormalizer clean_text
  std::string continuation_ = "##";  // WordPiece continuing_subword_prefix
  size_t max_chars_per_word_ = 100;  // WordPiece: a longer word is [UNK]
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t pad_id_ = 0, unk_id_ = 1, cls_id_ = 2, sep_id_ = 3, mask_id_ = -1;
  bool lowercase_ = true;
  bool strip_accents_ = true;
  bool chinese_chars_ = true;
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

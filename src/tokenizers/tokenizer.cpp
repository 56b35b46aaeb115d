#include "tokenizers/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizers/byte_bpe.h"
#include "tokenizers/sentencepiece.h"
#include "tokenizers/unicode.h"
#include "util/text.h"

namespace tune {

namespace internal {

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    char32_t min = 0, c = 0;
    if ((b & 0xE0) == 0xC0) {
      len = 2, min = 0x80, c = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, min = 0x800, c = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, c = b & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) return i;
      c = (c << 6) | (cb & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = FindInvalidUtf8(s.substr(i, 4));
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    size_t len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    if (bad == 0 || len == 1 || i + len > s.size()) {
      ++i;  // skip one invalid byte
      continue;
    }
    char32_t c = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace internal

namespace {

using internal::AppendUtf8;

std::string ToUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

// The first character of `s` (UTF-8), or 0.
char32_t FirstChar(std::string_view s) {
  const std::u32string c = internal::DecodeUtf8(s.substr(0, std::min<size_t>(s.size(), 4)));
  return c.empty() ? 0 : c[0];
}

// The last character of `s` (UTF-8), or 0.
char32_t LastChar(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  return i == 0 ? 0 : FirstChar(s.substr(i - 1));
}

// The byte length of the white space that starts (`from_start`) or ends `s`.
size_t WhiteSpaceRun(std::string_view s, bool from_start) {
  const std::u32string chars = internal::DecodeUtf8(s);
  size_t bytes = 0;
  for (size_t k = 0; k < chars.size(); ++k) {
    const char32_t c = from_start ? chars[k] : chars[chars.size() - 1 - k];
    if (!internal::IsWhiteSpace(c)) break;
    std::string utf8;
    AppendUtf8(c, utf8);
    bytes += utf8.size();
  }
  return bytes;
}

// transformers 5's DebertaV2Tokenizer normalizer after lowercasing: Replace(r"\s{2,}|[\n\r\t]",
// " "), NFC, Strip(right).
std::u32string DebertaNormalize(std::u32string s) {
  std::u32string replaced;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && internal::IsWhiteSpace(s[j])) ++j;
    if (j - i >= 2 || (j - i == 1 && (s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))) {
      replaced.push_back(U' ');
      i = j;
    } else {
      replaced.push_back(s[i++]);
    }
  }
  std::u32string out = internal::Nfc(replaced);
  while (!out.empty() && internal::IsWhiteSpace(out.back())) out.pop_back();
  return out;
}

}  // namespace

// Hugging Face tokenizers' AddedVocabulary::find_matches over the non-normalized special tokens:
// leftmost-longest matches; lstrip/rstrip take the white space beside a match into it;
// single_word tokens only between non-word characters.
template <typename Piece, typename Special>
void Tokenizer::SplitSpecials(std::string_view text, Piece&& piece, Special&& special) const {
  size_t done = 0;  // bytes of `text` already emitted
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* match = nullptr;
    for (const AddedToken& t : added_) {  // longest first
      if (text.compare(i, t.content.size(), t.content) == 0) {
        match = &t;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
      continue;
    }
    size_t start = i, stop = i + match->content.size();
    const size_t next = stop;  // the search goes on after the match itself
    if (match->single_word &&
        ((start > 0 && internal::IsWordChar(LastChar(text.substr(0, start)))) ||
         (stop < text.size() && internal::IsWordChar(FirstChar(text.substr(stop)))))) {
      i = next;
      continue;
    }
    if (match->lstrip) start = std::max(start - WhiteSpaceRun(text.substr(0, start), false), done);
    if (match->rstrip) stop += WhiteSpaceRun(text.substr(stop), true);
    if (done < start) piece(text.substr(done, start - done), done == 0);
    special(*match);
    done = stop;
    i = std::max(next, stop);
  }
  if (done < text.size()) piece(text.substr(done), done == 0);
}

// tokenizers' BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase) and
// BertPreTokenizer (tokenizer.h lists the steps, before Tokenizer::SplitWords).
std::vector<std::u32string> Tokenizer::SplitWordsU32(std::string_view text) const {
  std::u32string s;
  for (char32_t c : internal::DecodeUtf8(text)) {
    if (clean_text_) {
      if (internal::IsBertControl(c)) continue;
      if (internal::IsWhiteSpace(c)) c = U' ';
    }
    if (chinese_chars_ && internal::IsCjkIdeograph(c)) {
      s.append({U' ', c, U' '});
    } else {
      s.push_back(c);
    }
  }
  if (strip_accents_) s = internal::StripAccents(s);
  if (lowercase_) s = internal::Lowercase(s);
  std::vector<std::u32string> words;
  std::u32string word;
  for (char32_t c : s) {
    const bool space = internal::IsWhiteSpace(c);
    if (space || internal::IsBertPunctuation(c)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
      if (!space) words.emplace_back(1, c);
    } else {
      word.push_back(c);
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

std::vector<std::string> Tokenizer::UnigramWords(std::string_view piece, bool first) const {
  std::u32string s = internal::DecodeUtf8(piece);
  std::vector<std::u32string> splits;
  if (charsmap_ != nullptr || spm_offset_ == 1) {  // XLM-R: Precompiled, WhitespaceSplit
    if (charsmap_ != nullptr) s = charsmap_->Normalize(s);
    std::u32string word;
    for (char32_t c : s) {
      if (internal::IsWhiteSpace(c)) {
        if (!word.empty()) splits.push_back(std::move(word));
        word.clear();
      } else {
        word.push_back(c);
      }
    }
    if (!word.empty()) splits.push_back(std::move(word));
  } else {  // DeBERTa: Lowercase, Replace, NFC, Strip; Punctuation (isolated)
    if (lowercase_) s = internal::Lowercase(s);
    s = DebertaNormalize(std::move(s));
    if (split_by_punct_) {
      std::u32string word;
      for (char32_t c : s) {
        if (internal::IsBertPunctuation(c)) {
          if (!word.empty()) splits.push_back(std::move(word));
          word.clear();
          splits.emplace_back(1, c);
        } else {
          word.push_back(c);
        }
      }
      if (!word.empty()) splits.push_back(std::move(word));
    } else if (!s.empty()) {
      splits.push_back(std::move(s));
    }
  }
  std::vector<std::u32string> words;
  for (size_t k = 0; k < splits.size(); ++k) {
    internal::MetaspaceSplit(splits[k], prepend_, first && k == 0, words);
  }
  std::vector<std::string> out;
  out.reserve(words.size());
  for (const auto& w : words) out.push_back(ToUtf8(w));
  return out;
}

void Tokenizer::EncodePiece(std::string_view piece, bool first, size_t max_tokens,
                            std::vector<int32_t>* ids, std::vector<std::string>* words) const {
  if (unigram_) {
    for (const std::string& w : UnigramWords(piece, first)) {
      if (ids != nullptr && ids->size() >= max_tokens) return;
      std::vector<int32_t> scratch;
      unigram_->Encode(w, ids != nullptr ? *ids : scratch, words);
    }
    return;
  }
  if (bpe_) {
    if (ids != nullptr) {
      BytePairEncode(piece, max_tokens, *ids);
    } else {
      for (const auto& w : internal::GptPreTokenize(BpeInput(piece))) words->push_back(ToUtf8(w));
    }
    return;
  }
  for (const auto& w : SplitWordsU32(piece)) {
    if (ids == nullptr) {
      words->push_back(ToUtf8(w));
      continue;
    }
    if (ids->size() >= max_tokens) return;
    WordPiece(w, *ids);
  }
}

std::vector<std::string> Tokenizer::SplitWords(std::string_view text) const {
  std::vector<std::string> out;
  std::string valid;
  if (internal::FindInvalidUtf8(text) != std::string_view::npos) {
    valid = ToUtf8(internal::DecodeUtf8(text));
    text = valid;
  }
  SplitSpecials(
      text,
      [&](std::string_view piece, bool first) { EncodePiece(piece, first, 0, nullptr, &out); },
      [&](const AddedToken& t) { out.push_back(t.content); });
  return out;
}

void Tokenizer::WordPiece(const std::u32string& word, std::vector<int32_t>& out) const {
  if (word.size() > max_chars_per_word_) {
    out.push_back(unk_id_);
    return;
  }
  // Byte offsets of the characters in the word's UTF-8 form.
  std::string utf8;
  std::vector<size_t> offsets;
  for (char32_t c : word) {
    offsets.push_back(utf8.size());
    AppendUtf8(c, utf8);
  }
  offsets.push_back(utf8.size());
  const size_t first = out.size();
  std::string key;
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    int32_t found = -1;
    while (end > start) {
      key.assign(start > 0 ? continuation_ : std::string());
      key.append(utf8, offsets[start], offsets[end] - offsets[start]);
      auto it = ids_.find(key);
      if (it != ids_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

std::u32string Tokenizer::BpeInput(std::string_view text) const {
  std::u32string s = internal::DecodeUtf8(text);
  // tokenizers' ByteLevel add_prefix_space: a space before text that does not start with one.
  if (bpe_prefix_space_ && (s.empty() || s[0] != U' ')) s.insert(s.begin(), U' ');
  return s;
}

void Tokenizer::BytePairEncode(std::string_view text, size_t max_tokens,
                               std::vector<int32_t>& out) const {
  std::vector<std::string> pieces;
  for (const auto& word : internal::GptPreTokenize(BpeInput(text))) {
    if (out.size() >= max_tokens) break;
    pieces.clear();
    bpe_->Split(internal::ByteLevel(ToUtf8(word)), pieces);
    for (const auto& piece : pieces) {
      const int32_t id = TokenId(piece);
      out.push_back(id >= 0 ? id : unk_id_);
    }
  }
  if (out.size() > max_tokens) out.resize(max_tokens);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, size_t max_tokens) const {
  std::vector<int32_t> ids;
  std::string valid;
  if (internal::FindInvalidUtf8(text) != std::string_view::npos) {  // as DecodeUtf8 reads it
    valid = ToUtf8(internal::DecodeUtf8(text));
    text = valid;
  }
  SplitSpecials(
      text,
      [&](std::string_view piece, bool first) {
        if (ids.size() < max_tokens) EncodePiece(piece, first, max_tokens, &ids, nullptr);
      },
      [&](const AddedToken& t) { ids.push_back(t.id); });
  if (ids.size() > max_tokens) ids.resize(max_tokens);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeForClassification(std::string_view text,
                                                        int64_t max_length) const {
  std::vector<int32_t> ids = {cls_id_};
  std::vector<int32_t> body =
      Encode(text, static_cast<size_t>(std::max<int64_t>(max_length - 2, 0)));
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(sep_id_);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodePairForClassification(
    std::string_view a, std::string_view b, int64_t max_length, Truncation truncation,
    std::vector<int32_t>* token_types) const {
  const int32_t separators = PairSeparators();
  const std::vector<int32_t> first = Encode(a), second = Encode(b);
  const auto [keep_a, keep_b] =
      PairKeep(static_cast<int64_t>(first.size()), static_cast<int64_t>(second.size()),
               max_length - 2 - separators, truncation);
  std::vector<int32_t> ids(static_cast<size_t>(2 + separators + keep_a + keep_b));
  size_t second_starts = 0;
  JoinPair(first, keep_a, second, keep_b, cls_id_, sep_id_, separators, ids.data(), &second_starts);
  if (token_types != nullptr) {
    token_types->assign(ids.size(), 0);
    std::fill(token_types->begin() + static_cast<std::ptrdiff_t>(second_starts), token_types->end(),
              1);
  }
  return ids;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && static_cast<size_t>(id) < tokens_.size() ? tokens_[id] : kEmpty;
}

int32_t Tokenizer::TokenId(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

void Tokenizer::Index() {
  ids_.clear();
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_[tokens_[i]] = static_cast<int32_t>(i);
}

Result<Tokenizer> Tokenizer::FromVocabFile(const std::string& path, bool lowercase) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    try {  // nlohmann's typed accessors throw type_error for a value of another type
      return FromBpeFiles(path,
                          (std::filesystem::path(path).parent_path() / "merges.txt").string());
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgumentError(
          fmt::format("{}: a JSON value of the wrong type: {}", path, JsonSyntaxMessage(e.what())));
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the vocabulary file", path));
  TUNE_RETURN_IF_ERROR(internal::CheckUnicodeData());
  Tokenizer t;
  t.lowercase_ = lowercase;
  t.strip_accents_ = lowercase;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (size_t bad = internal::FindInvalidUtf8(line); bad != std::string::npos) {
      return InvalidArgumentError(fmt::format("{}:{}:{}: invalid UTF-8 (byte 0x{:02x})", path,
                                              line_no, bad + 1,
                                              static_cast<unsigned char>(line[bad])));
    }
    t.tokens_.push_back(line);
  }
  if (t.tokens_.empty())
    return InvalidArgumentError(fmt::format("{}: the vocabulary is empty", path));
  if (t.tokens_.size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError(fmt::format("{}: too many tokens", path));
  }
  t.Index();  // later duplicates win, as in Hugging Face's load_vocab
  const std::pair<const char*, int32_t*> specials[] = {
      {"[PAD]", &t.pad_id_}, {"[UNK]", &t.unk_id_}, {"[CLS]", &t.cls_id_}, {"[SEP]", &t.sep_id_}};
  for (const auto& [name, id] : specials) {
    int32_t found = t.TokenId(name);
    if (found < 0) {
      return InvalidArgumentError(
          fmt::format("{}: the vocabulary has no {} token (a BERT WordPiece vocab.txt is expected)",
                      path, name));
    }
    *id = found;
  }
  t.mask_id_ = t.TokenId("[MASK]");
  t.AddFamilySpecials();
  t.description_ = fmt::format("WordPiece vocab.txt {} ({} tokens)", path, t.tokens_.size());
  return t;
}

Tokenizer Tokenizer::Build(const std::vector<std::string>& texts, const TokenizerOptions& options) {
  Tokenizer t;
  t.lowercase_ = options.lowercase;
  t.strip_accents_ = options.strip_accents.value_or(options.lowercase);
  t.chinese_chars_ = options.tokenize_chinese_chars;
  std::unordered_map<std::string, int64_t> word_counts;
  std::map<char32_t, int64_t> char_counts;
  for (const auto& text : texts) {
    for (const auto& w : t.SplitWordsU32(text)) {
      for (char32_t c : w) ++char_counts[c];
      ++word_counts[ToUtf8(w)];
    }
  }
  t.tokens_ = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
  const auto vocab_size = static_cast<size_t>(std::max<int64_t>(options.vocab_size, 6));
  const int64_t min_count = std::max<int64_t>(options.min_count, 1);

  std::vector<std::pair<int64_t, char32_t>> chars;
  for (const auto& [c, n] : char_counts) {
    if (n >= min_count) chars.emplace_back(-n, c);
  }
  std::sort(chars.begin(), chars.end());
  const size_t max_chars = std::max<size_t>((vocab_size - 4) / 8, 1);
  if (chars.size() > max_chars) chars.resize(max_chars);
  for (const auto& [n, c] : chars) {
    std::string s;
    AppendUtf8(c, s);
    t.tokens_.push_back(s);
    t.tokens_.push_back("##" + s);
  }
  t.Index();

  std::vector<std::pair<int64_t, const std::string*>> words;
  for (const auto& [w, n] : word_counts) {
    if (n >= min_count && !t.ids_.count(w)) words.emplace_back(-n, &w);
  }
  std::sort(words.begin(), words.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : *a.second < *b.second;
  });
  for (const auto& [n, w] : words) {
    if (t.tokens_.size() >= vocab_size) break;
    t.tokens_.push_back(*w);
  }
  t.Index();
  t.AddFamilySpecials();
  t.description_ =
      fmt::format("vocabulary built from the training text ({} tokens)", t.tokens_.size());
  return t;
}

}  // namespace tune

#include "tune/train/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <filesystem>
#include <map>

#include "train/byte_bpe.h"

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

constexpr size_t kMaxCharsPerWord = 100;  // BERT: max_input_chars_per_word

bool IsWhitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x00A0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Cc and the common Cf characters (BERT's _is_control), NUL and U+FFFD: removed.
bool IsControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x00AD || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) || c == 0xFEFF || c == 0xFFFD;
}

bool IsPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;  // every non-alphanumeric ASCII character, as BERT does
  }
  return c == 0x00A1 || c == 0x00A7 || c == 0x00AB || c == 0x00B6 || c == 0x00B7 || c == 0x00BB ||
         c == 0x00BF || (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) ||
         (c >= 0x3001 && c <= 0x3003) || (c >= 0x3008 && c <= 0x3011) ||
         (c >= 0x3014 && c <= 0x301F) ||
         (c >= 0xFF01 && c <= 0xFF0F && c != 0xFF04 && c != 0xFF0B) || c == 0xFF1A || c == 0xFF1B ||
         c == 0xFF1F || c == 0xFF20 || (c >= 0xFF3B && c <= 0xFF3F) || c == 0xFF5B || c == 0xFF5D ||
         (c >= 0xFF5F && c <= 0xFF65);
}

bool IsCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsCombiningMark(char32_t c) { return c >= 0x0300 && c <= 0x036F; }

char32_t ToLower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c >= 0x100 && c <= 0x17F) {
    if (((c <= 0x137) || (c >= 0x14A && c <= 0x177)) && c % 2 == 0) return c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && c % 2 == 1) return c + 1;
    if (c == 0x178) return 0xFF;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  switch (c) {
    case 0x386:
      return 0x3AC;
    case 0x388:
      return 0x3AD;
    case 0x389:
      return 0x3AE;
    case 0x38A:
      return 0x3AF;
    case 0x38C:
      return 0x3CC;
    case 0x38E:
      return 0x3CD;
    case 0x38F:
      return 0x3CE;
    case 0x3AA:
      return 0x3CA;
    case 0x3AB:
      return 0x3CB;
    default:
      break;
  }
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

// The base letter of an accented lowercase letter (what NFD + dropping marks gives), or `c`.
char32_t StripAccent(char32_t c) {
  static const char kLatin1[] = "aaaaaa.ceeeeiiii.nooooo..uuuuy.y";  // U+00E0..U+00FF
  // U+0100..U+017F, 16 per line.
  static const char kLatinExtA[] =
      "aaaaaaccccccccdd"
      "..eeeeeeeeeegggg"
      "gggghh..iiiiiiii"
      "i...jjkk.llllll."
      "...nnnnnn...oooo"
      "oo..rrrrrrssssss"
      "sstttt..uuuuuuuu"
      "uuuuwwyyyzzzzzz.";
  static_assert(sizeof(kLatin1) == 0x20 + 1 && sizeof(kLatinExtA) == 0x80 + 1);
  if (c >= 0xE0 && c <= 0xFF) {
    char b = kLatin1[c - 0xE0];
    return b == '.' ? c : static_cast<char32_t>(b);
  }
  if (c >= 0x100 && c <= 0x17F) {
    char b = kLatinExtA[c - 0x100];
    return b == '.' ? c : static_cast<char32_t>(b);
  }
  switch (c) {
    case 0x3AC:
      return 0x3B1;
    case 0x3AD:
      return 0x3B5;
    case 0x3AE:
      return 0x3B7;
    case 0x3AF:
    case 0x3CA:
    case 0x390:
      return 0x3B9;
    case 0x3CC:
      return 0x3BF;
    case 0x3CD:
    case 0x3CB:
    case 0x3B0:
      return 0x3C5;
    case 0x3CE:
      return 0x3C9;
    case 0x439:
    case 0x45D:
      return 0x438;
    case 0x450:
    case 0x451:
      return 0x435;
    case 0x453:
      return 0x433;
    case 0x457:
      return 0x456;
    case 0x45C:
      return 0x43A;
    case 0x45E:
      return 0x443;
    default:
      return c;
  }
}

std::string ToUtf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

}  // namespace

std::vector<std::u32string> Tokenizer::SplitWordsU32(std::string_view text) const {
  std::vector<std::u32string> words;
  std::u32string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : internal::DecodeUtf8(text)) {
    if (c == 0 || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      flush();
      continue;
    }
    if (lowercase_) {
      if (IsCombiningMark(c)) continue;
      c = StripAccent(ToLower(c));
    }
    if (IsPunctuation(c) || IsCjk(c)) {
      flush();
      words.push_back(std::u32string(1, c));
      continue;
    }
    cur.push_back(c);
  }
  flush();
  return words;
}

std::vector<std::string> Tokenizer::SplitWords(std::string_view text) const {
  std::vector<std::string> out;
  if (bpe_) {
    for (const auto& w : internal::GptPreTokenize(internal::DecodeUtf8(text))) {
      out.push_back(ToUtf8(w));
    }
    return out;
  }
  for (const auto& w : SplitWordsU32(text)) out.push_back(ToUtf8(w));
  return out;
}

void Tokenizer::WordPiece(const std::u32string& word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxCharsPerWord) {
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
      key.assign(start > 0 ? "##" : "");
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

void Tokenizer::BytePairEncode(std::string_view text, size_t max_tokens,
                               std::vector<int32_t>& out) const {
  std::vector<std::string> pieces;
  for (const auto& word : internal::GptPreTokenize(internal::DecodeUtf8(text))) {
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
  if (bpe_) {
    BytePairEncode(text, max_tokens, ids);
    return ids;
  }
  for (const auto& w : SplitWordsU32(text)) {
    if (ids.size() >= max_tokens) break;
    WordPiece(w, ids);
  }
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

Result<Tokenizer> Tokenizer::FromBpeFiles(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the vocabulary file", path));
  const nlohmann::json vocab = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (vocab.is_discarded() || !vocab.is_object()) {
    return InvalidArgumentError(fmt::format(
        "{}: not a JSON object of token -> id (a byte-level BPE vocab.json is expected)", path));
  }
  if (vocab.empty()) return InvalidArgumentError(fmt::format("{}: the vocabulary is empty", path));
  Tokenizer t;
  t.lowercase_ = false;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return InvalidArgumentError(fmt::format("{}: token '{}' has id {}; ids are integers >= 0",
                                              path, token, id.dump()));
    }
    const auto i = static_cast<size_t>(id.get<int64_t>());
    if (i >= t.tokens_.size()) t.tokens_.resize(i + 1);
    if (!t.tokens_[i].empty()) {
      return InvalidArgumentError(fmt::format("{}: tokens '{}' and '{}' share id {}", path,
                                              t.tokens_[i], token, i));
    }
    t.tokens_[i] = token;
  }
  t.Index();
  t.ids_.erase("");  // ids no token has
  const std::pair<const char*, int32_t*> specials[] = {
      {"<pad>", &t.pad_id_}, {"<unk>", &t.unk_id_}, {"<s>", &t.cls_id_}, {"</s>", &t.sep_id_}};
  for (const auto& [name, id] : specials) {
    const int32_t found = t.TokenId(name);
    if (found < 0) {
      return InvalidArgumentError(fmt::format(
          "{}: the vocabulary has no {} token (a RoBERTa-style byte-level BPE vocab.json is "
          "expected)",
          path, name));
    }
    *id = found;
  }
  const std::string merges = (std::filesystem::path(path).parent_path() / "merges.txt").string();
  TUNE_ASSIGN_OR_RETURN(internal::ByteBpe bpe, internal::ByteBpe::FromMergesFile(merges));
  t.description_ = fmt::format("byte-level BPE {} ({} tokens, {} merges)", path, vocab.size(),
                               bpe.size());
  t.bpe_ = std::make_shared<const internal::ByteBpe>(std::move(bpe));
  return t;
}

Result<Tokenizer> Tokenizer::FromVocabFile(const std::string& path, bool lowercase) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    return FromBpeFiles(path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the vocabulary file", path));
  Tokenizer t;
  t.lowercase_ = lowercase;
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
  t.description_ = fmt::format("WordPiece vocab.txt {} ({} tokens)", path, t.tokens_.size());
  return t;
}

Tokenizer Tokenizer::Build(const std::vector<std::string>& texts, const TokenizerOptions& options) {
  Tokenizer t;
  t.lowercase_ = options.lowercase;
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
  t.description_ =
      fmt::format("vocabulary built from the training text ({} tokens)", t.tokens_.size());
  return t;
}

}  // namespace tune

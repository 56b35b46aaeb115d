#include "train/byte_bpe.h"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <limits>

#include "tune/train/tokenizer.h"

namespace tune::internal {
namespace {

bool IsSpace(char32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE) ||
         (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) ||
         (c >= 0x966 && c <= 0x96F) || (c >= 0x9E6 && c <= 0x9EF) ||
         (c >= 0x2070 && c <= 0x2079 && c != 0x2071 && c != 0x2072 && c != 0x2073) ||
         (c >= 0x2080 && c <= 0x2089) || (c >= 0x2150 && c <= 0x2189) ||
         (c >= 0x2460 && c <= 0x249B) || (c >= 0x2776 && c <= 0x2793) ||
         (c >= 0xFF10 && c <= 0xFF19);
}

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (c < 0x100) return c == 0xAA || c == 0xB5 || c == 0xBA || (c >= 0xC0 && c != 0xD7 && c != 0xF7);
  return (c <= 0x2AF) ||                        // Latin Extended, IPA
         (c >= 0x370 && c <= 0x3FF && c != 0x37E && c != 0x387) ||  // Greek
         (c >= 0x400 && c <= 0x52F && !(c >= 0x482 && c <= 0x489)) ||  // Cyrillic
         (c >= 0x531 && c <= 0x587) ||          // Armenian
         (c >= 0x5D0 && c <= 0x5F2) ||          // Hebrew letters
         (c >= 0x620 && c <= 0x64A) || (c >= 0x671 && c <= 0x6D3) ||  // Arabic letters
         (c >= 0x904 && c <= 0x939) ||          // Devanagari letters
         (c >= 0xE01 && c <= 0xE30) ||          // Thai
         (c >= 0x10A0 && c <= 0x10FF) ||        // Georgian
         (c >= 0x1100 && c <= 0x11FF) ||        // Hangul Jamo
         (c >= 0x1E00 && c <= 0x1FFF && c != 0x1FBD && !(c >= 0x1FBF && c <= 0x1FC1) &&
          !(c >= 0x1FCD && c <= 0x1FCF) && !(c >= 0x1FDD && c <= 0x1FDF) &&
          !(c >= 0x1FED && c <= 0x1FEF) && c != 0x1FFD && c != 0x1FFE) ||  // Latin/Greek ext.
         (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA) ||  // kana
         (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||  // CJK ideographs
         (c >= 0xAC00 && c <= 0xD7A3) ||        // Hangul syllables
         (c >= 0xF900 && c <= 0xFAFF) ||        // CJK compatibility ideographs
         (c >= 0xFF21 && c <= 0xFF3A) || (c >= 0xFF41 && c <= 0xFF5A) ||  // fullwidth Latin
         (c >= 0x20000 && c <= 0x2FA1F);        // CJK extensions
}

bool IsOther(char32_t c) { return !IsSpace(c) && !IsLetter(c) && !IsNumber(c); }

// GPT-2's bytes_to_unicode: the printable bytes keep their code point, the 68 others take
// U+0100, U+0101, ... in byte order.
const std::array<std::string, 256>& ByteAlphabet() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      AppendUtf8(printable ? static_cast<char32_t>(b) : next++, t[b]);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::u32string> GptPreTokenize(std::u32string_view s) {
  std::vector<std::u32string> out;
  const size_t n = s.size();
  size_t i = 0;
  auto run = [&](size_t j, bool (*in)(char32_t)) {
    while (j < n && in(s[j])) ++j;
    return j;
  };
  while (i < n) {
    // 's 't 're 've 'm 'll 'd
    if (s[i] == '\'' && i + 1 < n) {
      const char32_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
      size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') len = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) len = 3;
      if (len > 0) {
        out.emplace_back(s.substr(i, len));
        i += len;
        continue;
      }
    }
    // ' ?' then letters, numbers or other characters.
    const size_t j = (s[i] == ' ' && i + 1 < n && !IsSpace(s[i + 1])) ? i + 1 : i;
    if (!IsSpace(s[j])) {
      const size_t end = IsLetter(s[j]) ? run(j, IsLetter) : IsNumber(s[j]) ? run(j, IsNumber)
                                                                              : run(j, IsOther);
      out.emplace_back(s.substr(i, end - i));
      i = end;
      continue;
    }
    // \s+(?!\S): a run of spaces leaves its last one to the word after it; \s+ otherwise.
    const size_t end = run(i, IsSpace);
    const size_t take = (end < n && end - i > 1) ? end - 1 - i : end - i;
    out.emplace_back(s.substr(i, take));
    i += take;
  }
  return out;
}

std::string ByteLevel(std::string_view utf8) {
  const auto& alphabet = ByteAlphabet();
  std::string out;
  out.reserve(utf8.size() * 2);
  for (unsigned char b : utf8) out += alphabet[b];
  return out;
}

Result<ByteBpe> ByteBpe::FromMergesFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the BPE merges file", path));
  ByteBpe bpe;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      return InvalidArgumentError(
          fmt::format("{}:{}: '{}' is not a merge (two tokens separated by one space)", path,
                      line_no, line.substr(0, 80)));
    }
    if (FindInvalidUtf8(line) != std::string::npos) {
      return InvalidArgumentError(fmt::format("{}:{}: invalid UTF-8", path, line_no));
    }
    if (bpe.ranks_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return InvalidArgumentError(fmt::format("{}: too many merges", path));
    }
    // The first occurrence of a pair keeps its rank, as Hugging Face's tokenizers do.
    bpe.ranks_.emplace(line, static_cast<int32_t>(bpe.ranks_.size()));
  }
  if (bpe.ranks_.empty()) return InvalidArgumentError(fmt::format("{}: no merges", path));
  return bpe;
}

void ByteBpe::Split(const std::string& word, std::vector<std::string>& out) const {
  std::vector<std::string> parts;  // one symbol per code point
  for (char32_t c : DecodeUtf8(word)) AppendUtf8(c, parts.emplace_back());
  std::string key;
  while (parts.size() > 1) {
    int32_t best = std::numeric_limits<int32_t>::max();
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      key.assign(parts[k]).append(" ").append(parts[k + 1]);
      auto it = ranks_.find(key);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = k;
      }
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    const std::string left = parts[at], right = parts[at + 1];
    std::vector<std::string> merged;
    merged.reserve(parts.size());
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k + 1 < parts.size() && parts[k] == left && parts[k + 1] == right) {
        merged.push_back(left + right);
        ++k;
      } else {
        merged.push_back(parts[k]);
      }
    }
    parts = std::move(merged);
  }
  for (auto& p : parts) out.push_back(std::move(p));
}

}  // namespace tune::internal

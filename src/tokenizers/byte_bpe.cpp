#include "tokenizers/byte_bpe.h"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <limits>

#include "tokenizers/tokenizer.h"
#include "tokenizers/unicode.h"

namespace tune::internal {
namespace {

bool IsSpace(char32_t c) { return internal::IsWhiteSpace(c); }

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
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        len = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        len = 3;
      if (len > 0) {
        out.emplace_back(s.substr(i, len));
        i += len;
        continue;
      }
    }
    // ' ?' then letters, numbers or other characters.
    const size_t j = (s[i] == ' ' && i + 1 < n && !IsSpace(s[i + 1])) ? i + 1 : i;
    if (!IsSpace(s[j])) {
      const size_t end = IsLetter(s[j])   ? run(j, IsLetter)
                         : IsNumber(s[j]) ? run(j, IsNumber)
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

Status ByteBpe::AddMerge(std::string_view pair, const std::string& where) {
  const size_t space = pair.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == pair.size() ||
      pair.find(' ', space + 1) != std::string::npos) {
    return InvalidArgumentError(fmt::format(
        "{}: '{}' is not a merge (two tokens separated by one space)", where, pair.substr(0, 80)));
  }
  if (FindInvalidUtf8(pair) != std::string::npos) {
    return InvalidArgumentError(fmt::format("{}: invalid UTF-8", where));
  }
  if (ranks_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgumentError(fmt::format("{}: too many merges", where));
  }
  // The first occurrence of a pair keeps its rank, as Hugging Face's tokenizers do.
  ranks_.emplace(std::string(pair), static_cast<int32_t>(ranks_.size()));
  return Status::Ok();
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
    TUNE_RETURN_IF_ERROR(bpe.AddMerge(line, fmt::format("{}:{}", path, line_no)));
  }
  if (bpe.ranks_.empty()) return InvalidArgumentError(fmt::format("{}: no merges", path));
  return bpe;
}

Result<ByteBpe> ByteBpe::FromMerges(const std::vector<std::string>& pairs,
                                    const std::string& source) {
  ByteBpe bpe;
  for (size_t i = 0; i < pairs.size(); ++i) {
    TUNE_RETURN_IF_ERROR(bpe.AddMerge(pairs[i], fmt::format("{}: merges[{}]", source, i)));
  }
  if (bpe.ranks_.empty()) return InvalidArgumentError(fmt::format("{}: no merges", source));
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

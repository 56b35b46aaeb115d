#include "tokenizers/unigram.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "tokenizers/tokenizer.h"
#include "tokenizers/unicode.h"

namespace tune::internal {
namespace {

constexpr double kUnkPenalty = 10.0;     // tokenizers' K_UNK_PENALTY (SentencePiece's kUnkPenalty)
constexpr char32_t kMetaspace = 0x2581;  // "▁"

// The byte length of the UTF-8 character that starts with `lead`.
size_t Utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : 4;
}

std::string ToUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

// darts-clone's double-array unit fields.
bool HasLeaf(uint32_t unit) { return ((unit >> 8) & 1) != 0; }
uint32_t Value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t Label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

Unigram::Unigram(const std::vector<std::pair<std::string, double>>& vocab, int32_t unk_id)
    : unk_id_(unk_id) {
  min_score_ = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < vocab.size(); ++i) {
    ids_.emplace(vocab[i].first, static_cast<int32_t>(i));  // the first of equal pieces wins
    scores_.push_back(vocab[i].second);
    longest_ = std::max(longest_, vocab[i].first.size());
    min_score_ = std::min(min_score_, vocab[i].second);
  }
}

void Unigram::Encode(std::string_view word, std::vector<int32_t>& ids,
                     std::vector<std::string>* pieces) const {
  struct Node {
    int32_t id = -1;
    double score = 0.0;
    size_t starts_at = SIZE_MAX;  // SIZE_MAX: no path ends here yet
  };
  const size_t size = word.size();
  if (size == 0) return;
  const double unk_score = min_score_ - kUnkPenalty;
  std::vector<Node> best(size + 1);
  best[0].starts_at = 0;
  std::string key;
  for (size_t start = 0; start < size;) {
    const double here = best[start].score;
    const size_t char_len =
        std::min(Utf8Length(static_cast<unsigned char>(word[start])), size - start);
    bool single = false;
    // Every piece that is a prefix of the rest, shortest first (the order of the library's trie).
    for (size_t end = start + char_len; end <= size && end - start <= longest_;) {
      key.assign(word.data() + start, end - start);
      if (auto it = ids_.find(key); it != ids_.end()) {
        const double candidate = scores_[static_cast<size_t>(it->second)] + here;
        Node& target = best[end];
        if (target.starts_at == SIZE_MAX || candidate > target.score) {
          target = Node{it->second, candidate, start};
        }
        if (end - start == char_len) single = true;
      }
      if (end == size) break;
      end += Utf8Length(static_cast<unsigned char>(word[end]));
      end = std::min(end, size);
    }
    if (!single) {
      Node& target = best[start + char_len];
      const double candidate = unk_score + here;
      if (target.starts_at == SIZE_MAX || candidate > target.score) {
        target = Node{unk_id_, candidate, start};
      }
    }
    start += char_len;
  }
  // Back from the end; runs of unknown characters fuse into one token.
  std::vector<std::string_view> tokens;
  size_t fused_begin = SIZE_MAX, fused_end = 0;
  for (size_t end = size; end > 0;) {
    const Node& node = best[end];
    const size_t start = node.starts_at;
    if (node.id == unk_id_) {
      if (fused_begin == SIZE_MAX) fused_end = end;
      fused_begin = start;
    } else {
      if (fused_begin != SIZE_MAX) {
        tokens.push_back(word.substr(fused_begin, fused_end - fused_begin));
        fused_begin = SIZE_MAX;
      }
      tokens.push_back(word.substr(start, end - start));
    }
    end = start;
  }
  if (fused_begin != SIZE_MAX) tokens.push_back(word.substr(fused_begin, fused_end - fused_begin));
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
    key.assign(it->data(), it->size());
    const auto found = ids_.find(key);
    ids.push_back(found != ids_.end() ? found->second : unk_id_);
    if (pieces != nullptr) pieces->push_back(key);
  }
}

Result<PrecompiledCharsmap> PrecompiledCharsmap::Parse(std::string_view map,
                                                       const std::string& source) {
  PrecompiledCharsmap c;
  if (map.empty()) return c;
  uint32_t trie_bytes = 0;
  if (map.size() < 4) {
    return InvalidArgumentError(
        fmt::format("{}: the normalizer's character map is truncated", source));
  }
  for (int i = 3; i >= 0; --i) trie_bytes = (trie_bytes << 8) | static_cast<unsigned char>(map[i]);
  if (trie_bytes % 4 != 0 || trie_bytes > map.size() - 4 || trie_bytes == 0) {
    return InvalidArgumentError(
        fmt::format("{}: the normalizer's character map is malformed (a trie of {} bytes in {})",
                    source, trie_bytes, map.size()));
  }
  c.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < c.units_.size(); ++i) {
    uint32_t u = 0;
    for (int b = 3; b >= 0; --b) u = (u << 8) | static_cast<unsigned char>(map[4 + 4 * i + b]);
    c.units_[i] = u;
  }
  c.targets_ = std::string(map.substr(4 + trie_bytes));
  return c;
}

std::optional<std::string_view> PrecompiledCharsmap::Transform(std::string_view chunk) const {
  if (units_.empty()) return std::nullopt;
  size_t pos = Offset(units_[0]);
  for (unsigned char c : chunk) {
    if (c == 0) break;
    pos ^= c;
    if (pos >= units_.size()) return std::nullopt;
    const uint32_t unit = units_[pos];
    if (Label(unit) != c) return std::nullopt;
    pos ^= Offset(unit);
    if (pos >= units_.size()) return std::nullopt;
    if (HasLeaf(unit)) {  // the shortest match is the one used
      const size_t begin = Value(units_[pos]);
      if (begin >= targets_.size()) return std::nullopt;
      const size_t end = targets_.find('\0', begin);
      return std::string_view(targets_).substr(begin, end == std::string::npos ? end : end - begin);
    }
  }
  return std::nullopt;
}

std::u32string PrecompiledCharsmap::Normalize(std::u32string_view text) const {
  if (units_.empty()) return std::u32string(text);
  std::u32string out;
  out.reserve(text.size());
  std::string chunk;
  auto append = [&out](std::string_view utf8) {
    const std::u32string s = DecodeUtf8(utf8);
    out.append(s);
  };
  for (const auto& [begin, end] : Graphemes(text)) {
    const std::u32string_view cluster = text.substr(begin, end - begin);
    chunk = ToUtf8(cluster);
    if (chunk.size() < 6) {
      if (auto target = Transform(chunk)) {
        append(*target);
        continue;
      }
    }
    for (char32_t c : cluster) {
      chunk.clear();
      AppendUtf8(c, chunk);
      if (auto target = Transform(chunk)) {
        append(*target);
      } else {
        out.push_back(c);
      }
    }
  }
  return out;
}

void MetaspaceSplit(std::u32string_view piece, PrependScheme scheme, bool first,
                    std::vector<std::u32string>& out) {
  if (piece.empty()) return;
  std::u32string s;
  s.reserve(piece.size() + 1);
  const bool prepend =
      scheme == PrependScheme::kAlways || (scheme == PrependScheme::kFirst && first);
  if (prepend && piece[0] != U' ' && piece[0] != kMetaspace) {
    s.push_back(kMetaspace);
  }
  for (char32_t c : piece) s.push_back(c == U' ' ? kMetaspace : c);
  size_t word = 0;
  for (size_t i = 1; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == kMetaspace) {
      if (i > word) out.push_back(s.substr(word, i - word));
      word = i;
    }
  }
}

}  // namespace tune::internal

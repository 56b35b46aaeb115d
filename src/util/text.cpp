#include "util/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace tune {

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (1-4), or 0 when the byte there does not
// begin one (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                                          std::tolower(static_cast<unsigned char>(b[j - 1]))
                                      ? 0
                                      : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
std::string SortedLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  // A candidate the word is a prefix of ("bert-base" -> "bert-base-uncased") wins first.
  if (word.size() >= 3) {
    for (const std::string& c : candidates) {
      if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) return c;
    }
  }
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  bool best_anagram = false;
  const std::string letters = SortedLower(word);
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    bool anagram = SortedLower(c) == letters;  // a transposition ("lgo" -> "log")
    if (d < best_d || (d == best_d && anagram && !best_anagram)) {
      best_d = d;
      best = c;
      best_anagram = anagram;
    }
  }
  if (best || word.size() < 3) return best;
  for (const std::string& c : candidates) {
    if (c.find(word) != std::string::npos || (c.size() >= 3 && word.find(c) != std::string::npos)) {
      return c;
    }
  }
  return std::nullopt;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = ClosestMatch(word, candidates);
  return m ? " (did you mean '" + *m + "'?)" : "";
}

size_t DisplayWidth(std::string_view utf8) {
  size_t width = 0;
  for (char c : utf8) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++width;  // not a continuation byte
  }
  return width;
}

std::string JoinNames(const std::vector<std::string>& names, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += sep;
    out += names[i];
  }
  return out;
}

std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int value = 0;
    if (i + 3 > text.size() ||
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr !=
            text.data() + i + 3) {
      return std::nullopt;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> SplitUrlQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> items;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    items.emplace_back(std::string(item.substr(0, eq)), eq == std::string_view::npos
                                                            ? std::string()
                                                            : std::string(item.substr(eq + 1)));
  }
  return items;
}

TextPosition LineColumnAt(std::string_view text, size_t byte) {
  TextPosition p;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

std::string JsonSyntaxMessage(const std::string& what) {
  const auto pos = what.find("syntax error");
  if (pos != std::string::npos) return what.substr(pos);
  // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
  const auto id_end = what.find("] ");
  if (what.rfind("[json.exception.", 0) == 0 && id_end != std::string::npos) {
    return what.substr(id_end + 2);
  }
  return what;
}

namespace {
constexpr int64_t kKiBytes = int64_t{1} << 10;
constexpr int64_t kMiBytes = int64_t{1} << 20;
constexpr int64_t kGiBytes = int64_t{1} << 30;
}  // namespace

std::string FormatBytes(int64_t bytes) {
  const double v = static_cast<double>(bytes);
  const int64_t mag = bytes < 0 ? -bytes : bytes;
  if (mag >= kGiBytes) return fmt::format("{:.2f} GiB", v / static_cast<double>(kGiBytes));
  if (mag >= kMiBytes) return fmt::format("{:.1f} MiB", v / static_cast<double>(kMiBytes));
  if (mag >= kKiBytes) return fmt::format("{:.1f} KiB", v / static_cast<double>(kKiBytes));
  return fmt::format("{} B", bytes);
}

Result<int64_t> ParseBytes(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("invalid memory size '{}': {} (examples: 24GiB, 1.5GB, 512MiB, "
                              "1000000)",
                              text, why));
  };
  size_t k = 0;
  while (k < text.size() && (std::isdigit(static_cast<unsigned char>(text[k])) || text[k] == '.')) {
    ++k;
  }
  if (k == 0) return bad("no number");
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(0, k)), &used);
    if (used != k) return bad("not a number");
  } catch (const std::exception&) {
    return bad("not a number");
  }
  std::string unit(text.substr(k));
  unit.erase(0, unit.find_first_not_of(' '));
  std::string lower;
  for (char ch : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (lower.empty() || lower == "b")
    scale = 1;
  else if (lower == "k" || lower == "kib")
    scale = static_cast<double>(kKiBytes);
  else if (lower == "kb")
    scale = 1e3;
  else if (lower == "m" || lower == "mib")
    scale = static_cast<double>(kMiBytes);
  else if (lower == "mb")
    scale = 1e6;
  else if (lower == "g" || lower == "gib")
    scale = static_cast<double>(kGiBytes);
  else if (lower == "gb")
    scale = 1e9;
  else if (lower == "t" || lower == "tib")
    scale = static_cast<double>(kGiBytes) * 1024;
  else if (lower == "tb")
    scale = 1e12;
  else
    return bad(fmt::format("unknown unit '{}'", unit));
  const double bytes = number * scale;
  if (!(bytes > 0) || bytes > 9e18) return bad("out of range");
  return static_cast<int64_t>(std::llround(bytes));
}

std::string Abbreviate(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  std::string out(text.substr(0, max > 3 ? max - 3 : 0));
  out.append("...");
  return out;
}

}  // namespace tune

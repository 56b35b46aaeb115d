#include "tune/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace tune {

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
    items.emplace_back(std::string(item.substr(0, eq)),
                       eq == std::string_view::npos ? std::string() : std::string(item.substr(eq + 1)));
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
  return pos == std::string::npos ? what : what.substr(pos);
}

}  // namespace tune

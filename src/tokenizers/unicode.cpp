#include "tokenizers/unicode.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "tokenizers/unicode_tables.h"

namespace tune::internal {
namespace {

namespace ut = unicode_tables;

// kPropertyRanges as a two-stage table, built on first use (a few milliseconds): each block of
// 128 code points is one of about 300 distinct blocks of word indices, so that a look-up is three
// loads instead of a binary search over 5,000 ranges.
struct PropertyIndex {
  static constexpr int kShift = 7;
  static constexpr char32_t kBlock = 1u << kShift;
  std::vector<uint32_t> blocks;  // for each block of code points, its first entry in `words`
  std::vector<uint8_t> words;    // kBlock indices into kPropertyWords per distinct block
};

const PropertyIndex& Index() {
  static const PropertyIndex* index = [] {
    auto* out = new PropertyIndex;
    std::map<std::string, uint32_t> seen;
    std::string block(PropertyIndex::kBlock, '\0');
    size_t r = 0;
    for (char32_t start = 0; start <= 0x10FFFF; start += PropertyIndex::kBlock) {
      for (char32_t k = 0; k < PropertyIndex::kBlock; ++k) {
        while (r + 1 < ut::kPropertyRangeCount && ut::kPropertyRanges[r + 1].first <= start + k) {
          ++r;
        }
        block[k] = static_cast<char>(ut::kPropertyRanges[r].word);
      }
      const auto [it, added] = seen.emplace(block, static_cast<uint32_t>(out->words.size()));
      if (added) out->words.insert(out->words.end(), block.begin(), block.end());
      out->blocks.push_back(it->second);
    }
    return out;
  }();
  return *index;
}

// The property word of `c` (unicode_tables.h).
uint32_t Properties(char32_t c) {
  c = std::min<char32_t>(c, 0x10FFFF);  // beyond Unicode: as U+10FFFF (unassigned, Other)
  const PropertyIndex& index = Index();
  return ut::kPropertyWords[index.words[index.blocks[c >> PropertyIndex::kShift] +
                                        (c & (PropertyIndex::kBlock - 1))]];
}

bool Has(char32_t c, uint32_t bit) { return (Properties(c) & bit) != 0; }

uint32_t GraphemeBreakOf(uint32_t properties) {
  return (properties >> ut::kGraphemeBreakShift) & 0xF;
}

// ---- Normalization (UAX #15) -----------------------------------------------------------------

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t CombiningClassOf(uint32_t properties) {
  return static_cast<uint8_t>(properties >> ut::kCombiningClassShift);
}

// A pool entry of `table` for `c`, or null.
const ut::Decomposition* FindEntry(const ut::Decomposition* table, size_t count, char32_t c) {
  const ut::Decomposition* end = table + count;
  const ut::Decomposition* it = std::lower_bound(
      table, end, c, [](const ut::Decomposition& d, char32_t v) { return d.code_point < v; });
  return it != end && it->code_point == c ? it : nullptr;
}

struct Coded {
  char32_t c;
  uint8_t ccc;
  bool composes_back;  // kComposesBack
};

Coded Code(char32_t c) {
  const uint32_t p = Properties(c);
  return {c, CombiningClassOf(p), (p & ut::kComposesBack) != 0};
}

// Appends the full canonical decomposition of `c` (with `properties`) to `out`.
void Decompose(char32_t c, uint32_t properties, std::vector<Coded>& out) {
  if ((properties & ut::kDecomposes) == 0) {
    out.push_back({c, CombiningClassOf(properties), (properties & ut::kComposesBack) != 0});
    return;
  }
  if (c >= kSBase && c < kSBase + kSCount) {  // Hangul: L V or L V T, all of class 0
    const char32_t s = c - kSBase;
    out.push_back({kLBase + s / kNCount, 0, false});
    out.push_back({kVBase + (s % kNCount) / kTCount, 0, true});
    if (s % kTCount != 0) out.push_back({kTBase + s % kTCount, 0, true});
    return;
  }
  const ut::Decomposition* d = FindEntry(ut::kDecompositions, ut::kDecompositionCount, c);
  if (d == nullptr) {  // cannot happen with consistent tables
    out.push_back(Code(c));
    return;
  }
  for (size_t i = 0; i < d->length; ++i) out.push_back(Code(ut::kDecompositionPool[d->offset + i]));
}

// The primary composite of `first` and `second`, or 0.
char32_t Compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const uint64_t key = (static_cast<uint64_t>(first) << 21) | second;
  const ut::Composition* end = ut::kCompositions + ut::kCompositionCount;
  const ut::Composition* it = std::lower_bound(
      ut::kCompositions, end, key, [](const ut::Composition& k, uint64_t v) { return k.pair < v; });
  return it != end && it->pair == key ? it->composite : 0;
}

// Normalizes a run of Unicode 9.0's characters onto `out`: the full decomposition, canonical
// ordering (a stable sort of each run of non-starters by class), then, for NFC, canonical
// composition.
void NormalizeRun(std::u32string_view run, bool compose, std::u32string& out) {
  thread_local std::vector<Coded> buffer;
  buffer.clear();
  for (char32_t c : run) Decompose(c, Properties(c), buffer);
  for (size_t i = 0; i < buffer.size();) {
    if (buffer[i].ccc == 0) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < buffer.size() && buffer[j].ccc != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(buffer.begin() + static_cast<ptrdiff_t>(i),
                       buffer.begin() + static_cast<ptrdiff_t>(j),
                       [](const Coded& a, const Coded& b) { return a.ccc < b.ccc; });
    }
    i = j;
  }
  if (!compose) {
    for (const Coded& x : buffer) out.push_back(x.c);
    return;
  }
  // A character composes with the last starter unless a character between them is blocking it
  // (of class 0, or of a class not below its own).
  size_t starter = SIZE_MAX;
  uint8_t last_ccc = 0;
  for (const Coded& x : buffer) {
    if (starter != SIZE_MAX) {
      const bool adjacent = out.size() == starter + 1;
      if (x.composes_back && (adjacent || (last_ccc != 0 && last_ccc < x.ccc))) {
        const char32_t composite = Compose(out[starter], x.c);
        if (composite != 0) {
          out[starter] = composite;
          continue;
        }
      }
    }
    last_ccc = x.ccc;
    if (x.ccc == 0) starter = out.size();
    out.push_back(x.c);
  }
}

bool AllBelow(std::u32string_view s, char32_t limit) {
  for (char32_t c : s) {
    if (c >= limit) return false;
  }
  return true;
}

// NFD or NFC of the characters of Unicode 9.0 (the library's normalization tables): each maximal
// run of them is normalized on its own, and every later character is left where it is (to the
// library it neither decomposes, composes nor moves; its combining class is 0).
std::u32string Normalize(std::u32string_view s, bool compose) {
  // Below U+00C0 nothing decomposes, and below U+0300 (the first combining mark) nothing composes.
  if (AllBelow(s, compose ? 0x300 : 0xC0)) return std::u32string(s);
  // A run without a character of this mask is normalized already.
  const uint32_t check = compose ? ut::kNfcCheck : (ut::kDecomposes | ut::kNfcCheck);
  std::u32string out;
  out.reserve(s.size() + s.size() / 2);
  for (size_t i = 0; i < s.size();) {
    uint32_t p = Properties(s[i]);
    if ((p & ut::kNormalizes) == 0) {
      out.push_back(s[i++]);
      continue;
    }
    size_t j = i;
    bool needs = false;
    while (j < s.size() && (p & ut::kNormalizes) != 0) {
      needs = needs || (p & check) != 0;
      if (++j < s.size()) p = Properties(s[j]);
    }
    if (needs) {
      NormalizeRun(s.substr(i, j - i), compose, out);
    } else {
      out.append(s.substr(i, j - i));
    }
    i = j;
  }
  return out;
}

}  // namespace

Status CheckUnicodeData() { return Status::Ok(); }

bool IsBertControl(char32_t c) { return Has(c, ut::kBertControl); }
bool IsWhiteSpace(char32_t c) { return Has(c, ut::kWhiteSpace); }
bool IsBertPunctuation(char32_t c) { return Has(c, ut::kBertPunctuation); }
bool IsNonspacingMark(char32_t c) { return c >= 0x300 && Has(c, ut::kNonspacingMark); }

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsLetter(char32_t c) { return Has(c, ut::kLetter); }
bool IsNumber(char32_t c) { return Has(c, ut::kNumber); }
bool IsWordChar(char32_t c) { return Has(c, ut::kWordChar); }

std::u32string Nfd(std::u32string_view s) { return Normalize(s, /*compose=*/false); }
std::u32string Nfc(std::u32string_view s) { return Normalize(s, /*compose=*/true); }

std::u32string Lowercase(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back((c >= 'A' && c <= 'Z') ? c + 32 : c);
      continue;
    }
    if (!Has(c, ut::kChangesLower)) {
      out.push_back(c);
      continue;
    }
    const ut::CaseMapping* end = ut::kLowercase + ut::kLowercaseCount;
    const ut::CaseMapping* it =
        std::lower_bound(ut::kLowercase, end, c,
                         [](const ut::CaseMapping& m, char32_t v) { return m.code_point < v; });
    if (it != end && it->code_point == c) {
      out.push_back(it->lower);
      continue;
    }
    const ut::Decomposition* special =
        FindEntry(ut::kLowercaseSpecial, ut::kLowercaseSpecialCount, c);
    if (special == nullptr) {
      out.push_back(c);
      continue;
    }
    for (size_t i = 0; i < special->length; ++i) {
      out.push_back(ut::kLowercaseSpecialPool[special->offset + i]);
    }
  }
  return out;
}

std::u32string StripAccents(std::u32string_view s) {
  std::u32string out;
  for (char32_t c : Nfd(s)) {
    if (!IsNonspacingMark(c)) out.push_back(c);
  }
  return out;
}

// UAX #29's extended grapheme clusters with the rules ICU 72 applies (its root rules, which tune
// used before) over Unicode 15.0's properties: GB3-GB9b, ICU's rule 9.3 (no break within
// LinkingConsonant ExtCccZwj* Virama ExtCccZwj* LinkingConsonant: Unicode 15.1's GB9c before it
// was, with ICU's classes; unicode_tables.h), GB11 (emoji ZWJ sequences) and GB12/GB13 (flag
// pairs). The marks Unicode 16.0 and 17.0 added are Other to 15.0, so a cluster would break
// before one: they extend the cluster before them instead, unless it ends with a control
// character (GB4: never extended).
std::vector<std::pair<size_t, size_t>> Graphemes(std::u32string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  if (s.empty()) return out;
  uint32_t p = Properties(s[0]);
  uint32_t prev = GraphemeBreakOf(p);
  size_t regional = prev == ut::kGcbRegionalIndicator ? 1 : 0;  // RIs just before
  bool pictographic = (p & ut::kExtendedPictographic) != 0;     // ExtPict Extend* just before
  bool pictographic_zwj = false;                                // ExtPict Extend* ZWJ before
  // LinkingConsonant ExtCccZwj* just before: 1 without a Virama among them, 2 with one.
  int conjunct = (p & ut::kLinkingConsonant) != 0 ? 1 : 0;
  size_t begin = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    p = Properties(s[i]);
    const uint32_t cur = GraphemeBreakOf(p);
    const bool prev_control = prev == ut::kGcbControl || prev == ut::kGcbCr || prev == ut::kGcbLf;
    bool boundary;
    if (prev == ut::kGcbCr && cur == ut::kGcbLf) {
      boundary = false;  // GB3
    } else if (prev_control || cur == ut::kGcbControl || cur == ut::kGcbCr || cur == ut::kGcbLf) {
      boundary = true;  // GB4, GB5
    } else if (prev == ut::kGcbL &&
               (cur == ut::kGcbL || cur == ut::kGcbV || cur == ut::kGcbLv || cur == ut::kGcbLvt)) {
      boundary = false;  // GB6
    } else if ((prev == ut::kGcbLv || prev == ut::kGcbV) &&
               (cur == ut::kGcbV || cur == ut::kGcbT)) {
      boundary = false;  // GB7
    } else if ((prev == ut::kGcbLvt || prev == ut::kGcbT) && cur == ut::kGcbT) {
      boundary = false;  // GB8
    } else if (cur == ut::kGcbExtend || cur == ut::kGcbZwj || cur == ut::kGcbSpacingMark ||
               prev == ut::kGcbPrepend) {
      boundary = false;  // GB9, GB9a, GB9b
    } else if (conjunct == 2 && (p & ut::kLinkingConsonant) != 0) {
      boundary = false;  // ICU's rule 9.3
    } else if (pictographic_zwj && (p & ut::kExtendedPictographic) != 0) {
      boundary = false;  // GB11
    } else if (prev == ut::kGcbRegionalIndicator && cur == ut::kGcbRegionalIndicator) {
      boundary = regional % 2 == 0;  // GB12, GB13: pairs
    } else {
      boundary = true;  // GB999
    }
    if (boundary && !((p & ut::kNewerMark) != 0 && !prev_control)) {
      out.emplace_back(begin, i);
      begin = i;
    }
    regional = cur == ut::kGcbRegionalIndicator ? regional + 1 : 0;
    if ((p & ut::kLinkingConsonant) != 0) {
      conjunct = 1;
    } else if (conjunct != 0 && (p & ut::kVirama) != 0) {
      conjunct = 2;
    } else if ((p & ut::kExtendCccZwj) == 0) {
      conjunct = 0;
    }
    pictographic_zwj = pictographic && cur == ut::kGcbZwj;
    pictographic = (p & ut::kExtendedPictographic) != 0 || (pictographic && cur == ut::kGcbExtend);
    prev = cur;
  }
  out.emplace_back(begin, s.size());
  return out;
}

}  // namespace tune::internal

#include "tokenizers/unicode.h"

#include <fmt/format.h>
#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <memory>

namespace tune::internal {
namespace {

bool InCategories(char32_t c, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}

// Assigned in Unicode major.minor or earlier (ICU's age; 0.0 for a code point ICU does not know).
bool AssignedBy(char32_t c, int major, int minor) {
  UVersionInfo v;
  u_charAge(static_cast<UChar32>(c), v);
  if (v[0] == 0 && v[1] == 0) return false;
  return v[0] < major || (v[0] == major && v[1] <= minor);
}

// Unknown to ICU (unassigned in its Unicode version).
bool UnknownToIcu(char32_t c) {
  UVersionInfo v;
  u_charAge(static_cast<UChar32>(c), v);
  return v[0] == 0 && v[1] == 0;
}

// Characters whose general category in Unicode 8.0 (the library's tables) differs from today's:
// U+166D CANADIAN SYLLABICS CHI SIGN and U+111C9 SHARADA SANDHI MARK were Po; U+1734 HANUNOO
// SIGN PAMUDPOD was Mn; U+1885, U+1886 (Mongolian) and U+A9BD (Javanese) were not Mn.
bool WasPunctuationIn8(char32_t c) { return c == 0x166D || c == 0x111C9; }
bool WasNonspacingIn8(char32_t c) { return c == 0x1734; }
bool WasOtherIn8(char32_t c) { return c == 0x1885 || c == 0x1886 || c == 0xA9BD || c == 0x111C9; }

// Letters and numbers of Unicode 16.0 that ICU versions before 76 do not know.
struct Range16 {
  char32_t first, last;
  bool number;
};
constexpr Range16 kUnicode16LettersNumbers[] = {
    {0x1C89, 0x1C8A, false},   {0xA7CB, 0xA7CD, false},   {0xA7DA, 0xA7DC, false},
    {0x105C0, 0x105F3, false}, {0x10D40, 0x10D49, true},  {0x10D4A, 0x10D65, false},
    {0x10D6F, 0x10D85, false}, {0x10EC2, 0x10EC4, false}, {0x11380, 0x11389, false},
    {0x1138B, 0x1138B, false}, {0x1138E, 0x1138E, false}, {0x11390, 0x113B5, false},
    {0x113B7, 0x113B7, false}, {0x113D1, 0x113D1, false}, {0x113D3, 0x113D3, false},
    {0x116D0, 0x116E3, true},  {0x11BC0, 0x11BE0, false}, {0x11BF0, 0x11BF9, true},
    {0x13460, 0x143FA, false}, {0x16100, 0x1611D, false}, {0x16130, 0x16139, true},
    {0x16D40, 0x16D6C, false}, {0x16D70, 0x16D79, true},  {0x18CFF, 0x18CFF, false},
    {0x1CCF0, 0x1CCF9, true},  {0x1E5D0, 0x1E5ED, false}, {0x1E5F0, 0x1E5F0, false},
    {0x1E5F1, 0x1E5FA, true},  {0x2EBF0, 0x2EE5D, false}};

// Unicode 16.0's new uppercase letters (ICU before 76 does not know them) and their lowercase.
constexpr std::pair<char32_t, char32_t> kUnicode16Lowercase[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0x264},  {0xA7CC, 0xA7CD}, {0xA7CE, 0xA7CF},
    {0xA7D2, 0xA7D3}, {0xA7D4, 0xA7D5}, {0xA7DA, 0xA7DB}, {0xA7DC, 0x19B}};
// Garay (U+10D50-U+10D65 -> +0x20) and Kirat Rai (U+16EA0-U+16EB8 -> +0x1B) are ranges.

// Combining marks of Unicode 16.0 and 17.0, which ICU 72 does not know and the library's grapheme
// clusters (unicode-segmentation, Unicode 17.0) extend; the Rust `regex` crate's \w (Unicode 16.0)
// has those of 16.0 only.
struct NewerMarks {
  char32_t first, last;
  bool unicode17;
};
constexpr NewerMarks kNewerExtendingMarks[] = {
    {0x897, 0x897, false},     {0x1ACF, 0x1ADD, true},    {0x1AE0, 0x1AEB, true},
    {0x10D69, 0x10D6D, false}, {0x10EFA, 0x10EFB, true},  {0x10EFC, 0x10EFC, false},
    {0x113B8, 0x113C0, false}, {0x113C2, 0x113C2, false}, {0x113C5, 0x113C5, false},
    {0x113C7, 0x113CA, false}, {0x113CC, 0x113D0, false}, {0x113D2, 0x113D2, false},
    {0x113E1, 0x113E2, false}, {0x11B60, 0x11B67, true},  {0x11F5A, 0x11F5A, false},
    {0x1611E, 0x1612F, false}, {0x1E5EE, 0x1E5EF, false}, {0x1E6E3, 0x1E6E3, true},
    {0x1E6E6, 0x1E6E6, true},  {0x1E6EE, 0x1E6EF, true},  {0x1E6F5, 0x1E6F5, true}};

// A mark of kNewerExtendingMarks (of Unicode 16.0 only, with `only16`) that ICU does not know.
bool IsNewerExtendingMark(char32_t c, bool only16 = false) {
  for (const NewerMarks& m : kNewerExtendingMarks) {
    if (c >= m.first && c <= m.last) return !(only16 && m.unicode17) && UnknownToIcu(c);
  }
  return false;
}

// Grapheme_Cluster_Break Control, CR or LF: a cluster always ends after it.
bool BreaksAfter(char32_t c) {
  const int gcb = u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_GRAPHEME_CLUSTER_BREAK);
  return gcb == U_GCB_CONTROL || gcb == U_GCB_CR || gcb == U_GCB_LF;
}

const Range16* Unicode16Class(char32_t c) {
  for (const Range16& r : kUnicode16LettersNumbers) {
    if (c >= r.first && c <= r.last) return &r;
  }
  return nullptr;
}

char32_t Unicode16Lower(char32_t c) {
  if (c >= 0x10D50 && c <= 0x10D65) return c + 0x20;
  if (c >= 0x16EA0 && c <= 0x16EB8) return c + 0x1B;
  for (const auto& [upper, lower] : kUnicode16Lowercase) {
    if (c == upper) return lower;
  }
  return c;
}

icu::UnicodeString ToIcu(std::u32string_view s) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()),
                                       static_cast<int32_t>(s.size()));
}

std::u32string FromIcu(const icu::UnicodeString& s) {
  std::u32string out;
  out.reserve(static_cast<size_t>(s.length()));
  for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) {
    out.push_back(static_cast<char32_t>(s.char32At(i)));
  }
  return out;
}

bool AllBelow(std::u32string_view s, char32_t limit) {
  for (char32_t c : s) {
    if (c >= limit) return false;
  }
  return true;
}

// NFD or NFC of the characters of Unicode 9.0 (the library's normalization tables): ICU's
// normalizer filtered to them, so that later characters neither decompose, compose nor move
// (their combining class is 0 to the library).
const icu::Normalizer2* Normalizer(bool compose, UErrorCode& err) {
  struct Filtered {
    std::unique_ptr<icu::UnicodeSet> set;
    std::unique_ptr<icu::FilteredNormalizer2> nfd, nfc;
  };
  static const Filtered* filtered = [] {
    auto* f = new Filtered;
    UErrorCode e = U_ZERO_ERROR;
    f->set = std::make_unique<icu::UnicodeSet>(icu::UnicodeString(u"[:age=9.0:]"), e);
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(e);
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(e);
    if (U_FAILURE(e)) return f;
    f->set->freeze();
    f->nfd = std::make_unique<icu::FilteredNormalizer2>(*nfd, *f->set);
    f->nfc = std::make_unique<icu::FilteredNormalizer2>(*nfc, *f->set);
    return f;
  }();
  const icu::Normalizer2* n = compose ? static_cast<const icu::Normalizer2*>(filtered->nfc.get())
                                      : static_cast<const icu::Normalizer2*>(filtered->nfd.get());
  if (n == nullptr) err = U_MISSING_RESOURCE_ERROR;
  return n;
}

// NFC or NFD; the input unchanged if ICU's data is missing (CheckUnicodeData reports that).
std::u32string Normalize(std::u32string_view s, bool compose) {
  // Below U+00C0 nothing decomposes, and below U+0300 (the first combining mark) nothing composes.
  if (AllBelow(s, compose ? 0x300 : 0xC0)) return std::u32string(s);
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = Normalizer(compose, err);
  if (U_FAILURE(err)) return std::u32string(s);
  icu::UnicodeString out = n->normalize(ToIcu(s), err);
  return U_FAILURE(err) ? std::u32string(s) : FromIcu(out);
}

}  // namespace

Status CheckUnicodeData() {
  UErrorCode err = U_ZERO_ERROR;
  Normalizer(/*compose=*/true, err);
  if (U_FAILURE(err)) {
    return InternalError(
        fmt::format("ICU's Unicode normalization data is unavailable ({})", u_errorName(err)));
  }
  return Status::Ok();
}

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c == 0 || c == 0xFFFD) return true;
  if (InCategories(c, U_GC_CC_MASK | U_GC_CO_MASK | U_GC_CS_MASK)) return true;
  return InCategories(c, U_GC_CF_MASK) && AssignedBy(c, 8, 0);
}

bool IsWhiteSpace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0; }

bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  if (c < 0x80) return false;
  return (InCategories(c, U_GC_P_MASK) && AssignedBy(c, 8, 0)) || WasPunctuationIn8(c);
}

bool IsNonspacingMark(char32_t c) {
  if (c < 0x300) return false;
  if (WasNonspacingIn8(c)) return true;
  return InCategories(c, U_GC_MN_MASK) && AssignedBy(c, 8, 0) && !WasOtherIn8(c);
}

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsLetter(char32_t c) {
  if (InCategories(c, U_GC_L_MASK)) return true;
  const Range16* r = c >= 0x1C89 && UnknownToIcu(c) ? Unicode16Class(c) : nullptr;
  return r != nullptr && !r->number;
}

bool IsNumber(char32_t c) {
  if (InCategories(c, U_GC_N_MASK)) return true;
  const Range16* r = c >= 0x1C89 && UnknownToIcu(c) ? Unicode16Class(c) : nullptr;
  return r != nullptr && r->number;
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
      InCategories(c, U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) {
    return true;
  }
  // Letters, decimal digits and marks of Unicode 16.0 that ICU does not know yet.
  return UnknownToIcu(c) && (IsLetter(c) || IsNumber(c) || IsNewerExtendingMark(c, true));
}

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
    if (UnknownToIcu(c)) {
      out.push_back(Unicode16Lower(c));
      continue;
    }
    UChar in[2], lower[8];
    int32_t n = 0;
    U16_APPEND_UNSAFE(in, n, static_cast<UChar32>(c));
    UErrorCode err = U_ZERO_ERROR;
    const int32_t len = u_strToLower(lower, 8, in, n, "", &err);
    if (U_FAILURE(err)) {
      out.push_back(c);
      continue;
    }
    for (int32_t i = 0; i < len;) {
      UChar32 lc;
      U16_NEXT_UNSAFE(lower, i, lc);
      out.push_back(static_cast<char32_t>(lc));
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

std::vector<std::pair<size_t, size_t>> Graphemes(std::u32string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  if (s.empty()) return out;
  thread_local std::unique_ptr<icu::BreakIterator> it = [] {
    UErrorCode err = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> b(
        icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), err));
    return U_FAILURE(err) ? nullptr : std::move(b);
  }();
  if (it == nullptr) {  // no break data: every character its own cluster
    for (size_t i = 0; i < s.size(); ++i) out.emplace_back(i, i + 1);
    return out;
  }
  const icu::UnicodeString text = ToIcu(s);
  it->setText(text);
  // UTF-16 offsets back to code point offsets.
  int32_t prev16 = it->first();
  size_t prev32 = 0;
  for (int32_t b = it->next(); b != icu::BreakIterator::DONE; b = it->next()) {
    const size_t next32 = prev32 + static_cast<size_t>(text.countChar32(prev16, b - prev16));
    // A cluster ICU starts with a mark it does not know yet belongs to the one before, unless that
    // one ends with a control character (GB4: never extended).
    if (!out.empty() && IsNewerExtendingMark(s[prev32]) && !BreaksAfter(s[prev32 - 1])) {
      out.back().second = next32;
    } else {
      out.emplace_back(prev32, next32);
    }
    prev16 = b;
    prev32 = next32;
  }
  return out;
}

}  // namespace tune::internal

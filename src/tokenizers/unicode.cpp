#include "tokenizers/unicode.h"

#include <fmt/format.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace tune::internal {
namespace {

bool InCategories(char32_t c, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
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

// NFC or NFD; the input unchanged if ICU's data is missing (CheckUnicodeData reports that).
std::u32string Normalize(std::u32string_view s, bool compose) {
  // Below U+00C0 nothing decomposes, and below U+0300 (the first combining mark) nothing composes.
  if (AllBelow(s, compose ? 0x300 : 0xC0)) return std::u32string(s);
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n =
      compose ? icu::Normalizer2::getNFCInstance(err) : icu::Normalizer2::getNFDInstance(err);
  if (U_FAILURE(err)) return std::u32string(s);
  icu::UnicodeString out = n->normalize(ToIcu(s), err);
  return U_FAILURE(err) ? std::u32string(s) : FromIcu(out);
}

}  // namespace

Status CheckUnicodeData() {
  UErrorCode err = U_ZERO_ERROR;
  icu::Normalizer2::getNFCInstance(err);
  if (U_SUCCESS(err)) icu::Normalizer2::getNFDInstance(err);
  if (U_FAILURE(err)) {
    return InternalError(
        fmt::format("ICU's Unicode normalization data is unavailable ({})", u_errorName(err)));
  }
  return Status::Ok();
}

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return InCategories(c, U_GC_C_MASK);
}

bool IsBertWhitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || InCategories(c, U_GC_ZS_MASK);
}

bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  return InCategories(c, U_GC_P_MASK);
}

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsLetter(char32_t c) { return InCategories(c, U_GC_L_MASK); }
bool IsNumber(char32_t c) { return InCategories(c, U_GC_N_MASK); }
bool IsWhiteSpace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0; }

std::u32string Nfc(std::u32string_view s) { return Normalize(s, /*compose=*/true); }

std::u32string Lowercase(std::u32string_view s) {
  if (AllBelow(s, 0x80)) {
    std::u32string out(s);
    for (char32_t& c : out) c = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    return out;
  }
  icu::UnicodeString u = ToIcu(s);
  u.toLower(icu::Locale::getRoot());
  return FromIcu(u);
}

std::u32string StripAccents(std::u32string_view s) {
  std::u32string out;
  for (char32_t c : Normalize(s, /*compose=*/false)) {
    if (!InCategories(c, U_GC_MN_MASK)) out.push_back(c);
  }
  return out;
}

}  // namespace tune::internal

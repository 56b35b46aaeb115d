// Unicode character properties and transforms for the tokenizers, from ICU [tune_train, private].
//
// The classes are those of Hugging Face's `tokenizers` library (which transformers' tokenizers
// run), with its Unicode tables: its BertNormalizer and BertPreTokenizer read the general
// categories of Unicode 8.0 (the `unicode_categories` crate), its NFD and NFC those of Unicode
// 9.0 (`unicode-normalization-alignments`), its lowercasing, GPT-2's pattern and its grapheme
// clusters (Rust's standard library, Oniguruma, `unicode-segmentation`) those of Unicode 16.0
// and 17.0. ICU's own version (72 on Debian 12: Unicode 15.0) may be older or newer: each function
// below says how it bridges the difference. tests/tokenizer_parity/ checks every code
// point against the library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

namespace tune::internal {

// Ok when ICU's normalization data is available (it is linked in; checked once per load).
Status CheckUnicodeData();

// BertNormalizer's clean_text removes these: NUL, U+FFFD, and the categories Cc, Co, Cs and Cf
// of Unicode 8.0 (format characters added later stay), except \t, \n and \r.
bool IsBertControl(char32_t c);
// The White_Space property (Rust's char::is_whitespace; BertNormalizer makes these a space,
// BertPreTokenizer, WhitespaceSplit and Strip split or strip them).
bool IsWhiteSpace(char32_t c);
// BertPreTokenizer's and Punctuation's punctuation: every non-alphanumeric printable ASCII
// character, or a P* category of Unicode 8.0 (two characters since moved to So and Mn count).
bool IsBertPunctuation(char32_t c);
// BertNormalizer's strip_accents removes these after NFD: the nonspacing marks (Mn) of Unicode
// 8.0.
bool IsNonspacingMark(char32_t c);
// BertNormalizer's handle_chinese_chars: the CJK Unified Ideographs blocks and extensions and
// the CJK Compatibility Ideographs, with the library's ranges (its extension C-E range starts at
// U+2B920, not U+2B820). Hangul, kana and Thai are not among them.
bool IsCjkIdeograph(char32_t c);

// \p{L} and \p{N} of GPT-2's pattern (Oniguruma's Unicode 16.0 categories: the letters and
// numbers Unicode 16.0 added count even where ICU predates them).
bool IsLetter(char32_t c);
bool IsNumber(char32_t c);
// \w of the Rust `regex` crate, which decides whether a single_word added token touches a word:
// Alphabetic, a mark (M*), a decimal digit (Nd), connector punctuation (Pc) or Join_Control.
bool IsWordChar(char32_t c);

// Unicode normalization forms D and C of the characters of Unicode 9.0; later characters are
// left as they are (they neither compose nor reorder).
std::u32string Nfd(std::u32string_view s);
std::u32string Nfc(std::u32string_view s);
// Each character's full lowercase mapping on its own, without context ("İ" -> "i̇", "Σ" -> "σ"
// even at the end of a word), as the library lowercases; Unicode 16.0's case pairs included.
std::u32string Lowercase(std::u32string_view s);
// BertNormalizer's strip_accents: NFD, then every nonspacing mark (IsNonspacingMark) removed.
std::u32string StripAccents(std::u32string_view s);
// The extended grapheme clusters of `s` as [begin, end) offsets: ICU's rules, with the
// combining marks of Unicode 16.0 and 17.0 extending a cluster where ICU does not know them.
std::vector<std::pair<size_t, size_t>> Graphemes(std::u32string_view s);

}  // namespace tune::internal

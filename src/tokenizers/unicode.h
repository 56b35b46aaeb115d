// Unicode character properties and transforms for the tokenizers, from ICU [tune_train, private].
//
// The classes are those of the reference implementations the tokenizers must agree with:
// Hugging Face's BertTokenizer (Python's unicodedata general categories) and GPT-2's
// pre-tokenizer pattern as the `regex` module runs it (\p{L}, \p{N}, and \s = White_Space).
#pragma once

#include <string>
#include <string_view>

#include "tune/status.h"

namespace tune::internal {

// Ok when ICU's normalization data is available (it is linked in; checked once per load).
Status CheckUnicodeData();

// BERT's _is_control: a C* category (Cc, Cf, Cs, Co, Cn) other than \t, \n and \r.
bool IsBertControl(char32_t c);
// BERT's _is_whitespace: ' ', \t, \n, \r or a Zs character.
bool IsBertWhitespace(char32_t c);
// BERT's _is_punctuation: every non-alphanumeric printable ASCII character, or a P* category.
bool IsBertPunctuation(char32_t c);
// BERT's _is_chinese_char: the CJK Unified Ideographs blocks (with extensions A-E) and the CJK
// Compatibility Ideographs (with their supplement). Hangul, kana and Thai are not among them.
bool IsCjkIdeograph(char32_t c);

// \p{L}, \p{N} and \s (the White_Space property), as the `regex` module matches them.
bool IsLetter(char32_t c);
bool IsNumber(char32_t c);
bool IsWhiteSpace(char32_t c);

// Unicode normalization form C.
std::u32string Nfc(std::u32string_view s);
// Full lowercase mapping in the root locale (Python's str.lower: "İ" -> "i̇", final sigma).
std::u32string Lowercase(std::u32string_view s);
// BERT's _run_strip_accents: NFD, then every nonspacing mark (Mn) removed.
std::u32string StripAccents(std::u32string_view s);

}  // namespace tune::internal

// Small text helpers: the closest valid choice for error messages ("did you mean ...?"), URL
// %-decoding, positions in JSON texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

// `s` as valid UTF-8: every byte that does not begin a well-formed UTF-8 sequence (a stray
// continuation byte, a truncated or overlong sequence, a surrogate, a code point past U+10FFFF)
// is written as the four characters "\xNN"; valid text comes back unchanged. For bytes from
// outside (a program's output, a file's content in a message) on their way to JSON or a terminal.
std::string ValidUtf8(std::string_view s);

// Levenshtein distance.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is plausibly a typo of it (distance <= max(2, |word|/3)),
// or a candidate that contains `word` / is contained in it.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// URL %-decoding ("a%20b" -> "a b"); nullopt for a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text);

// The items of a URL query ("a=1&b&&c=x%20y") in order, each split at its first '=' into a
// key and a value ("" when there is no '='); empty items are skipped; nothing is decoded.
std::vector<std::pair<std::string, std::string>> SplitUrlQuery(std::string_view query);

// Where a JSON text failed to parse: the 1-based line and column of the 1-based byte offset
// nlohmann's parse_error reports (`byte`).
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};
TextPosition LineColumnAt(std::string_view text, size_t byte);
// nlohmann's exception what() for a message: a parse_error's from "syntax error" on (its
// "[json.exception...]" prefix and byte offset dropped), another's after its "[json.exception...]"
// prefix ("number overflow parsing '1e400'").
std::string JsonSyntaxMessage(const std::string& what);

// "1.50 GiB", "312.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);
// "24GiB", "24 GB", "1.5G", "512MiB", "1000000" (bytes). InvalidArgument naming the text.
Result<int64_t> ParseBytes(std::string_view text);

// The columns `utf8` takes in a terminal: one per character (a UTF-8 lead byte), so "b·B·T" is 5
// wide though it is 7 bytes. Wide (East Asian) and combining characters are not special-cased.
size_t DisplayWidth(std::string_view utf8);

// "a, b, c".
// `text` when it has at most `max` bytes, else its first max - 3 bytes and "..." (for messages).
std::string Abbreviate(std::string_view text, size_t max);

std::string JoinNames(const std::vector<std::string>& names, std::string_view sep = ", ");

}  // namespace tune

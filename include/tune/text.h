// Small text helpers for error messages: the closest valid choice ("did you mean ...?").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tune {

// Levenshtein distance.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is plausibly a typo of it (distance <= max(2, |word|/3)),
// or a candidate that contains `word` / is contained in it.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// "a, b, c".
std::string JoinNames(const std::vector<std::string>& names, std::string_view sep = ", ");

}  // namespace tune

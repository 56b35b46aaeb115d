#include "tokenizers/pairs.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/text.h"

namespace tune {

const char* TruncationName(Truncation truncation) {
  switch (truncation) {
    case Truncation::kOnlyFirst:
      return "only_first";
    case Truncation::kOnlySecond:
      return "only_second";
    case Truncation::kLongestFirst:
      break;
  }
  return "longest_first";
}

std::pair<int64_t, int64_t> PairKeep(int64_t first, int64_t second, int64_t room,
                                     Truncation truncation) {
  room = std::max<int64_t>(room, 0);
  if (first + second <= room) return {first, second};
  if (truncation == Truncation::kLongestFirst) {
    // tokenizers' truncate_pair: n1 the shorter, n2 the longer.
    const bool swap = first > second;
    int64_t n1 = std::min(first, second);
    int64_t n2 = n1 > room ? n1 : std::max(n1, room - n1);
    if (n1 + n2 > room) {
      n1 = room / 2;
      n2 = n1 + room % 2;
    }
    if (swap) std::swap(n1, n2);
    return {std::min(first, n1), std::min(second, n2)};
  }
  const int64_t over = first + second - room;
  if (truncation == Truncation::kOnlyFirst) {
    return first > over ? std::make_pair(first - over, second)
                        : std::make_pair(int64_t{0}, std::min(second, room));
  }
  return second > over ? std::make_pair(first, second - over)
                       : std::make_pair(std::min(first, room), int64_t{0});
}

Result<Truncation> ParseTruncation(const std::string& name) {
  for (Truncation t :
       {Truncation::kLongestFirst, Truncation::kOnlyFirst, Truncation::kOnlySecond}) {
    if (name == TruncationName(t)) return t;
  }
  const std::vector<std::string> valid = {"longest_first", "only_first", "only_second"};
  return InvalidArgumentError(fmt::format("unknown truncation '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

}  // namespace tune

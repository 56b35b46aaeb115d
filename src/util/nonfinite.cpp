#include "util/nonfinite.h"

#include <fmt/format.h>

namespace tune {

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string ShortList(const std::vector<int64_t>& numbers, size_t shown) {
  std::string out;
  for (size_t i = 0; i < numbers.size() && i < shown; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(numbers[i]);
  }
  if (numbers.size() > shown) out += fmt::format(" and {} more", numbers.size() - shown);
  return out;
}

}  // namespace tune

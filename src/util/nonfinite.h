// Values that are not finite (NaN, +inf, -inf): the order and the checks every path uses, so that
// no loop over user data depends on NaN comparing like a number. The policy built on them is in
// docs/config.md ("Non-finite values"): a metric of non-finite inputs is undefined, a trial whose
// loss, outputs or weights are not finite ends FAIL with reason "nonfinite", a study goes on.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tune {

// A strict weak order over doubles for sorting: numbers by `<` (-inf first, +inf after every other
// number), then every NaN, the NaNs equivalent to each other. `<` alone is not a strict weak order
// once a NaN is present (a NaN is "equivalent" to every number), which std::sort requires.
inline bool NanLastLess(double a, double b) {
  if (std::isnan(a)) return false;
  return std::isnan(b) || a < b;
}

// The equivalence of NanLastLess: equal numbers, or two NaNs. A run of ties over a sorted range
// compared with this always ends (with `==` a NaN never equals itself).
inline bool SameValue(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Whether every value is finite (true for an empty range).
template <typename T>
bool AllFinite(const std::vector<T>& values) {
  for (const T& v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// The 0-based rows of a row-major [values.size() / width x width] table that hold at least one
// value that is not finite, in order (width 0 counts as 1).
template <typename T>
std::vector<int64_t> NonFiniteRows(const std::vector<T>& values, size_t width) {
  if (width == 0) width = 1;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) &&
        (rows.empty() || rows.back() != static_cast<int64_t>(i / width))) {
      rows.push_back(static_cast<int64_t>(i / width));
    }
  }
  return rows;
}

// "NaN", "inf", "-inf", or the number as fmt's {} writes it (shortest round trip).
std::string FormatNumber(double v);

// "1, 2, 5" of the first `shown` numbers, then " and N more": rows or lines in messages.
std::string ShortList(const std::vector<int64_t>& numbers, size_t shown = 8);

}  // namespace tune

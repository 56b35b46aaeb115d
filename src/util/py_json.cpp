// Python's json.dumps, byte for byte (py_json.h).
#include "util/py_json.h"

#include <fmt/format.h>

#include <cmath>

namespace tune {

std::string PyFloatRepr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string PyJsonDumps(const Json& v) {
  if (v.is_number_float()) return PyFloatRepr(v.get<double>());
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      out += PyJsonDumps(v[i]);
    }
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(k).dump(-1, ' ', true, Json::error_handler_t::replace) + ": " + PyJsonDumps(item);
    }
    return out + "}";
  }
  // Invalid UTF-8 (bytes from outside that reached a string) becomes U+FFFD, as Python's
  // errors="replace" decodes it, rather than an exception.
  return v.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
}

}  // namespace tune

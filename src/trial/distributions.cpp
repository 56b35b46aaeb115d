#include "tune/distributions.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "util/py_json.h"

namespace tune {
namespace {

// Rounds to 15 significant digits: turns binary noise from low + k*step back into the decimal
// value Optuna computes with decimal.Decimal (0 + 3*0.3 -> 0.9, not 0.8999999999999999).
double Round15(double v) { return std::strtod(fmt::format("{:.15g}", v).c_str(), nullptr); }

bool IsScalar(const Json& v) {
  return v.is_null() || v.is_boolean() || v.is_number() || v.is_string();
}

__extension__ typedef __int128 Int128;  // GCC/Clang extension; exact 38-digit integers

// Exact decimal arithmetic on the shortest repr of doubles, as Optuna does with
// decimal.Decimal(str(x)). A value is mantissa * 10^exponent.
struct Dec {
  Int128 m = 0;
  int e = 0;
};

std::optional<Dec> ParseDec(double v) {
  std::string s = fmt::format("{}", v);  // shortest round-trip digits, like Python's str()
  Dec d;
  bool neg = false;
  size_t i = 0;
  if (s[i] == '-') {
    neg = true;
    ++i;
  }
  int frac_digits = 0;
  bool in_frac = false;
  int digits = 0;
  for (; i < s.size() && s[i] != 'e'; ++i) {
    if (s[i] == '.') {
      in_frac = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    d.m = d.m * 10 + (s[i] - '0');
    if (++digits > 30) return std::nullopt;
    frac_digits += in_frac;
  }
  int exp = 0;
  if (i < s.size()) exp = std::atoi(s.c_str() + i + 1);
  d.e = exp - frac_digits;
  if (neg) d.m = -d.m;
  return d;
}

// Rescales to exponent `e` (<= d.e); nullopt on overflow.
std::optional<Int128> Scale(const Dec& d, int e) {
  Int128 m = d.m;
  for (int k = d.e; k > e; --k) {
    if (m > static_cast<Int128>(1e36) || m < -static_cast<Int128>(1e36)) return std::nullopt;
    m *= 10;
  }
  return m;
}

double DecToDouble(Int128 m, int e) {
  bool neg = m < 0;
  if (neg) m = -m;
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m > 0);
  std::string text = (neg ? "-" : "") + digits + "e" + std::to_string(e);
  return std::strtod(text.c_str(), nullptr);
}

// Optuna's _adjust_discrete_uniform_high: nullopt if step divides high - low, else the new high.
std::optional<double> AdjustedHigh(double low, double high, double step) {
  auto l = ParseDec(low), h = ParseDec(high), q = ParseDec(step);
  if (l && h && q) {
    int e = std::min({l->e, h->e, q->e});
    auto lm = Scale(*l, e), hm = Scale(*h, e), qm = Scale(*q, e);
    if (lm && hm && qm && *qm > 0) {
      Int128 r = *hm - *lm;
      if (r % *qm == 0) return std::nullopt;
      return DecToDouble((r / *qm) * *qm + *lm, e);
    }
  }
  double r = (high - low) / step;  // out of range for exact arithmetic: best effort
  if (std::fabs(r - std::round(r)) <= 1e-9 * std::max(1.0, std::fabs(r))) return std::nullopt;
  return Round15(low + std::floor(r) * step);
}

}  // namespace

bool ScalarEqual(const Json& a, const Json& b) {
  if (a.is_number_float() && b.is_number_float() && std::isnan(a.get<double>()) &&
      std::isnan(b.get<double>())) {
    return true;
  }
  if (a.is_boolean() != b.is_boolean()) return false;
  return a == b;
}

bool operator==(const CategoricalDistribution& a, const CategoricalDistribution& b) {
  if (a.choices.size() != b.choices.size()) return false;
  for (size_t i = 0; i < a.choices.size(); ++i) {
    if (!ScalarEqual(a.choices[i], b.choices[i])) return false;
    // 1 and 1.0 are equal in Python too, but keep the JSON kinds apart so that the stored
    // distribution_json round-trips exactly.
    if (a.choices[i].is_number_integer() != b.choices[i].is_number_integer()) return false;
  }
  return true;
}

bool StepDividesRange(double low, double high, double step) {
  return !AdjustedHigh(low, high, step).has_value();
}

Result<FloatDistribution> MakeFloatDistribution(double low, double high, bool log,
                                                std::optional<double> step) {
  if (std::isnan(low) || std::isnan(high)) {
    return InvalidArgumentError("FloatDistribution: low and high must be numbers, not NaN");
  }
  if (log && step) {
    return InvalidArgumentError(
        "FloatDistribution: the parameter `step` is not supported when `log` is true");
  }
  if (low > high) {
    return InvalidArgumentError(fmt::format(
        "FloatDistribution: `low <= high` must hold, but got low={} high={}", low, high));
  }
  if (log && low <= 0.0) {
    return InvalidArgumentError(fmt::format(
        "FloatDistribution: `low > 0` must hold when `log` is true, but got low={}", low));
  }
  if (step && !(*step > 0.0)) {
    return InvalidArgumentError(
        fmt::format("FloatDistribution: `step > 0` must hold, but got step={}", *step));
  }
  FloatDistribution d{low, high, log, step};
  if (auto adjusted_high = step ? AdjustedHigh(low, high, *step) : std::nullopt) {
    double adjusted = *adjusted_high;
    spdlog::warn("The range [{}, {}] is not divisible by step={}; it is replaced by [{}, {}]", low,
                 high, *step, low, adjusted);
    d.high = adjusted;
  }
  return d;
}

Result<IntDistribution> MakeIntDistribution(int64_t low, int64_t high, bool log, int64_t step) {
  if (log && step != 1) {
    return InvalidArgumentError("IntDistribution: `step` must be 1 when `log` is true, got step=" +
                                std::to_string(step));
  }
  if (low > high) {
    return InvalidArgumentError(
        fmt::format("IntDistribution: `low <= high` must hold, but got low={} high={}", low, high));
  }
  if (log && low < 1) {
    return InvalidArgumentError(fmt::format(
        "IntDistribution: `low >= 1` must hold when `log` is true, but got low={}", low));
  }
  if (step <= 0) {
    return InvalidArgumentError(
        fmt::format("IntDistribution: `step > 0` must hold, but got step={}", step));
  }
  IntDistribution d{low, high, log, step};
  if ((high - low) % step != 0) {
    int64_t adjusted = low + (high - low) / step * step;
    spdlog::warn("The range [{}, {}] is not divisible by step={}; it is replaced by [{}, {}]", low,
                 high, step, low, adjusted);
    d.high = adjusted;
  }
  return d;
}

Result<CategoricalDistribution> MakeCategoricalDistribution(std::vector<Json> choices) {
  if (choices.empty()) {
    return InvalidArgumentError(
        "CategoricalDistribution: `choices` must contain one or more "
        "elements");
  }
  for (const Json& c : choices) {
    if (!IsScalar(c)) {
      return InvalidArgumentError(
          "CategoricalDistribution: choices must be null, bool, int, "
          "float or string, got " +
          c.dump());
    }
  }
  return CategoricalDistribution{std::move(choices)};
}

std::string DistributionClassName(const Distribution& d) {
  switch (d.index()) {
    case 0:
      return "FloatDistribution";
    case 1:
      return "IntDistribution";
    default:
      return "CategoricalDistribution";
  }
}

std::string DistributionToJson(const Distribution& d) {
  // Key order follows Optuna's attribute assignment order (docs/cli.md, distribution_json).
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    return fmt::format(
        R"({{"name": "FloatDistribution", "attributes": {{"step": {}, "low": {}, "high": {}, "log": {}}}}})",
        f->step ? PyFloatRepr(*f->step) : "null", PyFloatRepr(f->low), PyFloatRepr(f->high),
        f->log ? "true" : "false");
  }
  if (const auto* i = std::get_if<IntDistribution>(&d)) {
    return fmt::format(
        R"({{"name": "IntDistribution", "attributes": {{"log": {}, "step": {}, "low": {}, "high": {}}}}})",
        i->log ? "true" : "false", i->step, i->low, i->high);
  }
  const auto& c = std::get<CategoricalDistribution>(d);
  return R"({"name": "CategoricalDistribution", "attributes": {"choices": )" +
         PyJsonDumps(Json(c.choices)) + "}}";
}

namespace {

Result<double> NumberAttr(const Json& attrs, const char* key, const std::string& name) {
  auto it = attrs.find(key);
  if (it == attrs.end() || !it->is_number()) {
    return InvalidArgumentError(
        fmt::format("{}: attribute '{}' missing or not a number", name, key));
  }
  return it->get<double>();
}

Result<int64_t> IntAttr(const Json& attrs, const char* key, const std::string& name,
                        int64_t fallback, bool required) {
  auto it = attrs.find(key);
  if (it == attrs.end() || it->is_null()) {
    if (required) {
      return InvalidArgumentError(fmt::format("{}: attribute '{}' missing", name, key));
    }
    return fallback;
  }
  if (!it->is_number()) {
    return InvalidArgumentError(fmt::format("{}: attribute '{}' is not a number", name, key));
  }
  double v = it->get<double>();
  if (v != std::floor(v)) {
    return InvalidArgumentError(fmt::format("{}: attribute '{}' is not an integer", name, key));
  }
  return static_cast<int64_t>(v);
}

bool BoolAttr(const Json& attrs, const char* key) {
  auto it = attrs.find(key);
  return it != attrs.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

Result<Distribution> DistributionFromJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("distribution_json is not a JSON object: " + std::string(text));
  }
  auto name_it = j.find("name");
  auto attrs_it = j.find("attributes");
  if (name_it == j.end() || !name_it->is_string() || attrs_it == j.end() ||
      !attrs_it->is_object()) {
    return InvalidArgumentError("distribution_json needs \"name\" and \"attributes\": " +
                                std::string(text));
  }
  const std::string name = name_it->get<std::string>();
  const Json& a = *attrs_it;
  auto float_dist = [&](bool log, std::optional<double> step) -> Result<Distribution> {
    TUNE_ASSIGN_OR_RETURN(double low, NumberAttr(a, "low", name));
    TUNE_ASSIGN_OR_RETURN(double high, NumberAttr(a, "high", name));
    TUNE_ASSIGN_OR_RETURN(FloatDistribution f, MakeFloatDistribution(low, high, log, step));
    return Distribution(f);
  };
  auto int_dist = [&](bool log) -> Result<Distribution> {
    TUNE_ASSIGN_OR_RETURN(int64_t low, IntAttr(a, "low", name, 0, true));
    TUNE_ASSIGN_OR_RETURN(int64_t high, IntAttr(a, "high", name, 0, true));
    TUNE_ASSIGN_OR_RETURN(int64_t step, IntAttr(a, "step", name, 1, false));
    TUNE_ASSIGN_OR_RETURN(IntDistribution i, MakeIntDistribution(low, high, log, step));
    return Distribution(i);
  };
  if (name == "FloatDistribution") {
    std::optional<double> step;
    auto it = a.find("step");
    if (it != a.end() && !it->is_null()) {
      TUNE_ASSIGN_OR_RETURN(double s, NumberAttr(a, "step", name));
      step = s;
    }
    return float_dist(BoolAttr(a, "log"), step);
  }
  if (name == "IntDistribution") return int_dist(BoolAttr(a, "log"));
  if (name == "CategoricalDistribution") {
    auto it = a.find("choices");
    if (it == a.end() || !it->is_array()) {
      return InvalidArgumentError("CategoricalDistribution: attribute 'choices' missing");
    }
    TUNE_ASSIGN_OR_RETURN(CategoricalDistribution c,
                          MakeCategoricalDistribution(it->get<std::vector<Json>>()));
    return Distribution(c);
  }
  if (name == "UniformDistribution") return float_dist(false, std::nullopt);
  if (name == "LogUniformDistribution") return float_dist(true, std::nullopt);
  if (name == "DiscreteUniformDistribution") {
    TUNE_ASSIGN_OR_RETURN(double q, NumberAttr(a, "q", name));
    return float_dist(false, q);
  }
  if (name == "IntUniformDistribution") return int_dist(false);
  if (name == "IntLogUniformDistribution") return int_dist(true);
  return InvalidArgumentError("unknown distribution name '" + name + "'");
}

Result<double> ToInternal(const Distribution& d, const Json& external) {
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
    for (size_t i = 0; i < c->choices.size(); ++i) {
      if (ScalarEqual(c->choices[i], external)) return static_cast<double>(i);
    }
    return InvalidArgumentError(
        fmt::format("{} is not among the choices {}", external.dump(), Json(c->choices).dump()));
  }
  if (!external.is_number() || external.is_boolean()) {
    return InvalidArgumentError(fmt::format("{} is not a number (distribution {})", external.dump(),
                                            DistributionToJson(d)));
  }
  double v = external.get<double>();
  if (std::isnan(v)) return InvalidArgumentError("parameter value is NaN");
  if (std::holds_alternative<IntDistribution>(d) && v != std::floor(v)) {
    return InvalidArgumentError(fmt::format("{} is not an integer", external.dump()));
  }
  return v;
}

Json ToExternal(const Distribution& d, double internal) {
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
    return c->choices.at(static_cast<size_t>(internal));
  }
  if (std::holds_alternative<IntDistribution>(d)) {
    return static_cast<int64_t>(std::llround(internal));
  }
  return internal;
}

bool Contains(const Distribution& d, double v) {
  if (std::isnan(v)) return false;
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (!f->step) return f->low <= v && v <= f->high;
    double k = (v - f->low) / *f->step;
    return f->low <= v && v <= f->high && std::fabs(k - std::round(k)) < 1.0e-8;
  }
  if (const auto* i = std::get_if<IntDistribution>(&d)) {
    if (v != std::floor(v)) return false;
    auto x = static_cast<int64_t>(v);
    return i->low <= x && x <= i->high && (x - i->low) % i->step == 0;
  }
  const auto& c = std::get<CategoricalDistribution>(d);
  return v >= 0 && v == std::floor(v) && v < static_cast<double>(c.choices.size());
}

bool IsSingle(const Distribution& d) {
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (!f->step || f->low == f->high) return f->low == f->high;
    return Round15(f->high - f->low) < *f->step;
  }
  if (const auto* i = std::get_if<IntDistribution>(&d)) {
    if (i->log || i->low == i->high) return i->low == i->high;
    return i->high - i->low < i->step;
  }
  return std::get<CategoricalDistribution>(d).choices.size() == 1;
}

Status CheckCompatibility(const Distribution& old_dist, const Distribution& new_dist) {
  if (old_dist.index() != new_dist.index()) {
    return InvalidArgumentError(
        fmt::format("Cannot set different distribution kind to the same parameter name ({} vs {})",
                    DistributionClassName(old_dist), DistributionClassName(new_dist)));
  }
  if (const auto* c = std::get_if<CategoricalDistribution>(&old_dist)) {
    if (!(*c == std::get<CategoricalDistribution>(new_dist))) {
      return InvalidArgumentError("CategoricalDistribution does not support dynamic value space");
    }
    return Status::Ok();
  }
  auto log_flag = [](const Distribution& d) {
    return std::visit(
        [](const auto& x) {
          if constexpr (requires { x.log; }) return x.log;
          return false;
        },
        d);
  };
  if (log_flag(old_dist) != log_flag(new_dist)) {
    return InvalidArgumentError("Cannot set different log configuration to the same parameter");
  }
  return Status::Ok();
}

}  // namespace tune

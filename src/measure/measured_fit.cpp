// Measured-memory fits (measured_fit.h).
#include "measure/measured_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "util/text.h"

namespace tune {
namespace {

// The features of a point: 1, B·T, B·T².
std::array<double, 3> Features(int64_t batch_size, int64_t max_length) {
  const double bt = static_cast<double>(batch_size) * static_cast<double>(max_length);
  return {1.0, bt, bt * static_cast<double>(max_length)};
}

// Least squares over the features in `use` (a bit mask over a, b, c), the others held at 0:
// the normal equations of the columns scaled to unit size, solved by Gaussian elimination.
// nullopt when they are singular.
std::optional<std::array<double, 3>> SolveSubset(const std::vector<MemoryPoint>& points,
                                                 unsigned use) {
  std::vector<int> cols;
  for (int k = 0; k < 3; ++k) {
    if (use & (1u << k)) cols.push_back(k);
  }
  const size_t n = cols.size();
  std::array<double, 3> scale{1, 1, 1};
  for (const MemoryPoint& p : points) {
    const auto f = Features(p.batch_size, p.max_length);
    for (int k = 0; k < 3; ++k) scale[k] = std::max(scale[k], f[k]);
  }
  double m[3][4] = {};
  for (const MemoryPoint& p : points) {
    const auto f = Features(p.batch_size, p.max_length);
    for (size_t i = 0; i < n; ++i) {
      const double fi = f[cols[i]] / scale[cols[i]];
      for (size_t j = 0; j < n; ++j) m[i][j] += fi * f[cols[j]] / scale[cols[j]];
      m[i][n] += fi * static_cast<double>(p.peak);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    size_t pivot = i;
    for (size_t r = i + 1; r < n; ++r) {
      if (std::abs(m[r][i]) > std::abs(m[pivot][i])) pivot = r;
    }
    if (std::abs(m[pivot][i]) < 1e-12) return std::nullopt;
    for (size_t j = 0; j <= n; ++j) std::swap(m[i][j], m[pivot][j]);
    for (size_t r = 0; r < n; ++r) {
      if (r == i) continue;
      const double factor = m[r][i] / m[i][i];
      for (size_t j = i; j <= n; ++j) m[r][j] -= factor * m[i][j];
    }
  }
  std::array<double, 3> coef{0, 0, 0};
  for (size_t i = 0; i < n; ++i) coef[cols[i]] = m[i][n] / m[i][i] / scale[cols[i]];
  return coef;
}

double SumOfSquares(const std::vector<MemoryPoint>& points, const std::array<double, 3>& coef) {
  double sse = 0;
  for (const MemoryPoint& p : points) {
    const auto f = Features(p.batch_size, p.max_length);
    const double r = coef[0] * f[0] + coef[1] * f[1] + coef[2] * f[2] - static_cast<double>(p.peak);
    sse += r * r;
  }
  return sse;
}

// The least-squares coefficients with each one >= 0: the best of the fits over every subset of
// the three features whose coefficients are all >= 0 (seven small solves).
std::array<double, 3> NonNegativeFit(const std::vector<MemoryPoint>& points) {
  std::array<double, 3> best{0, 0, 0};
  double best_sse = std::numeric_limits<double>::infinity();
  for (unsigned use = 1; use < 8; ++use) {
    const auto coef = SolveSubset(points, use);
    if (!coef || std::any_of(coef->begin(), coef->end(), [](double v) { return v < 0; })) continue;
    const double sse = SumOfSquares(points, *coef);
    if (sse < best_sse) best_sse = sse, best = *coef;
  }
  return best;
}

double Evaluate(const std::array<double, 3>& coef, int64_t batch_size, int64_t max_length) {
  const auto f = Features(batch_size, max_length);
  return coef[0] * f[0] + coef[1] * f[1] + coef[2] * f[2];
}

size_t DistinctLengths(const std::vector<MemoryPoint>& points) {
  std::set<int64_t> lengths;
  for (const MemoryPoint& p : points) lengths.insert(p.max_length);
  return lengths.size();
}

}  // namespace

double MeasuredFit::Fitted(int64_t batch_size, int64_t max_length) const {
  return std::max(floor, Evaluate({a, b, c}, batch_size, max_length));
}

double MeasuredFit::margin() const {
  double m = std::max(kMinMargin, -held_out_error);
  for (const MemoryPoint& p : points) {
    const double fitted = Fitted(p.batch_size, p.max_length);
    if (fitted > 0) m = std::max(m, static_cast<double>(p.peak) / fitted - 1.0);
  }
  return m;
}

int64_t MeasuredFit::Predict(int64_t batch_size, int64_t max_length) const {
  // Measured shapes bound it: those at least as large from above, those no larger from below.
  double upper = std::numeric_limits<double>::infinity(), lower = 0;
  for (const MemoryPoint& p : points) {
    const double measured = static_cast<double>(p.peak) * (1.0 + kMinMargin);
    if (p.batch_size >= batch_size && p.max_length >= max_length) upper = std::min(upper, measured);
    if (p.batch_size <= batch_size && p.max_length <= max_length) lower = std::max(lower, measured);
  }
  const double fitted = Fitted(batch_size, max_length) * (1.0 + margin());
  return static_cast<int64_t>(std::ceil(std::max(lower, std::min(fitted, upper))));
}

std::vector<MemoryPoint> DistinctShapes(const std::vector<MemoryPoint>& points) {
  std::map<std::pair<int64_t, int64_t>, int64_t> peaks;  // (T, B) -> largest peak
  for (const MemoryPoint& p : points) {
    if (p.batch_size <= 0 || p.max_length <= 0 || p.peak <= 0) continue;
    int64_t& peak = peaks[{p.max_length, p.batch_size}];
    peak = std::max(peak, p.peak);
  }
  std::vector<MemoryPoint> out;
  for (const auto& [shape, peak] : peaks) out.push_back({shape.second, shape.first, peak});
  return out;
}

namespace {

// The distinct shapes of `points` at least kFloorBand above `floor` (all of them for floor 0).
std::vector<MemoryPoint> AboveFloor(const std::vector<MemoryPoint>& points, double floor) {
  std::vector<MemoryPoint> out;
  for (const MemoryPoint& p : DistinctShapes(points)) {
    if (static_cast<double>(p.peak) >= floor * (1 + MeasuredFit::kFloorBand)) out.push_back(p);
  }
  return out;
}

}  // namespace

bool CanFit(const std::vector<MemoryPoint>& points, double floor) {
  const std::vector<MemoryPoint> shapes = AboveFloor(points, floor);
  return shapes.size() >= MeasuredFit::kMinPoints && DistinctLengths(shapes) >= 2;
}

Result<MeasuredFit> FitMeasuredMemory(const std::vector<MemoryPoint>& points,
                                      const std::string& model, const std::string& precision,
                                      double floor) {
  std::vector<MemoryPoint> shapes = AboveFloor(points, floor);
  if (!CanFit(shapes)) {
    return FailedPreconditionError(fmt::format(
        "cannot fit the memory of '{}' ({}): {} measured shape(s){} with {} value(s) of "
        "max_length; a fit needs {} shapes with at least 2 values of max_length",
        model, precision, shapes.size(),
        floor > 0 ? fmt::format(" above the floor of {}", FormatBytes(std::llround(floor))) : "",
        DistinctLengths(shapes), MeasuredFit::kMinPoints));
  }
  MeasuredFit fit;
  fit.model = model;
  fit.precision = precision;
  // Hold out the shape nearest the boundary: the largest B·T² (then the largest B·T).
  const auto boundary = std::max_element(
      shapes.begin(), shapes.end(), [](const MemoryPoint& x, const MemoryPoint& y) {
        return Features(x.batch_size, x.max_length)[2] < Features(y.batch_size, y.max_length)[2];
      });
  fit.held_out = *boundary;
  std::vector<MemoryPoint> rest = shapes;
  rest.erase(rest.begin() + (boundary - shapes.begin()));
  const double check =
      Evaluate(NonNegativeFit(rest), fit.held_out.batch_size, fit.held_out.max_length);
  fit.held_out_error =
      (check - static_cast<double>(fit.held_out.peak)) / static_cast<double>(fit.held_out.peak);
  const auto coef = NonNegativeFit(shapes);
  fit.a = coef[0], fit.b = coef[1], fit.c = coef[2];
  fit.floor = floor;
  fit.points = DistinctShapes(points);
  return fit;
}

std::string MeasuredFitText(const MeasuredFit& fit) {
  const std::string curve =
      fmt::format("{} + {:.1f}·B·T + {:.4g}·B·T²",
                  FormatBytes(static_cast<int64_t>(std::llround(fit.a))), fit.b, fit.c);
  return fmt::format("peak = {} bytes; held out (B={}, T={}): {:+.1f}%, margin {:.1f}%",
                     fit.floor > 0
                         ? fmt::format("max({}, {})", FormatBytes(std::llround(fit.floor)), curve)
                         : curve,
                     fit.held_out.batch_size, fit.held_out.max_length, 100 * fit.held_out_error,
                     100 * fit.margin());
}

std::string MeasuredFitKey(const std::string& model, const std::string& precision) {
  return "memory_fit:" + model + "/" + precision;
}

std::string MeasuredFamily(const std::string& model, const std::string& precision) {
  return "measured:" + model + (precision == "fp32" ? "" : "/" + precision);
}

std::optional<std::string> MeasuredPrecision(const MemoryAttr& m) {
  const std::string bare = "measured:" + m.model;
  if (m.family == bare) return "fp32";
  if (m.family.size() > bare.size() + 1 && m.family.rfind(bare + "/", 0) == 0) {
    return m.family.substr(bare.size() + 1);
  }
  return std::nullopt;
}

std::vector<MemoryPoint> MeasuredPoints(const std::vector<MemoryAttr>& attrs) {
  std::vector<MemoryPoint> points;
  for (const MemoryAttr& m : attrs) {
    if (m.oom || m.peak <= 0 || !m.run) continue;
    if (m.peak_source != "reported" && m.peak_source != "max_rss") continue;
    points.push_back({m.run->batch_size, m.run->max_length, m.peak});
  }
  return points;
}

namespace {

Json PointToJson(const MemoryPoint& p) {
  return {{"batch_size", p.batch_size}, {"max_length", p.max_length}, {"peak", p.peak}};
}

Result<MemoryPoint> PointFromJson(const Json& j, const std::string& where) {
  MemoryPoint p;
  for (auto [key, field] : {std::pair{"batch_size", &p.batch_size},
                            std::pair{"max_length", &p.max_length}, std::pair{"peak", &p.peak}}) {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_number_integer()) {
      return InvalidArgumentError(
          fmt::format("memory fit: {}.{}: expected an integer", where, key));
    }
    *field = j.at(key).get<int64_t>();
  }
  return p;
}

}  // namespace

Json MeasuredFitToJson(const MeasuredFit& fit) {
  Json points = Json::array();
  for (const MemoryPoint& p : fit.points) points.push_back(PointToJson(p));
  Json j = {{"model", fit.model},
            {"precision", fit.precision},
            {"formula", fit.floor > 0 ? "max(floor, a + b*B*T + c*B*T^2)" : "a + b*B*T + c*B*T^2"},
            {"a", fit.a},
            {"b", fit.b},
            {"c", fit.c},
            {"floor", fit.floor},
            {"points", points},
            {"held_out", PointToJson(fit.held_out)},
            {"held_out_error", fit.held_out_error},
            {"margin", fit.margin()}};
  if (!fit.source.empty()) j["source"] = fit.source;
  return j;
}

Result<MeasuredFit> MeasuredFitFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgumentError("memory fit: expected an object");
  MeasuredFit fit;
  for (auto [key, field] :
       {std::pair{"model", &fit.model}, std::pair{"precision", &fit.precision}}) {
    if (!j.contains(key) || !j.at(key).is_string()) {
      return InvalidArgumentError(fmt::format("memory fit: \"{}\": expected a string", key));
    }
    *field = j.at(key).get<std::string>();
  }
  for (auto [key, field] : {std::pair{"a", &fit.a}, std::pair{"b", &fit.b}, std::pair{"c", &fit.c},
                            std::pair{"held_out_error", &fit.held_out_error}}) {
    if (!j.contains(key) || !j.at(key).is_number()) {
      return InvalidArgumentError(fmt::format("memory fit: \"{}\": expected a number", key));
    }
    *field = j.at(key).get<double>();
  }
  if (j.contains("source") && j.at("source").is_string())
    fit.source = j.at("source").get<std::string>();
  if (j.contains("floor")) {  // fits stored before floors have none
    if (!j.at("floor").is_number()) {
      return InvalidArgumentError("memory fit: \"floor\": expected a number");
    }
    fit.floor = j.at("floor").get<double>();
  }
  if (!j.contains("points") || !j.at("points").is_array()) {
    return InvalidArgumentError("memory fit: \"points\": expected an array");
  }
  for (size_t i = 0; i < j.at("points").size(); ++i) {
    TUNE_ASSIGN_OR_RETURN(MemoryPoint p,
                          PointFromJson(j.at("points")[i], fmt::format("points[{}]", i)));
    fit.points.push_back(p);
  }
  TUNE_ASSIGN_OR_RETURN(fit.held_out, PointFromJson(j.value("held_out", Json()), "held_out"));
  return fit;
}

}  // namespace tune

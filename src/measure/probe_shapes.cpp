// Boundary probe shapes (probe_shapes.h).
#include "measure/probe_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace tune {
namespace {

// The positive integer values of a distribution: a categorical's sorted choices, or an int
// distribution's grid first + k·step up to last.
class IntValues {
 public:
  static Result<IntValues> Of(const Distribution& d, const std::string& name) {
    IntValues v;
    if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
      for (const Json& choice : c->choices) {
        if (auto n = PositiveInt(choice)) v.list_.push_back(*n);
      }
      std::sort(v.list_.begin(), v.list_.end());
      v.list_.erase(std::unique(v.list_.begin(), v.list_.end()), v.list_.end());
      if (v.list_.empty()) {
        return InvalidArgumentError(name + ": no choice is a positive integer");
      }
      return v;
    }
    const auto* i = std::get_if<IntDistribution>(&d);
    if (i == nullptr) return InvalidArgumentError(name + ": a float distribution");
    v.step_ = std::max<int64_t>(1, i->step);
    v.first_ = i->low >= 1 ? i->low : i->low + (1 - i->low + v.step_ - 1) / v.step_ * v.step_;
    v.last_ = i->low + (i->high - i->low) / v.step_ * v.step_;
    if (v.first_ > v.last_) return InvalidArgumentError(name + ": no value is positive");
    return v;
  }

  int64_t min() const { return list_.empty() ? first_ : list_.front(); }
  int64_t max() const { return list_.empty() ? last_ : list_.back(); }
  std::optional<int64_t> second() const {
    if (!list_.empty()) return list_.size() > 1 ? std::optional<int64_t>(list_[1]) : std::nullopt;
    return first_ + step_ <= last_ ? std::optional<int64_t>(first_ + step_) : std::nullopt;
  }
  // The value nearest x (the smaller on a tie).
  int64_t Nearest(double x) const {
    if (list_.empty()) {
      const double k = std::round((x - static_cast<double>(first_)) / static_cast<double>(step_));
      const int64_t n = (last_ - first_) / step_;
      return first_ + std::clamp<int64_t>(static_cast<int64_t>(k), 0, n) * step_;
    }
    int64_t best = list_.front();
    for (int64_t v : list_) {
      if (std::abs(static_cast<double>(v) - x) < std::abs(static_cast<double>(best) - x)) best = v;
    }
    return best;
  }

 private:
  // A number with an integral value >= 1 (512 or 512.0), else nullopt.
  static std::optional<int64_t> PositiveInt(const Json& v) {
    if (!v.is_number() || v.is_boolean()) return std::nullopt;
    const double x = v.get<double>();
    if (!(x >= 1 && x < 9e15) || x != std::floor(x)) return std::nullopt;
    return static_cast<int64_t>(x);
  }

  std::vector<int64_t> list_;  // categorical; empty for an int distribution
  int64_t first_ = 0, last_ = 0, step_ = 1;
};

}  // namespace

Result<std::vector<ProbeShape>> BoundaryProbeShapes(const Distribution& batch_size,
                                                    const Distribution& max_length) {
  TUNE_ASSIGN_OR_RETURN(IntValues b, IntValues::Of(batch_size, "batch_size"));
  TUNE_ASSIGN_OR_RETURN(IntValues t, IntValues::Of(max_length, "max_length"));
  if (t.min() == t.max()) {
    return FailedPreconditionError(
        fmt::format("max_length has one value ({}); a fit needs two lengths", t.min()));
  }
  const int64_t t_mid =
      t.Nearest(std::sqrt(static_cast<double>(t.min()) * static_cast<double>(t.max())));
  std::vector<ProbeShape> shapes;
  auto add = [&](int64_t batch, int64_t length) {
    const ProbeShape s{batch, length};
    if (shapes.size() < 4 && std::find(shapes.begin(), shapes.end(), s) == shapes.end()) {
      shapes.push_back(s);
    }
  };
  add(b.min(), t.max());
  add(b.min(), t_mid);
  if (auto b2 = b.second()) add(*b2, t.max());
  add(b.min(), t.min());
  if (auto b2 = b.second()) {  // stand-ins when T_mid is T_min or T_max
    add(*b2, t_mid);
    add(*b2, t.min());
  }
  return shapes;
}

std::string ProbeShapesText(const std::vector<ProbeShape>& shapes) {
  std::string out;
  for (const ProbeShape& s : shapes) {
    out += fmt::format("{}(B={},T={})", out.empty() ? "" : ", ", s.batch_size, s.max_length);
  }
  return out;
}

}  // namespace tune

#include "tune/samplers/random.h"

#include <algorithm>
#include <cmath>

namespace tune {

double SampleUniform(const Distribution& distribution, Rng& rng) {
  auto uniform = [&rng](double lo, double hi) {
    if (lo == hi) return lo;
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  if (const auto* f = std::get_if<FloatDistribution>(&distribution)) {
    if (f->log) {
      return std::clamp(std::exp(uniform(std::log(f->low), std::log(f->high))), f->low, f->high);
    }
    if (f->step) {
      auto n = static_cast<int64_t>(std::llround((f->high - f->low) / *f->step));
      int64_t k = std::uniform_int_distribution<int64_t>(0, n)(rng);
      return std::min(f->high, f->low + static_cast<double>(k) * *f->step);
    }
    return uniform(f->low, f->high);
  }
  if (const auto* i = std::get_if<IntDistribution>(&distribution)) {
    if (i->log) {
      // Optuna: uniform in [ln(low - 0.5), ln(high + 0.5)], rounded, clipped.
      double v = std::exp(uniform(std::log(i->low - 0.5), std::log(i->high + 0.5)));
      return std::clamp(std::round(v), static_cast<double>(i->low), static_cast<double>(i->high));
    }
    int64_t n = (i->high - i->low) / i->step;
    int64_t k = std::uniform_int_distribution<int64_t>(0, n)(rng);
    return static_cast<double>(i->low + k * i->step);
  }
  const auto& c = std::get<CategoricalDistribution>(distribution);
  return static_cast<double>(std::uniform_int_distribution<size_t>(0, c.choices.size() - 1)(rng));
}

double RandomSampler::SampleIndependent(const TrialHistory& /*history*/,
                                        const FrozenTrial& /*trial*/, const std::string& /*name*/,
                                        const Distribution& distribution, Rng& rng) {
  return SampleUniform(distribution, rng);
}

}  // namespace tune

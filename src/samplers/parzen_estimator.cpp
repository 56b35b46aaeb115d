#include "samplers/parzen_estimator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

#include "samplers/truncnorm.h"

namespace tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLogSqrt2Pi = 0.91893853320467274178;
constexpr double kScottMagnitude = 0.2;  // Optuna's SIGMA0_MAGNITUDE
constexpr double kEps = 1e-12;

// The kernel loops below are plain element-wise arithmetic that GCC vectorises (this file is
// built with -O3 -fno-trapping-math, so FastExpNonPositive's clamp if-converts); the hot
// functions get AVX2 and AVX-512 clones (TUNE_VECTOR_CLONES, truncnorm.h).

// ln sum_i exp(v[i]). Overwrites v. Element-wise loops plus lane-wise reductions.
TUNE_VECTOR_CLONES double LogSumExp(double* v, size_t n) {
  constexpr size_t kLanes = 4;
  double mx_lane[kLanes] = {-kInf, -kInf, -kInf, -kInf};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) mx_lane[k] = v[i + k] > mx_lane[k] ? v[i + k] : mx_lane[k];
  }
  double mx = std::max(std::max(mx_lane[0], mx_lane[1]), std::max(mx_lane[2], mx_lane[3]));
  for (; i < n; ++i) mx = std::max(mx, v[i]);
  if (mx == -kInf) return -kInf;
  if (mx == kInf) return kInf;
  for (size_t j = 0; j < n; ++j) v[j] = truncnorm::FastExpNonPositive(v[j] - mx);
  double sum_lane[kLanes] = {0.0, 0.0, 0.0, 0.0};
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) sum_lane[k] += v[i + k];
  }
  double sum = (sum_lane[0] + sum_lane[1]) + (sum_lane[2] + sum_lane[3]);
  for (; i < n; ++i) sum += v[i];
  return mx + std::log(sum);
}

}  // namespace

ParzenDimension MakeParzenDimension(const Distribution& distribution) {
  ParzenDimension d;
  if (const auto* f = std::get_if<FloatDistribution>(&distribution)) {
    if (f->log) {
      d.low = std::log(f->low);
      d.high = std::log(f->high);
    } else if (f->step) {
      d.kind = KernelKind::kDiscrete;
      d.step = *f->step;
      d.low = f->low - 0.5 * d.step;
      d.high = f->high + 0.5 * d.step;
      d.grid_low = f->low;
      d.grid_high = f->high;
    } else {
      d.low = f->low;
      d.high = f->high;
    }
  } else if (const auto* i = std::get_if<IntDistribution>(&distribution)) {
    d.kind = KernelKind::kDiscrete;
    d.grid_low = static_cast<double>(i->low);
    d.grid_high = static_cast<double>(i->high);
    if (i->log) {
      d.log_int = true;
      d.low = std::log(d.grid_low - 0.5);
      d.high = std::log(d.grid_high + 0.5);
    } else {
      d.step = static_cast<double>(i->step);
      d.low = d.grid_low - 0.5 * d.step;
      d.high = d.grid_high + 0.5 * d.step;
    }
  } else {
    d.kind = KernelKind::kCategorical;
    d.n_choices = static_cast<int>(std::get<CategoricalDistribution>(distribution).choices.size());
  }
  return d;
}

double ToParzenSpace(const Distribution& distribution, double internal) {
  if (const auto* f = std::get_if<FloatDistribution>(&distribution); f && f->log) {
    return std::log(internal);
  }
  if (const auto* i = std::get_if<IntDistribution>(&distribution); i && i->log) {
    return std::log(internal);
  }
  return internal;
}

double FromParzenSpace(const Distribution& distribution, double t) {
  if (const auto* f = std::get_if<FloatDistribution>(&distribution)) {
    if (f->log) return std::clamp(std::exp(t), f->low, f->high);
    if (f->step) {
      double v = std::round((t - f->low) / *f->step) * *f->step + f->low;
      return std::clamp(v, f->low, f->high);
    }
    return std::clamp(t, f->low, f->high);
  }
  if (const auto* i = std::get_if<IntDistribution>(&distribution)) {
    auto lo = static_cast<double>(i->low);
    auto hi = static_cast<double>(i->high);
    if (i->log) return std::clamp(std::round(std::exp(t)), lo, hi);
    auto q = static_cast<double>(i->step);
    return std::clamp(std::round((t - lo) / q) * q + lo, lo, hi);
  }
  const auto& c = std::get<CategoricalDistribution>(distribution);
  return std::clamp(std::round(t), 0.0, static_cast<double>(c.choices.size() - 1));
}

void ParzenEstimator::BinEdges(const ParzenDimension& d, double t, double* lo, double* hi) {
  if (d.log_int) {
    double x = std::round(std::exp(t));
    *lo = std::log(x - 0.5);
    *hi = std::log(x + 0.5);
  } else {
    *lo = t - 0.5 * d.step;
    *hi = t + 0.5 * d.step;
  }
  *lo = std::max(*lo, d.low);
  *hi = std::min(*hi, d.high);
}

ParzenEstimator::ParzenEstimator(std::vector<ParzenDimension> dims,
                                 const std::vector<std::vector<double>>& observations,
                                 const std::vector<double>& weights, const ParzenOptions& options,
                                 const std::vector<std::vector<uint32_t>>* sorted_order)
    : dims_(std::move(dims)), dim_state_(dims_.size()) {
  const size_t m = weights.size();
  assert(observations.size() == dims_.size());
  // Mixture weights: observations, then the prior (always present when there is nothing else).
  double prior = options.prior_weight;
  double total = std::accumulate(weights.begin(), weights.end(), 0.0) + prior;
  std::vector<double> w(weights);
  if (m == 0 || total <= 0.0) {
    prior = 1.0;
    total = std::accumulate(w.begin(), w.end(), 0.0) + prior;
  }
  w.push_back(prior);
  weights_.resize(m + 1);
  cumulative_.resize(m + 1);
  double acc = 0.0;
  for (size_t i = 0; i <= m; ++i) {
    weights_[i] = w[i] / total;
    acc += weights_[i];
    cumulative_[i] = acc;
  }
  cumulative_[m] = 1.0;

  for (size_t d = 0; d < dims_.size(); ++d) {
    assert(observations[d].size() == m);
    if (dims_[d].kind == KernelKind::kCategorical) {
      ComputeCategorical(d, observations[d], options);
    } else {
      const std::vector<uint32_t>* order = nullptr;
      if (sorted_order != nullptr && d < sorted_order->size() && (*sorted_order)[d].size() == m) {
        order = &(*sorted_order)[d];
      }
      ComputeNumerical(d, observations[d], options, order);
    }
  }
}

void ParzenEstimator::ComputeCategorical(size_t d, const std::vector<double>& obs,
                                         const ParzenOptions& options) {
  DimState& st = dim_state_[d];
  const size_t m = obs.size();
  const double k = dims_[d].n_choices;
  st.choice.resize(m + 1);
  for (size_t i = 0; i < m; ++i) st.choice[i] = static_cast<int32_t>(obs[i]);
  st.choice[m] = -1;
  if (options.categorical_prior_weight && k > 1) {
    // 1 - b on the observed choice, b spread over the others (docs/tpe.md#categorical-kernel).
    const double b = *options.categorical_prior_weight;
    st.log_hit.assign(m + 1, std::log(1.0 - b));
    st.log_miss.assign(m + 1, std::log(b / (k - 1.0)));
    st.hit_probability = 1.0 - b;
    st.miss_others_only = true;
  } else {
    const double a = options.prior_weight / static_cast<double>(m + 1);
    const double norm = 1.0 + k * a;
    st.log_hit.assign(m + 1, std::log((a + 1.0) / norm));
    st.log_miss.assign(m + 1, std::log(a / norm));
    st.hit_probability = 1.0 / norm;
  }
  st.log_hit[m] = st.log_miss[m] = -std::log(k);
}

namespace {

// numpy.percentile's default (linear) interpolation of sorted values.
double Percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Scott's rule of thumb over sorted values: 1.059 min(IQR / 1.34, std) n^(-1/5), std with
// ddof 1 (0 for a single value).
double ScottBandwidth(const std::vector<double>& sorted) {
  const auto n = static_cast<double>(sorted.size());
  double mean = 0.0;
  for (double v : sorted) mean += v;
  mean /= n;
  double ss = 0.0;
  for (double v : sorted) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / (sorted.size() > 1 ? n - 1.0 : n));
  const double iqr = Percentile(sorted, 0.75) - Percentile(sorted, 0.25);
  return 1.059 * std::min(iqr / 1.34, sd) * std::pow(n, -0.2);
}

}  // namespace

void ParzenEstimator::NeighborBandwidths(const ParzenDimension& dim,
                                         const std::vector<std::pair<double, uint32_t>>& sorted,
                                         const ParzenOptions& options, std::vector<double>& sigma) {
  const size_t m = sorted.size();
  if (options.rule == BandwidthRule::kOptuna) {
    // Larger gap to a sorted neighbour, the domain ends acting as neighbours.
    for (size_t j = 0; j < m; ++j) {
      double v = sorted[j].first;
      double left = v - (j == 0 ? dim.low : sorted[j - 1].first);
      double right = (j + 1 == m ? dim.high : sorted[j + 1].first) - v;
      double s = std::max(left, right);
      if (!options.consider_endpoints && m >= 2) {
        if (j == 0) s = right;
        if (j + 1 == m) s = left;
      }
      sigma[sorted[j].second] = s;
    }
    return;
  }
  // Hyperopt's rule and Scott's: the prior's centre counts among the values.
  std::vector<double> values;
  values.reserve(m + 1);
  for (const auto& entry : sorted) values.push_back(entry.first);
  const double centre = 0.5 * (dim.low + dim.high);
  const auto p =
      static_cast<size_t>(std::upper_bound(values.begin(), values.end(), centre) - values.begin());
  values.insert(values.begin() + static_cast<ptrdiff_t>(p), centre);
  if (options.rule == BandwidthRule::kScott) {
    const double s = ScottBandwidth(values);
    for (const auto& entry : sorted) sigma[entry.second] = s;
    return;
  }
  for (size_t j = 0; j < m; ++j) {
    const size_t k = j < p ? j : j + 1;  // position among `values`
    const double left = values[k] - (k == 0 ? dim.low : values[k - 1]);
    const double right = (k + 1 == values.size() ? dim.high : values[k + 1]) - values[k];
    sigma[sorted[j].second] = std::max(left, right);
  }
}

void ParzenEstimator::TruncationNorms(const ParzenDimension& dim,
                                      const std::vector<std::pair<double, uint32_t>>& sorted,
                                      DimState& st) {
  // Components in mu order (the prior last): equal (mu, sigma) pairs, frequent in integer and
  // stepped dimensions, are adjacent and share one truncation mass. The masses of the distinct
  // pairs are computed in one batch (SIMD where available).
  const size_t m = sorted.size();
  std::vector<uint32_t> pair_of(m + 1);  // component -> distinct (mu, sigma) pair
  std::vector<double> a, b;
  double last_mu = 0.0, last_sigma = -1.0;
  for (size_t j = 0; j <= m; ++j) {
    const size_t i = j < m ? sorted[j].second : m;
    st.inv_sigma[i] = 1.0 / st.sigma[i];
    if (st.sigma[i] != last_sigma || st.mu[i] != last_mu) {
      last_sigma = st.sigma[i];
      last_mu = st.mu[i];
      a.push_back((dim.low - st.mu[i]) * st.inv_sigma[i]);
      b.push_back((dim.high - st.mu[i]) * st.inv_sigma[i]);
    }
    pair_of[i] = static_cast<uint32_t>(a.size() - 1);
  }
  std::vector<double> log_z(a.size());
  truncnorm::LogGaussMasses(a.data(), b.data(), log_z.data(), a.size());
  last_sigma = -1.0;
  double last_log_sigma = 0.0;  // most sigmas repeat (Scott, the magic clip)
  for (size_t i = 0; i <= m; ++i) {
    if (st.sigma[i] != last_sigma) {
      last_sigma = st.sigma[i];
      last_log_sigma = std::log(last_sigma);
    }
    const double lz = log_z[pair_of[i]];
    st.log_norm[i] = dim.kind == KernelKind::kContinuous ? -lz - last_log_sigma - kLogSqrt2Pi : -lz;
  }
}

void ParzenEstimator::ComputeNumerical(size_t d, const std::vector<double>& obs,
                                       const ParzenOptions& options,
                                       const std::vector<uint32_t>* order) {
  const ParzenDimension& dim = dims_[d];
  DimState& st = dim_state_[d];
  const size_t m = obs.size();
  const double width = dim.high - dim.low;
  st.mu.resize(m + 1);
  st.sigma.resize(m + 1);
  std::copy(obs.begin(), obs.end(), st.mu.begin());
  st.mu[m] = 0.5 * (dim.low + dim.high);

  if (options.multivariate && options.bandwidth == MultivariateBandwidth::kScott) {
    double s = kScottMagnitude *
               std::pow(static_cast<double>(std::max<size_t>(m, 1)),
                        -1.0 / (static_cast<double>(dims_.size()) + 4.0)) *
               width;
    std::fill(st.sigma.begin(), st.sigma.begin() + static_cast<ptrdiff_t>(m), s);
  }
  // Observations sorted by value (contiguous pairs: faster than an indirect sort), from the
  // caller's order when it has one.
  std::vector<std::pair<double, uint32_t>> sorted(m);
  if (order != nullptr) {
    for (size_t j = 0; j < m; ++j) sorted[j] = {obs[(*order)[j]], (*order)[j]};
    assert(std::is_sorted(sorted.begin(), sorted.end()));
  } else {
    for (size_t i = 0; i < m; ++i) sorted[i] = {obs[i], static_cast<uint32_t>(i)};
    std::sort(sorted.begin(), sorted.end());
  }
  if (!(options.multivariate && options.bandwidth == MultivariateBandwidth::kScott)) {
    NeighborBandwidths(dim, sorted, options, st.sigma);
  }
  if (dims_.size() == 1 && dim.kind == KernelKind::kContinuous) {
    st.order.resize(m);
    for (size_t j = 0; j < m; ++j) st.order[j] = sorted[j].second;
  }
  // Optuna's (H - L) / min(100, m + 2) with the defaults 0.01 and 1, exactly.
  const double min_sigma =
      options.consider_magic_clip
          ? width / std::min(1.0 / options.min_bandwidth_factor,
                             std::pow(static_cast<double>(m) + 2.0, options.magic_clip_exponent))
          : kEps;
  for (size_t i = 0; i < m; ++i) st.sigma[i] = std::clamp(st.sigma[i], min_sigma, width);
  st.sigma[m] = width;

  st.inv_sigma.resize(m + 1);
  st.log_norm.resize(m + 1);
  TruncationNorms(dim, sorted, st);
  if (dim.kind == KernelKind::kDiscrete) {
    // Components with equal (mu, sigma) share their bin masses: evaluate each class once.
    // Equal mus are adjacent in `sorted`; within a run, sigmas take few distinct values.
    st.uid.resize(m + 1);
    size_t run_start = 0;  // index into uid_first where the current run of equal mu starts
    for (size_t j = 0; j < m; ++j) {
      uint32_t i = sorted[j].second;
      if (j == 0 || sorted[j].first != sorted[j - 1].first) run_start = st.uid_first.size();
      int32_t id = -1;
      for (size_t u = run_start; u < st.uid_first.size(); ++u) {
        if (st.sigma[static_cast<size_t>(st.uid_first[u])] == st.sigma[i]) {
          id = static_cast<int32_t>(u);
          break;
        }
      }
      if (id < 0) {
        id = static_cast<int32_t>(st.uid_first.size());
        st.uid_first.push_back(static_cast<int32_t>(i));
      }
      st.uid[i] = id;
    }
    st.uid[m] = static_cast<int32_t>(st.uid_first.size());
    st.uid_first.push_back(static_cast<int32_t>(m));
  }
}

std::vector<double> ParzenEstimator::CategoricalProbabilities(size_t d, size_t component) const {
  const DimState& st = dim_state_[d];
  const int32_t observed = st.choice[component];
  std::vector<double> p(static_cast<size_t>(dims_[d].n_choices));
  for (size_t c = 0; c < p.size(); ++c) {
    p[c] = std::exp(static_cast<int32_t>(c) == observed ? st.log_hit[component]
                                                        : st.log_miss[component]);
  }
  return p;
}

std::vector<std::vector<double>> ParzenEstimator::Sample(Rng& rng, int n) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<size_t> active(static_cast<size_t>(n));
  for (auto& a : active) {
    double u = unit(rng);
    a = static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) -
                            cumulative_.begin());
    a = std::min(a, cumulative_.size() - 1);
  }
  std::vector<std::vector<double>> out(dims_.size(), std::vector<double>(active.size()));
  for (size_t d = 0; d < dims_.size(); ++d) {
    const ParzenDimension& dim = dims_[d];
    const DimState& st = dim_state_[d];
    for (size_t j = 0; j < active.size(); ++j) {
      size_t c = active[j];
      if (dim.kind == KernelKind::kCategorical) {
        // Row c = hit_probability * [observed choice] + (1 - hit_probability) * uniform (over
        // the other choices with categorical_prior_weight, over all of them otherwise).
        const bool observed = st.choice[c] >= 0;
        if (observed && unit(rng) < st.hit_probability) {
          out[d][j] = st.choice[c];
        } else if (observed && st.miss_others_only) {
          std::uniform_int_distribution<int> other(0, dim.n_choices - 2);
          const int o = other(rng);
          out[d][j] = o >= st.choice[c] ? o + 1 : o;
        } else {
          std::uniform_int_distribution<int> any(0, dim.n_choices - 1);
          out[d][j] = any(rng);
        }
        continue;
      }
      double a = (dim.low - st.mu[c]) * st.inv_sigma[c];
      double b = (dim.high - st.mu[c]) * st.inv_sigma[c];
      double t = st.mu[c] + st.sigma[c] * truncnorm::Ppf(unit(rng), a, b);
      t = std::clamp(t, dim.low, dim.high);
      if (dim.kind == KernelKind::kDiscrete) {
        if (dim.log_int) {
          t = std::log(std::clamp(std::round(std::exp(t)), dim.grid_low, dim.grid_high));
        } else {
          t = std::clamp(std::round((t - dim.grid_low) / dim.step) * dim.step + dim.grid_low,
                         dim.grid_low, dim.grid_high);
        }
      }
      out[d][j] = t;
    }
  }
  return out;
}

std::vector<double> ParzenEstimator::LogPdf(const std::vector<std::vector<double>>& points) const {
  const size_t n_points = points.empty() ? 0 : points[0].size();
  if (n_points == 0) return {};
  if (dims_.size() == 1) {
    switch (dims_[0].kind) {
      case KernelKind::kContinuous:
        return LogPdfContinuous1D(points[0]);
      case KernelKind::kDiscrete:
        return LogPdfDiscrete1D(MakeDiscreteTable(0, points[0]));
      case KernelKind::kCategorical:
        return LogPdfCategorical1D(points[0]);
    }
  }
  std::vector<DiscreteTable> tables(dims_.size());
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (dims_[d].kind == KernelKind::kDiscrete) tables[d] = MakeDiscreteTable(d, points[d]);
  }
  return LogPdfProduct(points, tables);
}

ParzenEstimator::DiscreteTable ParzenEstimator::MakeDiscreteTable(
    size_t d, const std::vector<double>& xs) const {
  const DimState& st = dim_state_[d];
  DiscreteTable tab;
  tab.point_index.resize(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) {
    auto it = std::find(tab.values.begin(), tab.values.end(), xs[j]);
    tab.point_index[j] = static_cast<size_t>(it - tab.values.begin());
    if (it == tab.values.end()) tab.values.push_back(xs[j]);
  }
  const size_t nv = tab.values.size();
  tab.table.resize(st.uid_first.size() * nv);
  for (size_t k = 0; k < nv; ++k) {
    double lo, hi;
    BinEdges(dims_[d], tab.values[k], &lo, &hi);
    for (size_t u = 0; u < st.uid_first.size(); ++u) {
      auto i = static_cast<size_t>(st.uid_first[u]);
      tab.table[u * nv + k] = truncnorm::LogGaussMass((lo - st.mu[i]) * st.inv_sigma[i],
                                                      (hi - st.mu[i]) * st.inv_sigma[i]) +
                              st.log_norm[i];
    }
  }
  return tab;
}

std::vector<double> ParzenEstimator::LogPdfDiscrete1D(const DiscreteTable& tab) const {
  // Components with the same (mu, sigma) class share a kernel: one term per class.
  const DimState& st = dim_state_[0];
  const size_t n_classes = st.uid_first.size();
  std::vector<double> class_weight(n_classes, 0.0);
  for (size_t i = 0; i < weights_.size(); ++i) {
    class_weight[static_cast<size_t>(st.uid[i])] += weights_[i];
  }
  std::vector<double> out(tab.point_index.size()), buf(n_classes);
  for (size_t j = 0; j < out.size(); ++j) {
    for (size_t u = 0; u < n_classes; ++u) {
      buf[u] = std::log(class_weight[u]) + tab.table[u * tab.values.size() + tab.point_index[j]];
    }
    out[j] = LogSumExp(buf.data(), n_classes);
  }
  return out;
}

std::vector<double> ParzenEstimator::LogPdfCategorical1D(const std::vector<double>& xs) const {
  // p(c) = sum_i w_i (miss_i + [c == c_i] (hit_i - miss_i)); every observation has the same hit
  // and miss, the prior (last) a uniform row.
  const DimState& st = dim_state_[0];
  const int k = dims_[0].n_choices;
  std::vector<double> p(static_cast<size_t>(k), 0.0);
  const size_t last = weights_.size() - 1;
  const double hit = std::exp(st.log_hit[0]), miss = std::exp(st.log_miss[0]);
  double observed = 0.0;
  for (size_t i = 0; i < last; ++i) {
    observed += weights_[i];
    p[static_cast<size_t>(st.choice[i])] += weights_[i] * (hit - miss);
  }
  const double base = weights_[last] / k + (last > 0 ? observed * miss : 0.0);
  std::vector<double> out(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) out[j] = std::log(base + p[static_cast<size_t>(xs[j])]);
  return out;
}

namespace {

// The product kernel's log terms of one dimension, added to buf[i] (one per component).
inline void AddContinuousTerms(const ParzenDimension& dim, const double* __restrict mu,
                               const double* __restrict inv, const double* __restrict ln, double x,
                               double* __restrict b, size_t n) {
  if (x < dim.low || x > dim.high) {
    std::fill(b, b + n, -kInf);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const double z = (x - mu[i]) * inv[i];
    b[i] += ln[i] - 0.5 * z * z;
  }
}

inline void AddTableTerms(const double* __restrict col, const int32_t* __restrict uid,
                          double* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) b[i] += col[uid[i]];  // a gather
}

inline void AddChoiceTerms(int32_t c, const int32_t* __restrict choice,
                           const double* __restrict hit, const double* __restrict miss,
                           double* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double h = hit[i], m = miss[i];  // both loaded: a select, not a branch
    b[i] += choice[i] == c ? h : m;
  }
}

}  // namespace

TUNE_VECTOR_CLONES std::vector<double> ParzenEstimator::LogPdfProduct(
    const std::vector<std::vector<double>>& points,
    const std::vector<DiscreteTable>& tables) const {
  const size_t n_points = points[0].size();
  const size_t n_comp = weights_.size();
  std::vector<double> log_weights(n_comp);
  for (size_t i = 0; i < n_comp; ++i) log_weights[i] = std::log(weights_[i]);
  std::vector<double> out(n_points), buf(n_comp), column;
  for (size_t j = 0; j < n_points; ++j) {
    std::copy(log_weights.begin(), log_weights.end(), buf.begin());
    for (size_t d = 0; d < dims_.size(); ++d) {
      const DimState& st = dim_state_[d];
      const double x = points[d][j];
      switch (dims_[d].kind) {
        case KernelKind::kContinuous:
          AddContinuousTerms(dims_[d], st.mu.data(), st.inv_sigma.data(), st.log_norm.data(), x,
                             buf.data(), n_comp);
          break;
        case KernelKind::kDiscrete: {
          const DiscreteTable& tab = tables[d];
          const size_t nv = tab.values.size(), k = tab.point_index[j];
          column.resize(st.uid_first.size());
          for (size_t u = 0; u < column.size(); ++u) column[u] = tab.table[u * nv + k];
          AddTableTerms(column.data(), st.uid.data(), buf.data(), n_comp);
          break;
        }
        case KernelKind::kCategorical:
          AddChoiceTerms(static_cast<int32_t>(x), st.choice.data(), st.log_hit.data(),
                         st.log_miss.data(), buf.data(), n_comp);
          break;
      }
    }
    out[j] = LogSumExp(buf.data(), n_comp);
  }
  return out;
}

std::vector<double> ParzenEstimator::LogPdfContinuous1D(const std::vector<double>& xs) const {
  // Kernel i contributes exp(c_i - z_i^2 / 2), c_i = ln w_i + ln norm_i. A kernel whose term is
  // below (largest term) - kNegligible adds less than e^-50 relative each, so with kernels
  // sorted by mu only a window around x needs evaluating: outside |x - mu| <= R with
  // R = sigma_max sqrt(2 (c_max - L + kNegligible)), L a lower bound of the largest term, no
  // term can reach L - kNegligible. Exact to ~1e-19 relative, not an approximation of the
  // mixture.
  constexpr double kNegligible = 50.0;
  const ParzenDimension& dim = dims_[0];
  const DimState& st = dim_state_[0];
  const size_t m = st.order.size();  // observations; the prior is component m
  std::vector<double> smu(m), sinv(m), sc(m);
  double sigma_max = 0.0, c_max = -kInf;
  for (size_t k = 0; k < m; ++k) {
    const size_t i = st.order[k];
    smu[k] = st.mu[i];
    sinv[k] = st.inv_sigma[i];
    sc[k] = std::log(weights_[i]) + st.log_norm[i];
    sigma_max = std::max(sigma_max, st.sigma[i]);
    c_max = std::max(c_max, sc[k]);
  }
  const double prior_c = std::log(weights_[m]) + st.log_norm[m];
  auto term = [](double c, double x, double mu, double inv) {
    double z = (x - mu) * inv;
    return c - 0.5 * z * z;
  };
  std::vector<double> out(xs.size());
  std::vector<double> buf(m + 1);
  for (size_t j = 0; j < xs.size(); ++j) {
    const double x = xs[j];
    if (x < dim.low || x > dim.high) {
      out[j] = -kInf;
      continue;
    }
    const size_t pos =
        static_cast<size_t>(std::lower_bound(smu.begin(), smu.end(), x) - smu.begin());
    double bound = term(prior_c, x, st.mu[m], st.inv_sigma[m]);
    if (pos < m) bound = std::max(bound, term(sc[pos], x, smu[pos], sinv[pos]));
    if (pos > 0) bound = std::max(bound, term(sc[pos - 1], x, smu[pos - 1], sinv[pos - 1]));
    const double reach = sigma_max * std::sqrt(2.0 * std::max(0.0, c_max - bound + kNegligible));
    const auto lo = static_cast<size_t>(
        std::lower_bound(smu.begin(), smu.begin() + static_cast<ptrdiff_t>(pos), x - reach) -
        smu.begin());
    const auto hi = static_cast<size_t>(
        std::upper_bound(smu.begin() + static_cast<ptrdiff_t>(pos), smu.end(), x + reach) -
        smu.begin());
    size_t n = 0;
    for (size_t k = lo; k < hi; ++k) buf[n++] = term(sc[k], x, smu[k], sinv[k]);
    buf[n++] = term(prior_c, x, st.mu[m], st.inv_sigma[m]);
    out[j] = LogSumExp(buf.data(), n);
  }
  return out;
}

}  // namespace tune

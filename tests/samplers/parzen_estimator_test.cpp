// Statistical and hand-computed checks of the truncated-normal helpers and the Parzen
// estimator TPE builds (samplers/truncnorm.h, parzen_estimator.h).
#include "samplers/parzen_estimator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "samplers/truncnorm.h"

namespace tune {
namespace {

using truncnorm::LogGaussMass;
using truncnorm::LogNdtr;
using truncnorm::Ndtr;
using truncnorm::Ndtri;

TEST(Truncnorm, NdtriInvertsNdtr) {
  // Phi(z) near 1 cannot hold much precision in a double, so round trips are checked up to
  // z = 5 (Ppf inverts the complement there instead).
  for (double z = -8.0; z <= 5.0; z += 0.37) {
    EXPECT_NEAR(Ndtri(Ndtr(z)), z, 1e-9 * std::max(1.0, std::fabs(z))) << z;
  }
  EXPECT_NEAR(Ndtri(0.975), 1.959963984540054, 1e-12);
  EXPECT_EQ(Ndtri(0.0), -INFINITY);
  EXPECT_EQ(Ndtri(1.0), INFINITY);
}

TEST(Truncnorm, LogNdtrIsAccurateInTheTails) {
  // Where erfc is still representable, the direct value is the reference.
  for (double z : {-35.0, -30.0, -25.0, -20.5, -19.5, -5.0, 0.0, 3.0}) {
    EXPECT_NEAR(LogNdtr(z), std::log(0.5 * std::erfc(-z / std::sqrt(2.0))),
                1e-9 * std::fabs(LogNdtr(z)) + 1e-15)
        << z;
  }
  // Far tail: the leading term dominates; finite, monotone.
  EXPECT_NEAR(LogNdtr(-100.0), -0.5 * 1e4 - std::log(100.0) - 0.5 * std::log(2 * M_PI), 1e-3);
  EXPECT_LT(LogNdtr(-101.0), LogNdtr(-100.0));
  EXPECT_NEAR(LogNdtr(10.0), -7.619853024160527e-24, 1e-30);
}

TEST(Truncnorm, LogGaussMassMatchesDirectDifferenceAndSurvivesTails) {
  EXPECT_NEAR(LogGaussMass(-1.0, 2.0), std::log(Ndtr(2.0) - Ndtr(-1.0)), 1e-14);
  EXPECT_NEAR(LogGaussMass(0.5, 1.5), std::log(Ndtr(1.5) - Ndtr(0.5)), 1e-13);
  EXPECT_NEAR(LogGaussMass(-1.5, -0.5), std::log(Ndtr(-0.5) - Ndtr(-1.5)), 1e-13);
  // Both bounds 40 sigmas out: Phi differences underflow, the log-space form does not.
  double far = LogGaussMass(40.0, 41.0);
  EXPECT_TRUE(std::isfinite(far));
  EXPECT_NEAR(far, LogGaussMass(-41.0, -40.0), 1e-9);
  EXPECT_NEAR(far, LogNdtr(-40.0), 1e-6 * std::fabs(far));  // mass beyond 41 is negligible
  EXPECT_EQ(LogGaussMass(1.0, 1.0), -INFINITY);
}

TEST(Truncnorm, BatchedMassesEqualTheScalarOnes) {
  // Intervals around 0 of every width (tails on both sides of the 8.5 cut-off), one-sided ones,
  // far tails and empty ones; 1003 of them, so SIMD lanes and the remainder loop both run.
  std::vector<double> a, b;
  for (int k = 0; k < 1003; ++k) {
    const double lo = -12.0 + 0.0237 * k, width = 0.05 + 0.0119 * k;
    a.push_back(lo);
    b.push_back(lo + width);
  }
  for (double x : {0.0, -40.0, 40.0, 3.0}) {
    a.push_back(x);
    b.push_back(x);  // empty
  }
  a.push_back(-41.0), b.push_back(-40.0);
  a.push_back(40.0), b.push_back(41.0);
  std::vector<double> out(a.size());
  truncnorm::LogGaussMasses(a.data(), b.data(), out.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double ref = LogGaussMass(a[i], b[i]);
    if (std::isinf(ref)) {
      EXPECT_EQ(out[i], ref) << a[i] << " " << b[i];
    } else {
      EXPECT_NEAR(out[i], ref, 1e-14 * std::fabs(ref) + 1e-16) << a[i] << " " << b[i];
    }
  }
  // The dropped tail beyond 8.5 is below a double's resolution of the mass.
  const double full = std::log1p(-Ndtr(-9.0) - Ndtr(-1.0));
  EXPECT_NEAR(LogGaussMass(-9.0, 1.0), full, 3e-17);
}

TEST(Truncnorm, FastExpMatchesExp) {
  for (double x = -707.0; x <= 0.0; x += 0.731) {
    EXPECT_NEAR(truncnorm::FastExpNonPositive(x) / std::exp(x), 1.0, 1e-12) << x;
  }
  EXPECT_EQ(truncnorm::FastExpNonPositive(0.0), 1.0);
  EXPECT_LT(truncnorm::FastExpNonPositive(-1000.0), 1e-300);
}

TEST(Truncnorm, PpfInvertsTheTruncatedCdf) {
  const double a = -0.7, b = 2.5;
  for (double u : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    double z = truncnorm::Ppf(u, a, b);
    EXPECT_NEAR((Ndtr(z) - Ndtr(a)) / (Ndtr(b) - Ndtr(a)), u, 1e-9);
  }
  // Upper part of the interval: full precision through the complement.
  double hi = truncnorm::Ppf(1.0 - 1e-12, -1.0, 9.0);
  // (1 - u is itself only accurate to ~1e-4 relative here.)
  EXPECT_NEAR(Ndtr(-hi) / (1e-12 * (Ndtr(1.0) - Ndtr(-9.0))), 1.0, 1e-3);
  // Entirely in the right tail (reflection path).
  double z = truncnorm::Ppf(0.5, 6.0, 7.0);
  EXPECT_GT(z, 6.0);
  EXPECT_LT(z, 6.2);
}

// ---------------------------------------------------------------------------------------------

ParzenEstimator Make(const Distribution& d, std::vector<double> internal_values,
                     ParzenOptions options = {}, std::vector<double> weights = {}) {
  std::vector<double> t;
  for (double v : internal_values) t.push_back(ToParzenSpace(d, v));
  if (weights.empty()) weights.assign(t.size(), 1.0);
  return ParzenEstimator({MakeParzenDimension(d)}, {t}, weights, options);
}

double Integrate(const ParzenEstimator& e, double lo, double hi, int n = 20000) {
  std::vector<std::vector<double>> pts(1);
  for (int i = 0; i <= n; ++i) pts[0].push_back(lo + (hi - lo) * i / n);
  auto lp = e.LogPdf(pts);
  double sum = 0.0;
  for (int i = 0; i <= n; ++i)
    sum += std::exp(lp[static_cast<size_t>(i)]) * ((i == 0 || i == n) ? 0.5 : 1.0);
  return sum * (hi - lo) / n;
}

TEST(ParzenEstimator, ContinuousKernelsIntegrateToOne) {
  auto d = *MakeFloatDistribution(-2.0, 3.0);
  for (const auto& obs : std::vector<std::vector<double>>{{}, {2.9}, {-1.0, 0.0, 0.1, 2.5}}) {
    auto e = Make(d, obs);
    EXPECT_NEAR(Integrate(e, -2.0, 3.0), 1.0, 1e-6) << obs.size();
  }
  // Log scale: a density over ln x.
  auto lg = *MakeFloatDistribution(1e-6, 1e-3, true);
  auto e = Make(lg, {1e-5, 2e-5, 5e-4});
  EXPECT_NEAR(Integrate(e, std::log(1e-6), std::log(1e-3)), 1.0, 1e-6);
}

TEST(ParzenEstimator, DiscreteKernelsSumToOne) {
  auto step = *MakeIntDistribution(128, 512, false, 32);
  auto e = Make(step, {128, 256, 256, 512});
  std::vector<std::vector<double>> pts(1);
  for (int v = 128; v <= 512; v += 32) pts[0].push_back(v);
  auto lp = e.LogPdf(pts);
  double sum = 0.0;
  for (double x : lp) sum += std::exp(x);
  EXPECT_NEAR(sum, 1.0, 1e-12);

  auto fstep = *MakeFloatDistribution(0.0, 1.0, false, 0.25);
  auto ef = Make(fstep, {0.25, 1.0});
  std::vector<std::vector<double>> fp{{0.0, 0.25, 0.5, 0.75, 1.0}};
  double fs = 0.0;
  for (double x : ef.LogPdf(fp)) fs += std::exp(x);
  EXPECT_NEAR(fs, 1.0, 1e-12);

  auto ilog = *MakeIntDistribution(1, 300, true);
  auto el = Make(ilog, {2, 3, 100});
  std::vector<std::vector<double>> lpts(1);
  for (int v = 1; v <= 300; ++v) lpts[0].push_back(std::log(v));
  double ls = 0.0;
  for (double x : el.LogPdf(lpts)) ls += std::exp(x);
  EXPECT_NEAR(ls, 1.0, 1e-12);
}

TEST(ParzenEstimator, CategoricalKernelMatchesHandComputation) {
  auto c = *MakeCategoricalDistribution({"a", "b", "c"});
  // m = 2 observations of choice 0, prior_weight 1: a = 1/3, row = (1/3 + [hit]) / 2, so
  // hit 2/3, miss 1/6; component weights 1/3 each; prior row uniform 1/3.
  auto e = Make(c, {0, 0});
  auto lp = e.LogPdf({{0, 1, 2}});
  EXPECT_NEAR(std::exp(lp[0]), 5.0 / 9.0, 1e-12);
  EXPECT_NEAR(std::exp(lp[1]), 2.0 / 9.0, 1e-12);
  EXPECT_NEAR(std::exp(lp[2]), 2.0 / 9.0, 1e-12);
}

TEST(ParzenEstimator, MultivariateMixedKernelsIntegrateToOne) {
  auto x = *MakeFloatDistribution(0.0, 1.0);
  auto c = *MakeCategoricalDistribution({1, 2, 3, 4});
  ParzenOptions o;
  o.multivariate = true;
  for (auto bw : {MultivariateBandwidth::kPerDimension, MultivariateBandwidth::kScott}) {
    o.bandwidth = bw;
    ParzenEstimator e({MakeParzenDimension(x), MakeParzenDimension(c)},
                      {{0.1, 0.5, 0.55}, {0, 3, 3}}, {1.0, 1.0, 0.5}, o);
    double total = 0.0;
    const int n = 4000;
    for (int k = 0; k < 4; ++k) {
      std::vector<std::vector<double>> pts(2);
      for (int i = 0; i <= n; ++i) {
        pts[0].push_back(static_cast<double>(i) / n);
        pts[1].push_back(k);
      }
      auto lp = e.LogPdf(pts);
      double s = 0.0;
      for (int i = 0; i <= n; ++i)
        s += std::exp(lp[static_cast<size_t>(i)]) * ((i == 0 || i == n) ? 0.5 : 1.0);
      total += s / n;
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

TEST(ParzenEstimator, UnivariateBandwidthFollowsOptuna49) {
  auto d = *MakeFloatDistribution(0.0, 1.0);
  // Sorted 0.2, 0.5, 0.6 in [0, 1]: neighbour gaps; the smallest point takes its right gap,
  // the largest its left gap (consider_endpoints=false); magic clip min = 1/min(100, 3+2).
  auto e = Make(d, {0.5, 0.2, 0.6});
  EXPECT_NEAR(e.sigmas(0)[0], 0.3, 1e-12);  // 0.5: max(0.3, 0.1)
  EXPECT_NEAR(e.sigmas(0)[1], 0.3, 1e-12);  // 0.2: right gap 0.3
  EXPECT_NEAR(e.sigmas(0)[2], 0.2, 1e-12);  // 0.6: left gap 0.1, clipped up to 0.2
  EXPECT_NEAR(e.sigmas(0)[3], 1.0, 1e-12);  // prior
  EXPECT_NEAR(e.mus(0)[3], 0.5, 1e-12);

  ParzenOptions no_clip;
  no_clip.consider_magic_clip = false;
  EXPECT_NEAR(Make(d, {0.5, 0.2, 0.6}, no_clip).sigmas(0)[2], 0.1, 1e-12);

  ParzenOptions endpoints;
  endpoints.consider_endpoints = true;
  auto ee = Make(d, {0.5, 0.2, 0.6}, endpoints);
  EXPECT_NEAR(ee.sigmas(0)[1], 0.3, 1e-12);  // max(0.2 to the low end, 0.3)
  EXPECT_NEAR(ee.sigmas(0)[2], 0.4, 1e-12);  // max(0.1, 0.4 to the high end)

  // One observation: the larger distance to an end.
  EXPECT_NEAR(Make(d, {0.2}).sigmas(0)[0], 0.8, 1e-12);
}

// Watanabe (2023)'s alternatives to Optuna's rule (TpeOptions::bandwidth): Hyperopt's
// neighbour gaps count the prior's centre among the values and always the domain ends; Scott's
// rule is one bandwidth from the values with the prior's centre.
TEST(ParzenEstimator, HyperoptAndScottBandwidths) {
  auto d = *MakeFloatDistribution(0.0, 1.0);
  ParzenOptions hyperopt;
  hyperopt.rule = BandwidthRule::kHyperopt;
  // Values 0.1, 0.2, 0.5 (the prior's centre), 0.9 with the ends 0 and 1 as neighbours; clip
  // min 1/min(100, 3 + 2) = 0.2.
  auto h = Make(d, {0.9, 0.1, 0.2}, hyperopt);
  EXPECT_NEAR(h.sigmas(0)[0], 0.4, 1e-12);  // 0.9: max(0.4, 0.1)
  EXPECT_NEAR(h.sigmas(0)[1], 0.2, 1e-12);  // 0.1: max(0.1, 0.1), clipped up
  EXPECT_NEAR(h.sigmas(0)[2], 0.3, 1e-12);  // 0.2: max(0.1, 0.3 to the centre)
  EXPECT_NEAR(h.sigmas(0)[3], 1.0, 1e-12);  // prior

  ParzenOptions scott;
  scott.rule = BandwidthRule::kScott;
  scott.consider_magic_clip = false;
  auto sc = Make(d, {0.9, 0.1, 0.2}, scott);
  // numpy: v = [0.1, 0.2, 0.5, 0.9]; std(ddof=1); IQR = percentile 75 - 25 (linear).
  const std::vector<double> v{0.1, 0.2, 0.5, 0.9};
  const double mean = (0.1 + 0.2 + 0.5 + 0.9) / 4;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / 3);
  const double iqr = (0.5 + 0.25 * (0.9 - 0.5)) - (0.1 + 0.75 * (0.2 - 0.1));
  const double expected = 1.059 * std::min(iqr / 1.34, sd) * std::pow(4.0, -0.2);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(sc.sigmas(0)[i], expected, 1e-12) << i;
  EXPECT_NEAR(sc.sigmas(0)[3], 1.0, 1e-12);
  // Equal values: Scott's bandwidth is 0 and the clip (on) widens it.
  auto same = Make(d, {0.5, 0.5}, ParzenOptions{.rule = BandwidthRule::kScott});
  EXPECT_NEAR(same.sigmas(0)[0], 0.25, 1e-12);  // 1 / min(100, 2 + 2)
}

// The magic clip's floor: (H - L) / min(1 / min_bandwidth_factor, (m + 2)^exponent).
TEST(ParzenEstimator, MagicClipFactorAndExponent) {
  auto d = *MakeFloatDistribution(0.0, 1.0);
  const std::vector<double> close{0.5, 0.5001, 0.5002};  // gaps far below any floor
  EXPECT_NEAR(Make(d, close).sigmas(0)[1], 0.2, 1e-12);  // Optuna: 1 / min(100, 5)
  ParzenOptions squared;
  squared.magic_clip_exponent = 2.0;  // 1 / min(100, 25)
  EXPECT_NEAR(Make(d, close, squared).sigmas(0)[1], 0.04, 1e-12);
  ParzenOptions floor;
  floor.magic_clip_exponent = 2.0;
  floor.min_bandwidth_factor = 0.1;  // 1 / min(10, 25)
  EXPECT_NEAR(Make(d, close, floor).sigmas(0)[1], 0.1, 1e-12);
  std::vector<double> many(200, 0.5);
  EXPECT_NEAR(Make(d, many).sigmas(0)[7], 0.01, 1e-15);  // 1 / min(100, 202)
}

// categorical_prior_weight b: 1 - b on the observed choice, b / (K - 1) on each other; the
// prior stays uniform; sampling follows the same probabilities.
TEST(ParzenEstimator, CategoricalPriorWeightKernel) {
  auto c = *MakeCategoricalDistribution({"a", "b", "c", "d", "e"});
  ParzenOptions o;
  o.categorical_prior_weight = 0.2;
  auto e = Make(c, {1, 1, 3}, o);
  const auto row = e.CategoricalProbabilities(0, 2);
  EXPECT_NEAR(row[3], 0.8, 1e-12);
  EXPECT_NEAR(row[0], 0.05, 1e-12);
  const auto prior = e.CategoricalProbabilities(0, 3);
  EXPECT_NEAR(prior[4], 0.2, 1e-12);
  // Mixture: weights 1/4 each; p(b) = 2/4 * 0.8 + 1/4 * 0.05 + 1/4 * 0.2.
  auto lp = e.LogPdf({{0, 1, 2, 3, 4}});
  EXPECT_NEAR(std::exp(lp[1]), 0.4 + 0.0125 + 0.05, 1e-12);
  double total = 0;
  for (double x : lp) total += std::exp(x);
  EXPECT_NEAR(total, 1.0, 1e-12);
  Rng rng(5);
  const int n = 40000;
  auto s = e.Sample(rng, n);
  for (int k = 0; k < 5; ++k) {
    double freq = static_cast<double>(std::count(s[0].begin(), s[0].end(), k)) / n;
    EXPECT_NEAR(freq, std::exp(lp[static_cast<size_t>(k)]), 0.01) << k;
  }
}

TEST(ParzenEstimator, ScottBandwidthFollowsOptuna31) {
  auto x = *MakeFloatDistribution(0.0, 10.0);
  ParzenOptions o;
  o.multivariate = true;
  o.bandwidth = MultivariateBandwidth::kScott;
  o.consider_magic_clip = false;  // with it, 3 observations clip sigma up to 10/5
  ParzenEstimator e({MakeParzenDimension(x), MakeParzenDimension(x)},
                    {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, {1, 1, 1}, o);
  double expected = 0.2 * std::pow(3.0, -1.0 / 6.0) * 10.0;
  EXPECT_NEAR(e.sigmas(0)[0], expected, 1e-12);
  EXPECT_NEAR(e.sigmas(1)[2], expected, 1e-12);
}

TEST(ParzenEstimator, ContinuousDensityIsCorrectlyNormalised) {
  // One observation at 0.3 in [0, 1] (sigma = max(0.3, 0.7) = 0.7) + the prior (mu 0.5,
  // sigma 1), weights 1/2 each; each truncated normal has the -ln sigma term.
  auto d = *MakeFloatDistribution(0.0, 1.0);
  auto e = Make(d, {0.3});
  auto tn = [](double x, double mu, double s) {
    double z = (x - mu) / s;
    return std::exp(-0.5 * z * z) / (s * std::sqrt(2 * M_PI)) /
           (Ndtr((1 - mu) / s) - Ndtr((0 - mu) / s));
  };
  double x = 0.8;
  double expected = 0.5 * tn(x, 0.3, 0.7) + 0.5 * tn(x, 0.5, 1.0);
  EXPECT_NEAR(std::exp(e.LogPdf({{x}})[0]), expected, 1e-12);
}

// The density of a one-dimensional continuous estimator, summing every kernel directly.
double DirectLogPdf(const ParzenEstimator& e, double low, double high, double x) {
  double sum = 0.0;
  for (size_t i = 0; i < e.n_components(); ++i) {
    double mu = e.mus(0)[i], s = e.sigmas(0)[i];
    double z = (x - mu) / s;
    double mass = Ndtr((high - mu) / s) - Ndtr((low - mu) / s);
    sum += e.weights()[i] * std::exp(-0.5 * z * z) / (s * std::sqrt(2 * M_PI) * mass);
  }
  return std::log(sum);
}

TEST(ParzenEstimator, WindowedContinuousDensityEqualsTheFullSum) {
  // 3000 observations (narrow kernels, ramped weights, a dense cluster and sparse tails): the
  // one-dimensional path evaluates only kernels near x; it must agree with all of them summed.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> cluster(0.2, 0.01);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> obs, weights;
  for (int i = 0; i < 3000; ++i) {
    obs.push_back(i % 3 == 0 ? std::clamp(cluster(rng), 0.0, 1.0) : unit(rng) * unit(rng));
    weights.push_back(1.0 / 3000 + i / 3000.0);
  }
  auto d = *MakeFloatDistribution(0.0, 1.0);
  auto e = Make(d, obs, {}, weights);
  std::vector<std::vector<double>> xs(1);
  for (double x : {0.0, 1e-6, 0.05, 0.2, 0.2003, 0.5, 0.77, 0.999, 1.0}) xs[0].push_back(x);
  auto lp = e.LogPdf(xs);
  for (size_t j = 0; j < xs[0].size(); ++j) {
    EXPECT_NEAR(lp[j], DirectLogPdf(e, 0.0, 1.0, xs[0][j]), 1e-9) << xs[0][j];
  }
  EXPECT_EQ(e.LogPdf({{1.5}})[0], -INFINITY);
}

TEST(ParzenEstimator, AGivenSortOrderGivesTheSameEstimator) {
  // Callers with an incremental index pass the order instead of letting the estimator sort
  // (equal values by ascending index, as the bandwidth of tied observations depends on it).
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> grid(0, 12);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto x = MakeParzenDimension(*MakeFloatDistribution(0.0, 1.0));
  auto q = MakeParzenDimension(*MakeIntDistribution(128, 512, false, 32));
  std::vector<std::vector<double>> obs(2);
  for (int i = 0; i < 200; ++i) {
    obs[0].push_back(std::round(unit(rng) * 50) / 50);  // many ties
    obs[1].push_back(128 + 32 * grid(rng));
  }
  std::vector<std::vector<uint32_t>> order(2, std::vector<uint32_t>(200));
  for (size_t d = 0; d < 2; ++d) {
    std::iota(order[d].begin(), order[d].end(), 0u);
    std::stable_sort(order[d].begin(), order[d].end(),
                     [&](uint32_t a, uint32_t b) { return obs[d][a] < obs[d][b]; });
  }
  std::vector<double> w(200, 1.0);
  ParzenOptions o;
  o.multivariate = true;
  ParzenEstimator own({x, q}, obs, w, o), given({x, q}, obs, w, o, &order);
  for (size_t d = 0; d < 2; ++d) EXPECT_EQ(own.sigmas(d), given.sigmas(d));
  std::vector<std::vector<double>> pts{{0.1, 0.5, 0.93}, {128, 320, 512}};
  auto a = own.LogPdf(pts), b = given.LogPdf(pts);
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(a[j], b[j], 1e-12);
}

TEST(ParzenEstimator, WeightsAndPriorWeightShapeTheMixture) {
  auto d = *MakeFloatDistribution(0.0, 1.0);
  ParzenOptions o;
  o.prior_weight = 2.0;
  auto e = Make(d, {0.1, 0.9}, o, {1.0, 3.0});
  ASSERT_EQ(e.n_components(), 3u);
  EXPECT_NEAR(e.weights()[0], 1.0 / 6.0, 1e-12);
  EXPECT_NEAR(e.weights()[1], 3.0 / 6.0, 1e-12);
  EXPECT_NEAR(e.weights()[2], 2.0 / 6.0, 1e-12);
}

// Samples follow the density: histogram frequencies vs the density's bin masses.
TEST(ParzenEstimator, ContinuousSamplesFollowTheDensity) {
  auto d = *MakeFloatDistribution(0.0, 1.0);
  auto e = Make(d, {0.1, 0.15, 0.7});
  Rng rng(5);
  const int n = 40000, bins = 10;
  auto s = e.Sample(rng, n);
  std::vector<int> counts(bins, 0);
  for (double v : s[0]) {
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 1.0);
    counts[std::min(bins - 1, static_cast<int>(v * bins))]++;
  }
  for (int b = 0; b < bins; ++b) {
    double p = Integrate(e, static_cast<double>(b) / bins, static_cast<double>(b + 1) / bins, 2000);
    EXPECT_NEAR(counts[static_cast<size_t>(b)] / static_cast<double>(n), p, 0.01) << b;
  }
}

TEST(ParzenEstimator, DiscreteAndCategoricalSamplesFollowTheMass) {
  Rng rng(11);
  const int n = 40000;
  auto step = *MakeIntDistribution(128, 512, false, 32);
  auto e = Make(step, {128, 160, 512});
  auto s = e.Sample(rng, n);
  std::vector<std::vector<double>> grid(1);
  for (int v = 128; v <= 512; v += 32) grid[0].push_back(v);
  auto lp = e.LogPdf(grid);
  for (size_t k = 0; k < grid[0].size(); ++k) {
    double freq = static_cast<double>(std::count(s[0].begin(), s[0].end(), grid[0][k])) / n;
    EXPECT_NEAR(freq, std::exp(lp[k]), 0.01) << grid[0][k];
  }
  auto c = *MakeCategoricalDistribution({"x", "y", "z", "w"});
  auto ec = Make(c, {2, 2, 0});
  auto sc = ec.Sample(rng, n);
  auto lc = ec.LogPdf({{0, 1, 2, 3}});
  for (int k = 0; k < 4; ++k) {
    double freq = static_cast<double>(std::count(sc[0].begin(), sc[0].end(), k)) / n;
    EXPECT_NEAR(freq, std::exp(lc[static_cast<size_t>(k)]), 0.01) << k;
  }
}

TEST(ParzenEstimator, TransformRoundTrips) {
  auto lg = *MakeFloatDistribution(1e-6, 1e-3, true);
  EXPECT_NEAR(FromParzenSpace(lg, ToParzenSpace(lg, 3e-5)), 3e-5, 1e-18);
  auto st = *MakeIntDistribution(128, 512, false, 32);
  EXPECT_EQ(FromParzenSpace(st, 170.0), 160.0);
  EXPECT_EQ(FromParzenSpace(st, 600.0), 512.0);
  auto il = *MakeIntDistribution(1, 100, true);
  EXPECT_EQ(FromParzenSpace(il, std::log(7.2)), 7.0);
  auto fs = *MakeFloatDistribution(0.0, 1.0, false, 0.25);
  EXPECT_EQ(FromParzenSpace(fs, 0.3), 0.25);
}

}  // namespace
}  // namespace tune

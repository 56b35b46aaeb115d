#include "samplers/truncnorm.h"

#include <algorithm>
#include <limits>
#include <numbers>

#ifdef TUNE_HAVE_LIBMVEC
// glibc declares its SIMD variants only under -ffast-math; this file is built with
// -fopenmp-simd -fno-math-errno instead, which keeps IEEE semantics.
extern "C" {
#pragma omp declare simd notinbranch
double erfc(double) noexcept;
#pragma omp declare simd notinbranch
double log1p(double) noexcept;
}
#endif

namespace tune::truncnorm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // ln sqrt(2 pi)
// In a mass >= 1/2, a tail beyond 8.5 (Phi(-8.5) = 9.5e-18) moves ln(mass) by < 2e-17, under a
// double's resolution of the result: it is dropped, which saves an erfc.
constexpr double kNegligibleTail = 8.5;

// ln(exp(x) - exp(y)) for y <= x.
double LogDiff(double x, double y) {
  if (y == -kInf) return x;
  if (y >= x) return -kInf;
  return x + std::log1p(-std::exp(y - x));
}

}  // namespace

double Ndtr(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

double LogNdtr(double z) {
  if (z > 6.0) return std::log1p(-0.5 * std::erfc(z / std::numbers::sqrt2));
  if (z > -20.0) return std::log(0.5 * std::erfc(-z / std::numbers::sqrt2));
  if (z == -kInf) return -kInf;
  // Asymptotic expansion: Phi(z) ~ phi(z)/(-z) * sum_k (-1)^k (2k-1)!! / z^(2k).
  double z2 = z * z;
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2.0 * k - 1.0) / z2;
    sum += term;
  }
  return -0.5 * z2 - std::log(-z) - kLogSqrt2Pi + std::log(sum);
}

double Ndtri(double p) {
  if (p <= 0.0) return -kInf;
  if (p >= 1.0) return kInf;
  // Acklam's rational approximation (relative error 1.15e-9) ...
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow) {
    double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - kLow) {
    double q = p - 0.5;
    double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  // ... refined by one Halley step to full double precision.
  double e = Ndtr(x) - p;
  double u = e * std::sqrt(2.0 * std::numbers::pi) * std::exp(0.5 * x * x);
  return x - u / (1.0 + 0.5 * x * u);
}

double LogGaussMass(double a, double b) {
  if (a >= b) return -kInf;
  if (b <= 0.0) return LogDiff(LogNdtr(b), LogNdtr(a));
  if (a >= 0.0) return LogDiff(LogNdtr(-a), LogNdtr(-b));
  // The interval contains 0: 1 - Phi(a) - Phi(-b), both terms <= 1/2, so the mass is >= 1/2.
  const double lower = a < -kNegligibleTail ? 0.0 : Ndtr(a);
  const double upper = b > kNegligibleTail ? 0.0 : Ndtr(-b);
  return std::log1p(-lower - upper);
}

TUNE_VECTOR_CLONES void LogGaussMasses(const double* a, const double* b, double* out, size_t n) {
  // Every interval as if it contained 0 (branch-free, so it vectorises) ...
#ifdef TUNE_HAVE_LIBMVEC
#pragma omp simd
#endif
  for (size_t i = 0; i < n; ++i) {
    const double lower = a[i] < -kNegligibleTail ? 0.0 : 0.5 * erfc(-a[i] / std::numbers::sqrt2);
    const double upper = b[i] > kNegligibleTail ? 0.0 : 0.5 * erfc(b[i] / std::numbers::sqrt2);
    out[i] = log1p(-lower - upper);
  }
  // ... then the others again, the scalar way.
  for (size_t i = 0; i < n; ++i) {
    if (!(a[i] < 0.0 && b[i] > 0.0)) out[i] = LogGaussMass(a[i], b[i]);
  }
}

double Ppf(double u, double a, double b) {
  u = std::clamp(u, 0.0, 1.0);
  if (a > 0.0) return -Ppf(1.0 - u, -b, -a);  // work in the left tail, where Phi is precise
  double lo = Ndtr(a);
  double hi = Ndtr(b);
  double p = lo + u * (hi - lo);
  if (p <= 0.5) return std::clamp(Ndtri(p), a, b);
  // Upper half: invert the complement, which keeps its precision near 1.
  double upper_lo = Ndtr(-b);
  double upper_hi = Ndtr(-a);
  double z = -Ndtri(upper_lo + (1.0 - u) * (upper_hi - upper_lo));
  return std::clamp(z, a, b);
}

double LogPdf(double x, double mu, double sigma, double low, double high) {
  if (x < low || x > high) return -kInf;
  double z = (x - mu) / sigma;
  return -0.5 * z * z - kLogSqrt2Pi - std::log(sigma) -
         LogGaussMass((low - mu) / sigma, (high - mu) / sigma);
}

}  // namespace tune::truncnorm

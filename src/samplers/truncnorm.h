// The standard normal and truncated-normal functions TPE needs, accurate in the tails (log
// space), without SciPy. Optuna's optuna/samplers/_tpe/_truncnorm.py computes the same
// quantities; the continuous log-density here includes the -ln(sigma) term (Optuna >= 3.5).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

// Hot element-wise loops over kernels: on x86-64 Linux, GCC also builds AVX2 and AVX-512 clones
// of the functions marked with this and picks one at load time.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12
#define TUNE_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
// GCC 11 (Ubuntu 22.04's) has no dispatcher for the x86-64-vN levels: clones by feature.
#define TUNE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TUNE_VECTOR_CLONES
#endif

namespace tune::truncnorm {

// Phi(z), the standard normal CDF.
double Ndtr(double z);
// ln Phi(z), accurate for very negative z (asymptotic series below -20).
double LogNdtr(double z);
// Phi^{-1}(p) for p in (0, 1); -inf/+inf at 0/1.
double Ndtri(double p);
// ln(Phi(b) - Phi(a)) for a <= b, accurate when both are far in the same tail.
double LogGaussMass(double a, double b);
// out[i] = LogGaussMass(a[i], b[i]) for i < n. Where libmvec is available (glibc >= 2.35 on
// x86-64) the intervals that contain 0, all of a Parzen estimator's kernels but a few, take
// its SIMD erfc and log1p (within a few ulp of the scalar ones): 4-8x faster.
void LogGaussMasses(const double* a, const double* b, double* out, size_t n);
// The standardised truncated normal on [a, b] (a < b): the z whose CDF is u in [0, 1].
double Ppf(double u, double a, double b);
// ln of the density at x of N(mu, sigma) truncated to [low, high]; -inf outside.
double LogPdf(double x, double mu, double sigma, double low, double high);

// exp(x) for x <= 0 with relative error below 1e-12, branch-free so that loops over it
// vectorise; returns 0 below -708. Used for log-sum-exp over thousands of kernels.
inline double FastExpNonPositive(double x) {
  x = x < -708.0 ? -708.0 : x;
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 0.6931471803691238;
  constexpr double kLn2Lo = 1.9082149292705877e-10;
  // Round x*log2(e) to the nearest integer n with the 1.5*2^52 trick (no libm call, so the
  // loop vectorises); the low mantissa bits of `t` then hold n.
  constexpr double kMagic = 6755399441055744.0;
  double t = x * kLog2e + kMagic;
  double n = t - kMagic;
  double r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2/2
  // Taylor series of e^r to degree 11 (error < 2e-14 on |r| <= 0.347).
  double p = 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // Scale by 2^n through the exponent bits (n >= -1022 here, so the result is normal).
  int64_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  constexpr int64_t kMagicBits = 0x4338000000000000;  // the bits of kMagic
  int64_t bits = (t_bits - kMagicBits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace tune::truncnorm

// NSGA-II's numerical crossovers, each Optuna 4.9's (optuna/samplers/nsgaii/_crossovers/), with
// the same draws in the same order (tests/differential/nsgaii_diff.py feeds both the same ones).
#include <algorithm>
#include <cmath>
#include <random>

#include "tune/samplers/nsgaii.h"

namespace tune {
namespace {

using Matrix = std::vector<std::vector<double>>;
using Vector = std::vector<double>;
using Bounds = std::vector<std::pair<double, double>>;

Vector ColumnMin(const Matrix& p) {
  Vector out = p.at(0);
  for (const Vector& row : p) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::min(out[i], row[i]);
  }
  return out;
}

Vector ColumnMax(const Matrix& p) {
  Vector out = p.at(0);
  for (const Vector& row : p) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::max(out[i], row[i]);
  }
  return out;
}

Vector Draws(GaRandom& random, size_t n) {
  Vector u(n);
  for (double& x : u) x = random.Rand();
  return u;
}

double Dot(const Vector& a, const Vector& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double Norm(const Vector& a) { return std::sqrt(Dot(a, a)); }

// UniformCrossover: each column from the second parent where the draw is >= swapping_prob.
Vector Uniform(const Matrix& p, double swapping_prob, GaRandom& random) {
  Vector u = Draws(random, p[0].size());
  Vector child(u.size());
  for (size_t i = 0; i < u.size(); ++i) child[i] = p[u[i] >= swapping_prob ? 1 : 0][i];
  return child;
}

// BLXAlphaCrossover: uniform in the parents' box widened by alpha times its width each side.
Vector BlxAlpha(const Matrix& p, double alpha, GaRandom& random) {
  Vector lo = ColumnMin(p);
  Vector hi = ColumnMax(p);
  Vector r = Draws(random, lo.size());
  Vector child(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    double diff = alpha * (hi[i] - lo[i]);
    double low = lo[i] - diff;
    double high = hi[i] + diff;
    child[i] = (high - low) * r[i] + low;
  }
  return child;
}

// SBX and VSBX make two children c1, c2 and keep one: per column a child's gene (or, with
// probability 1 - use_child_gene_prob, a parent's), swapped with probability
// uniform_crossover_prob; then either child with probability 1/2.
Vector PickChild(const Matrix& p, const Vector& c1, const Vector& c2, const NsgaIIOptions& o,
                 GaRandom& random) {
  Vector child1;
  Vector child2;
  for (size_t i = 0; i < c1.size(); ++i) {
    bool gene = random.Rand() < o.use_child_gene_prob;
    double a = gene ? c1[i] : p[0][i];
    double b = gene ? c2[i] : p[1][i];
    if (random.Rand() >= o.uniform_crossover_prob) {
      child1.push_back(a);
      child2.push_back(b);
    } else {
      child1.push_back(b);
      child2.push_back(a);
    }
  }
  return random.Rand() < 0.5 ? child1 : child2;
}

double EtaOf(const NsgaIIOptions& o, bool multi_objective) {
  return o.eta ? *o.eta : (multi_objective ? 20.0 : 2.0);
}

// SBXCrossover, with Optuna's bounded spread factors (alpha1, alpha2).
Vector Sbx(const Matrix& p, const Bounds& bounds, const NsgaIIOptions& o, bool multi,
           GaRandom& random) {
  const double eta = EtaOf(o, multi);
  const double e = 1.0 / (eta + 1.0);
  Vector lo = ColumnMin(p);
  Vector hi = ColumnMax(p);
  Vector us = Draws(random, lo.size());
  Vector c1(lo.size());
  Vector c2(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) {
    double diff = std::max(hi[i] - lo[i], 1e-10);
    double beta1 = 1.0 + 2.0 * (lo[i] - bounds[i].first) / diff;
    double beta2 = 1.0 + 2.0 * (bounds[i].second - hi[i]) / diff;
    double alpha1 = 2.0 - std::pow(beta1, -(eta + 1.0));
    double alpha2 = 2.0 - std::pow(beta2, -(eta + 1.0));
    double betaq1 = us[i] > 1.0 / alpha1 ? std::pow(1.0 / (2.0 - us[i] * alpha1), e)
                                         : std::pow(us[i] * alpha1, e);
    double betaq2 = us[i] > 1.0 / alpha2 ? std::pow(1.0 / (2.0 - us[i] * alpha2), e)
                                         : std::pow(us[i] * alpha2, e);
    c1[i] = 0.5 * ((lo[i] + hi[i]) - betaq1 * diff);
    c2[i] = 0.5 * ((lo[i] + hi[i]) + betaq2 * diff);
  }
  return PickChild(p, c1, c2, o, random);
}

// VSBXCrossover.
Vector Vsbx(const Matrix& p, const NsgaIIOptions& o, bool multi, GaRandom& random) {
  const double eta = EtaOf(o, multi);
  const double eps = 1e-10;
  const size_t n = p[0].size();
  Vector us = Draws(random, n);
  Vector b1(n);
  Vector b2(n);
  for (size_t i = 0; i < n; ++i) {
    b1[i] = std::pow(1.0 / std::max(2.0 * us[i], eps), 1.0 / (eta + 1.0));
    b2[i] = std::pow(1.0 / std::max(2.0 * (1.0 - us[i]), eps), 1.0 / (eta + 1.0));
  }
  const Vector& x0 = p[0];
  const Vector& x1 = p[1];
  Vector c1(n);
  Vector c2(n);
  bool first1 = random.Rand() <= 0.5;
  for (size_t i = 0; i < n; ++i) {
    c1[i] = first1 ? 0.5 * ((1 + b1[i]) * x0[i] + (1 - b2[i]) * x1[i])
                   : 0.5 * ((1 - b1[i]) * x0[i] + (1 + b2[i]) * x1[i]);
  }
  bool first2 = random.Rand() <= 0.5;
  for (size_t i = 0; i < n; ++i) {
    c2[i] = first2 ? 0.5 * ((3 - b1[i]) * x0[i] - (1 - b2[i]) * x1[i])
                   : 0.5 * (-(1 - b1[i]) * x0[i] + (3 - b2[i]) * x1[i]);
  }
  return PickChild(p, c1, c2, o, random);
}

// SPXCrossover (three parents).
Vector Spx(const Matrix& p, const NsgaIIOptions& o, GaRandom& random) {
  const size_t n = p[0].size();
  const size_t k = p.size();
  Vector g(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (const Vector& row : p) g[i] += row[i];
    g[i] /= static_cast<double>(k);
  }
  Vector rs = Draws(random, k - 1);
  for (size_t j = 0; j < rs.size(); ++j) rs[j] = std::pow(rs[j], 1.0 / static_cast<double>(j + 1));
  double epsilon = o.epsilon ? *o.epsilon : std::sqrt(static_cast<double>(n) + 2.0);
  Matrix xs(k, Vector(n));
  for (size_t j = 0; j < k; ++j) {
    for (size_t i = 0; i < n; ++i) xs[j][i] = g[i] + epsilon * (p[j][i] - g[i]);
  }
  Vector c(n, 0.0);
  for (size_t j = 1; j < k; ++j) {
    for (size_t i = 0; i < n; ++i) c[i] = rs[j - 1] * (xs[j - 1][i] - xs[j][i] + c[i]);
  }
  for (size_t i = 0; i < n; ++i) c[i] += xs[k - 1][i];
  return c;
}

// The unit vector from the first parent to the second (numpy's v / clip(|v|, 1e-10)).
Vector UnitX1ToX2(const Matrix& p) {
  Vector v(p[0].size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = p[1][i] - p[0][i];
  double m = std::max(Norm(v), 1e-10);
  for (double& x : v) x /= m;
  return v;
}

// Q of the Householder QR of `a` (columns), LAPACK's dgeqr2/dorg2r conventions (numpy's
// np.linalg.qr): reflector i maps column i onto -sign(a_ii) |column| e_i; none where the part
// below the diagonal is already 0. Returns Q's columns.
Matrix HouseholderQ(Matrix a) {
  const size_t n = a.size();
  std::vector<Vector> vs(n);
  Vector taus(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    Vector& col = a[i];
    double alpha = col[i];
    double xnorm = 0.0;
    for (size_t r = i + 1; r < n; ++r) xnorm = std::hypot(xnorm, col[r]);
    Vector v(n, 0.0);
    v[i] = 1.0;
    if (xnorm != 0.0) {
      double beta = -std::copysign(std::hypot(alpha, xnorm), alpha);
      taus[i] = (beta - alpha) / beta;
      for (size_t r = i + 1; r < n; ++r) v[r] = col[r] / (alpha - beta);
    }
    vs[i] = v;
    // Apply H_i = I - tau v v^T to the remaining columns.
    for (size_t j = i; j < n; ++j) {
      double s = 0.0;
      for (size_t r = i; r < n; ++r) s += v[r] * a[j][r];
      for (size_t r = i; r < n; ++r) a[j][r] -= taus[i] * v[r] * s;
    }
  }
  // Q = H_0 H_1 ... H_{n-1} I, applied from the last reflector.
  Matrix q(n, Vector(n, 0.0));
  for (size_t j = 0; j < n; ++j) q[j][j] = 1.0;
  for (size_t i = n; i-- > 0;) {
    for (size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (size_t r = i; r < n; ++r) s += vs[i][r] * q[j][r];
      for (size_t r = i; r < n; ++r) q[j][r] -= taus[i] * vs[i][r] * s;
    }
  }
  return q;
}

// UNDXCrossover (three parents). As Optuna, the normal draws take sigma^2 as their scale.
Vector Undx(const Matrix& p, const NsgaIIOptions& o, GaRandom& random) {
  const size_t n = p[0].size();
  Vector xp(n);
  Vector d(n);
  for (size_t i = 0; i < n; ++i) {
    xp[i] = (p[0][i] + p[1][i]) / 2;
    d[i] = p[0][i] - p[1][i];
  }
  double sigma_eta = o.sigma_eta ? *o.sigma_eta : 0.35 / std::sqrt(static_cast<double>(n));
  Vector etas(n);
  for (double& e : etas) e = random.Normal(0.0, sigma_eta * sigma_eta);
  double xi = random.Normal(0.0, o.sigma_xi * o.sigma_xi);
  Vector e12 = UnitX1ToX2(p);
  Vector child(n);
  for (size_t i = 0; i < n; ++i) child[i] = xp[i] + xi * d[i];
  if (n <= 1) return child;
  Matrix a(n, Vector(n, 0.0));  // columns: e12 (if not 0), then the unit vectors e_1 ...
  for (size_t j = 0; j < n; ++j) a[j][j] = 1.0;
  if (std::any_of(e12.begin(), e12.end(), [](double x) { return x != 0.0; })) a[0] = e12;
  Matrix q = HouseholderQ(a);
  Vector v13(n);
  for (size_t i = 0; i < n; ++i) v13[i] = p[2][i] - p[0][i];
  double along = Dot(v13, e12);
  Vector orth(n);
  for (size_t i = 0; i < n; ++i) orth[i] = v13[i] - along * e12[i];
  double dist = Norm(orth);
  Vector three(n, 0.0);
  for (size_t k = 0; k + 1 < n; ++k) {
    for (size_t i = 0; i < n; ++i) three[i] += etas[k] * q[k + 1][i];
  }
  for (size_t i = 0; i < n; ++i) child[i] += three[i] * dist;
  return child;
}

}  // namespace

double RngGaRandom::Rand() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // 53 random bits, in [0, 1)
}

std::size_t RngGaRandom::Choice(std::size_t n) {
  return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
}

double RngGaRandom::Normal(double loc, double scale) {
  return loc + scale * std::normal_distribution<double>(0.0, 1.0)(rng_);
}

int CrossoverParents(NsgaIICrossover crossover) {
  return crossover == NsgaIICrossover::kSpx || crossover == NsgaIICrossover::kUndx ? 3 : 2;
}

const char* CrossoverName(NsgaIICrossover crossover) {
  switch (crossover) {
    case NsgaIICrossover::kUniform:
      return "uniform";
    case NsgaIICrossover::kBlxAlpha:
      return "blxalpha";
    case NsgaIICrossover::kSbx:
      return "sbx";
    case NsgaIICrossover::kVsbx:
      return "vsbx";
    case NsgaIICrossover::kSpx:
      return "spx";
    case NsgaIICrossover::kUndx:
      return "undx";
  }
  return "uniform";
}

std::vector<double> Crossover(const NsgaIIOptions& options,
                              const std::vector<std::vector<double>>& parents,
                              const std::vector<std::pair<double, double>>& bounds,
                              bool multi_objective, GaRandom& random) {
  switch (options.crossover) {
    case NsgaIICrossover::kUniform:
      return Uniform(parents, options.swapping_prob, random);
    case NsgaIICrossover::kBlxAlpha:
      return BlxAlpha(parents, options.alpha, random);
    case NsgaIICrossover::kSbx:
      return Sbx(parents, bounds, options, multi_objective, random);
    case NsgaIICrossover::kVsbx:
      return Vsbx(parents, options, multi_objective, random);
    case NsgaIICrossover::kSpx:
      return Spx(parents, options, random);
    case NsgaIICrossover::kUndx:
      return Undx(parents, options, random);
  }
  return {};
}

}  // namespace tune

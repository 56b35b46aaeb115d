#include "objectives/mo_functions.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace tune {
namespace {

constexpr double kPi = std::numbers::pi;

std::vector<double> Zdt(const std::string& name, const std::vector<double>& x) {
  const double f1 = x[0];
  double sum = 0.0;
  for (size_t i = 1; i < x.size(); ++i) sum += x[i];
  const double g = 1.0 + 9.0 * sum / static_cast<double>(x.size() - 1);
  const double r = f1 / g;
  double h = 1.0 - std::sqrt(r);
  if (name == "zdt2") h = 1.0 - r * r;
  if (name == "zdt3") h = 1.0 - std::sqrt(r) - r * std::sin(10.0 * kPi * f1);
  return {f1, g * h};
}

std::vector<double> Dtlz2(const std::vector<double>& x) {
  double g = 0.0;
  for (size_t i = 2; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
  const double a = x[0] * kPi / 2, b = x[1] * kPi / 2;
  return {(1 + g) * std::cos(a) * std::cos(b), (1 + g) * std::cos(a) * std::sin(b),
          (1 + g) * std::sin(a)};
}

// WFG's multi-modal shift s_multi(y, A, B, C).
double SMulti(double y, double a, double b, double c) {
  const double t = std::fabs(y - c) / (2.0 * (std::floor(c - y) + c));
  return (1.0 + std::cos((4.0 * a + 2.0) * kPi * (0.5 - t)) + 4.0 * b * t * t) / (b + 2.0);
}

// WFG4 with M = 2, k = 4 position and l = 6 distance parameters.
std::vector<double> Wfg4(const std::vector<double>& z) {
  constexpr int kPosition = 4;
  std::vector<double> y(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    y[i] = SMulti(z[i] / (2.0 * static_cast<double>(i + 1)), 30, 10, 0.35);
  }
  double position = 0.0, distance = 0.0;  // r_sum with unit weights: means
  for (size_t i = 0; i < z.size(); ++i)
    (static_cast<int>(i) < kPosition ? position : distance) += y[i];
  position /= kPosition;
  distance /= static_cast<double>(z.size() - kPosition);
  // Concave shape with A = 1: x_1 = t_1, x_M = t_M; f_m = x_M + 2m h_m.
  return {distance + 2.0 * std::sin(position * kPi / 2),
          distance + 4.0 * std::cos(position * kPi / 2)};
}

}  // namespace

std::vector<std::string> MultiObjectiveProblemNames() {
  return {"zdt1", "zdt2", "zdt3", "dtlz2", "wfg4"};
}

int MultiObjectiveProblemObjectives(const std::string& name) {
  if (name == "zdt1" || name == "zdt2" || name == "zdt3" || name == "wfg4") return 2;
  return name == "dtlz2" ? 3 : 0;
}

int MultiObjectiveProblemVariables(const std::string& name) {
  if (name == "dtlz2") return 12;
  return MultiObjectiveProblemObjectives(name) > 0 ? 10 : 0;
}

std::pair<double, double> MultiObjectiveProblemBounds(const std::string& name, int i) {
  if (name == "wfg4") return {0.0, 2.0 * (i + 1)};
  return {0.0, 1.0};
}

Result<std::vector<double>> EvaluateMultiObjectiveProblem(const std::string& name,
                                                          const std::vector<double>& x) {
  const int n = MultiObjectiveProblemVariables(name);
  if (n == 0) return InvalidArgumentError(fmt::format("unknown problem '{}'", name));
  if (static_cast<int>(x.size()) != n) {
    return InvalidArgumentError(fmt::format("{} takes {} variables, got {}", name, n, x.size()));
  }
  if (name == "dtlz2") return Dtlz2(x);
  if (name == "wfg4") return Wfg4(x);
  return Zdt(name, x);
}

}  // namespace tune

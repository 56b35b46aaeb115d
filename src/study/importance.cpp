#include "tune/importance.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <variant>

namespace tune {
namespace {

constexpr int kMaxSteps = 50;         // PedAnovaImportanceEvaluator._n_steps
constexpr double kPriorWeight = 1.0;  // ... _prior_weight
constexpr size_t kMinTopTrials = 2;   // ... _min_n_top_trials

using Trials = std::vector<const FrozenTrial*>;

// The distributions every trial has, as optuna.search_space.intersection_search_space.
std::map<std::string, Distribution> IntersectionSpace(const Trials& trials) {
  std::map<std::string, Distribution> space;
  if (trials.empty()) return space;
  space = trials.front()->distributions;
  for (const FrozenTrial* t : trials) {
    for (auto it = space.begin(); it != space.end();) {
      auto found = t->distributions.find(it->first);
      bool same = found != t->distributions.end() && found->second == it->second;
      it = same ? std::next(it) : space.erase(it);
    }
  }
  return space;
}

// The trials whose loss (value, negated when maximising) is within the top `quantile`, and at
// least the best kMinTopTrials (Optuna's _QuantileFilter).
Trials TopTrials(const Trials& trials, bool lower_is_better, double quantile) {
  std::vector<double> loss;
  for (const FrozenTrial* t : trials) loss.push_back(lower_is_better ? t->value() : -t->value());
  std::vector<double> sorted = loss;
  std::sort(sorted.begin(), sorted.end());
  const auto at = static_cast<size_t>(std::ceil(quantile * static_cast<double>(loss.size()))) - 1;
  const double cutoff = std::max(sorted[kMinTopTrials - 1], sorted[at]);
  Trials top;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (loss[i] <= cutoff) top.push_back(trials[i]);
  }
  return top;
}

// How many trials fall on each grid point: the choice index of a categorical parameter, else
// the nearest of at most kMaxSteps points spread evenly (in log space for log parameters).
std::vector<double> GridCounts(const std::string& name, const Distribution& d,
                               const Trials& trials) {
  if (const auto* c = std::get_if<CategoricalDistribution>(&d)) {
    std::vector<double> counts(c->choices.size(), 0.0);
    for (const FrozenTrial* t : trials) counts[static_cast<size_t>(t->params.at(name))] += 1;
    return counts;
  }
  double low = 0, high = 0;
  bool log = false;
  std::optional<double> step;
  int n = kMaxSteps;
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    low = f->low, high = f->high, log = f->log, step = f->step;
  } else {
    const auto& i = std::get<IntDistribution>(d);
    low = static_cast<double>(i.low), high = static_cast<double>(i.high), log = i.log;
    step = static_cast<double>(i.step);
    if (log)
      n = std::min(n, static_cast<int>(std::ceil(std::log(high - low + 1) / std::log(2.0))) + 1);
  }
  if (step && !log) n = std::min(n, static_cast<int>(std::round((high - low) / *step)) + 1);
  auto scale = [log](double v) { return log ? std::log(v) : v; };
  std::vector<double> grid(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) grid[k] = scale(low) + (scale(high) - scale(low)) * k / (n - 1);
  grid.back() = scale(high);
  const double half = (grid[1] - grid[0]) / 2;
  std::vector<double> counts(grid.size(), 0.0);
  for (const FrozenTrial* t : trials) {
    auto at = std::lower_bound(grid.begin(), grid.end(), scale(t->params.at(name)) - half);
    counts[std::min<size_t>(at - grid.begin(), grid.size() - 1)] += 1;
  }
  return counts;
}

double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// The bandwidth of Optuna's _ScottParzenEstimator: Scott's rule on the grid indices, at least
// 0.5 / 1.64.
double ScottSigma(const std::vector<double>& counts) {
  std::vector<double> mus, cs;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] > 0) mus.push_back(static_cast<double>(k)), cs.push_back(counts[k]);
  }
  const double total = std::accumulate(cs.begin(), cs.end(), 0.0);
  double mean = 0, var = 0;
  for (size_t k = 0; k < mus.size(); ++k) mean += mus[k] * cs[k] / total;
  for (size_t k = 0; k < mus.size(); ++k) var += (mus[k] - mean) * (mus[k] - mean) * cs[k];
  const double sd = std::sqrt(var / std::max(1.0, total - 1));
  std::vector<double> cum(cs.size());
  std::partial_sum(cs.begin(), cs.end(), cum.begin());
  const size_t q25 = std::lower_bound(cum.begin(), cum.end(), std::floor(total / 4)) - cum.begin();
  const size_t q75 =
      std::upper_bound(cum.begin(), cum.end(), std::floor(total * 3 / 4)) - cum.begin();
  const double iqr = mus[std::min(mus.size() - 1, q75)] - mus[std::min(mus.size() - 1, q25)];
  const double sigma = 1.059 * std::min(iqr / 1.34, sd) * std::pow(total, -0.2);
  return std::max(sigma, 0.5 / 1.64);
}

// The estimator's probability of each grid index: discretised truncated normals at the observed
// indices (weighted by their counts) plus a wide prior kernel at the middle.
std::vector<double> NumericalPdf(const std::vector<double>& counts) {
  const auto n = static_cast<double>(counts.size());
  std::vector<std::array<double, 3>> kernels;  // mu, sigma, weight
  const double sigma = ScottSigma(counts);
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] > 0) kernels.push_back({static_cast<double>(k), sigma, counts[k]});
  }
  kernels.push_back({0.5 * (n - 1), n, kPriorWeight});
  double weights = 0;
  for (const auto& k : kernels) weights += k[2];
  std::vector<double> pdf(counts.size(), 0.0);
  for (const auto& [mu, s, w] : kernels) {
    const double mass = Phi((n - 0.5 - mu) / s) - Phi((-0.5 - mu) / s);
    for (size_t x = 0; x < pdf.size(); ++x) {
      const double xd = static_cast<double>(x);
      pdf[x] += w / weights * (Phi((xd + 0.5 - mu) / s) - Phi((xd - 0.5 - mu) / s)) / mass;
    }
  }
  return pdf;
}

// Optuna's categorical kernels: each observed choice gets 1 + prior / n_kernels, the others
// prior / n_kernels; the prior kernel is uniform.
std::vector<double> CategoricalPdf(const std::vector<double>& counts) {
  const size_t n = counts.size();
  double observed = 0, weights = kPriorWeight;
  for (double c : counts) observed += c > 0, weights += c;
  const double fill = kPriorWeight / (observed + 1);
  std::vector<double> pdf(n, kPriorWeight / weights / static_cast<double>(n));
  for (size_t j = 0; j < n; ++j) {
    if (counts[j] <= 0) continue;
    const double row = fill * static_cast<double>(n) + 1;
    for (size_t x = 0; x < n; ++x) pdf[x] += counts[j] / weights * (fill + (x == j)) / row;
  }
  return pdf;
}

double PearsonDivergence(const std::string& name, const Distribution& d, const Trials& top,
                         const Trials& region) {
  const bool categorical = std::holds_alternative<CategoricalDistribution>(d);
  auto pdf = [&](const Trials& trials) {
    auto counts = GridCounts(name, d, trials);
    return categorical ? CategoricalPdf(counts) : NumericalPdf(counts);
  };
  const std::vector<double> p_top = pdf(top), p_region = pdf(region);
  double divergence = 0;
  for (size_t x = 0; x < p_top.size(); ++x) {
    const double t = p_top[x] + 1e-12, r = p_region[x] + 1e-12;
    divergence += r * (t / r - 1) * (t / r - 1);
  }
  return divergence;
}

}  // namespace

std::vector<ParamImportance> PedAnovaImportances(const std::vector<FrozenTrial>& trials,
                                                 StudyDirection direction, double target_quantile) {
  Trials complete;
  for (const FrozenTrial& t : trials) {
    if (t.state == TrialState::kComplete && t.values.size() == 1) complete.push_back(&t);
  }
  const auto space = IntersectionSpace(complete);
  Trials region;
  for (const FrozenTrial* t : complete) {
    if (std::isfinite(t->value())) region.push_back(t);
  }
  if (region.size() <= kMinTopTrials || space.empty()) return {};
  const Trials top = TopTrials(region, direction != StudyDirection::kMaximize, target_quantile);
  const double quantile = static_cast<double>(top.size()) / static_cast<double>(region.size());
  std::vector<ParamImportance> out;
  double sum = 0;
  for (const auto& [name, d] : space) {
    const double v =
        IsSingle(d) ? 0.0 : quantile * quantile * PearsonDivergence(name, d, top, region);
    out.push_back({name, v});
    sum += v;
  }
  for (auto& p : out)
    p.importance = sum > 0 ? p.importance / sum : 1.0 / static_cast<double>(out.size());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.importance > b.importance; });
  return out;
}

}  // namespace tune

#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "util/nonfinite.h"

namespace tune {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Every metric of `m` undefined (NaN; AUROC unset): its inputs were not all finite.
ClassificationMetrics& Undefined(ClassificationMetrics& m, size_t k) {
  m.accuracy = m.macro_f1 = m.micro_f1 = m.weighted_f1 = m.mcc = m.balanced_accuracy = kNaN;
  m.class_f1.assign(k, kNaN);
  m.auroc.reset();
  return m;
}

// Per-class F1, weighted F1 and the multi-class Matthews correlation from the counts.
void AddAgreementMetrics(const std::vector<int64_t>& labels,
                         const std::vector<int64_t>& predictions, size_t k,
                         const std::vector<int64_t>& tp, const std::vector<int64_t>& fp,
                         const std::vector<int64_t>& fn, ClassificationMetrics& m) {
  const auto n = static_cast<double>(std::min(labels.size(), predictions.size()));
  m.class_f1.assign(k, 0.0);
  double weighted = 0, sum_true_pred = 0, sum_pred2 = 0, sum_true2 = 0, correct = 0;
  for (size_t c = 0; c < k; ++c) {
    const double denom = static_cast<double>(2 * tp[c] + fp[c] + fn[c]);
    m.class_f1[c] = denom > 0 ? 2.0 * static_cast<double>(tp[c]) / denom : 0.0;
    const auto truth = static_cast<double>(tp[c] + fn[c]),
               predicted = static_cast<double>(tp[c] + fp[c]);
    weighted += truth * m.class_f1[c];
    sum_true_pred += truth * predicted;
    sum_pred2 += predicted * predicted;
    sum_true2 += truth * truth;
    correct += static_cast<double>(tp[c]);
  }
  m.weighted_f1 = n > 0 ? weighted / n : 0.0;
  const double denom = std::sqrt((n * n - sum_pred2) * (n * n - sum_true2));
  m.mcc = denom > 0 ? (correct * n - sum_true_pred) / denom : 0.0;
}

// roc_auc_score: two classes, of class 1's probability; more, the one-vs-rest macro average.
std::optional<double> OneVsRestAuc(const std::vector<int64_t>& labels,
                                   const std::vector<float>& probabilities, size_t k) {
  const size_t n = labels.size();
  if (k < 2 || probabilities.size() < n * k) return std::nullopt;
  double sum = 0;
  for (size_t c = k == 2 ? 1 : 0; c < k; ++c) {
    std::vector<double> scores(n);
    std::vector<bool> positive(n);
    for (size_t i = 0; i < n; ++i) {
      scores[i] = probabilities[i * k + c];
      positive[i] = static_cast<size_t>(labels[i]) == c;
    }
    const std::optional<double> auc = RocAuc(scores, positive);
    if (!auc) return std::nullopt;
    if (k == 2) return auc;
    sum += *auc;
  }
  return sum / static_cast<double>(k);
}

}  // namespace

ClassificationMetrics ComputeClassificationMetrics(const std::vector<int64_t>& labels,
                                                   const std::vector<int64_t>& predictions,
                                                   int64_t num_classes,
                                                   const std::vector<float>* probabilities) {
  ClassificationMetrics m;
  const size_t n = std::min(labels.size(), predictions.size());
  m.count = static_cast<int64_t>(n);
  if (n == 0 || num_classes <= 0) return m;
  const auto k = static_cast<size_t>(num_classes);
  if (probabilities != nullptr && !AllFinite(*probabilities)) return Undefined(m, k);
  std::vector<int64_t> tp(k, 0), fp(k, 0), fn(k, 0);
  int64_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto y = static_cast<size_t>(labels[i]);
    const auto p = static_cast<size_t>(predictions[i]);
    if (y == p) {
      ++correct;
      ++tp[y];
    } else {
      ++fn[y];
      ++fp[p];
    }
  }
  m.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  double sum = 0;
  int64_t classes = 0;
  for (size_t c = 0; c < k; ++c) {
    if (tp[c] + fp[c] + fn[c] == 0) continue;  // neither a label nor a prediction
    ++classes;
    const double denom = static_cast<double>(2 * tp[c] + fp[c] + fn[c]);
    sum += denom > 0 ? 2.0 * static_cast<double>(tp[c]) / denom : 0.0;
  }
  m.macro_f1 = classes > 0 ? sum / static_cast<double>(classes) : 0.0;
  m.micro_f1 = m.accuracy;
  double recall = 0;
  int64_t labelled = 0;
  for (size_t c = 0; c < k; ++c) {
    if (tp[c] + fn[c] == 0) continue;  // not in the labels
    ++labelled;
    recall += static_cast<double>(tp[c]) / static_cast<double>(tp[c] + fn[c]);
  }
  m.balanced_accuracy = labelled > 0 ? recall / static_cast<double>(labelled) : 0.0;
  AddAgreementMetrics(labels, predictions, k, tp, fp, fn, m);
  if (probabilities != nullptr) m.auroc = OneVsRestAuc(labels, *probabilities, k);
  return m;
}

namespace {

// Pearson's correlation; unset when either side is constant.
std::optional<double> Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::nullopt;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return std::nullopt;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

}  // namespace

ClassificationMetrics ComputeMultiLabelMetrics(const std::vector<float>& targets,
                                               const std::vector<float>& probabilities,
                                               int64_t num_labels, double threshold) {
  ClassificationMetrics m;
  if (num_labels <= 0) return m;
  const auto k = static_cast<size_t>(num_labels);
  const size_t n = std::min(targets.size(), probabilities.size()) / k;
  m.count = static_cast<int64_t>(n);
  if (n == 0) return m;
  if (!AllFinite(probabilities)) return Undefined(m, k);
  std::vector<int64_t> tp(k, 0), fp(k, 0), fn(k, 0);
  int64_t exact = 0;
  for (size_t i = 0; i < n; ++i) {
    bool all = true;
    for (size_t c = 0; c < k; ++c) {
      const bool truth = targets[i * k + c] > 0.5f;
      const bool predicted = probabilities[i * k + c] >= threshold;
      all = all && truth == predicted;
      tp[c] += truth && predicted;
      fp[c] += !truth && predicted;
      fn[c] += truth && !predicted;
    }
    exact += all;
  }
  m.accuracy = static_cast<double>(exact) / static_cast<double>(n);
  auto f1 = [](int64_t t, int64_t p, int64_t f) {
    const auto denom = static_cast<double>(2 * t + p + f);
    return denom > 0 ? 2.0 * static_cast<double>(t) / denom : 0.0;
  };
  m.class_f1.resize(k);
  int64_t all_tp = 0, all_fp = 0, all_fn = 0, support = 0;
  double sum = 0, weighted = 0;
  for (size_t c = 0; c < k; ++c) {
    m.class_f1[c] = f1(tp[c], fp[c], fn[c]);
    sum += m.class_f1[c];
    weighted += static_cast<double>(tp[c] + fn[c]) * m.class_f1[c];
    support += tp[c] + fn[c];
    all_tp += tp[c];
    all_fp += fp[c];
    all_fn += fn[c];
  }
  m.macro_f1 = sum / static_cast<double>(k);
  m.micro_f1 = f1(all_tp, all_fp, all_fn);
  m.weighted_f1 = support > 0 ? weighted / static_cast<double>(support) : 0.0;
  double auc_sum = 0;
  bool defined = true;
  for (size_t c = 0; c < k && defined; ++c) {
    std::vector<double> scores(n);
    std::vector<bool> positive(n);
    for (size_t i = 0; i < n; ++i) {
      scores[i] = probabilities[i * k + c];
      positive[i] = targets[i * k + c] > 0.5f;
    }
    const std::optional<double> auc = RocAuc(scores, positive);
    defined = auc.has_value();
    auc_sum += auc.value_or(0.0);
  }
  if (defined) m.auroc = auc_sum / static_cast<double>(k);
  return m;
}

RegressionMetrics ComputeRegressionMetrics(const std::vector<double>& targets,
                                           const std::vector<double>& predictions) {
  RegressionMetrics m;
  const size_t n = std::min(targets.size(), predictions.size());
  m.count = static_cast<int64_t>(n);
  if (n == 0) return m;
  if (!AllFinite(targets) || !AllFinite(predictions)) {
    m.mse = m.rmse = m.mae = m.r2 = kNaN;
    return m;
  }
  double squared = 0, absolute = 0, mean = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = predictions[i] - targets[i];
    squared += e * e;
    absolute += std::abs(e);
    mean += targets[i];
  }
  mean /= static_cast<double>(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += (targets[i] - mean) * (targets[i] - mean);
  m.mse = squared / static_cast<double>(n);
  m.rmse = std::sqrt(m.mse);
  m.mae = absolute / static_cast<double>(n);
  m.r2 = total > 0 ? 1.0 - squared / total : (squared == 0 ? 1.0 : 0.0);
  const std::vector<double> t(targets.begin(), targets.begin() + static_cast<std::ptrdiff_t>(n));
  const std::vector<double> p(predictions.begin(),
                              predictions.begin() + static_cast<std::ptrdiff_t>(n));
  m.pearson = Pearson(t, p);
  m.spearman = Pearson(AverageRanks(t), AverageRanks(p));
  return m;
}

std::vector<double> AverageRanks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return NanLastLess(v[a], v[b]); });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;  // each pass ranks at least one value
    while (j < order.size() && SameValue(v[order[j]], v[order[i]])) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t t = i; t < j; ++t) ranks[order[t]] = rank;
    i = j;
  }
  return ranks;
}

std::optional<double> RocAuc(const std::vector<double>& scores, const std::vector<bool>& positive) {
  const size_t n = std::min(scores.size(), positive.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(scores[i])) return std::nullopt;
  }
  const std::vector<double> ranks = AverageRanks(
      std::vector<double>(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(n)));
  // AUC = (rank sum of positives - P(P+1)/2) / (P N).
  double rank_sum = 0;
  int64_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!positive[i]) continue;
    rank_sum += ranks[i];
    ++pos;
  }
  const int64_t neg = static_cast<int64_t>(n) - pos;
  if (pos == 0 || neg == 0) return std::nullopt;
  const double p = static_cast<double>(pos);
  return (rank_sum - p * (p + 1) / 2.0) / (p * static_cast<double>(neg));
}

double LearningRateAt(Schedule schedule, double base_lr, int64_t step, int64_t total_steps,
                      int64_t warmup_steps) {
  if (step < warmup_steps) {
    return base_lr * static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, warmup_steps));
  }
  if (schedule == Schedule::kConstant) return base_lr;
  const double progress = static_cast<double>(step - warmup_steps) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  if (schedule == Schedule::kLinear) return base_lr * std::max(0.0, 1.0 - progress);
  return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace tune

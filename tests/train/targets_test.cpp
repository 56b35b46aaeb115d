// targets.h's ClassWeights and train_metric.h's MetricsOf on their own: the weights checked
// against the identities that define them (scikit-learn's compute_class_weight("balanced"),
// PyTorch's pos_weight = negatives / positives), the errors naming the label or the count, and
// each problem type's metrics against CheckMetricFor, the default and the directions.
#include "train/targets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "train/train_metric.h"

namespace tune {
namespace {

std::vector<std::string> Labels(size_t k) {
  std::vector<std::string> labels;
  for (size_t c = 0; c < k; ++c) labels.push_back("label" + std::to_string(c));
  return labels;
}

TEST(ClassWeights, NoneGivesNoWeights) {
  auto w = ClassWeights({}, ProblemType::kSingleLabel, {3, 1}, 4, Labels(2));
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->empty());
}

// compute_class_weight("balanced"): w_c = n / (k * n_c), so that each class's total weight
// w_c * n_c is the same, n / k, and the weights over the examples sum to n.
TEST(ClassWeights, BalancedSingleLabelGivesEveryClassTheSameTotalWeight) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    const size_t k = 2 + rng() % 6;
    std::vector<int64_t> counts(k);
    for (auto& n : counts) n = 1 + static_cast<int64_t>(rng() % 500);
    const int64_t examples = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    ClassWeightsOption option;
    option.balanced = true;
    auto w = ClassWeights(option, ProblemType::kSingleLabel, counts, examples, Labels(k));
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_EQ(w->size(), k);
    double total = 0;
    for (size_t c = 0; c < k; ++c) {
      EXPECT_NEAR((*w)[c] * counts[c], static_cast<double>(examples) / k, 1e-3 * examples);
      total += (*w)[c] * counts[c];
    }
    EXPECT_NEAR(total, examples, 1e-4 * examples);
    // The rarest class weighs most.
    const size_t rarest = std::min_element(counts.begin(), counts.end()) - counts.begin();
    EXPECT_EQ(std::max_element(w->begin(), w->end()) - w->begin(),
              static_cast<std::ptrdiff_t>(rarest));
  }
}

// Multi-label: each label's pos_weight is its negatives over its positives, so a label's
// positive terms weigh as much as its negative ones.
TEST(ClassWeights, BalancedMultiLabelIsNegativesOverPositives) {
  const std::vector<int64_t> positives = {1, 5, 9};
  const int64_t examples = 10;
  ClassWeightsOption option;
  option.balanced = true;
  auto w = ClassWeights(option, ProblemType::kMultiLabel, positives, examples, Labels(3));
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (size_t c = 0; c < positives.size(); ++c) {
    EXPECT_FLOAT_EQ((*w)[c] * positives[c], static_cast<float>(examples - positives[c]));
  }
}

TEST(ClassWeights, ALabelBalancingCannotUseIsNamed) {
  ClassWeightsOption option;
  option.balanced = true;
  auto none = ClassWeights(option, ProblemType::kSingleLabel, {4, 0}, 4, Labels(2));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("label 'label1' is on 0 training examples"),
            std::string::npos)
      << none.status().message();
  // Multi-label: a label on every example has no negatives to balance against.
  auto all = ClassWeights(option, ProblemType::kMultiLabel, {4, 2}, 4, Labels(2));
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("label 'label0' is on 4 training examples; balancing "
                                        "needs examples with and without it"),
            std::string::npos)
      << all.status().message();
}

TEST(ClassWeights, AListIsOnePositiveWeightPerLabel) {
  ClassWeightsOption option;
  option.values = {0.5, 2.0, 7.25};
  auto w = ClassWeights(option, ProblemType::kSingleLabel, {}, 0, Labels(3));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (std::vector<float>{0.5f, 2.0f, 7.25f}));
  option.values = {1.0, 2.0};
  auto short_list = ClassWeights(option, ProblemType::kSingleLabel, {}, 0, Labels(3));
  ASSERT_FALSE(short_list.ok());
  EXPECT_EQ(short_list.status().message(),
            "class_weights: 2 weights for 3 labels (label0, label1, label2); give one per label, "
            "in that order");
  option.values = {1.0, -2.0, 1.0};
  auto negative = ClassWeights(option, ProblemType::kMultiLabel, {}, 0, Labels(3));
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "class_weights/1: the weight of 'label1' must be a positive number, got -2");
  option.values = {1.0};
  auto regression = ClassWeights(option, ProblemType::kRegression, {}, 0, {});
  ASSERT_FALSE(regression.ok());
  EXPECT_NE(regression.status().message().find("a regression has no classes"), std::string::npos);
}

const std::vector<ProblemType> kTypes = {ProblemType::kSingleLabel, ProblemType::kMultiLabel,
                                         ProblemType::kRegression};

std::vector<TrainMetric> AllMetrics() {
  std::vector<TrainMetric> all;
  for (const char* name :
       {"macro_f1", "micro_f1", "weighted_f1", "f1", "accuracy", "balanced_accuracy", "mcc",
        "auroc", "loss", "mse", "rmse", "mae", "r2", "pearson", "spearman"}) {
    auto m = ParseTrainMetric(name);
    EXPECT_TRUE(m.ok()) << name;
    if (m.ok()) all.push_back(*m);
  }
  return all;
}

// MetricsOf and CheckMetricFor agree on every (metric, type) pair; the error lists exactly the
// type's metrics; the default is one of them; every metric applies to some type.
TEST(MetricsOf, AgreesWithCheckMetricForOnEveryPair) {
  std::set<TrainMetric> covered;
  for (ProblemType type : kTypes) {
    const std::vector<TrainMetric> valid = MetricsOf(type);
    ASSERT_FALSE(valid.empty());
    EXPECT_NE(std::find(valid.begin(), valid.end(), DefaultMetric(type)), valid.end());
    EXPECT_NE(std::find(valid.begin(), valid.end(), TrainMetric::kLoss), valid.end());
    EXPECT_EQ(std::set<TrainMetric>(valid.begin(), valid.end()).size(), valid.size());
    for (TrainMetric m : AllMetrics()) {
      const bool listed = std::find(valid.begin(), valid.end(), m) != valid.end();
      const Status st = CheckMetricFor(m, type);
      EXPECT_EQ(st.ok(), listed) << TrainMetricName(m) << " / " << ProblemTypeName(type);
      if (listed) {
        covered.insert(m);
        continue;
      }
      std::string names;
      for (TrainMetric v : valid)
        names += (names.empty() ? "" : ", ") + std::string(TrainMetricName(v));
      EXPECT_EQ(st.message(), std::string("metric '") + TrainMetricName(m) +
                                  "' does not apply to problem_type '" + ProblemTypeName(type) +
                                  "'; valid: " + names);
    }
  }
  EXPECT_EQ(covered.size(), AllMetrics().size());
}

// Classification metrics belong to the classification types, error and correlation metrics to
// regression; f1 (one positive class) and mcc only to single-label.
TEST(MetricsOf, EachTypeHasItsOwnKindOfMetric) {
  auto has = [](ProblemType type, TrainMetric m) {
    const auto v = MetricsOf(type);
    return std::find(v.begin(), v.end(), m) != v.end();
  };
  for (TrainMetric m : {TrainMetric::kMse, TrainMetric::kR2, TrainMetric::kSpearman}) {
    EXPECT_TRUE(has(ProblemType::kRegression, m));
    EXPECT_FALSE(has(ProblemType::kSingleLabel, m));
    EXPECT_FALSE(has(ProblemType::kMultiLabel, m));
  }
  for (TrainMetric m : {TrainMetric::kMacroF1, TrainMetric::kAccuracy, TrainMetric::kAuroc}) {
    EXPECT_TRUE(has(ProblemType::kSingleLabel, m));
    EXPECT_TRUE(has(ProblemType::kMultiLabel, m));
    EXPECT_FALSE(has(ProblemType::kRegression, m));
  }
  EXPECT_TRUE(has(ProblemType::kSingleLabel, TrainMetric::kF1));
  EXPECT_FALSE(has(ProblemType::kMultiLabel, TrainMetric::kF1));
  EXPECT_FALSE(has(ProblemType::kMultiLabel, TrainMetric::kMcc));
  EXPECT_TRUE(has(ProblemType::kSingleLabel, TrainMetric::kBalancedAccuracy));
  EXPECT_FALSE(has(ProblemType::kMultiLabel, TrainMetric::kBalancedAccuracy));
  // Errors and losses are minimised, scores maximised.
  for (TrainMetric m : AllMetrics()) {
    const std::string name = TrainMetricName(m);
    const bool error = name == "loss" || name == "mse" || name == "rmse" || name == "mae";
    EXPECT_EQ(TrainMetricDirection(m),
              error ? StudyDirection::kMinimize : StudyDirection::kMaximize)
        << name;
  }
}

// Each row of train_metric.cpp's table reads its own field of an evaluation: every field holds a
// distinct value, so a row that read another field would show. Undefined values are NaN.
TEST(MetricTable, EveryMetricReadsItsOwnField) {
  EpochMetrics m;
  m.validation_loss = 0.5;
  ClassificationMetrics& c = m.classification;
  c.macro_f1 = 0.11;
  c.micro_f1 = 0.12;
  c.weighted_f1 = 0.13;
  c.accuracy = 0.14;
  c.balanced_accuracy = 0.15;
  c.mcc = 0.16;
  c.auroc = 0.17;
  c.class_f1 = {0.18, 0.19};
  RegressionMetrics& r = m.regression;
  r.mse = 1.1;
  r.rmse = 1.2;
  r.mae = 1.3;
  r.r2 = 1.4;
  r.pearson = 1.5;
  r.spearman = 1.6;
  const std::map<std::string, double> expected = {{"macro_f1", 0.11},
                                                  {"micro_f1", 0.12},
                                                  {"weighted_f1", 0.13},
                                                  {"accuracy", 0.14},
                                                  {"balanced_accuracy", 0.15},
                                                  {"mcc", 0.16},
                                                  {"auroc", 0.17},
                                                  {"f1", 0.19},
                                                  {"loss", 0.5},
                                                  {"mse", 1.1},
                                                  {"rmse", 1.2},
                                                  {"mae", 1.3},
                                                  {"r2", 1.4},
                                                  {"pearson", 1.5},
                                                  {"spearman", 1.6}};
  for (TrainMetric metric : AllMetrics()) {
    const auto it = expected.find(TrainMetricName(metric));
    ASSERT_NE(it, expected.end()) << TrainMetricName(metric) << " has no expected value here";
    EXPECT_EQ(TrainMetricValue(metric, m), it->second) << it->first;
  }
  EXPECT_EQ(expected.size(), AllMetrics().size());
  EXPECT_EQ(TrainMetricValue(TrainMetric::kF1, m, /*positive=*/0), 0.18);
  // Undefined: no AUROC or correlation, f1 without exactly two classes.
  c.auroc.reset();
  r.pearson.reset();
  c.class_f1 = {0.1, 0.2, 0.3};
  EXPECT_TRUE(std::isnan(TrainMetricValue(TrainMetric::kAuroc, m)));
  EXPECT_TRUE(std::isnan(TrainMetricValue(TrainMetric::kPearson, m)));
  EXPECT_TRUE(std::isnan(TrainMetricValue(TrainMetric::kF1, m)));
}

}  // namespace
}  // namespace tune

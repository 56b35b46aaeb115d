#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tune {
namespace {

TEST(Metrics, MacroF1ByHand) {
  // class 0: tp 1, fp 1, fn 1 -> 0.5; class 1: tp 2, fp 1 -> 0.8; class 2: fn 1 -> 0;
  // class 3 occurs nowhere and is left out (scikit-learn's labels = unique(y_true, y_pred)).
  auto m = ComputeClassificationMetrics({0, 0, 1, 1, 2}, {0, 1, 1, 1, 0}, 4);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.6);
  EXPECT_NEAR(m.macro_f1, (0.5 + 0.8 + 0.0) / 3, 1e-12);
  EXPECT_EQ(m.count, 5);
}

TEST(Metrics, PerfectAndConstantPredictions) {
  auto perfect = ComputeClassificationMetrics({0, 1, 2, 1}, {0, 1, 2, 1}, 3);
  EXPECT_DOUBLE_EQ(perfect.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(perfect.macro_f1, 1.0);
  // Always predicting the majority class: accuracy 0.75, but macro-F1 only (6/7 + 0) / 2.
  auto majority = ComputeClassificationMetrics({0, 0, 0, 1}, {0, 0, 0, 0}, 2);
  EXPECT_DOUBLE_EQ(majority.accuracy, 0.75);
  EXPECT_NEAR(majority.macro_f1, (6.0 / 7.0) / 2, 1e-12);
  auto empty = ComputeClassificationMetrics({}, {}, 3);
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.macro_f1, 0.0);
}

// scikit-learn's documented examples: roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) is
// 0.75; matthews_corrcoef([+1, +1, +1, -1], [+1, -1, +1, +1]) is -0.333...; a tie counts half.
TEST(Metrics, AurocAndMccOfScikitLearnsExamples) {
  EXPECT_DOUBLE_EQ(*RocAuc({0.1, 0.4, 0.35, 0.8}, {false, false, true, true}), 0.75);
  EXPECT_DOUBLE_EQ(*RocAuc({0.5, 0.5}, {false, true}), 0.5);
  EXPECT_FALSE(RocAuc({0.2, 0.7}, {true, true}).has_value());
  auto m = ComputeClassificationMetrics({1, 1, 1, 0}, {1, 0, 1, 1}, 2);
  EXPECT_NEAR(m.mcc, -1.0 / 3.0, 1e-12);
  // Class 0: tp 0, fp 1, fn 1 -> F1 0; class 1: tp 2, fp 1, fn 1 -> 2/3; weighted by the true
  // counts 1 and 3.
  EXPECT_EQ(m.class_f1, (std::vector<double>{0.0, 2.0 / 3.0}));
  EXPECT_NEAR(m.weighted_f1, 3.0 * (2.0 / 3.0) / 4.0, 1e-12);
  EXPECT_DOUBLE_EQ(m.micro_f1, m.accuracy);
  EXPECT_FALSE(m.auroc.has_value());  // no probabilities given
}

// scikit-learn's documented example: balanced_accuracy_score([0, 1, 0, 0, 1, 0],
// [0, 1, 0, 0, 0, 1]) is 0.625 (recalls 3/4 and 1/2). A class that is only predicted has no
// recall and is left out of the mean, as scikit-learn does (with a warning).
TEST(Metrics, BalancedAccuracyOfScikitLearnsExample) {
  auto m = ComputeClassificationMetrics({0, 1, 0, 0, 1, 0}, {0, 1, 0, 0, 0, 1}, 2);
  EXPECT_DOUBLE_EQ(m.balanced_accuracy, 0.625);
  auto predicted_only = ComputeClassificationMetrics({0, 0, 1, 1}, {0, 2, 1, 1}, 3);
  EXPECT_DOUBLE_EQ(predicted_only.balanced_accuracy, (0.5 + 1.0) / 2);
  EXPECT_EQ(ComputeClassificationMetrics({}, {}, 2).balanced_accuracy, 0.0);
}

TEST(Schedules, WarmupThenDecay) {
  // 10 steps, 2 of warmup, base 1.
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 0, 10, 2), 0.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 1, 10, 2), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 2, 10, 2), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 6, 10, 2), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 10, 10, 2), 0.0);
  EXPECT_NEAR(LearningRateAt(Schedule::kCosine, 1.0, 4, 10, 2), 0.5 * (1 + std::cos(M_PI / 4)),
              1e-12);
  EXPECT_NEAR(LearningRateAt(Schedule::kCosine, 2.0, 6, 10, 2), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kConstant, 3.0, 9, 10, 2), 3.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(Schedule::kLinear, 1.0, 0, 10, 0), 1.0);  // no warmup
}

// ---- Non-finite inputs (docs/config.md "Non-finite values") ---------------------------------
// Each function returns for NaN, ±inf, empty and one-element inputs (with `==` in the tie loop a
// NaN never ended its run: the old AverageRanks spun forever on these inputs), and a metric of
// inputs that are not all finite is undefined.

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MetricsNonFinite, RanksPlaceNanLastAndTieThem) {
  EXPECT_EQ(AverageRanks({}), std::vector<double>{});
  EXPECT_EQ(AverageRanks({kNan}), std::vector<double>{1.0});
  EXPECT_EQ(AverageRanks({2.0, kNan, 1.0, kNan}), (std::vector<double>{2.0, 3.5, 1.0, 3.5}));
  EXPECT_EQ(AverageRanks({kInf, -kInf, kNan, 0.0, kInf}),
            (std::vector<double>{3.5, 1.0, 5.0, 2.0, 3.5}));
  // A long input of NaNs and ties ends (each pass ranks at least one value).
  std::vector<double> many(5000, kNan);
  for (size_t i = 0; i < many.size(); i += 3) many[i] = static_cast<double>(i % 7);
  const std::vector<double> ranks = AverageRanks(many);
  ASSERT_EQ(ranks.size(), many.size());
  for (size_t i = 0; i < many.size(); ++i) {
    if (std::isnan(many[i])) {
      EXPECT_GT(ranks[i], static_cast<double>(many.size()) / 3.0) << i;
    }
  }
}

TEST(MetricsNonFinite, AurocIsUnsetForAnyNonFiniteScore) {
  for (double bad : {kNan, kInf, -kInf}) {
    EXPECT_FALSE(RocAuc({0.1, bad, 0.8, 0.3}, {false, true, true, false}).has_value()) << bad;
    EXPECT_FALSE(RocAuc({bad, bad}, {false, true}).has_value()) << bad;
  }
  EXPECT_FALSE(RocAuc({}, {}).has_value());
  EXPECT_FALSE(RocAuc({0.4}, {true}).has_value());
}

TEST(MetricsNonFinite, SingleLabelMetricsAreUndefined) {
  for (float bad : {std::nanf(""), HUGE_VALF, -HUGE_VALF}) {
    const std::vector<float> probs = {0.9f, 0.1f, bad, 0.5f, 0.2f, 0.8f};
    const auto m = ComputeClassificationMetrics({0, 1, 1}, {0, 0, 1}, 2, &probs);
    EXPECT_EQ(m.count, 3);
    EXPECT_TRUE(std::isnan(m.accuracy) && std::isnan(m.macro_f1) && std::isnan(m.micro_f1) &&
                std::isnan(m.weighted_f1) && std::isnan(m.mcc))
        << bad;
    ASSERT_EQ(m.class_f1.size(), 2u);
    EXPECT_TRUE(std::isnan(m.class_f1[0]) && std::isnan(m.class_f1[1]));
    EXPECT_FALSE(m.auroc.has_value());
  }
  // One example: defined (the AUROC needs both classes).
  const std::vector<float> one = {0.3f, 0.7f};
  const auto m = ComputeClassificationMetrics({1}, {1}, 2, &one);
  EXPECT_EQ(m.accuracy, 1.0);
  EXPECT_FALSE(m.auroc.has_value());
}

TEST(MetricsNonFinite, MultiLabelMetricsAreUndefined) {
  const std::vector<float> targets = {1, 0, 0, 1, 1, 1};
  for (float bad : {std::nanf(""), HUGE_VALF, -HUGE_VALF}) {
    const std::vector<float> probs = {0.9f, 0.2f, 0.1f, bad, 0.7f, 0.6f};
    const auto m = ComputeMultiLabelMetrics(targets, probs, 2, 0.5);
    EXPECT_EQ(m.count, 3);
    EXPECT_TRUE(std::isnan(m.accuracy) && std::isnan(m.macro_f1) && std::isnan(m.micro_f1) &&
                std::isnan(m.weighted_f1))
        << bad;
    EXPECT_FALSE(m.auroc.has_value());
  }
  EXPECT_EQ(ComputeMultiLabelMetrics({}, {}, 2, 0.5).count, 0);
  const auto one = ComputeMultiLabelMetrics({1, 0}, {0.8f, 0.1f}, 2, 0.5);
  EXPECT_EQ(one.accuracy, 1.0);
}

TEST(MetricsNonFinite, RegressionMetricsAreUndefined) {
  for (double bad : {kNan, kInf, -kInf}) {
    for (bool in_targets : {false, true}) {
      std::vector<double> t = {1.0, 2.0, 3.0, 4.0}, p = {1.1, 1.9, 3.2, 3.8};
      (in_targets ? t : p)[2] = bad;
      const auto m = ComputeRegressionMetrics(t, p);
      EXPECT_EQ(m.count, 4);
      EXPECT_TRUE(std::isnan(m.mse) && std::isnan(m.rmse) && std::isnan(m.mae) && std::isnan(m.r2))
          << bad << " " << in_targets;
      EXPECT_FALSE(m.pearson.has_value());
      EXPECT_FALSE(m.spearman.has_value());
    }
  }
  EXPECT_EQ(ComputeRegressionMetrics({}, {}).count, 0);
  const auto one = ComputeRegressionMetrics({2.0}, {2.5});
  EXPECT_DOUBLE_EQ(one.mse, 0.25);
  EXPECT_EQ(one.r2, 0.0);  // constant targets, imperfect fit (r2_score's force_finite)
  EXPECT_FALSE(one.pearson.has_value());
  EXPECT_FALSE(one.spearman.has_value());
}

}  // namespace
}  // namespace tune

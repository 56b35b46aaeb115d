#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace tune

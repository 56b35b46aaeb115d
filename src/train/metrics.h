// The trainer's metrics (single-label, multi-label, regression) and learning-rate schedules
// (plain C++, pure functions).
//
// Non-finite inputs (util/nonfinite.h, docs/config.md "Non-finite values"): a metric is computed
// from finite values only. When a probability, score, prediction or target is NaN or infinite,
// every metric of the call is NaN and the optional ones (AUROC, Pearson, Spearman) are unset, as
// scikit-learn refuses such inputs; `count` still says how many examples there were. Every
// function returns for any input, empty and one-element ones included.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tune {

// The metrics of one evaluation of a single-label classifier, as scikit-learn computes them
// (zero_division=0 wherever it applies).
struct ClassificationMetrics {
  double accuracy = 0.0;
  // The unweighted mean of the per-class F1 scores over the classes that occur in the labels or
  // the predictions (scikit-learn's f1_score(average="macro") with zero_division=0).
  double macro_f1 = 0.0;
  // f1_score(average="micro"): for single-label data, the accuracy.
  double micro_f1 = 0.0;
  // f1_score(average="weighted"): the per-class F1 scores weighted by each class's true count.
  double weighted_f1 = 0.0;
  // balanced_accuracy_score: the mean recall over the classes that occur in the labels
  // (single-label; 0 for multi-label).
  double balanced_accuracy = 0.0;
  // matthews_corrcoef (its multi-class form); 0 when a marginal is constant.
  double mcc = 0.0;
  // Each class's F1 (f1_score(average=None)), by class index; f1_score(pos_label=k) of a
  // two-class task is class_f1[k].
  std::vector<double> class_f1;
  // roc_auc_score from the predicted probabilities, when given: two classes, of class 1's
  // probability; more, one-vs-rest and macro-averaged (multi_class="ovr"). Unset without
  // probabilities, or when a class has no example or every example (scikit-learn raises there).
  std::optional<double> auroc;
  int64_t count = 0;
};

// REQUIRES: labels.size() == predictions.size(); every value in [0, num_classes); probabilities,
// when given, row-major [labels.size() x num_classes]. Non-finite probabilities: every metric
// NaN, AUROC unset. No example: count 0, every metric 0.
ClassificationMetrics ComputeClassificationMetrics(
    const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
    int64_t num_classes, const std::vector<float>* probabilities = nullptr);

// The area under the ROC curve of `scores` for the examples where `positive` is true (the
// Mann-Whitney statistic with tied scores counted half: scikit-learn's roc_auc_score); unset when
// either class has no example or a score is not finite.
std::optional<double> RocAuc(const std::vector<double>& scores, const std::vector<bool>& positive);

// Ranks from 1, ties sharing their mean rank (scipy.stats.rankdata's "average"). NaNs rank after
// every number (+inf included) and tie with each other; ranks of ±inf are ordinary.
std::vector<double> AverageRanks(const std::vector<double>& v);

// The metrics of a multi-label evaluation, as scikit-learn computes them on indicator matrices
// (zero_division=0): accuracy is the subset accuracy (every label of the example right);
// macro_f1 the mean of every label's F1 (labels that are neither true nor predicted count 0);
// micro_f1 from the counts over all labels; weighted_f1 weighted by each label's true count;
// class_f1 per label; auroc the macro average of each label's AUROC (unset when a label is on
// no validation example or on all of them). mcc does not apply (0).
// `targets` and `probabilities`: row-major [n x num_labels]; targets 0 or 1. A label is
// predicted when its probability is >= threshold. Non-finite probabilities: every metric NaN,
// AUROC unset.
ClassificationMetrics ComputeMultiLabelMetrics(const std::vector<float>& targets,
                                               const std::vector<float>& probabilities,
                                               int64_t num_labels, double threshold);

// The metrics of a regression evaluation (scikit-learn's mean_squared_error, its root,
// mean_absolute_error, r2_score; SciPy's pearsonr and spearmanr, ties sharing their mean rank).
struct RegressionMetrics {
  double mse = 0.0, rmse = 0.0, mae = 0.0;
  // 1 - residual / total sum of squares; with constant targets 1 for a perfect fit, else 0
  // (r2_score's force_finite).
  double r2 = 0.0;
  // Unset when either side is constant (the correlation is undefined).
  std::optional<double> pearson, spearman;
  int64_t count = 0;
};
// A target or prediction that is not finite: mse, rmse, mae and r2 NaN, the correlations unset.
RegressionMetrics ComputeRegressionMetrics(const std::vector<double>& targets,
                                           const std::vector<double>& predictions);

enum class Schedule {
  kLinear,    // linear warmup, then linear decay to 0 at the last step (Hugging Face's default)
  kCosine,    // linear warmup, then half a cosine to 0
  kConstant,  // linear warmup, then constant
};

// Hugging Face's schedules (get_linear_schedule_with_warmup and friends): the learning rate of the
// optimizer step that follows `step` completed steps, out of `total_steps`, of which the first
// `warmup_steps` warm up linearly from 0.
double LearningRateAt(Schedule schedule, double base_lr, int64_t step, int64_t total_steps,
                      int64_t warmup_steps);

}  // namespace tune

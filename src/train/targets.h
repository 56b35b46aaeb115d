// What a text classifier learns to predict (plain C++): its problem type, as Hugging Face's
// config.problem_type names it, and the class weights of its loss.
//
//  - single_label_classification: one label per example (softmax, cross-entropy);
//  - multi_label_classification: any number of labels per example, none included (one sigmoid
//    per label, binary cross-entropy; a label is predicted when its probability is >= the
//    `threshold` hyperparameter);
//  - regression: one number per example (one output, mean squared error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

enum class ProblemType { kSingleLabel, kMultiLabel, kRegression };

// Hugging Face's names: "single_label_classification", "multi_label_classification",
// "regression".
const char* ProblemTypeName(ProblemType type);
// Hugging Face's names, or the short "single_label" / "multi_label"; InvalidArgument naming the
// closest valid choice otherwise.
Result<ProblemType> ParseProblemType(const std::string& name);

// "class_weights" in the data: none, "balanced", or one weight per label.
struct ClassWeightsOption {
  bool balanced = false;
  std::vector<double> values;  // by label index; empty (and not balanced): no weights
  bool empty() const { return !balanced && values.empty(); }
};

// The loss weights of a training split (InvalidArgument when a label has no example to balance):
//  - single-label: each class's weight in the cross-entropy; "balanced" is scikit-learn's
//    compute_class_weight("balanced"): examples / (labels x the class's examples);
//  - multi-label: each label's pos_weight in the binary cross-entropy (the weight of its
//    positive term); "balanced" is negatives / positives per label, as PyTorch's
//    BCEWithLogitsLoss documents it.
// `counts`: per label, the training examples that carry it; `examples`: the training examples.
Result<std::vector<float>> ClassWeights(const ClassWeightsOption& option, ProblemType type,
                                        const std::vector<int64_t>& counts, int64_t examples,
                                        const std::vector<std::string>& labels);

}  // namespace tune

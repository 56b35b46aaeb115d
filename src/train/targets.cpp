#include "train/targets.h"

#include <fmt/format.h>

#include <cmath>

#include "util/text.h"

namespace tune {

const char* ProblemTypeName(ProblemType type) {
  switch (type) {
    case ProblemType::kSingleLabel:
      return "single_label_classification";
    case ProblemType::kMultiLabel:
      return "multi_label_classification";
    case ProblemType::kRegression:
      return "regression";
  }
  return "?";
}

Result<ProblemType> ParseProblemType(const std::string& name) {
  for (ProblemType t :
       {ProblemType::kSingleLabel, ProblemType::kMultiLabel, ProblemType::kRegression}) {
    if (name == ProblemTypeName(t)) return t;
  }
  if (name == "single_label") return ProblemType::kSingleLabel;
  if (name == "multi_label") return ProblemType::kMultiLabel;
  const std::vector<std::string> valid = {"single_label_classification",
                                          "multi_label_classification", "regression"};
  std::vector<std::string> accepted = valid;
  accepted.insert(accepted.end(), {"single_label", "multi_label"});
  return InvalidArgumentError(fmt::format("unknown problem_type '{}'{}; valid: {}", name,
                                          DidYouMean(name, accepted), JoinNames(valid)));
}

Result<std::vector<float>> ClassWeights(const ClassWeightsOption& option, ProblemType type,
                                        const std::vector<int64_t>& counts, int64_t examples,
                                        const std::vector<std::string>& labels) {
  if (option.empty()) return std::vector<float>();
  const size_t k = labels.size();
  if (type == ProblemType::kRegression) {
    return InvalidArgumentError("class_weights: a regression has no classes to weigh");
  }
  std::vector<float> weights;
  if (!option.balanced) {
    if (option.values.size() != k) {
      return InvalidArgumentError(fmt::format(
          "class_weights: {} weight{} for {} labels ({}); give one per label, in that order",
          option.values.size(), option.values.size() == 1 ? "" : "s", k, JoinNames(labels)));
    }
    for (size_t c = 0; c < k; ++c) {
      if (!(option.values[c] > 0) || !std::isfinite(option.values[c])) {
        return InvalidArgumentError(
            fmt::format("class_weights/{}: the weight of '{}' must be a positive number, got {}", c,
                        labels[c], option.values[c]));
      }
      weights.push_back(static_cast<float>(option.values[c]));
    }
    return weights;
  }
  for (size_t c = 0; c < k; ++c) {
    const int64_t n = c < counts.size() ? counts[c] : 0;
    if (n == 0 || (type == ProblemType::kMultiLabel && n == examples)) {
      return InvalidArgumentError(fmt::format(
          "class_weights \"balanced\": label '{}' is on {} training example{}; balancing needs "
          "examples {} it (give the weights as a list instead)",
          labels[c], n, n == 1 ? "" : "s", n == 0 ? "with" : "with and without"));
    }
    weights.push_back(
        type == ProblemType::kMultiLabel
            ? static_cast<float>(static_cast<double>(examples - n) / static_cast<double>(n))
            : static_cast<float>(static_cast<double>(examples) /
                                 (static_cast<double>(k) * static_cast<double>(n))));
  }
  return weights;
}

}  // namespace tune

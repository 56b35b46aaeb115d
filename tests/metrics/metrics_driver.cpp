// The tune side of the metrics reference test (metrics_reference.py).
//
//   tune_metrics_driver < cases.jsonl > metrics.jsonl
//
// Each input line is one of
//  - {"labels": [...], "probabilities": [[...], ...], "num_classes": K}: single-label; the
//    predictions are each row's most probable class (the first on a tie, as argmax); the output
//    holds what ComputeClassificationMetrics gives: accuracy, macro_f1, micro_f1, weighted_f1,
//    mcc, class_f1 and auroc (null when it cannot be computed);
//  - {"kind": "multi_label", "targets": [[0/1...], ...], "probabilities": [[...], ...],
//    "threshold": t}: ComputeMultiLabelMetrics's accuracy, macro_f1, micro_f1, weighted_f1,
//    class_f1, auroc;
//  - {"kind": "regression", "targets": [...], "predictions": [...]}: ComputeRegressionMetrics's
//    mse, rmse, mae, r2, pearson, spearman (null when undefined).
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/metrics.h"

int main() {
  std::string line;
  auto optional = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  while (std::getline(std::cin, line)) {
    const auto in = nlohmann::json::parse(line);
    const std::string kind = in.value("kind", "single_label");
    if (kind == "regression") {
      const tune::RegressionMetrics r = tune::ComputeRegressionMetrics(
          in["targets"].get<std::vector<double>>(), in["predictions"].get<std::vector<double>>());
      std::cout << nlohmann::json{{"mse", r.mse},
                                  {"rmse", r.rmse},
                                  {"mae", r.mae},
                                  {"r2", r.r2},
                                  {"pearson", optional(r.pearson)},
                                  {"spearman", optional(r.spearman)}}
                       .dump()
                << "\n";
      continue;
    }
    if (kind == "multi_label") {
      std::vector<float> targets, probabilities;
      int64_t k = 0;
      for (const auto& row : in["targets"]) {
        k = static_cast<int64_t>(row.size());
        for (const auto& v : row) targets.push_back(v.get<float>());
      }
      for (const auto& row : in["probabilities"]) {
        for (const auto& v : row) probabilities.push_back(v.get<float>());
      }
      const tune::ClassificationMetrics m =
          tune::ComputeMultiLabelMetrics(targets, probabilities, k, in["threshold"].get<double>());
      std::cout << nlohmann::json{{"accuracy", m.accuracy}, {"macro_f1", m.macro_f1},
                                  {"micro_f1", m.micro_f1}, {"weighted_f1", m.weighted_f1},
                                  {"class_f1", m.class_f1}, {"auroc", optional(m.auroc)}}
                       .dump()
                << "\n";
      continue;
    }
    const auto k = in["num_classes"].get<int64_t>();
    const auto labels = in["labels"].get<std::vector<int64_t>>();
    std::vector<int64_t> predictions;
    std::vector<float> probabilities;
    for (const auto& row : in["probabilities"]) {
      int64_t best = 0;
      for (int64_t c = 0; c < k; ++c) {
        probabilities.push_back(row[c].get<float>());
        if (row[c].get<float>() > row[best].get<float>()) best = c;
      }
      predictions.push_back(best);
    }
    const tune::ClassificationMetrics m =
        tune::ComputeClassificationMetrics(labels, predictions, k, &probabilities);
    nlohmann::json out{{"accuracy", m.accuracy}, {"macro_f1", m.macro_f1},
                       {"micro_f1", m.micro_f1}, {"weighted_f1", m.weighted_f1},
                       {"mcc", m.mcc},           {"balanced_accuracy", m.balanced_accuracy},
                       {"class_f1", m.class_f1}, {"predictions", predictions}};
    out["auroc"] = optional(m.auroc);
    std::cout << out.dump() << "\n";
  }
  return 0;
}

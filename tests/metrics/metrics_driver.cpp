// The tune side of the metrics reference test (metrics_reference.py).
//
//   tune_metrics_driver < cases.jsonl > metrics.jsonl
//
// Each input line is {"labels": [...], "probabilities": [[...], ...], "num_classes": K}; the
// predictions are each row's most probable class (the first on a tie, as argmax). Each output
// line holds what ComputeClassificationMetrics gives: accuracy, macro_f1, micro_f1, weighted_f1,
// mcc, class_f1 and auroc (null when it cannot be computed).
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/metrics.h"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto in = nlohmann::json::parse(line);
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
    nlohmann::json out{
        {"accuracy", m.accuracy},       {"macro_f1", m.macro_f1}, {"micro_f1", m.micro_f1},
        {"weighted_f1", m.weighted_f1}, {"mcc", m.mcc},           {"class_f1", m.class_f1},
        {"predictions", predictions}};
    out["auroc"] = m.auroc ? nlohmann::json(*m.auroc) : nlohmann::json();
    std::cout << out.dump() << "\n";
  }
  return 0;
}

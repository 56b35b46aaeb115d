#include "tracking/trial_scalars.h"

#include <fmt/format.h>

#include <cmath>

#include "tune/trial_attrs.h"

namespace tune {
namespace {

void Add(std::map<std::string, std::vector<ScalarPoint>>& out, const std::string& name,
         int64_t step, double value) {
  if (std::isfinite(value)) out[name].push_back({step, value});
}

// One evaluation of the "train" attribute's history, as Hugging Face's Trainer names it.
void AddEvaluation(std::map<std::string, std::vector<ScalarPoint>>& out, const Json& e) {
  if (!e.is_object()) return;
  const int64_t step = e.value("optimizer_steps", int64_t{0});
  for (const auto& [key, v] : e.items()) {
    if (!v.is_number() || key == "optimizer_steps" || key == "seconds" || key == "eval_seconds") {
      continue;
    }
    const double value = v.get<double>();
    if (key == "train_loss") {
      Add(out, "train/loss", step, value);
    } else if (key == "learning_rate") {
      Add(out, "train/learning_rate", step, value);
    } else if (key == "epoch") {
      Add(out, "train/epoch", step, value + 1);  // epochs done, as the Trainer counts them
    } else if (key == "validation_loss") {
      Add(out, "eval/loss", step, value);
    } else {
      Add(out, "eval/" + key, step, value);
    }
  }
}

}  // namespace

std::map<std::string, std::vector<ScalarPoint>> TrialScalars(const FrozenTrial& trial) {
  std::map<std::string, std::vector<ScalarPoint>> out;
  const Json* history = nullptr;
  if (auto it = trial.user_attrs.find(attrs::kTrain); it != trial.user_attrs.end() &&
                                                      it->is_object() && it->contains("history") &&
                                                      (*it)["history"].is_array()) {
    history = &(*it)["history"];
  }
  int64_t last_step = 0;
  if (history != nullptr && !history->empty()) {
    for (const Json& e : *history) AddEvaluation(out, e);
    last_step = history->back().value("optimizer_steps", int64_t{0});
  } else {
    for (const auto& [step, value] : trial.intermediate_values) {
      Add(out, "intermediate_value", step, value);
    }
    last_step = trial.last_step().value_or(0);
  }
  if (trial.state == TrialState::kComplete) {
    for (size_t i = 0; i < trial.values.size(); ++i) {
      Add(out, trial.values.size() == 1 ? std::string("value") : fmt::format("value_{}", i),
          last_step, trial.values[i]);
    }
  }
  return out;
}

std::map<std::string, double> TrialMemoryFigures(const FrozenTrial& trial) {
  std::map<std::string, double> out;
  auto it = trial.user_attrs.find(attrs::kMemory);
  if (it == trial.user_attrs.end() || !it->is_object()) return out;
  for (const char* key : {"estimate", "predicted", "peak", "device_memory", "usable", "cap"}) {
    auto v = it->find(key);
    if (v == it->end() || !v->is_number()) continue;
    const double bytes = v->get<double>();
    if (bytes > 0) out[std::string("memory/") + key] = bytes;
  }
  return out;
}

std::string TrialReasonTag(const FrozenTrial& trial, const std::string& pruner) {
  if (std::optional<EndReason> reason = TrialEndReason(trial)) return EndReasonName(*reason);
  if (trial.state != TrialState::kPruned) return "";
  const auto by = trial.system_attrs.find(attrs::kPrunedBy);
  if (by != trial.system_attrs.end() && by->is_string()) return by->get<std::string>();
  return pruner;
}

}  // namespace tune

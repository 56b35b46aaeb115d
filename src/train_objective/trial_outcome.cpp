// A train trial's epochs and outcome (trial_outcome.h).
#include "train_objective/trial_outcome.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <utility>
#include <vector>

#include "tune/trial_attrs.h"
#include "util/nonfinite.h"
#include "util/text.h"

namespace tune {
namespace {

// Every metric of the epoch's evaluation (the summary's history, which `tune trials` shows):
// those of its problem type (train_metric.h's MetricsOf).
Json EpochToJson(const EpochMetrics& m, int64_t positive) {
  Json j{{"epoch", m.epoch}, {"train_loss", m.train_loss}, {"validation_loss", m.validation_loss}};
  for (TrainMetric metric : MetricsOf(m.problem_type)) {
    if (metric == TrainMetric::kLoss) continue;
    const double value = TrainMetricValue(metric, m, positive);
    if (!std::isnan(value)) j[TrainMetricName(metric)] = value;  // undefined: train_metric.h
  }
  if (!m.classification.class_f1.empty()) j["class_f1"] = m.classification.class_f1;
  j["optimizer_steps"] = m.optimizer_steps;
  j["learning_rate"] = m.learning_rate;
  j["seconds"] = m.seconds;
  j["eval_seconds"] = m.eval_seconds;
  return j;
}

// "accuracy=0.8125 macro_f1=0.7931" / "mse=0.0412 pearson=0.8770": the problem type's headline
// metrics, for the per-evaluation debug line.
std::string HeadlineMetrics(const EpochMetrics& m) {
  if (m.problem_type == ProblemType::kRegression) {
    return fmt::format("mse={:.4f} pearson={:.4f}", m.regression.mse,
                       m.regression.pearson.value_or(std::nan("")));
  }
  return fmt::format("accuracy={:.4f} macro_f1={:.4f}", m.classification.accuracy,
                     m.classification.macro_f1);
}

}  // namespace

Result<EpochDecision> EpochTracker::OnEpoch(const EpochMetrics& m) {
  const double value = TrainMetricValue(metric_, m, positive_);
  if (std::isnan(value)) {
    return InvalidArgumentError(fmt::format(
        "metric '{}' cannot be computed at epoch {}: {}; use a validation set with every label "
        "(and without), or another metric",
        TrainMetricName(metric_), m.epoch + 1,
        m.problem_type == ProblemType::kRegression
            ? "the targets or the predictions are constant"
            : "a label has no validation example (or all of them)"));
  }
  if (std::isinf(value)) {  // finite outputs give finite metrics: a model's overflow
    nonfinite = NonFiniteAttr{.where = "metric",
                              .epoch = m.epoch + 1,
                              .step = m.optimizer_steps,
                              .name = TrainMetricName(metric_),
                              .value = FormatNumber(value)};
    nonfinite_message =
        fmt::format("metric '{}' is {} at the evaluation of epoch {}, step {}",
                    TrainMetricName(metric_), FormatNumber(value), m.epoch + 1, m.optimizer_steps);
    return EpochDecision::kStop;
  }
  // Per-evaluation lines are for --log-level debug; the trial's line says how it ended.
  const bool by_steps = hp_.eval_strategy == EvalStrategy::kSteps;
  spdlog::debug(
      "Trial {} {}: train_loss={:.4f} validation_loss={:.4f} {} ({:.1f}s, of which evaluating "
      "{:.1f}s)",
      trial_.number(),
      by_steps ? fmt::format("step {} (epoch {}/{})", m.optimizer_steps, m.epoch + 1, hp_.epochs)
               : fmt::format("epoch {}/{}", m.epoch + 1, hp_.epochs),
      m.train_loss, m.validation_loss, HeadlineMetrics(m), m.seconds, m.eval_seconds);
  // The pruner's step: the epoch, or by steps the optimizer step (as Optuna's callback for
  // Hugging Face's Trainer reports state.global_step).
  TUNE_RETURN_IF_ERROR(trial_.Report(value, by_steps ? m.optimizer_steps : m.epoch));
  const bool improved = Improves(value);
  if (improved) {
    best = value;
    best_epoch = m.epoch;
    best_step = m.optimizer_steps;
    since_best_ = 0;
  } else {
    ++since_best_;
  }
  TUNE_ASSIGN_OR_RETURN(bool prune, trial_.ShouldPrune());
  if (prune) {
    pruned = true;
    return EpochDecision::kStop;
  }
  if (hp_.patience > 0 && since_best_ >= hp_.patience && m.epoch + 1 < hp_.epochs) {
    stopped_early = true;
    return EpochDecision::kStop;
  }
  return improved ? EpochDecision::kKeep : EpochDecision::kContinue;
}

void EpochTracker::Reset() {
  best.reset();
  best_epoch = best_step = -1;
  since_best_ = 0;
  pruned = stopped_early = false;
  nonfinite.reset();
  nonfinite_message.clear();
}

bool EpochTracker::Improves(double value) const {
  if (!best) return true;
  if (!std::isfinite(value)) return false;
  return TrainMetricDirection(metric_) == StudyDirection::kMaximize ? value > *best + hp_.min_delta
                                                                    : value < *best - hp_.min_delta;
}

std::string FirstLine(const std::string& s) {
  return Abbreviate(std::string_view(s).substr(0, s.find('\n')), 300);
}

Result<TrialOutcome> FailTrial(TrialHandle& trial, const std::string& reason) {
  spdlog::warn("Trial {} failed: {}", trial.number(), FirstLine(reason));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, reason));
  return TrialOutcome{TrialState::kFail, {}, FirstLine(reason)};
}

Status RecordTrainSummary(TrialHandle& trial, const TrainObjectiveOptions& options,
                          const TrainResult& result, const EpochTracker& tracker) {
  Json summary{{"end", TrainEndName(result.end)},
               {"epochs_run", result.epochs.size()},
               {"num_parameters", result.num_parameters},
               {"metric", TrainMetricName(options.metric)}};
  if (!options.costs.empty()) {
    Json names = Json::array({TrainMetricName(options.metric)});
    for (TrainCost c : options.costs) names.push_back(TrainCostName(c));
    summary["objectives"] = std::move(names);
  }
  if (tracker.best_epoch >= 0) summary["best_epoch"] = tracker.best_epoch;
  if (tracker.best_epoch >= 0 && tracker.by_steps()) summary["best_step"] = tracker.best_step;
  double eval_seconds = 0;
  for (const auto& m : result.epochs) eval_seconds += m.eval_seconds;
  summary["evaluations"] = result.epochs.size();
  summary["eval_seconds"] = eval_seconds;
  if (tracker.stopped_early) summary["stopped_early"] = true;
  if (result.peak_memory_bytes >= 0) summary["peak_memory_bytes"] = result.peak_memory_bytes;
  Json history = Json::array();
  for (const auto& m : result.epochs) history.push_back(EpochToJson(m, tracker.positive()));
  summary["history"] = std::move(history);
  return trial.SetUserAttr(attrs::kTrain, summary);
}

Result<TrialOutcome> FinishedRunOutcome(TrialHandle& trial, const TrainObjectiveOptions& options,
                                        const TrainResult& result, const EpochTracker& tracker) {
  if (tracker.pruned) {
    const EpochMetrics* last = result.epochs.empty() ? nullptr : &result.epochs.back();
    return TrialOutcome{
        TrialState::kPruned,
        {},
        last != nullptr && tracker.by_steps()
            ? fmt::format("pruned at step {} (epoch {})", last->optimizer_steps, last->epoch + 1)
            : fmt::format("pruned after epoch {}", result.epochs.size())};
  }
  if (!tracker.best) return FailTrial(trial, "the run finished without an evaluated epoch");
  std::vector<double> values{*tracker.best};
  for (TrainCost c : options.costs) values.push_back(TrainCostValue(c, result));
  for (const auto& [c, bound] : options.constraints) {  // Optuna 5.0's trial.set_constraint
    TUNE_RETURN_IF_ERROR(
        trial.SetSystemAttr(ConstraintKey(TrainCostName(c)), TrainCostValue(c, result) - bound));
  }
  return TrialOutcome{TrialState::kComplete, std::move(values), ""};
}

}  // namespace tune

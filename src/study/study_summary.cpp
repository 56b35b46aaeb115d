#include "study/study_summary.h"

#include <algorithm>
#include <cmath>

#include "tune/study.h"
#include "tune/trial_attrs.h"

namespace tune {

const char* TrialCategoryName(TrialCategory category) {
  switch (category) {
    case TrialCategory::kComplete:
      return "complete";
    case TrialCategory::kPruned:
      return "pruned";
    case TrialCategory::kOom:
      return "oom";
    case TrialCategory::kPredicted:
      return "predicted";
    case TrialCategory::kFailed:
      return "failed";
    case TrialCategory::kInterrupted:
      return "interrupted";
    case TrialCategory::kTimeout:
      return "timeout";
    case TrialCategory::kNonFinite:
      return "nonfinite";
    case TrialCategory::kStale:
      return "stale";
    case TrialCategory::kRunning:
      return "running";
    case TrialCategory::kWaiting:
      return "waiting";
  }
  return "?";
}

const char* TrialCategoryLabel(TrialCategory category) {
  switch (category) {
    case TrialCategory::kComplete:
      return "COMPLETE";
    case TrialCategory::kPruned:
      return "PRUNED by the pruner";
    case TrialCategory::kOom:
      return "PRUNED: out of memory at run time";
    case TrialCategory::kPredicted:
      return "PRUNED: predicted not to fit (not run)";
    case TrialCategory::kFailed:
      return "FAIL: error";
    case TrialCategory::kInterrupted:
      return "FAIL: interrupted (Ctrl-C, SIGTERM)";
    case TrialCategory::kTimeout:
      return "FAIL: timed out";
    case TrialCategory::kNonFinite:
      return "FAIL: non-finite loss, output or value";
    case TrialCategory::kStale:
      return "FAIL: stale (worker died)";
    case TrialCategory::kRunning:
      return "RUNNING";
    case TrialCategory::kWaiting:
      return "WAITING";
  }
  return "?";
}

namespace {

bool IsStale(const FrozenTrial& t) {
  for (const Json* attrs : {&t.user_attrs, &t.system_attrs}) {
    auto it = attrs->find(attrs::kFailReason);
    if (it != attrs->end() && it->is_string() && it->get<std::string>().rfind("stale:", 0) == 0) {
      return true;
    }
  }
  return false;
}

void AddError(std::vector<std::pair<double, int64_t>>& errors, int64_t predicted, int64_t peak,
              int64_t number) {
  if (predicted <= 0 || peak <= 0) return;
  errors.emplace_back(static_cast<double>(predicted - peak) / static_cast<double>(peak), number);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ErrorStats Stats(const std::vector<std::pair<double, int64_t>>& errors) {
  ErrorStats s;
  s.count = static_cast<int64_t>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> signed_errors, abs_errors;
  for (const auto& [e, number] : errors) {
    signed_errors.push_back(e);
    abs_errors.push_back(std::fabs(e));
    s.under += e < 0;
    if (s.worst_trial < 0 || std::fabs(e) > std::fabs(s.worst)) {
      s.worst = e;
      s.worst_trial = number;
    }
  }
  s.median = Median(signed_errors);
  s.median_abs = Median(abs_errors);
  return s;
}

// The memory attribute's admission, levers and retries.
void AddMemory(StudySummary& s, const MemoryAttr& m) {
  if (m.admission) ++s.admissions[*m.admission];
  s.lever_batch += m.levers.find("batch_size") != std::string::npos;
  s.lever_checkpointing += m.levers.find("gradient_checkpointing") != std::string::npos;
  if (m.run && !m.run->oom_retries.empty()) {
    ++s.oom_retry_trials;
    s.oom_retries += static_cast<int64_t>(m.run->oom_retries.size());
  }
}

// A trial of a model outside the catalog: its point, and whether a fit predicted it.
void AddMeasured(StudySummary& s, const MemoryAttr& m, std::vector<MemoryAttr>& attrs) {
  const std::optional<std::string> precision = MeasuredPrecision(m);
  if (!precision) return;
  StudySummary::Measured& x = s.measured[m.family];
  x.model = m.model;
  x.precision = *precision;
  attrs.push_back(m);
  if (m.admission && m.estimate > 0) {  // the fit predicted it (a known OOM shape: no estimate)
    ++x.fitted_trials;
    x.oom_after_fit += m.oom;
  }
}

void FitMeasured(StudySummary& s, const std::map<std::string, std::vector<MemoryAttr>>& attrs) {
  for (auto& [family, x] : s.measured) {
    x.points = MeasuredPoints(attrs.at(family));
    auto fit = FitMeasuredMemory(x.points, x.model, x.precision);
    if (fit.ok()) x.fit = std::move(fit).value();
  }
}

// The probed fits of SummarizeTrials (study_summary.h).
void AddProbedFits(const Json& system_attrs, const std::vector<FrozenTrial>& trials,
                   StudySummary& s) {
  if (!system_attrs.is_object()) return;
  for (const auto& [key, value] : system_attrs.items()) {
    if (key.rfind("memory_fit:sha256:", 0) != 0) continue;
    Result<MeasuredFit> fit = MeasuredFitFromJson(value);
    if (!fit.ok()) continue;
    StudySummary::Measured& x = s.measured["probed:" + key];
    x.model = fit->source.empty() ? fit->model : fit->source;
    x.precision = fit->precision;
    x.points = fit->points;
    x.probed = true;
    const std::string family =
        std::string("torchscript") + (fit->precision == "fp32" ? "" : "/" + fit->precision);
    for (const FrozenTrial& t : trials) {
      auto memory = t.user_attrs.find(attrs::kMemory);
      if (memory == t.user_attrs.end()) continue;
      const std::optional<MemoryAttr> m = MemoryAttrFromJson(*memory);
      if (!m || m->family != family || m->estimate <= 0) continue;
      ++x.fitted_trials;
      x.oom_after_fit += m->oom ? 1 : 0;
    }
    x.fit = std::move(fit).value();
  }
}

}  // namespace

TrialCategory TrialCategoryOf(const FrozenTrial& t) {
  const std::optional<EndReason> reason = TrialEndReason(t);
  switch (t.state) {
    case TrialState::kComplete:
      return TrialCategory::kComplete;
    case TrialState::kRunning:
      return TrialCategory::kRunning;
    case TrialState::kWaiting:
      return TrialCategory::kWaiting;
    case TrialState::kPruned:
      if (reason == EndReason::kOom) return TrialCategory::kOom;
      if (reason == EndReason::kPredicted) return TrialCategory::kPredicted;
      return IsOomTrial(t) ? TrialCategory::kOom : TrialCategory::kPruned;
    case TrialState::kFail:
      if (reason == EndReason::kInterrupted) return TrialCategory::kInterrupted;
      if (reason == EndReason::kTimeout) return TrialCategory::kTimeout;
      if (reason == EndReason::kNonFinite) return TrialCategory::kNonFinite;
      return IsStale(t) ? TrialCategory::kStale : TrialCategory::kFailed;
  }
  return TrialCategory::kFailed;
}

StudySummary SummarizeTrials(const std::vector<FrozenTrial>& trials,
                             const std::vector<StudyDirection>& directions,
                             const Json& system_attrs) {
  StudySummary s;
  s.n_trials = static_cast<int64_t>(trials.size());
  std::vector<std::pair<double, int64_t>> estimate_errors, prediction_errors;
  std::map<std::string, std::vector<MemoryAttr>> measured;
  for (const FrozenTrial& t : trials) {
    ++s.states[t.state];
    StudySummary::Row& row = s.categories[TrialCategoryOf(t)];
    ++row.trials;
    if (auto d = t.duration_seconds(); d && IsFinished(t.state)) {
      row.seconds += *d;
      s.trial_seconds += *d;
    }
    if (t.datetime_start && (!s.first_start || *t.datetime_start < *s.first_start)) {
      s.first_start = t.datetime_start;
    }
    if (t.datetime_complete && (!s.last_complete || *t.datetime_complete > *s.last_complete)) {
      s.last_complete = t.datetime_complete;
    }
    auto memory = t.user_attrs.find(attrs::kMemory);
    if (memory == t.user_attrs.end()) continue;
    const std::optional<MemoryAttr> m = MemoryAttrFromJson(*memory);
    if (!m) continue;
    AddMemory(s, *m);
    AddMeasured(s, *m, measured[m->family]);
    // A failed trial (interrupted, an error) may have stopped before its peak.
    if (!m->oom && (t.state == TrialState::kComplete || t.state == TrialState::kPruned)) {
      AddError(estimate_errors, m->estimate, MeasuredDevicePeak(*m), t.number);
      AddError(prediction_errors, m->predicted, MeasuredDevicePeak(*m), t.number);
    }
  }
  FitMeasured(s, measured);
  AddProbedFits(system_attrs, trials, s);
  s.estimate_error = Stats(estimate_errors);
  s.prediction_error = Stats(prediction_errors);
  if (directions.size() == 1) s.best = FindBestTrial(trials, directions[0]);
  for (const FrozenTrial& t : FindBestTrials(trials, directions))
    s.pareto_front.push_back(t.number);
  return s;
}

}  // namespace tune

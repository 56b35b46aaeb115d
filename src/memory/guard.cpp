#include "memory/guard.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "tune/trial_attrs.h"
#include "util/text.h"

namespace tune {

const std::vector<std::string>& GuardLeverNames() {
  static const std::vector<std::string> names = {"grad_accum", "gradient_checkpointing"};
  return names;
}

int64_t UsableMemory(int64_t device_memory, double margin) {
  return static_cast<int64_t>(static_cast<double>(device_memory) * (1.0 - margin));
}

int64_t ProcessCap(int64_t reservation, double margin, std::optional<int64_t> device_memory) {
  const auto cap = static_cast<int64_t>(static_cast<double>(reservation) * (1.0 + margin));
  return device_memory ? std::min(cap, *device_memory) : cap;
}

bool RunsWithoutAdmission(const TrialHandle& trial) {
  if (trial.UserAttr(attrs::kAdmission) != Json(false)) return false;
  spdlog::info("Trial {} runs without admission: its user attribute '{}' is false", trial.number(),
               attrs::kAdmission);
  return true;
}

DeviceMemoryModel CudaDeviceModel(const GuardOptions& options, int64_t measured_context) {
  DeviceMemoryModel d = DeviceMemoryModel::Cuda();
  if (options.cuda_context) {
    d.context_bytes = *options.cuda_context;
  } else if (measured_context >= 0) {
    d.context_bytes = measured_context;
  }
  if (options.cuda_workspace) d.workspace_bytes = *options.cuda_workspace;
  if (options.fragmentation) d.fragmentation = *options.fragmentation;
  return d;
}

DeviceMemoryModel GuardDeviceModel(const GuardOptions& options, bool cuda,
                                   int64_t measured_context) {
  DeviceMemoryModel d =
      cuda ? CudaDeviceModel(options, measured_context) : DeviceMemoryModel::Cpu();
  d.correction = options.estimate_scale;
  return d;
}

std::string MemoryFamily(const ModelSpec& model, Precision precision) {
  std::string family = model.model_type.empty() ? model.name : model.model_type;
  if (precision != Precision::kFp32) family += std::string("/") + PrecisionName(precision);
  return family;
}

void MemoryCalibration::Add(const MemoryRecord& r) {
  if (r.estimate <= 0) return;
  AddTo(families_[r.family], r);
  if (!r.model.empty()) AddTo(models_[{r.family, r.model}], r);
}

void MemoryCalibration::AddTo(Family& f, const MemoryRecord& r) {
  ++f.n;
  const auto estimate = static_cast<double>(r.estimate);
  if (r.oom) {
    // It needed more than the budget: the estimate was at least budget/estimate too low.
    const int64_t budget = r.cap > 0 ? r.cap : r.device_memory;
    const double step = r.cap > 0 ? kCappedOomStep : kOomStep;
    if (budget > 0)
      f.oom_floor = std::max(f.oom_floor, static_cast<double>(budget) / estimate * step);
    return;
  }
  const int64_t measured = r.footprint >= 0 ? r.footprint : r.peak;
  if (measured < 0) return;
  f.ratios.push_back(static_cast<double>(measured) / estimate);
  if (f.ratios.size() > kWindow) f.ratios.erase(f.ratios.begin());
}

double MemoryCalibration::Correction(const std::string& family, const std::string& model) const {
  if (!model.empty()) {
    auto m = models_.find({family, model});
    if (m != models_.end()) return CorrectionOf(m->second);
  }
  auto it = families_.find(family);
  const double c = it == families_.end() ? 1.0 : CorrectionOf(it->second);
  return model.empty() ? c : std::max(1.0, c) * kUnmeasuredHeadroom;
}

double MemoryCalibration::CorrectionOf(const Family& f) {
  double c = f.ratios.empty() ? 1.0 : *std::max_element(f.ratios.begin(), f.ratios.end());
  c = std::max(c, f.oom_floor);
  return std::clamp(c, kMin, kMax);
}

int64_t MemoryCalibration::records(const std::string& family) const {
  auto it = families_.find(family);
  return it == families_.end() ? 0 : it->second.n;
}

Json MemoryCalibration::ToJson() const {
  Json j = Json::object();
  for (const auto& [name, f] : families_) {
    j[name] = Json{{"correction", Correction(name)}, {"records", f.n}};
  }
  return j;
}

Json MemoryRecordToJson(const MemoryRecord& r) {
  MemoryAttr m;
  m.family = r.family;
  m.estimate = r.estimate;
  m.device_memory = r.device_memory;
  m.peak = r.peak;
  m.oom = r.oom;
  m.model = r.model;
  m.cap = r.cap;
  return MemoryAttrToJson(m);
}

std::vector<MemoryRecord> MemoryRecordsFromJson(const Json& j) {
  std::vector<MemoryRecord> out;
  const std::optional<MemoryAttr> m = MemoryAttrFromJson(j);
  if (!m) return out;
  MemoryRecord r{m->family, m->estimate, m->device_memory, m->peak, m->oom, m->model, m->cap};
  if (const int64_t device_peak = MeasuredDevicePeak(*m); device_peak != m->peak) {
    r.footprint = device_peak;
  }
  out.push_back(r);
  if (!m->run) return out;
  for (const OomAttempt& attempt : m->run->oom_retries) {
    if (!attempt.estimate) continue;
    MemoryRecord failed = r;
    failed.estimate = *attempt.estimate;
    failed.peak = -1;
    failed.footprint = -1;
    failed.oom = true;
    out.push_back(failed);
  }
  return out;
}

MemoryCalibration CalibrationFromHistory(const TrialHistory& history) {
  MemoryCalibration c;
  for (const auto& t : history.trials) {
    if (!t || t->state == TrialState::kRunning || t->state == TrialState::kWaiting) continue;
    auto it = t->user_attrs.find(attrs::kMemory);
    if (it == t->user_attrs.end()) continue;
    for (const MemoryRecord& r : MemoryRecordsFromJson(*it)) c.Add(r);
  }
  return c;
}

const char* AdmissionVerdictName(AdmissionVerdict v) {
  switch (v) {
    case AdmissionVerdict::kRun:
      return "run";
    case AdmissionVerdict::kRunWithLevers:
      return "run_with_levers";
    case AdmissionVerdict::kReject:
      return "reject";
  }
  return "?";
}

bool HalveMicroBatch(int64_t& batch_size, int64_t& grad_accum) {
  if (batch_size < 2 || batch_size % 2 != 0) return false;
  batch_size /= 2;
  grad_accum *= 2;
  return true;
}

namespace {

std::string LeverText(const MemoryRequest& from, const MemoryRequest& to) {
  std::vector<std::string> parts;
  if (to.batch_size != from.batch_size) {
    parts.push_back(fmt::format("batch_size {} -> {}, grad_accum {} -> {}", from.batch_size,
                                to.batch_size, from.grad_accum, to.grad_accum));
  }
  if (to.gradient_checkpointing && !from.gradient_checkpointing) {
    parts.push_back("gradient_checkpointing on");
  }
  return JoinNames(parts);
}

}  // namespace

Result<Admission> AdmitTrial(const MemoryRequest& request, const MemoryModel& model, int64_t usable,
                             double correction, const GuardOptions& options) {
  Admission a;
  a.correction = correction;
  a.usable = usable;
  auto predict = [&](const MemoryEstimate& e) {
    return static_cast<int64_t>(std::ceil(static_cast<double>(e.device_peak) * correction));
  };
  TUNE_ASSIGN_OR_RETURN(a.estimate, model.Estimate(request));
  a.request = request;
  a.requested_estimate = a.estimate.device_peak;
  a.predicted = predict(a.estimate);
  if (a.predicted <= usable) return a;

  // Candidates, cheapest first: smaller micro-batches, then checkpointing with each of them.
  std::vector<MemoryRequest> candidates;
  auto add_halvings = [&](MemoryRequest r) {
    while (options.lever_grad_accum && HalveMicroBatch(r.batch_size, r.grad_accum)) {
      candidates.push_back(r);
    }
  };
  add_halvings(request);
  if (options.lever_checkpointing && !request.gradient_checkpointing &&
      request.architecture != Architecture::kMlp) {
    MemoryRequest r = request;
    r.gradient_checkpointing = true;
    candidates.push_back(r);
    add_halvings(r);
  }
  for (const MemoryRequest& c : candidates) {
    TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, model.Estimate(c));
    if (predict(e) <= usable) {
      a.verdict = AdmissionVerdict::kRunWithLevers;
      a.request = c;
      a.estimate = e;
      a.predicted = predict(e);
      a.levers = LeverText(request, c);
      return a;
    }
  }
  a.verdict = AdmissionVerdict::kReject;
  return a;
}

}  // namespace tune

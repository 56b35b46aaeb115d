// The train objective's memory guard (train_guard.h).
#include "memory/train_guard.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "memory/estimator.h"
#include "util/device.h"
#include "util/text.h"

namespace tune {
namespace {

// The study's system attributes, where TorchScript models' fits are kept (script_fit.h).
class StudyFitStore : public FitStore {
 public:
  explicit StudyFitStore(TrialHandle& trial) : trial_(trial) {}
  Result<std::optional<Json>> Get(const std::string& key) override {
    return trial_.GetStudySystemAttr(key);
  }
  Status Put(const std::string& key, const Json& value) override {
    return trial_.SetStudySystemAttr(key, value);
  }

 private:
  TrialHandle& trial_;
};

GuardDecision UnfitNow() {
  GuardDecision g;
  g.unfit_now = true;
  return g;
}

}  // namespace

Json JobConfigDetails(const TrainJob& job) {
  return Json{{"model", job.model.name},
              {"batch_size", job.hp.batch_size},
              {"grad_accum", job.hp.grad_accum},
              {"effective_batch_size", job.hp.batch_size * job.hp.grad_accum},
              {"max_length", job.hp.max_length},
              {"precision", PrecisionName(job.hp.precision)},
              {"gradient_checkpointing", job.hp.gradient_checkpointing}};
}

TrainGuard::TrainGuard(GuardOptions options, std::string device, Trainer* trainer,
                       std::optional<Json> planned)
    : options_(std::move(options)),
      device_(std::move(device)),
      trainer_(trainer),
      planned_(std::move(planned)),
      nvml_(device_),
      // A --jobs child's run is its parent's: the parent and the other trials are not others.
      others_(device_,
              options_.simulate && options_.device_memory
                  ? std::make_optional(std::make_pair(*options_.simulate, *options_.device_memory))
                  : std::nullopt,
              planned_ ? std::function<bool(pid_t)>(
                             [parent = getppid()](pid_t pid) { return DescendantOf(pid, parent); })
                       : std::function<bool(pid_t)>(SelfOrDescendant)) {}

bool TrainGuard::OnCuda() const {
  auto device = ParseDevice(device_);
  return device.ok() && device->is_cuda();
}

DeviceMemoryModel TrainGuard::DeviceModel() const {
  if (!OnCuda()) return GuardDeviceModel(options_, false, -1);
  const DeviceMemoryStatus m = trainer_ ? trainer_->MemoryStatus() : DeviceMemoryStatus{};
  return GuardDeviceModel(options_, true, MeasuredContext(m));
}

// This process's CUDA context and kernels: what the driver (NVML) says the process uses, less
// what the caching allocator reserved; -1 (the model's default) when the driver cannot say.
// Not total - free - reserved, which counts every other process on the card as context too
// (the other trials under --jobs: estimates 2-3x too high on an H200).
int64_t TrainGuard::MeasuredContext(const DeviceMemoryStatus& m) const {
  if (m.reserved < 0) return -1;
  const std::optional<int64_t> used = nvml_.UsedByThisProcess();
  return used && *used > m.reserved ? *used - m.reserved : -1;
}

std::optional<int64_t> TrainGuard::DeviceMemory() const {
  std::optional<int64_t> d = options_.device_memory;
  if (!OnCuda()) return d;
  // The card's total as CUDA reports it; a --jobs parent, which has no trainer (and creates no
  // CUDA context), reads it from the driver (NVML).
  const DeviceMemoryStatus m = trainer_ ? trainer_->MemoryStatus() : DeviceMemoryStatus{};
  const std::optional<int64_t> total = m.total > 0           ? std::make_optional(m.total)
                                       : trainer_ == nullptr ? nvml_.TotalMemory()
                                                             : std::nullopt;
  if (total) d = d ? std::min(*d, *total) : *total;
  return d;
}

std::optional<int64_t> TrainGuard::Budget() const {
  if (budget_) return budget_();
  const std::optional<int64_t> d = DeviceMemory();
  if (!d || planned_) return d;
  return others_.Budget(*d);
}

MemoryRequest TrainGuard::RequestFor(const TrainJob& job) {
  const int64_t labels = job.tabular != nullptr ? job.tabular->num_labels : job.data->num_labels;
  const int64_t features = job.tabular != nullptr ? job.tabular->num_features : 0;
  MemoryRequest r = MemoryRequestFor(job.model, job.hp, labels, features);
  if (job.tabular != nullptr || job.hp.padding != Padding::kLongest) return r;
  auto [it, added] = longest_.try_emplace(job.data, 0);
  if (added) {
    // The longest example with its special tokens (a pair: both texts before any cut).
    for (const bool train : {true, false}) {
      const size_t n = (train ? job.data->train_ids : job.data->validation_ids).size();
      for (size_t i = 0; i < n; ++i) {
        it->second = std::max(it->second, ExampleLength(*job.data, train, i, INT64_MAX));
      }
    }
  }
  if (it->second > 0) r.max_length = std::min(r.max_length, it->second);
  return r;
}

// The fit of a TorchScript job's measured peaks at its precision (script_fit.h): cached, or the
// study's, or with `probe` measured now on this process's trainer. FailedPrecondition when there
// is none (a --jobs parent, which has no trainer, before a child measured it).
Result<MeasuredFit> TrainGuard::ScriptFitFor(TrialHandle& trial, const TrainJob& job, bool probe) {
  ScriptFitRequest request;
  request.model = job.model;
  request.hp = job.hp;
  request.num_labels = job.data != nullptr ? job.data->num_labels : 2;
  StudyFitStore store(trial);
  return script_fits_.Get(probe ? trainer_ : nullptr, request, &store);
}

// What estimates a job's memory (memory_model.h): the estimator's formulas on the trial's device;
// for a TorchScript model, which they do not cover, the fit of its measured peaks (measured now
// only with `probe`: admission's).
Result<std::unique_ptr<MemoryModel>> TrainGuard::MemoryModelFor(TrialHandle& trial,
                                                                const TrainJob& job, bool probe) {
  if (!IsTorchScriptModel(job.model)) {
    return std::unique_ptr<MemoryModel>(std::make_unique<FormulaMemoryModel>(DeviceModel()));
  }
  TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, ScriptFitFor(trial, job, probe));
  return std::unique_ptr<MemoryModel>(std::make_unique<FittedMemoryModel>(std::move(fit)));
}

std::optional<int64_t> TrainGuard::EstimateFor(TrialHandle& trial, const TrainJob& job) {
  auto model = MemoryModelFor(trial, job);
  if (!model.ok()) return std::nullopt;
  auto e = (*model)->Estimate(RequestFor(job));
  if (!e.ok()) return std::nullopt;
  return e->device_peak;
}

double TrainGuard::CorrectionFor(TrialHandle& trial, const TrainJob& job,
                                 const std::string& family) const {
  double correction =
      options_.calibrate ? CalibrationFromHistory(trial.history()).Correction(family) : 1.0;
  // A measured fit carries its own margin (its held-out and measured shapes' errors):
  // calibration may raise its predictions, never lower them below what was measured (as for a
  // command's measured model).
  if (IsTorchScriptModel(job.model)) correction = std::max(1.0, correction);
  return correction;
}

Result<GuardDecision> TrainGuard::Admit(TrialHandle& trial, const Json& params, TrainJob& job,
                                        std::optional<int64_t> room) {
  if (planned_ && !AdmitsHere(job)) return PlannedDecision(job);
  GuardDecision g;
  g.family = MemoryFamily(job.model, job.hp.precision);
  // With a room (--jobs), the parent's ledger already left the other processes their memory.
  const std::optional<int64_t> device_memory = room ? DeviceMemory() : Budget();
  g.budget = device_memory;
  g.others = others_.last_others();  // with a room: as the parent's ledger last read them
  if (!options_.admission || !device_memory || RunsWithoutAdmission(trial)) {
    g.estimate = EstimateFor(trial, job);
    return g;
  }
  const double correction = CorrectionFor(trial, job, g.family);
  const int64_t usable = room.value_or(UsableMemory(*device_memory, options_.margin));
  GuardOptions guard = options_;
  // A fit does not know checkpointing (a TorchScript module need not declare it).
  if (room || IsTorchScriptModel(job.model)) guard.lever_checkpointing = false;
  auto model = MemoryModelFor(trial, job, /*probe=*/true);
  auto admitted = model.ok() ? AdmitTrial(RequestFor(job), **model, usable, correction, guard)
                             : Result<Admission>(model.status());
  if (model.ok()) g.memory_model = (*model)->ToJson();
  if (!admitted.ok()) {
    if (room) return UnfitNow();
    spdlog::warn("Trial {}: no memory estimate ({}); it runs without admission", trial.number(),
                 admitted.status().message());
    return g;
  }
  const Admission& a = *admitted;
  if (room &&
      (a.verdict == AdmissionVerdict::kReject || a.request.batch_size < options_.min_micro_batch)) {
    return UnfitNow();  // no micro-batch at or above the floor fits the room left
  }
  g.admission = a;
  g.estimate = a.estimate.device_peak;
  const std::string sizes =
      fmt::format("predicted {} (estimate {} x correction {:.3f}) of {} {}",
                  FormatBytes(a.predicted), FormatBytes(a.estimate.device_peak), correction,
                  FormatBytes(usable), room ? "left beside the running trials" : "usable");
  switch (a.verdict) {
    case AdmissionVerdict::kRun:
      spdlog::info("Trial {} admitted: {}", trial.number(), sizes);
      return g;
    case AdmissionVerdict::kRunWithLevers:
      job.hp.batch_size = a.request.batch_size;
      job.hp.grad_accum = a.request.grad_accum;
      job.hp.gradient_checkpointing = a.request.gradient_checkpointing;
      g.levers = a.levers;
      spdlog::info("Trial {} admitted with {}: {}", trial.number(), a.levers, sizes);
      return g;
    case AdmissionVerdict::kReject:
      break;
  }
  TUNE_ASSIGN_OR_RETURN(g.reject, Reject(trial, params, job, g, *device_memory));
  return g;
}

// A trial admission does not run: PRUNED with reason "predicted".
Result<TrialOutcome> TrainGuard::Reject(TrialHandle& trial, const Json& params, const TrainJob& job,
                                        const GuardDecision& g, int64_t device_memory) const {
  const Admission& a = *g.admission;
  TUNE_RETURN_IF_ERROR(
      trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(AdmissionAttr(g, device_memory))));
  Json details = JobConfigDetails(job);
  details["estimate"] = a.requested_estimate;
  details["predicted"] = a.predicted;
  details["usable"] = a.usable;
  details["correction"] = a.correction;
  const std::string reason =
      fmt::format("predicted out of memory: {} (estimate {} x correction {:.3f}) > {} usable",
                  FormatBytes(a.predicted), FormatBytes(a.requested_estimate), a.correction,
                  FormatBytes(a.usable));
  return RecordOom(trial, params, details, reason, EndReason::kPredicted);
}

Json TrainGuard::PlanJson(const GuardDecision& g) {
  Json j{{"family", g.family}, {"levers", g.levers}};
  if (g.others > 0) j["others"] = g.others;
  if (g.estimate) j["estimate"] = *g.estimate;
  if (!g.memory_model.is_null()) j["memory_model"] = g.memory_model;
  if (g.admission) {
    j["predicted"] = g.admission->predicted;
    j["correction"] = g.admission->correction;
    j["usable"] = g.admission->usable;
    j["verdict"] = AdmissionVerdictName(g.admission->verdict);
  }
  return j;
}

// In a child process: whether the trial is admitted here rather than by the parent. A
// TorchScript model the parent had no fit of (its first trial, which runs alone): it is measured
// here, first (the fit stored in the study for the parent's later plans), and admitted by that
// fit against the card as without --jobs (its levers shrink it).
bool TrainGuard::AdmitsHere(const TrainJob& job) const {
  const Json model = planned_->value("memory_model", Json::object());
  const bool parent_fit = model.value("kind", std::string()) == "fit" && model.contains("fit");
  return !parent_fit && IsTorchScriptModel(job.model) && trainer_ && options_.admission &&
         DeviceMemory().has_value();
}

// In a child process: the parent's decision, and the fit it used (an out-of-memory retry
// estimates with it).
Result<GuardDecision> TrainGuard::PlannedDecision(const TrainJob& job) {
  const Json& plan = *planned_;
  const Json model = plan.value("memory_model", Json::object());
  if (model.value("kind", std::string()) == "fit" && model.contains("fit")) {
    TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, MeasuredFitFromJson(model["fit"]));
    script_fits_.Add(fit);
  }
  return DecisionFromJson(plan, job);
}

// The child's decision: the parent's admission (the levers are already in the params).
GuardDecision TrainGuard::DecisionFromJson(const Json& j, const TrainJob& job) {
  GuardDecision g;
  g.family = j.value("family", MemoryFamily(job.model, job.hp.precision));
  g.levers = j.value("levers", std::string());
  g.others = j.value("others", int64_t{0});
  if (j.contains("estimate")) g.estimate = j["estimate"].get<int64_t>();
  if (j.contains("predicted")) {
    Admission a;
    a.verdict = j.value("verdict", std::string()) == "run_with_levers"
                    ? AdmissionVerdict::kRunWithLevers
                    : AdmissionVerdict::kRun;
    a.predicted = j["predicted"].get<int64_t>();
    a.correction = j.value("correction", 1.0);
    a.usable = j.value("usable", int64_t{0});
    g.admission = a;
  }
  return g;
}

MemoryAttr TrainGuard::AdmissionAttr(const GuardDecision& g, std::optional<int64_t> device_memory) {
  MemoryAttr m;
  m.family = g.family;
  m.estimate = g.estimate.value_or(0);
  m.device_memory = device_memory.value_or(0);
  m.others = g.others;
  if (g.admission) {
    m.admission = AdmissionVerdictName(g.admission->verdict);
    m.predicted = g.admission->predicted;
    m.correction = g.admission->correction;
    m.usable = g.admission->usable;
    m.levers = g.levers;
  }
  return m;
}

Status TrainGuard::RecordMemory(TrialHandle& trial, const TrainJob& job, const GuardDecision& g,
                                const TrainResult& result,
                                const std::vector<OomAttempt>& retries) const {
  MemoryAttr m = AdmissionAttr(g, g.budget ? g.budget : DeviceMemory());
  m.peak = result.peak_memory_bytes;
  m.oom = result.end == TrainResult::End::kOutOfMemory;
  m.others = g.others;
  // Out of memory after other processes took more than they held at admission: the trial had
  // that much less, and calibration's out-of-memory rule must see the budget it really had, not
  // blame the estimate for their growth.
  if (m.oom && m.device_memory > 0) {
    if (const std::optional<OthersReading> now = others_.Read(); now && now->others > g.others) {
      m.device_memory = std::max<int64_t>(0, m.device_memory - (now->others - g.others));
      m.others = now->others;
      spdlog::warn(
          "Trial {}: other processes on the card took {} more after admission ({} now: {}); its "
          "out-of-memory record counts a budget of {}",
          trial.number(), FormatBytes(now->others - g.others), FormatBytes(now->others),
          DescribeOthers(*now), FormatBytes(m.device_memory));
    }
  }
  // The formulas estimate the device's peak, context included; a TorchScript model's fit
  // predicts what its probes measured (allocated), which `peak` is compared with.
  if (OnCuda() && !IsTorchScriptModel(job.model)) m.context = DeviceModel().context_bytes;
  MemoryAttr::Run& run = m.run.emplace(MemoryAttr::Run{});  // (clang 14: not emplace())
  run.peak_reserved = result.peak_reserved_bytes;
  run.before = result.memory_before_bytes;
  run.after = result.memory_after_bytes;
  run.rss = ProcessResidentBytes();
  run.heap = ProcessHeapInUseBytes();
  run.batch_size = job.hp.batch_size;
  run.grad_accum = job.hp.grad_accum;
  run.gradient_checkpointing = job.hp.gradient_checkpointing;
  run.oom_retries = retries;
  return trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(m));
}

}  // namespace tune

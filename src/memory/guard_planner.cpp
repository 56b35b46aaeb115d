// The memory guard for command objectives (guard_planner.h).
#include "memory/guard_planner.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "measure/gpu_process_memory.h"
#include "memory/card_others.h"
#include "memory/cards.h"
#include "memory/estimator.h"
#include "memory/simulated_card.h"
#include "train/hyperparams.h"
#include "tune/trial_attrs.h"
#include "util/device.h"
#include "util/templates.h"
#include "util/text.h"

namespace tune {

namespace {

namespace fs = std::filesystem;

// The directory of libtune_train.so, for programs that charge a simulated card through it.
std::string LibraryDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tune_simulated_card_used), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  return fs::path(info.dli_fname).parent_path().string();
}

// The calibration family of a model the estimator does not know (measured_fit.h).
std::string MeasuredFamily(const TrainHyperparams& hp) {
  return tune::MeasuredFamily(hp.model, PrecisionName(hp.precision));
}

class GuardPlanner : public MemoryPlanner {
 public:
  // `cards`: the program's (Cards::Resolve; --jobs runs over them).
  GuardPlanner(CommandMemoryOptions options, ModelCatalog catalog, Cards cards)
      : options_(std::move(options)), catalog_(std::move(catalog)), cards_(std::move(cards)) {
    // A lever can only change a field the program receives through one parameter.
    options_.guard.lever_grad_accum =
        options_.guard.lever_grad_accum && MappedParam("batch_size") && MappedParam("grad_accum");
    options_.guard.lever_checkpointing =
        options_.guard.lever_checkpointing && MappedParam("gradient_checkpointing");
    const auto device = ParseDevice(options_.device);
    cpu_ = !(device.ok() && device->is_cuda());
    formula_ = std::make_shared<FormulaMemoryModel>(GuardDeviceModel(options_.guard, !cpu_, -1));
  }

  std::vector<Card> CardsNow() const override { return cards_.Now(options_.guard.margin); }

  // The budget trials are planned against: the largest of the cards' budgets now (another
  // process may hold most of the card with the most memory).
  int64_t Budget() const { return cards_.LargestNow().budget.value_or(0); }

  // The memory trials are planned against (Budget(), margin kept): "the whole card".
  int64_t PlanningCapacity() const { return UsableMemory(Budget(), options_.guard.margin); }

  Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) override {
    TrialPlan plan;
    plan.params = params;
    TUNE_ASSIGN_OR_RETURN(Request r, RequestFor(params));
    MemoryAttr& attr = attrs_[trial.number()];
    const Cards::Largest largest = cards_.LargestNow();
    attr.device_memory = largest.budget.value_or(0);
    attr.others = cards_.LastOthers(largest.card);
    TUNE_ASSIGN_OR_RETURN(std::optional<Modelled> m, ModelFor(trial, r, attr));
    if (!m) return PlanUnmeasured(trial, r, plan, attr);
    if (options_.guard.admission && RunsWithoutAdmission(trial)) {
      return PlanWithoutAdmission(*m, plan, attr);
    }
    if (auto oom = KnownOom(trial, *m, attr)) return RejectKnownOom(trial, plan, attr, *oom);
    if (!options_.guard.admission) return PlanWithoutAdmission(*m, plan, attr);
    TUNE_ASSIGN_OR_RETURN(
        Admission a,
        AdmitTrial(m->request, *m->model, UsableMemory(attr.device_memory, options_.guard.margin),
                   m->correction, options_.guard));
    if (a.verdict == AdmissionVerdict::kReject) {
      RecordAdmission(a, attr);
      return Reject(trial, params, a, plan, attr);
    }
    Admitted(a, plan, attr);
    return plan;
  }

  Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                             int64_t room) override {
    const GuardOptions& g = options_.guard;
    if (!g.admission || !g.shrink_to_start || !g.lever_grad_accum)
      return std::optional<TrialPlan>();
    TUNE_ASSIGN_OR_RETURN(Request r, RequestFor(params));
    MemoryAttr attr;
    attr.device_memory = *g.device_memory;
    TUNE_ASSIGN_OR_RETURN(std::optional<Modelled> m, ModelFor(trial, r, attr));
    if (!m || KnownOom(trial, *m, attr)) return std::optional<TrialPlan>();
    GuardOptions micro_batch_only = g;
    micro_batch_only.lever_checkpointing = false;
    TUNE_ASSIGN_OR_RETURN(Admission a,
                          AdmitTrial(m->request, *m->model, room, m->correction, micro_batch_only));
    if (a.verdict == AdmissionVerdict::kReject || a.request.batch_size < g.min_micro_batch) {
      return std::optional<TrialPlan>();
    }
    TrialPlan plan;
    plan.params = params;
    Admitted(a, plan, attr);
    plan.summary += ", to start beside the running trials";
    attrs_[trial.number()] = std::move(attr);
    return std::optional<TrialPlan>(std::move(plan));
  }

  Status Record(TrialHandle& trial, const TrialPlan& plan, const ProgramPeak& measured,
                bool oom) override {
    const int64_t peak = measured.bytes;
    const std::string& peak_source = measured.source;
    auto it = attrs_.find(trial.number());
    if (it == attrs_.end()) return Status::Ok();
    MemoryAttr m = std::move(it->second);
    attrs_.erase(it);
    m.peak = oom ? -1 : peak;
    // A CUDA program's resident set is host memory, not a point of its device's fit.
    m.peak_source = oom ? "" : peak_source == "max_rss" && !cpu_ ? "host_max_rss" : peak_source;
    m.oom = oom;
    m.cap = plan.cap;  // it ran (or ran out) under its reservation
    MemoryAttr::Run& run = m.run.emplace(MemoryAttr::Run{});  // (clang 14: not emplace())
    if (!oom) run.peak_reserved = measured.reserved;
    if (auto retried = retries_.find(trial.number()); retried != retries_.end()) {
      run.oom_retries = std::move(retried->second);
      retries_.erase(retried);
    }
    auto r = RequestFor(plan.params);
    if (r.ok()) {
      run.batch_size = r->hp.batch_size;
      run.grad_accum = r->hp.grad_accum;
      run.gradient_checkpointing = r->hp.gradient_checkpointing;
      run.max_length = r->hp.max_length;
    }
    const Json json = MemoryAttrToJson(m);
    recorded_[trial.number()] = json;
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kMemory, json));
    if (!r.ok() || m.family != MeasuredFamily(r->hp)) return Status::Ok();
    return Fitted(trial, r->hp, m).status();  // the study keeps the fit with this peak in it
  }

  Result<std::optional<TrialPlan>> RetryAfterOom(TrialHandle& trial, const TrialPlan& ran,
                                                 const ProgramPeak& peak,
                                                 const std::string& error) override {
    const auto done = retries_.find(trial.number());
    const size_t retried = done == retries_.end() ? 0 : done->second.size();
    const std::optional<std::string> batch = MappedParam("batch_size");
    const std::optional<std::string> accum = MappedParam("grad_accum");
    TUNE_ASSIGN_OR_RETURN(Request r, RequestFor(ran.params));
    TrainHyperparams next_hp = r.hp;
    if (static_cast<int64_t>(retried) >= options_.guard.oom_retry || !batch || !accum ||
        !HalveMicroBatch(next_hp.batch_size, next_hp.grad_accum)) {
      return std::optional<TrialPlan>();
    }
    std::vector<OomAttempt>& retries = retries_[trial.number()];
    MemoryAttr& attr = attrs_[trial.number()];
    OomAttempt failed{r.hp.batch_size, r.hp.grad_accum, "", error, -1, std::nullopt};
    // A CUDA program's resident set is host memory, not its device peak.
    if (peak.bytes >= 0 && (cpu_ || peak.source != "max_rss"))
      failed.peak_memory_bytes = peak.bytes;
    if (attr.estimate > 0) failed.estimate = attr.estimate;
    retries.push_back(std::move(failed));
    TrialPlan next = ran;
    next.params[*batch] = next_hp.batch_size;
    next.params[*accum] = next_hp.grad_accum;
    next.summary = fmt::format("retry {}/{} after out of memory: {} {} -> {}, {} {} -> {}",
                               retries.size(), options_.guard.oom_retry, *batch, r.hp.batch_size,
                               next_hp.batch_size, *accum, r.hp.grad_accum, next_hp.grad_accum);
    // The estimate of what runs now, when the formulas or a fit can say.
    TUNE_ASSIGN_OR_RETURN(Request smaller, RequestFor(next.params));
    TUNE_ASSIGN_OR_RETURN(std::optional<Modelled> m, ModelFor(trial, smaller, attr));
    if (m) {
      TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, m->model->Estimate(m->request));
      attr.estimate = e.device_peak;
    }
    return std::optional<TrialPlan>(std::move(next));
  }

  int64_t ProgramCap(const TrialPlan& plan) const override {
    return ProcessCap(plan.reservation, options_.guard.margin,
                      cards_.GuardFor(Index(plan.card), options_.guard).device_memory);
  }

  std::vector<std::string> Environment(const TrialPlan& plan) const override {
    std::vector<std::string> env = cards_.Environment(Index(plan.card));
    if (options_.guard.simulate) env.push_back("TUNE_LIBRARY_DIR=" + LibraryDirectory());
    return env;
  }

 private:
  static size_t Index(int64_t card) { return static_cast<size_t>(card); }

  struct Request {
    TrainHyperparams hp;
    int64_t num_labels = 2;
  };

  // The param a request field's template names when it is exactly "{param}".
  std::optional<std::string> MappedParam(const std::string& field) const {
    auto it = options_.request.find(field);
    if (it == options_.request.end() || !it->second.is_string()) return std::nullopt;
    return SingleParam(it->second.get_ref<const std::string&>());
  }

  // The request's fields with the templates expanded over `params`.
  Result<Request> RequestFor(const Json& params) const {
    std::map<std::string, std::string> values;
    for (const auto& [name, v] : params.items()) values[name] = TemplateValueText(v);
    Request r;
    for (const auto& [field, spec] : options_.request) {
      Json value = spec;
      if (spec.is_string()) {
        auto text = ExpandTemplate(spec.get<std::string>(), values);
        if (!text) {
          return InvalidArgumentError(
              fmt::format("memory.{}: \"{}\" names a parameter this trial does not have", field,
                          spec.get<std::string>()));
        }
        const Json parsed = Json::parse(*text, nullptr, false);
        value =
            parsed.is_discarded() || parsed.is_object() || parsed.is_array() ? Json(*text) : parsed;
      }
      if (field == "num_labels") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1) {
          return InvalidArgumentError("memory.num_labels: expected an integer >= 1, got " +
                                      value.dump());
        }
        r.num_labels = value.get<int64_t>();
        continue;
      }
      if (Status s = SetHyperparam(r.hp, field, value); !s.ok()) {
        return InvalidArgumentError(fmt::format("memory.{}: {}", field, s.message()));
      }
    }
    return r;
  }

  // What estimates a trial (memory_model.h), the request it estimates and the calibration
  // correction: the formulas for a catalog model, the fit of the measured peaks for any other
  // once they can be fitted (nullopt before). Sets the family and model of `attr`.
  struct Modelled {
    std::shared_ptr<const MemoryModel> model;
    MemoryRequest request;
    double correction = 1.0;
    bool measured = false;  // a fit, not the formulas
  };
  Result<std::optional<Modelled>> ModelFor(TrialHandle& trial, const Request& r, MemoryAttr& attr) {
    attr.model = r.hp.model;
    auto spec = catalog_.Find(r.hp.model);
    if (spec.ok()) {
      attr.family = "command:" + MemoryFamily(**spec, r.hp.precision);
      return std::optional<Modelled>(Modelled{
          formula_, MemoryRequestFor(**spec, r.hp, r.num_labels, 0), Correction(trial, attr, 0.0)});
    }
    attr.family = MeasuredFamily(r.hp);
    TUNE_ASSIGN_OR_RETURN(std::shared_ptr<const MemoryModel> fitted, Fitted(trial, r.hp, attr));
    if (!fitted) return std::optional<Modelled>();
    MemoryRequest request;
    request.model.name = r.hp.model;
    request.batch_size = r.hp.batch_size;
    request.max_length = r.hp.max_length;
    request.grad_accum = r.hp.grad_accum;
    request.precision = r.hp.precision;
    request.gradient_checkpointing = r.hp.gradient_checkpointing;
    // The fit carries its own margin: calibration may raise it (a run-time OOM), never lower it.
    return std::optional<Modelled>(
        Modelled{fitted, request, Correction(trial, attr, 1.0), /*measured=*/true});
  }

  // A fitted model's known out-of-memory shape that the trial reaches (KnownOomShape).
  std::optional<MemoryPoint> KnownOom(TrialHandle& trial, const Modelled& m,
                                      const MemoryAttr& attr) const {
    if (!m.measured) return std::nullopt;
    return KnownOomShape(FamilyAttrs(trial, attr.family), m.request.batch_size,
                         m.request.max_length);
  }

  // The family's calibration correction (at least `floor`), from the trials the history holds and
  // those this process recorded since.
  double Correction(TrialHandle& trial, const MemoryAttr& attr, double floor) const {
    if (!options_.guard.calibrate) return 1.0;
    MemoryCalibration calibration;
    for (const MemoryAttr& m : FamilyAttrs(trial, attr.family)) {
      for (const MemoryRecord& record : MemoryRecordsFromJson(MemoryAttrToJson(m))) {
        calibration.Add(record);
      }
    }
    return std::max(floor, calibration.Correction(attr.family, attr.model));
  }

  // The "memory" attributes of the finished trials of `family`: the history's and those this
  // process recorded after the history was taken.
  std::vector<MemoryAttr> FamilyAttrs(TrialHandle& trial, const std::string& family) const {
    std::map<int64_t, Json> found = recorded_;
    for (const auto& t : trial.history().trials) {
      if (!t || !IsFinished(t->state)) continue;
      auto it = t->user_attrs.find(attrs::kMemory);
      if (it != t->user_attrs.end()) found.emplace(t->number, *it);
    }
    std::vector<MemoryAttr> out;
    for (const auto& [number, json] : found) {
      std::optional<MemoryAttr> m = MemoryAttrFromJson(json);
      if (m && m->family == family) out.push_back(std::move(*m));
    }
    return out;
  }

  // The fit of the family's measured peaks, once CanFit; stored in the study's system attribute
  // MeasuredFitKey whenever it changes. Null before.
  Result<std::shared_ptr<const MemoryModel>> Fitted(TrialHandle& trial, const TrainHyperparams& hp,
                                                    const MemoryAttr& attr) {
    const std::vector<MemoryPoint> points = MeasuredPoints(FamilyAttrs(trial, attr.family));
    if (!CanFit(points)) return std::shared_ptr<const MemoryModel>();
    TUNE_ASSIGN_OR_RETURN(MeasuredFit fit,
                          FitMeasuredMemory(points, hp.model, PrecisionName(hp.precision)));
    const std::string key = MeasuredFitKey(fit.model, fit.precision);
    const Json json = MeasuredFitToJson(fit);
    if (stored_fits_[key] != json) {
      spdlog::info("Memory of '{}' ({}) fitted from {} measured peak(s): {}", fit.model,
                   fit.precision, fit.points.size(), MeasuredFitText(fit));
      TUNE_RETURN_IF_ERROR(trial.SetStudySystemAttr(key, json));
      stored_fits_[key] = json;
    }
    return std::shared_ptr<const MemoryModel>(std::make_shared<FittedMemoryModel>(fit));
  }

  static void RecordAdmission(const Admission& a, MemoryAttr& attr) {
    attr.estimate = a.estimate.device_peak;
    attr.admission = AdmissionVerdictName(a.verdict);
    attr.predicted = a.predicted;
    attr.correction = a.correction;
    attr.usable = a.usable;
    attr.levers = a.levers;
  }

  // An admitted trial: its params with the levers applied, its reservation, its attribute.
  void Admitted(const Admission& a, TrialPlan& plan, MemoryAttr& attr) const {
    RecordAdmission(a, attr);
    if (a.verdict == AdmissionVerdict::kRunWithLevers) ApplyLevers(a.request, plan.params);
    plan.reservation = a.predicted;
    plan.summary = fmt::format("predicted {} (estimate {} x correction {:.3f}){}",
                               FormatBytes(a.predicted), FormatBytes(a.estimate.device_peak),
                               a.correction, a.levers.empty() ? "" : ", " + a.levers);
  }

  // "admission": false: the trial runs as it is; it reserves its prediction all the same.
  Result<TrialPlan> PlanWithoutAdmission(const Modelled& m, TrialPlan& plan,
                                         MemoryAttr& attr) const {
    TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, m.model->Estimate(m.request));
    attr.estimate = e.device_peak;
    plan.reservation = static_cast<int64_t>(static_cast<double>(e.device_peak) * m.correction);
    plan.summary = fmt::format("predicted {} (no admission)", FormatBytes(plan.reservation));
    return plan;
  }

  void ApplyLevers(const MemoryRequest& admitted, Json& params) const {
    if (auto p = MappedParam("batch_size")) params[*p] = admitted.batch_size;
    if (auto p = MappedParam("grad_accum")) params[*p] = admitted.grad_accum;
    if (auto p = MappedParam("gradient_checkpointing")) {
      params[*p] = admitted.gradient_checkpointing;
    }
  }

  Result<TrialPlan> Reject(TrialHandle& trial, const Json& params, const Admission& a,
                           TrialPlan& plan, MemoryAttr& attr) {
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(attr)));
    attrs_.erase(trial.number());
    const std::string reason =
        fmt::format("predicted out of memory: {} (estimate {} x correction {:.3f}) > {} usable",
                    FormatBytes(a.predicted), FormatBytes(a.requested_estimate), a.correction,
                    FormatBytes(a.usable));
    Json details{{"estimate", a.requested_estimate},
                 {"predicted", a.predicted},
                 {"usable", a.usable},
                 {"correction", a.correction}};
    TUNE_ASSIGN_OR_RETURN(plan.outcome,
                          RecordOom(trial, params, details, reason, EndReason::kPredicted));
    return plan;
  }

  // A model the estimator does not know, before its peaks can be fitted: its first trial runs
  // alone (nothing else on the device, so that its peak is its own); later ones reserve the
  // whole card until the fit exists.
  Result<TrialPlan> PlanUnmeasured(TrialHandle& trial, const Request& r, TrialPlan& plan,
                                   MemoryAttr& attr) {
    const std::vector<MemoryAttr> seen = FamilyAttrs(trial, attr.family);
    const size_t shapes = DistinctShapes(MeasuredPoints(seen)).size();
    if (auto oom = KnownOomShape(seen, r.hp.batch_size, r.hp.max_length)) {
      return RejectKnownOom(trial, plan, attr, *oom);
    }
    plan.exclusive = seen.empty();
    plan.reservation = PlanningCapacity();
    plan.summary = fmt::format(
        "model '{}' is not in the catalog: {} to measure its peak ({} of {} shapes measured for "
        "a fit)",
        r.hp.model, plan.exclusive ? "runs alone" : "reserves the whole card", shapes,
        MeasuredFit::kMinPoints);
    return plan;
  }

  // A shape of the family that ran out of memory with the whole card (not under a smaller --jobs
  // reservation) and that (B, T) reaches in both: it would too, whatever a fit says.
  std::optional<MemoryPoint> KnownOomShape(const std::vector<MemoryAttr>& seen, int64_t batch_size,
                                           int64_t max_length) const {
    const int64_t whole_card = PlanningCapacity();  // reads every card's budget: once
    for (const MemoryAttr& m : seen) {
      if (!m.oom || !m.run || (m.cap > 0 && m.cap < whole_card)) continue;
      if (batch_size >= m.run->batch_size && max_length >= m.run->max_length) {
        return MemoryPoint{m.run->batch_size, m.run->max_length, -1};
      }
    }
    return std::nullopt;
  }

  Result<TrialPlan> RejectKnownOom(TrialHandle& trial, TrialPlan& plan, MemoryAttr& attr,
                                   const MemoryPoint& oom) {
    Admission a;
    a.usable = PlanningCapacity();
    a.verdict = AdmissionVerdict::kReject;
    RecordAdmission(a, attr);
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(attr)));
    attrs_.erase(trial.number());
    const std::string reason = fmt::format(
        "predicted out of memory: '{}' ran out of memory at batch_size {}, max_length {}, which "
        "this trial reaches or exceeds",
        attr.model, oom.batch_size, oom.max_length);
    Json details{{"usable", a.usable},
                 {"oom_batch_size", oom.batch_size},
                 {"oom_max_length", oom.max_length}};
    TUNE_ASSIGN_OR_RETURN(plan.outcome,
                          RecordOom(trial, plan.params, details, reason, EndReason::kPredicted));
    return plan;
  }

  CommandMemoryOptions options_;
  ModelCatalog catalog_;
  Cards cards_;                                 // the program's cards (at least one)
  bool cpu_ = false;                            // memory.device is "cpu"
  std::shared_ptr<const MemoryModel> formula_;  // the estimator's, on the device model
  std::map<int64_t, MemoryAttr> attrs_;         // planned trials' "memory", by number
  std::map<int64_t, Json> recorded_;            // "memory" of the trials this process recorded
  std::map<int64_t, std::vector<OomAttempt>> retries_;  // attempts oom_retry ran again, by trial
  std::map<std::string, Json> stored_fits_;             // study system attributes written, by key
};

}  // namespace

Status CheckOomRetry(const CommandMemoryOptions& options) {
  if (options.guard.oom_retry == 0) return Status::Ok();
  for (const char* field : {"batch_size", "grad_accum"}) {
    auto it = options.request.find(field);
    if (it != options.request.end() && it->second.is_string() &&
        SingleParam(it->second.get<std::string>())) {
      continue;
    }
    return InvalidArgumentError(fmt::format(
        "a retry runs the program again with batch_size halved and grad_accum doubled, which it "
        "receives as parameters: map both to parameters of the search space (\"batch_size\": "
        "\"{{batch_size}}\", \"grad_accum\": \"{{grad_accum}}\"; a fixed accumulation can be a "
        "one-choice parameter, \"grad_accum\": [1]); memory.{} is {}",
        field, it == options.request.end() ? "not set" : it->second.dump()));
  }
  return Status::Ok();
}

Result<std::unique_ptr<MemoryPlanner>> NewGuardPlanner(CommandMemoryOptions options,
                                                       ModelCatalog catalog) {
  // With the CUDA device model, the program's cards are every visible one, or those named.
  TUNE_ASSIGN_OR_RETURN(Cards cards,
                        Cards::Resolve(options.device == "cuda" ? "cuda" : "cpu", options.guard));
  return std::unique_ptr<MemoryPlanner>(
      std::make_unique<GuardPlanner>(std::move(options), std::move(catalog), std::move(cards)));
}

}  // namespace tune

// The memory guard for command objectives (guard_planner.h).
#include "memory/guard_planner.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "memory/estimator.h"
#include "memory/simulated_card.h"
#include "train/hyperparams.h"
#include "tune/trial_attrs.h"
#include "util/device.h"
#include "util/templates.h"
#include "util/text.h"

namespace tune {

std::optional<int64_t> EmpiricalPeak(const std::vector<std::pair<double, double>>& points,
                                     double tokens) {
  if (points.empty()) return std::nullopt;
  double predicted = 0;
  if (points.size() < 3) {
    for (const auto& [x, y] : points)
      predicted = std::max(predicted, y * tokens / std::max(x, 1.0));
  } else {
    // Least squares of y = a + b x + c x^2 (normal equations, x scaled to ~1).
    double scale = 0;
    for (const auto& [x, y] : points) scale = std::max(scale, x);
    double s[5] = {0, 0, 0, 0, 0}, t[3] = {0, 0, 0};
    for (const auto& [x0, y] : points) {
      const double x = x0 / scale;
      double p = 1;
      for (double& v : s) v += p, p *= x;
      t[0] += y, t[1] += y * x, t[2] += y * x * x;
    }
    const double m[3][3] = {{s[0], s[1], s[2]}, {s[1], s[2], s[3]}, {s[2], s[3], s[4]}};
    const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                       m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                       m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    double coef[3] = {0, 0, 0};
    for (int k = 0; k < 3 && std::abs(det) > 1e-12; ++k) {  // Cramer's rule
      double mk[3][3];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) mk[i][j] = j == k ? t[i] : m[i][j];
      }
      coef[k] = (mk[0][0] * (mk[1][1] * mk[2][2] - mk[1][2] * mk[2][1]) -
                 mk[0][1] * (mk[1][0] * mk[2][2] - mk[1][2] * mk[2][0]) +
                 mk[0][2] * (mk[1][0] * mk[2][1] - mk[1][1] * mk[2][0])) /
                det;
    }
    const double x = tokens / scale;
    predicted = coef[0] + coef[1] * x + coef[2] * x * x;
  }
  return static_cast<int64_t>(std::llround(std::max(predicted, 0.0) * 1.1));
}

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

class GuardPlanner : public MemoryPlanner {
 public:
  GuardPlanner(CommandMemoryOptions options, ModelCatalog catalog)
      : options_(std::move(options)), catalog_(std::move(catalog)) {
    // A lever can only change a field the program receives through one parameter.
    options_.guard.lever_grad_accum = options_.guard.lever_grad_accum &&
                                      MappedParam("batch_size") && MappedParam("grad_accum");
    options_.guard.lever_checkpointing =
        options_.guard.lever_checkpointing && MappedParam("gradient_checkpointing");
    const auto device = ParseDevice(options_.device);
    device_ = GuardDeviceModel(options_.guard, device.ok() && device->is_cuda(), -1);
  }

  std::optional<int64_t> Capacity() const override {
    return UsableMemory(*options_.guard.device_memory, options_.guard.margin);
  }

  // The simulated card's busy trials (opened on first use); nullopt without one.
  std::optional<DeviceBusy> Busy() const override {
    if (!options_.guard.simulate) return std::nullopt;
    if (!card_) {
      auto card = SimulatedCard::Open(*options_.guard.simulate, *options_.guard.device_memory);
      if (!card.ok()) return std::nullopt;
      card_ = std::move(card).value();
    }
    const CardLoad load = card_->load();
    return DeviceBusy{load.busy, load.sum_busy};
  }

  Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) override {
    TrialPlan plan;
    plan.params = params;
    TUNE_ASSIGN_OR_RETURN(Request r, RequestFor(params));
    MemoryAttr& attr = attrs_[trial.number()];
    attr.device_memory = *options_.guard.device_memory;
    auto spec = catalog_.Find(r.hp.model);
    if (!spec.ok()) return PlanEmpirical(trial, r, plan, attr);
    const auto [request, correction] = Calibrated(trial, **spec, r, attr);
    if (!options_.guard.admission) return PlanWithoutAdmission(request, correction, plan, attr);
    TUNE_ASSIGN_OR_RETURN(Admission a, AdmitTrial(request, device_, *Capacity(), correction,
                                                  options_.guard));
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
    auto spec = catalog_.Find(r.hp.model);
    if (!spec.ok()) return std::optional<TrialPlan>();
    MemoryAttr attr;
    attr.device_memory = *g.device_memory;
    const auto [request, correction] = Calibrated(trial, **spec, r, attr);
    GuardOptions micro_batch_only = g;
    micro_batch_only.lever_checkpointing = false;
    TUNE_ASSIGN_OR_RETURN(Admission a,
                          AdmitTrial(request, device_, room, correction, micro_batch_only));
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

  Status Record(TrialHandle& trial, const TrialPlan& plan, int64_t peak, bool oom) override {
    auto it = attrs_.find(trial.number());
    if (it == attrs_.end()) return Status::Ok();
    MemoryAttr m = std::move(it->second);
    attrs_.erase(it);
    m.peak = oom ? -1 : peak;
    m.oom = oom;
    m.cap = plan.cap;  // it ran (or ran out) under its reservation
    MemoryAttr::Run& run = m.run.emplace();
    auto r = RequestFor(plan.params);
    if (r.ok()) {
      run.batch_size = r->hp.batch_size;
      run.grad_accum = r->hp.grad_accum;
      run.gradient_checkpointing = r->hp.gradient_checkpointing;
      run.max_length = r->hp.max_length;
    }
    return trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(m));
  }

  std::vector<std::string> Environment(const TrialPlan& /*plan*/) const override {
    std::vector<std::string> env;
    if (options_.guard.simulate) {
      env.push_back("TUNE_SIMULATED_CARD=" + *options_.guard.simulate);
      env.push_back(fmt::format("TUNE_SIMULATED_CARD_BYTES={}", *options_.guard.device_memory));
      env.push_back("TUNE_LIBRARY_DIR=" + LibraryDirectory());
    }
    return env;
  }

 private:
  struct Request {
    TrainHyperparams hp;
    int64_t num_labels = 2;
  };

  // The param a request field's template names when it is exactly "{param}".
  std::optional<std::string> MappedParam(const std::string& field) const {
    auto it = options_.request.find(field);
    if (it == options_.request.end() || !it->second.is_string()) return std::nullopt;
    const std::string& t = it->second.get_ref<const std::string&>();
    if (t.size() < 3 || t.front() != '{' || t.back() != '}' ||
        t.find_first_of("{}", 1) != t.size() - 1) {
      return std::nullopt;
    }
    return t.substr(1, t.size() - 2);
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
          return InvalidArgumentError(fmt::format(
              "memory.{}: \"{}\" names a parameter this trial does not have", field,
              spec.get<std::string>()));
        }
        const Json parsed = Json::parse(*text, nullptr, false);
        value = parsed.is_discarded() || parsed.is_object() || parsed.is_array() ? Json(*text)
                                                                                  : parsed;
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

  // The estimator's request for a trial of a catalog model and its calibration correction; sets
  // the family and model of `attr`.
  std::pair<MemoryRequest, double> Calibrated(TrialHandle& trial, const ModelSpec& spec,
                                              const Request& r, MemoryAttr& attr) const {
    attr.family = "command:" + MemoryFamily(spec, r.hp.precision);
    attr.model = r.hp.model;
    const double correction =
        options_.guard.calibrate
            ? CalibrationFromHistory(trial.history()).Correction(attr.family, attr.model)
            : 1.0;
    return {MemoryRequestFor(spec, r.hp, r.num_labels, 0), correction};
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
  Result<TrialPlan> PlanWithoutAdmission(const MemoryRequest& request, double correction,
                                         TrialPlan& plan, MemoryAttr& attr) const {
    TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(request, device_));
    attr.estimate = e.device_peak;
    plan.reservation = static_cast<int64_t>(static_cast<double>(e.device_peak) * correction);
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

  // A model the estimator does not know: predicted from its trials' measured peaks.
  Result<TrialPlan> PlanEmpirical(TrialHandle& trial, const Request& r, TrialPlan& plan,
                                  MemoryAttr& attr) {
    attr.family = "measured:" + r.hp.model;
    std::vector<std::pair<double, double>> points;
    for (const auto& t : trial.history().trials) {
      if (!t || !IsFinished(t->state)) continue;
      auto it = t->user_attrs.find(attrs::kMemory);
      if (it == t->user_attrs.end()) continue;
      const std::optional<MemoryAttr> m = MemoryAttrFromJson(*it);
      if (!m || m->family != attr.family || m->oom || m->peak <= 0 || !m->run) continue;
      points.emplace_back(static_cast<double>(m->run->batch_size * m->run->max_length),
                          static_cast<double>(m->peak));
    }
    const double tokens = static_cast<double>(r.hp.batch_size * r.hp.max_length);
    const std::optional<int64_t> peak = EmpiricalPeak(points, tokens);
    if (!peak) {
      plan.exclusive = true;
      plan.summary = fmt::format("model '{}' unknown to the estimator: runs alone to measure it",
                                 r.hp.model);
      return plan;
    }
    attr.estimate = attr.predicted = *peak;
    attr.admission = "run";
    attr.usable = *Capacity();
    if (*peak > *Capacity() && points.size() >= 3) {
      Admission a;
      a.predicted = a.requested_estimate = *peak;
      a.usable = *Capacity();
      return Reject(trial, plan.params, a, plan, attr);
    }
    plan.reservation = std::min(*peak, *Capacity());
    plan.summary = fmt::format("predicted {} from {} measured trial(s) of '{}'",
                               FormatBytes(*peak), points.size(), r.hp.model);
    return plan;
  }

  CommandMemoryOptions options_;
  ModelCatalog catalog_;
  DeviceMemoryModel device_;
  std::map<int64_t, MemoryAttr> attrs_;  // planned trials' "memory", by number
  mutable std::unique_ptr<SimulatedCard> card_;  // Busy()'s view of the simulated card
};

}  // namespace

std::unique_ptr<MemoryPlanner> NewGuardPlanner(CommandMemoryOptions options, ModelCatalog catalog) {
  return std::make_unique<GuardPlanner>(std::move(options), std::move(catalog));
}

}  // namespace tune

#include "tune/trial_attrs.h"

#include <limits>

namespace tune {

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kOom:
      return "oom";
    case EndReason::kPredicted:
      return "predicted";
    case EndReason::kInterrupted:
      return "interrupted";
    case EndReason::kTimeout:
      return "timeout";
    case EndReason::kNonFinite:
      return "nonfinite";
  }
  return "?";
}

std::optional<EndReason> TrialEndReason(const FrozenTrial& trial) {
  auto it = trial.user_attrs.find(attrs::kReason);
  if (it == trial.user_attrs.end() || !it->is_string()) return std::nullopt;
  for (EndReason r : {EndReason::kOom, EndReason::kPredicted, EndReason::kInterrupted,
                      EndReason::kTimeout, EndReason::kNonFinite}) {
    if (*it == EndReasonName(r)) return r;
  }
  return std::nullopt;
}

bool IsOomTrial(const FrozenTrial& trial) {
  if (trial.state != TrialState::kPruned) return false;
  auto it = trial.user_attrs.find(attrs::kOom);
  return it != trial.user_attrs.end() && it->is_boolean() && it->get<bool>();
}

std::string ConstraintKey(const std::string& name) {
  return std::string(kConstraintsKey) + ":" + name;
}

std::map<std::string, double> TrialConstraints(const FrozenTrial& trial) {
  auto number = [](const Json& v) {
    return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  std::map<std::string, double> out;
  if (auto it = trial.system_attrs.find(kConstraintsKey);
      it != trial.system_attrs.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) out[std::to_string(i)] = number((*it)[i]);
  }
  const std::string prefix = ConstraintKey("");
  for (const auto& [key, value] : trial.system_attrs.items()) {
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0) {
      out[key.substr(prefix.size())] = number(value);
    }
  }
  return out;
}

double ConstraintViolation(const std::map<std::string, double>& constraints) {
  double sum = 0.0;
  for (const auto& [name, v] : constraints) {
    if (v > 0.0) sum += v;
  }
  return sum;
}

namespace {

Json OomAttemptToJson(const OomAttempt& a) {
  Json j{{"batch_size", a.batch_size},
         {"grad_accum", a.grad_accum},
         {"error", a.error},
         {"peak_memory_bytes", a.peak_memory_bytes}};
  if (!a.phase.empty()) j["phase"] = a.phase;  // a command's program does not say
  if (a.estimate) j["estimate"] = *a.estimate;
  return j;
}

template <typename T>
T Get(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->get<std::string>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    return it->is_number_integer() ? it->get<T>() : fallback;
  } else {
    return it->is_number() ? it->get<T>() : fallback;
  }
}

OomAttempt OomAttemptFromJson(const Json& j) {
  OomAttempt a;
  a.batch_size = Get<int64_t>(j, "batch_size", 0);
  a.grad_accum = Get<int64_t>(j, "grad_accum", 0);
  a.phase = Get<std::string>(j, "phase", "");
  a.error = Get<std::string>(j, "error", "");
  a.peak_memory_bytes = Get<int64_t>(j, "peak_memory_bytes", -1);
  auto e = j.find("estimate");
  if (e != j.end() && e->is_number_integer()) a.estimate = e->get<int64_t>();
  return a;
}

}  // namespace

Json MemoryAttrToJson(const MemoryAttr& m) {
  Json j{{"family", m.family},
         {"estimate", m.estimate},
         {"device_memory", m.device_memory},
         {"peak", m.peak},
         {"oom", m.oom}};
  if (!m.model.empty()) j["model"] = m.model;
  if (m.cap > 0) j["cap"] = m.cap;
  if (m.others > 0) j["others"] = m.others;
  if (m.context >= 0) j["context"] = m.context;
  if (!m.peak_source.empty()) j["peak_source"] = m.peak_source;
  if (m.admission) {
    j["admission"] = *m.admission;
    j["predicted"] = m.predicted;
    j["correction"] = m.correction;
    j["usable"] = m.usable;
    if (!m.levers.empty()) j["levers"] = m.levers;
  }
  if (!m.run) return j;
  const MemoryAttr::Run& r = *m.run;
  if (r.peak_reserved >= 0) j["peak_reserved"] = r.peak_reserved;
  j["before"] = r.before;
  j["after"] = r.after;
  if (r.rss >= 0) j["rss"] = r.rss;
  if (r.heap >= 0) j["heap"] = r.heap;
  j["batch_size"] = r.batch_size;
  j["grad_accum"] = r.grad_accum;
  if (r.max_length > 0) j["max_length"] = r.max_length;
  j["gradient_checkpointing"] = r.gradient_checkpointing;
  if (!r.oom_retries.empty()) {
    Json retries = Json::array();
    for (const OomAttempt& a : r.oom_retries) retries.push_back(OomAttemptToJson(a));
    j["oom_retries"] = std::move(retries);
  }
  return j;
}

int64_t MeasuredDevicePeak(const MemoryAttr& m) {
  if (m.context >= 0 && m.run && m.run->peak_reserved >= 0) return m.run->peak_reserved + m.context;
  return m.peak;
}

std::optional<MemoryAttr> MemoryAttrFromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto family = j.find("family");
  auto estimate = j.find("estimate");
  if (family == j.end() || !family->is_string() || estimate == j.end() ||
      !estimate->is_number_integer()) {
    return std::nullopt;
  }
  MemoryAttr m;
  m.family = family->get<std::string>();
  m.estimate = estimate->get<int64_t>();
  m.device_memory = Get<int64_t>(j, "device_memory", 0);
  m.peak = Get<int64_t>(j, "peak", -1);
  m.oom = Get<bool>(j, "oom", false);
  m.model = Get<std::string>(j, "model", "");
  m.cap = Get<int64_t>(j, "cap", 0);
  m.others = Get<int64_t>(j, "others", 0);
  m.context = Get<int64_t>(j, "context", -1);
  m.peak_source = Get<std::string>(j, "peak_source", "");
  if (j.contains("admission")) {
    m.admission = Get<std::string>(j, "admission", "");
    m.predicted = Get<int64_t>(j, "predicted", 0);
    m.correction = Get<double>(j, "correction", 1.0);
    m.usable = Get<int64_t>(j, "usable", 0);
    m.levers = Get<std::string>(j, "levers", "");
  }
  if (j.contains("before") || j.contains("oom_retries")) {
    MemoryAttr::Run r;
    r.peak_reserved = Get<int64_t>(j, "peak_reserved", -1);
    r.before = Get<int64_t>(j, "before", -1);
    r.after = Get<int64_t>(j, "after", -1);
    r.rss = Get<int64_t>(j, "rss", -1);
    r.heap = Get<int64_t>(j, "heap", -1);
    r.batch_size = Get<int64_t>(j, "batch_size", 0);
    r.grad_accum = Get<int64_t>(j, "grad_accum", 0);
    r.max_length = Get<int64_t>(j, "max_length", 0);
    r.gradient_checkpointing = Get<bool>(j, "gradient_checkpointing", false);
    auto retries = j.find("oom_retries");
    if (retries != j.end() && retries->is_array()) {
      for (const Json& a : *retries) {
        if (a.is_object()) r.oom_retries.push_back(OomAttemptFromJson(a));
      }
    }
    m.run = std::move(r);
  }
  return m;
}

Json NonFiniteAttrToJson(const NonFiniteAttr& a) {
  Json j{{"where", a.where}};
  if (a.epoch >= 0) j["epoch"] = a.epoch;
  if (a.step >= 0) j["step"] = a.step;
  if (a.count > 0) j["count"] = a.count;
  if (a.total > 0) j["total"] = a.total;
  if (!a.name.empty()) j["name"] = a.name;
  if (!a.value.empty()) j["value"] = a.value;
  return j;
}

std::optional<NonFiniteAttr> NonFiniteAttrFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("where") || !j["where"].is_string()) return std::nullopt;
  NonFiniteAttr a;
  a.where = j["where"].get<std::string>();
  a.epoch = Get<int64_t>(j, "epoch", -1);
  a.step = Get<int64_t>(j, "step", -1);
  a.count = Get<int64_t>(j, "count", 0);
  a.total = Get<int64_t>(j, "total", 0);
  a.name = Get<std::string>(j, "name", "");
  a.value = Get<std::string>(j, "value", "");
  return a;
}

Result<TrialOutcome> RecordNonFinite(TrialHandle& trial, const NonFiniteAttr& attr,
                                     const std::string& message) {
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, message));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kReason, EndReasonName(EndReason::kNonFinite)));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kNonFinite, NonFiniteAttrToJson(attr)));
  return TrialOutcome{TrialState::kFail, {}, message.substr(0, message.find('\n'))};
}

Result<TrialOutcome> RecordOom(TrialHandle& trial, const Json& params, const Json& details,
                               const std::string& reason, EndReason oom_reason) {
  Json oom_config = params;
  auto bs = params.find("batch_size");
  auto ga = params.find("grad_accum");
  if (bs != params.end() && ga != params.end() && bs->is_number() && ga->is_number()) {
    oom_config["effective_batch_size"] = bs->get<double>() * ga->get<double>();
  }
  for (const auto& [k, v] : details.items()) oom_config[k] = v;
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kOom, true));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kReason, EndReasonName(oom_reason)));
  TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kOomConfig, oom_config));
  return TrialOutcome{TrialState::kPruned, {}, reason};
}

}  // namespace tune

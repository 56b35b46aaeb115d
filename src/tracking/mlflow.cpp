#include "tracking/mlflow.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "tracking/trial_scalars.h"
#include "tune/trial_attrs.h"
#include "util/templates.h"

namespace tune {
namespace {

// MLflow's limits per log-batch request, and Optuna's MLflowCallback's cut of long tags.
constexpr size_t kMaxMetricsPerBatch = 1000;
constexpr size_t kMaxParamsPerBatch = 100;
constexpr size_t kMaxTagLength = 5000;
constexpr double kDownSeconds = 5.0;

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t Millis(const std::optional<TimePoint>& t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.value_or(Clock::now()).time_since_epoch())
      .count();
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

Json KeyValue(const std::string& key, std::string value) {
  if (value.size() > kMaxTagLength) value.resize(kMaxTagLength);
  return {{"key", key}, {"value", std::move(value)}};
}

// A param's value as Python's str() writes it (mlflow.log_params(trial.params)).
std::string ParamText(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return TemplateValueText(v);
}

// MLflowCallback's tags, and tune's.
Json RunTags(const FrozenTrial& trial, const TrackedStudy& study) {
  Json tags = Json::array();
  tags.push_back(KeyValue("number", std::to_string(trial.number)));
  tags.push_back(KeyValue("state", TrialStateName(trial.state)));
  std::string direction;
  for (StudyDirection d : study.directions) {
    const std::string name = d == StudyDirection::kMaximize ? "MAXIMIZE" : "MINIMIZE";
    direction += direction.empty() ? name : ", " + name;
  }
  tags.push_back(
      KeyValue("direction", study.directions.size() == 1 ? direction : "[" + direction + "]"));
  if (trial.datetime_start) {
    tags.push_back(KeyValue("datetime_start", FormatDatetime(*trial.datetime_start)));
  }
  if (trial.datetime_complete) {
    tags.push_back(KeyValue("datetime_complete", FormatDatetime(*trial.datetime_complete)));
  }
  const std::string reason = TrialReasonTag(trial, study.pruner);
  if (!reason.empty()) tags.push_back(KeyValue("reason", reason));
  if (auto it = trial.user_attrs.find(attrs::kFailReason);
      it != trial.user_attrs.end() && it->is_string()) {
    tags.push_back(KeyValue("fail_reason", it->get<std::string>()));
  }
  tags.push_back(KeyValue("tune.study", study.name));
  tags.push_back(KeyValue("tune.trial_number", std::to_string(trial.number)));
  return tags;
}

}  // namespace

const char* MlflowRunStatus(TrialState state) {
  switch (state) {
    case TrialState::kComplete:
      return "FINISHED";
    case TrialState::kFail:
      return "FAILED";
    case TrialState::kPruned:
      return "KILLED";
    default:
      return "RUNNING";
  }
}

MlflowSink::MlflowSink(MlflowOptions options, TrackedStudy study,
                       std::function<std::unique_ptr<HttpClient>()> connect)
    : options_(std::move(options)), study_(std::move(study)), connect_(std::move(connect)) {
  std::string uri = options_.uri;
  while (!uri.empty() && uri.back() == '/') uri.pop_back();
  base_ = uri + "/api/2.0/mlflow/";
  if (options_.experiment.empty()) options_.experiment = study_.name;
}

std::string MlflowSink::MissedHint() const {
  return fmt::format(
      "`tune export --study {} --mlflow {}{}` records them once the server is back", study_.name,
      options_.uri,
      options_.experiment == study_.name ? "" : " --mlflow-experiment " + options_.experiment);
}

std::unique_ptr<HttpClient> MlflowSink::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<HttpClient> http = std::move(idle_.back());
      idle_.pop_back();
      return http;
    }
  }
  return connect_();
}

void MlflowSink::Release(std::unique_ptr<HttpClient> http) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(http));
}

Result<Json> MlflowSink::Call(const std::string& method, const std::string& path,
                              const Json& body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (SteadySeconds() < down_until_) return UnavailableError(down_error_);
  }
  const std::string url = base_ + path;
  const std::string text = method == "POST" ? body.dump() : "";
  std::unique_ptr<HttpClient> http = Acquire();
  Status error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(attempt * 200 - 100));
    Result<HttpResponse> r = http->Request(method, url, text);
    if (!r.ok()) {
      error = r.status();
      continue;
    }
    Json answer = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (r->status >= 500) {
      error = UnavailableError(fmt::format("{} {}: HTTP {}", method, url, r->status));
      continue;
    }
    Release(std::move(http));
    if (r->status >= 400 || answer.is_discarded()) {
      const std::string code = answer.is_object() ? answer.value("error_code", "") : "";
      const std::string message =
          answer.is_object() ? answer.value("message", r->body) : r->body.substr(0, 300);
      const std::string what =
          fmt::format("{} {}: HTTP {} {}: {}", method, url, r->status, code, message);
      if (code == "RESOURCE_DOES_NOT_EXIST") return NotFoundError(what);
      if (code == "RESOURCE_ALREADY_EXISTS") return AlreadyExistsError(what);
      return InvalidArgumentError(what);
    }
    return answer;
  }
  // A connection that got no answer is dropped, not reused.
  std::lock_guard<std::mutex> lock(mu_);
  down_until_ = SteadySeconds() + kDownSeconds;
  down_error_ = error.message();
  return UnavailableError(error.message());
}

Result<std::string> MlflowSink::ExperimentId() {
  std::lock_guard<std::mutex> lock(experiment_mu_);
  if (!experiment_id_.empty()) return experiment_id_;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<Json> got = Call(
        "GET", "experiments/get-by-name?experiment_name=" + UrlEncode(options_.experiment), {});
    if (got.ok()) {
      experiment_id_ = (*got)["experiment"].value("experiment_id", "");
      if (experiment_id_.empty()) return InternalError("MLflow: an experiment without an id");
      return experiment_id_;
    }
    if (got.status().code() != StatusCode::kNotFound) return got.status();
    Result<Json> made = Call("POST", "experiments/create", {{"name", options_.experiment}});
    if (made.ok()) {
      experiment_id_ = made->value("experiment_id", "");
      return experiment_id_;
    }
    // Another worker made it first: read it again.
    if (made.status().code() != StatusCode::kAlreadyExists) return made.status();
  }
  return InternalError("MLflow: experiment '" + options_.experiment + "' neither found nor made");
}

Status MlflowSink::LogBatch(const std::string& run_id, const FrozenTrial& trial,
                            int64_t timestamp_ms) {
  Json metrics = Json::array();
  for (const auto& [key, points] : TrialScalars(trial)) {
    for (const ScalarPoint& p : points) {
      metrics.push_back(
          {{"key", key}, {"value", p.value}, {"timestamp", timestamp_ms}, {"step", p.step}});
    }
  }
  for (const auto& [key, bytes] : TrialMemoryFigures(trial)) {
    metrics.push_back({{"key", key}, {"value", bytes}, {"timestamp", timestamp_ms}, {"step", 0}});
  }
  Json params = Json::array();
  const Json external = trial.ExternalParams();
  for (const auto& [name, value] : external.items()) {
    params.push_back(KeyValue(name, ParamText(value)));
  }
  size_t m = 0, p = 0;
  while (m < metrics.size() || p < params.size() || (m == 0 && p == 0)) {
    Json batch{{"run_id", run_id}, {"metrics", Json::array()}, {"params", Json::array()}};
    for (size_t i = 0; i < kMaxParamsPerBatch && p < params.size(); ++i) {
      batch["params"].push_back(params[p++]);
    }
    for (size_t i = batch["params"].size(); i < kMaxMetricsPerBatch && m < metrics.size(); ++i) {
      batch["metrics"].push_back(metrics[m++]);
    }
    TUNE_RETURN_IF_ERROR(Call("POST", "runs/log-batch", batch).status());
    if (metrics.empty() && params.empty()) break;
  }
  return Status::Ok();
}

Status MlflowSink::Record(const FrozenTrial& trial, const StudyTally& tally) {
  (void)tally;
  TUNE_ASSIGN_OR_RETURN(std::string experiment, ExperimentId());
  const Json create{{"experiment_id", experiment},
                    {"run_name", std::to_string(trial.number)},
                    {"start_time", Millis(trial.datetime_start)},
                    {"tags", RunTags(trial, study_)}};
  TUNE_ASSIGN_OR_RETURN(Json made, Call("POST", "runs/create", create));
  const std::string run_id = made["run"]["info"].value("run_id", "");
  if (run_id.empty()) return InternalError("MLflow: runs/create answered without a run_id");
  const int64_t end = Millis(trial.datetime_complete);
  TUNE_RETURN_IF_ERROR(LogBatch(run_id, trial, end));
  return Call("POST", "runs/update",
              {{"run_id", run_id}, {"status", MlflowRunStatus(trial.state)}, {"end_time", end}})
      .status();
}

Status MlflowSink::RecordTally(const StudyTally& tally) {
  TUNE_ASSIGN_OR_RETURN(std::string experiment, ExperimentId());
  std::vector<std::pair<std::string, std::string>> tags;
  for (const char* state : {"COMPLETE", "PRUNED", "FAIL"}) {
    auto it = tally.by_state.find(state);
    tags.emplace_back(fmt::format("tune.trials.{}", state),
                      std::to_string(it == tally.by_state.end() ? 0 : it->second));
  }
  tags.emplace_back("tune.trials.oom", std::to_string(tally.oom));
  tags.emplace_back("tune.trials.predicted", std::to_string(tally.predicted));
  if (tally.best_value) {
    tags.emplace_back("tune.best_value", fmt::format("{}", *tally.best_value));
    tags.emplace_back("tune.best_trial", std::to_string(tally.best_trial));
  }
  for (const auto& [key, value] : tags) {
    TUNE_RETURN_IF_ERROR(Call("POST", "experiments/set-experiment-tag",
                              {{"experiment_id", experiment}, {"key", key}, {"value", value}})
                             .status());
  }
  return Status::Ok();
}

Result<std::map<int64_t, std::pair<std::string, std::string>>> MlflowSink::RecordedTrials() {
  TUNE_ASSIGN_OR_RETURN(std::string experiment, ExperimentId());
  std::map<int64_t, std::pair<std::string, std::string>> out;
  std::string page_token;
  do {
    Json body{{"experiment_ids", {experiment}},
              {"filter", fmt::format("tags.`tune.study` = '{}'", study_.name)},
              {"max_results", 1000}};
    if (!page_token.empty()) body["page_token"] = page_token;
    TUNE_ASSIGN_OR_RETURN(Json page, Call("POST", "runs/search", body));
    for (const Json& run : page.value("runs", Json::array())) {
      const Json& info = run["info"];
      for (const Json& tag : run["data"].value("tags", Json::array())) {
        if (tag.value("key", "") != "tune.trial_number") continue;
        const std::string number = tag.value("value", "");
        if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) break;
        out[std::stoll(number)] = {info.value("run_id", ""), info.value("status", "")};
      }
    }
    page_token = page.value("next_page_token", "");
  } while (!page_token.empty());
  return out;
}

Status MlflowSink::DeleteRun(const std::string& run_id) {
  return Call("POST", "runs/delete", {{"run_id", run_id}}).status();
}

std::unique_ptr<TrackingSink> NewMlflowSink(const MlflowOptions& options,
                                            const TrackedStudy& study) {
  return std::make_unique<MlflowSink>(options, study, [] { return NewCurlHttpClient(5.0); });
}

}  // namespace tune

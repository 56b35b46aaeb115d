#include "objectives/trial_protocol.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <istream>
#include <ostream>

#include "tune/objectives/command.h"
#include "tune/trial_attrs.h"
#include "util/interrupt.h"

namespace tune {
namespace {

Json OutcomeToJson(const TrialOutcome& o) {
  Json values = Json::array();
  for (double v : o.values) values.push_back(v);
  return Json{{"state", TrialStateName(o.state)}, {"values", values}, {"reason", o.reason}};
}

Result<TrialOutcome> OutcomeFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("state") || !j["state"].is_string()) {
    return InvalidArgumentError("malformed outcome " + j.dump());
  }
  TrialOutcome o;
  TUNE_ASSIGN_OR_RETURN(o.state, ParseTrialState(j["state"].get<std::string>()));
  for (const Json& v : j.value("values", Json::array())) {
    if (v.is_number()) o.values.push_back(v.get<double>());
  }
  o.reason = j.value("reason", std::string());
  return o;
}

// "[warning] message" -> (warn, "message"); other lines are info.
std::pair<spdlog::level::level_enum, std::string> SplitLevel(const std::string& line) {
  if (line.size() > 2 && line[0] == '[') {
    const size_t close = line.find("] ");
    if (close != std::string::npos) {
      const auto level = spdlog::level::from_str(line.substr(1, close - 1));
      if (level != spdlog::level::off) return {level, line.substr(close + 2)};
    }
  }
  return {spdlog::level::info, line};
}

}  // namespace

RemoteTrialHandle::RemoteTrialHandle(int64_t number, std::string study_name, std::istream& in,
                                     std::ostream& out)
    : number_(number), study_name_(std::move(study_name)), in_(in), out_(out) {}

Status RemoteTrialHandle::Send(const Json& message) {
  out_ << message.dump() << "\n" << std::flush;
  if (!out_) return UnavailableError("the parent tune process is gone (stdout closed)");
  return Status::Ok();
}

Status RemoteTrialHandle::Report(double value, int64_t step) {
  return Send(Json{{"report", {{"step", step}, {"value", value}}}});
}

Result<bool> RemoteTrialHandle::ShouldPrune() {
  TUNE_RETURN_IF_ERROR(Send(Json{{"should_prune", true}}));
  std::string line;
  if (!std::getline(in_, line)) {
    return UnavailableError("the parent tune process is gone (stdin closed)");
  }
  const Json answer = Json::parse(line, nullptr, false);
  if (!answer.is_object() || !answer.contains("prune") || !answer["prune"].is_boolean()) {
    return InternalError("unexpected answer from the parent: " + line);
  }
  return answer["prune"].get<bool>();
}

Status RemoteTrialHandle::SetUserAttr(const std::string& key, const Json& value) {
  return Send(Json{{"user_attr", {{"key", key}, {"value", value}}}});
}

Status RemoteTrialHandle::SetSystemAttr(const std::string& key, const Json& value) {
  return Send(Json{{"system_attr", {{"key", key}, {"value", value}}}});
}

Status RemoteTrialHandle::SetStudySystemAttr(const std::string& key, const Json& value) {
  return Send(Json{{"study_system_attr", {{"key", key}, {"value", value}}}});
}

Status RemoteTrialHandle::SendOutcome(const TrialOutcome& outcome) {
  return Send(Json{{"outcome", OutcomeToJson(outcome)}});
}

Result<std::unique_ptr<TrialProcess>> ChildTrialProcess::Start(TrialHandle& trial, Json params,
                                                               SubprocessOptions options) {
  options.stdin_pipe = true;
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> program, Subprocess::Spawn(options));
  spdlog::debug("Trial {}: started pid {}: {}", trial.number(), program->pid(),
                fmt::join(options.argv, " "));
  return std::unique_ptr<TrialProcess>(
      new ChildTrialProcess(trial, std::move(params), std::move(program)));
}

ChildTrialProcess::ChildTrialProcess(TrialHandle& trial, Json params,
                                     std::unique_ptr<Subprocess> program)
    : trial_(trial), params_(std::move(params)), program_(std::move(program)) {}

Status ChildTrialProcess::Poll(std::chrono::milliseconds wait) {
  return program_->Poll(wait, [this](Stream stream, const std::string& line) {
    if (stream == Stream::kStdout) return OnStdout(line);
    OnStderr(line);
    return Status::Ok();
  });
}

Status ChildTrialProcess::OnStdout(const std::string& line) {
  const Json m = Json::parse(line, nullptr, false);
  if (!m.is_object() || m.size() != 1) {
    spdlog::debug("[trial {}] {}", trial_.number(), line);
    return Status::Ok();
  }
  // A message whose members have other types than the protocol's (nlohmann's type_error) is an
  // error naming the line, not an exception ending tune.
  try {
    return OnMessage(m, line);
  } catch (const Json::exception& e) {
    return InternalError(
        fmt::format("trial {}: the trial's process wrote a malformed protocol "
                    "line ({}): {}",
                    trial_.number(), e.what(), line.substr(0, 300)));
  }
}

Status ChildTrialProcess::OnMessage(const Json& m, const std::string& line) {
  if (m.contains("report")) {
    const Json& r = m["report"];
    return trial_.Report(r.value("value", 0.0), r.value("step", int64_t{0}));
  }
  if (m.contains("should_prune")) {
    TUNE_ASSIGN_OR_RETURN(bool prune, trial_.ShouldPrune());
    if (Status s = program_->WriteLine(Json{{"prune", prune}}.dump()); !s.ok()) {
      spdlog::debug("Trial {}: {}", trial_.number(), s.message());  // it died meanwhile
    }
    return Status::Ok();
  }
  if (m.contains("user_attr")) {
    const Json& a = m["user_attr"];
    return trial_.SetUserAttr(a.value("key", std::string("?")), a.value("value", Json()));
  }
  if (m.contains("system_attr")) {
    const Json& a = m["system_attr"];
    return trial_.SetSystemAttr(a.value("key", std::string("?")), a.value("value", Json()));
  }
  if (m.contains("study_system_attr")) {
    const Json& a = m["study_system_attr"];
    return trial_.SetStudySystemAttr(a.value("key", std::string("?")), a.value("value", Json()));
  }
  if (m.contains("outcome")) {
    TUNE_ASSIGN_OR_RETURN(outcome_, OutcomeFromJson(m["outcome"]));
    return Status::Ok();
  }
  spdlog::debug("[trial {}] {}", trial_.number(), line);
  return Status::Ok();
}

void ChildTrialProcess::OnStderr(const std::string& line) {
  const auto [level, message] = SplitLevel(line);
  spdlog::log(level, "{}", message);
  if (oom_line_.empty()) {
    for (const std::string& p : DefaultOomPatterns()) {
      if (line.find(p) != std::string::npos) oom_line_ = line.substr(0, 500);
    }
  }
}

void ChildTrialProcess::Interrupt() {
  interrupted_ = true;
  program_->Stop();  // SIGTERM: the child's trainer stops before its next batch
}

Result<TrialOutcome> ChildTrialProcess::Finish() {
  if (outcome_) {
    // A child this process stopped reports the SIGTERM it was sent; the reason is this
    // process's own (a user's Ctrl-C, or a scheduler's SIGTERM).
    if (interrupted_ && outcome_->state == TrialState::kFail && InterruptRequested() &&
        outcome_->reason != InterruptReason() &&
        outcome_->reason.rfind("stopped by SIGTERM", 0) == 0) {
      outcome_->reason = InterruptReason();
      TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kFailReason, outcome_->reason));
    }
    return *outcome_;
  }
  return OutcomeOfDeath();
}

Result<TrialOutcome> ChildTrialProcess::OutcomeOfDeath() {
  const ExitStatus& exit = program_->exit_status();
  const std::string tail = program_->stderr_tail();
  if (interrupted_ || InterruptRequested()) {  // stopped by tune, or signalled with it
    TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kStderrTail, tail));
    return RecordInterrupted(trial_);
  }
  TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kStderrTail, tail));
  TUNE_RETURN_IF_ERROR(
      trial_.SetUserAttr(attrs::kExitStatus, exit.exited ? Json(exit.code) : Json(nullptr)));
  if (exit.signal != 0) TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kSignal, exit.SignalName()));
  if (!oom_line_.empty()) {
    return RecordOom(trial_, params_, {{"error", oom_line_}}, "out of memory: " + oom_line_);
  }
  const std::string reason =
      fmt::format("the trial's process ended without a result: {}{}", exit.Describe(),
                  exit.signal == 9 ? " (the kernel's out-of-memory killer sends this signal)" : "");
  spdlog::warn("Trial {} failed: {}", trial_.number(), reason);
  TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kFailReason, reason));
  return TrialOutcome{TrialState::kFail, {}, reason};
}

}  // namespace tune

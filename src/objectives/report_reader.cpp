#include "objectives/report_reader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>

#include "tune/trial_attrs.h"
#include "util/text.h"

namespace tune {
namespace fs = std::filesystem;

namespace {

std::string Trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

Result<double> ToNumber(const Json& v) {
  if (v.is_number() && !v.is_boolean()) return v.get<double>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "NaN" || s == "nan") return std::nan("");
    if (s == "Infinity" || s == "inf") return HUGE_VAL;
    if (s == "-Infinity" || s == "-inf") return -HUGE_VAL;
  }
  // (dump() throws on invalid UTF-8: a result file's bytes are anything.)
  return InvalidArgumentError("not a number: " +
                              v.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// Parses a JSON line, accepting Python's NaN / Infinity / -Infinity tokens (json.dumps) and
// nan / inf / -inf (str(float)) where a value goes.
std::optional<Json> ParseLine(const std::string& line) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() && line.find_first_of("NIni") != std::string::npos) {
    static const std::regex kTokens(R"((-?Infinity|NaN|-?inf|nan)(?=\s*[,}\]]))");
    j = Json::parse(std::regex_replace(line, kTokens, "\"$1\""), nullptr, false);
  }
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

bool IsReport(const Json& j) { return j.contains("value") || j.contains("values"); }

// The number(s) of a report object.
Result<std::vector<double>> ReportValues(const Json& j) {
  std::vector<double> vals;
  if (j.contains("values") && j.at("values").is_array()) {
    for (const Json& v : j.at("values")) {
      TUNE_ASSIGN_OR_RETURN(double n, ToNumber(v));
      vals.push_back(n);
    }
    return vals;
  }
  if (!j.contains("value")) {  // {"values": 1}: the fuzzer's, once an uncaught exception
    return InvalidArgumentError(
        "\"values\" must be an array of numbers, one per objective, e.g. {\"values\": [0.5, 12]}");
  }
  TUNE_ASSIGN_OR_RETURN(double n, ToNumber(j.at("value")));
  vals.push_back(n);
  return vals;
}

}  // namespace

Status ReportReader::OnStdoutLine(const std::string& line) {
  auto j = ParseLine(line);
  if (j && j->contains("memory_peak") && (*j)["memory_peak"].is_number_integer()) {
    memory_peak = (*j)["memory_peak"].get<int64_t>();
    if (j->contains("memory_peak_reserved") && (*j)["memory_peak_reserved"].is_number_integer())
      memory_peak_reserved = (*j)["memory_peak_reserved"].get<int64_t>();
    return Status::Ok();
  }
  // {"out_of_memory": "message"}: the program caught its allocator's error (tune_trial.py's
  // memory_guard); as an out-of-memory line on stderr.
  if (j && j->contains("out_of_memory")) {
    const Json& m = (*j)["out_of_memory"];
    if (!out_of_memory)
      // Cut at 500 bytes, then made valid UTF-8 again (the cut may split a character): it is
      // stored in the trial's attributes.
      out_of_memory = ValidUtf8((m.is_string() ? m.get<std::string>() : m.dump()).substr(0, 500));
    return Status::Ok();
  }
  if (j && j->contains("constraints")) {
    TUNE_RETURN_IF_ERROR(OnConstraints(j->at("constraints"), line));
    if (!IsReport(*j)) return Status::Ok();
  }
  if (!j || !IsReport(*j)) {
    spdlog::debug("[trial {}] {}", trial_.number(), line);
    return Status::Ok();
  }
  return OnReport(*j, line);
}

// {"constraints": {"name": value, ...}}: each a trial system attribute "constraints:<name>"
// (Optuna 5.0's trial.set_constraint; <= 0 = satisfied). A value that is not a finite or
// infinite number (NaN, text) is ignored with a warning, as Optuna refuses NaN.
Status ReportReader::OnConstraints(const Json& c, const std::string& shown) {
  if (!c.is_object()) {
    spdlog::warn(
        "Trial {}: ignoring constraints in {}: expected an object of numbers, e.g. "
        "{{\"constraints\": {{\"latency\": 0.2}}}}",
        trial_.number(), shown);
    return Status::Ok();
  }
  for (const auto& [name, value] : c.items()) {
    Result<double> v = ToNumber(value);
    if (name.empty() || !v.ok() || std::isnan(*v)) {
      spdlog::warn("Trial {}: ignoring constraint '{}' in {}: {}", trial_.number(), name, shown,
                   name.empty() ? "empty name" : "not a number (NaN is not allowed)");
      continue;
    }
    TUNE_RETURN_IF_ERROR(trial_.SetSystemAttr(ConstraintKey(name), *v));
  }
  return Status::Ok();
}

// {"value": x}, {"values": [...]} or {"step": n, "value": x}; `shown` names it in warnings.
Status ReportReader::OnReport(const Json& j, const std::string& shown) {
  Result<std::vector<double>> parsed = ReportValues(j);
  if (!parsed.ok()) {
    spdlog::warn("Trial {}: ignoring report {}: {}", trial_.number(), shown,
                 parsed.status().message());
    return Status::Ok();
  }
  if (!j.contains("step")) {
    final_values = *parsed;
    return Status::Ok();
  }
  const Json& s = j.at("step");
  if (!s.is_number_integer() || s.get<int64_t>() < 0 || parsed->size() != 1) {
    spdlog::warn("Trial {}: ignoring report {}: step must be an integer >= 0 with one value",
                 trial_.number(), shown);
    return Status::Ok();
  }
  const int64_t step = s.get<int64_t>();
  if (earlier_.count(step) == 0) {
    TUNE_RETURN_IF_ERROR(trial_.Report((*parsed)[0], step));
    reported_.insert(step);
  } else {
    spdlog::debug("Trial {}: step {} keeps the value an earlier attempt reported", trial_.number(),
                  step);
  }
  TUNE_ASSIGN_OR_RETURN(bool prune, trial_.ShouldPrune());
  if (prune && !pruned_step) pruned_step = step;
  return Answer(step, prune);
}

// The pruner's decision at `step`, appended to $TUNE_PRUNER_FILE for the program's
// should_prune() (tune_trial.py) before tune acts on it. One line, written whole.
Status ReportReader::Answer(int64_t step, bool prune) const {
  std::ofstream out(pruner_file_, std::ios::app);
  out << Json{{"step", step}, {"prune", prune}}.dump() << "\n" << std::flush;
  if (!out) return InternalError("cannot write " + pruner_file_.string());
  return Status::Ok();
}

// {"value": x} (or a bare number) written to $TUNE_RESULT_FILE, when stdout gave no value.
Status ReportReader::ReadResultFile(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return Status::Ok();
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto j = ParseLine(text);
  if (!j) {
    Json bare = Json::parse(text, nullptr, false);
    if (bare.is_number()) j = Json{{"value", bare}};
    const std::string word = Trimmed(text);  // print(float("nan")) writes "nan"
    if (ToNumber(Json(word)).ok()) j = Json{{"value", word}};
  }
  if (j && j->contains("constraints")) {
    TUNE_RETURN_IF_ERROR(OnConstraints(j->at("constraints"), file.string()));
  }
  if (j && IsReport(*j)) return OnReport(*j, file.string());
  if (!text.empty()) {
    spdlog::warn("Trial {}: result file {} holds no {{\"value\": ...}}", trial_.number(),
                 file.string());
  }
  return Status::Ok();
}

}  // namespace tune

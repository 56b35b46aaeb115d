// `tune enqueue --study NAME --params '{...}'`: adds a WAITING trial whose params are fixed
// (Optuna's enqueue_trial); the next worker runs it before sampling new ones.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>

#include "app.h"
#include "commands.h"
#include "tune/study.h"
#include "util/text.h"

namespace tune::app {
namespace {

std::string JsonType(const Json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

// The distribution each parameter had in the study's latest trial that has it.
Result<std::map<std::string, Distribution>> KnownDistributions(Storage& storage, int64_t study_id) {
  TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> trials, storage.GetAllTrials(study_id));
  std::map<std::string, Distribution> out;
  for (const FrozenTrial& t : trials) {
    for (const auto& [name, d] : t.distributions) out[name] = d;
  }
  return out;
}

// Values must fit the kind of parameter the study already knows; an unknown name is only
// warned about (a conditional parameter may not have been sampled yet).
Status CheckParams(const StoredStudy& opened, const std::string& study, const Json& params) {
  TUNE_ASSIGN_OR_RETURN(auto known, KnownDistributions(*opened.storage, opened.id));
  std::vector<std::string> names;
  for (const auto& [name, d] : known) names.push_back(name);
  for (const auto& [name, v] : params.items()) {
    auto it = known.find(name);
    if (it == known.end()) {
      if (!known.empty()) {
        spdlog::warn("--params: no trial of study '{}' has a parameter '{}'{}; known: {}", study,
                     name, DidYouMean(name, names), JoinNames(names));
      }
      continue;
    }
    Result<double> internal = ToInternal(it->second, v);
    if (!internal.ok()) {
      return InvalidArgumentError(
          fmt::format("--params: '{}': {}", name, internal.status().message()));
    }
    if (!Contains(it->second, *internal)) {
      spdlog::warn("--params: {} of '{}' is outside {}; the trial will use it anyway", v.dump(),
                   name, DistributionToJson(it->second));
    }
  }
  return Status::Ok();
}

}  // namespace

int Enqueue(const EnqueueArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto params = ParseJsonArgument("--params", args.params);
  if (!params.ok()) return Fail(params.status());
  if (!params->is_object()) {
    return Fail(InvalidArgumentError(fmt::format(
        "--params must be a JSON object of parameter values, like '{{\"x\": 1.5, \"opt\": "
        "\"adam\"}}'; got {}",
        JsonType(*params))));
  }
  for (const auto& [name, v] : params->items()) {
    if (v.is_structured()) {
      return Fail(InvalidArgumentError(
          fmt::format("--params: '{}' is {}; a parameter value is a number, string, boolean or "
                      "null",
                      name, JsonType(v))));
    }
  }
  auto opened = OpenStoredStudy(args.storage, args.study, StorageAccess::kExisting);
  if (!opened.ok()) return Fail(opened.status());
  if (Status st = CheckParams(*opened, args.study, *params); !st.ok()) return Fail(st);
  auto study = LoadStoredStudy(*opened, args.study);
  if (!study.ok()) return Fail(study.status());
  auto trial = (*study)->EnqueueTrial(*params);
  if (!trial.ok()) return Fail(trial.status());
  spdlog::info("Enqueued trial {} of study '{}' (WAITING) with params {}", trial->number,
               args.study, params->dump());
  if (*format == Format::kJson) {
    Json j = TrialToJson(*trial);
    j["params"] = *params;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"key", "value"}};
  rows.push_back({"number", std::to_string(trial->number)});
  rows.push_back({"state", TrialStateName(trial->state)});
  for (const auto& [name, v] : params->items()) {
    rows.push_back({"params_" + name, v.is_string() ? v.get<std::string>() : v.dump()});
  }
  std::cout << (*format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
  return kExitOk;
}

std::function<int()> DeclareEnqueue(CLI::App& command) {
  auto args = std::make_shared<EnqueueArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command
      .add_option("--params", args->params,
                  "The parameter values, a JSON object: '{\"x\": 1.5, \"opt\": \"adam\"}'")
      ->required();
  command.add_option("--storage", args->storage,
                     "Storage URL: sqlite:///PATH (default: sqlite:///tune.db); never created");
  command.add_option("--format", args->format, "table, json or csv");
  return [args] { return Enqueue(*args); };
}

}  // namespace tune::app

// The objective family's table (registry.h): one row per objective type a config can name.
#include <fmt/format.h>

#include "config/objective_config.h"
#include "memory/guard_planner.h"
#include "train/hyperparams.h"
#include "tune/memory_guard.h"
#include "util/templates.h"
#include "util/text.h"

namespace tune {
namespace internal {
namespace {

namespace fs = std::filesystem;

struct ObjectiveRow {
  const char* name;
  ObjectiveType type;
  std::vector<OptionKey> (*keys)();  // besides "type"
  // Parses the options (their keys already checked) into `out`.
  Status (*parse)(const JsonReader& r, const ObjectiveContext& context, ObjectiveConfig& out);
  Result<std::unique_ptr<Objective>> (*make)(const StudyConfig& config,
                                             std::unique_ptr<Trainer> trainer);
};

std::vector<OptionKey> FunctionKeys() {
  const FunctionOptions d;
  return {{"name", d.name}, {"dims", d.dims}, {"n_steps", d.n_steps}, {"oom_threshold", nullptr}};
}

Status ParseFunction(const JsonReader& r, const ObjectiveContext&, ObjectiveConfig& out) {
  FunctionOptions& f = out.function;
  TUNE_ASSIGN_OR_RETURN(f.name, r.String("name", f.name));
  auto names = FunctionNames();
  if (std::find(names.begin(), names.end(), f.name) == names.end()) {
    return r.ChildError("name", fmt::format("unknown function '{}'{}; valid: {}", f.name,
                                            DidYouMean(f.name, names), JoinNames(names)));
  }
  TUNE_ASSIGN_OR_RETURN(auto dims, r.OptInt("dims"));
  if (dims) {
    if (*dims < 1 || *dims > 1000) return r.ChildError("dims", "must be in 1..1000");
    f.dims = *dims;
  }
  TUNE_ASSIGN_OR_RETURN(auto n_steps, r.OptInt("n_steps"));
  if (n_steps) {
    if (*n_steps < 0) return r.ChildError("n_steps", "must be >= 0");
    f.n_steps = *n_steps;
  }
  TUNE_ASSIGN_OR_RETURN(f.oom_threshold, r.OptNumber("oom_threshold"));
  return Status::Ok();
}

Result<std::unique_ptr<Objective>> MakeFunction(const StudyConfig& config,
                                                std::unique_ptr<Trainer>) {
  return NewFunctionObjective(config.objective.function, config.space.catalog());
}

std::vector<OptionKey> CommandKeys() {
  const CommandOptions d;
  return {{"argv", nullptr},
          {"env", Json::object()},
          {"cwd", nullptr},
          {"timeout", nullptr},
          {"work_dir", nullptr},
          {"oom_patterns", Json::array()},
          {"stderr_tail_bytes", d.stderr_tail_bytes},
          {"memory", nullptr},
          {"devices", Json::array()}};
}

Status CheckTemplate(const JsonReader& r, const std::string& key, const std::string& text,
                     const std::vector<std::string>& valid) {
  auto names = TemplateNames(text);
  if (!names.ok()) return r.ChildError(key, names.status().message());
  for (const auto& n : *names) {
    if (std::find(valid.begin(), valid.end(), n) == valid.end()) {
      return r.ChildError(key, fmt::format("unknown placeholder '{{{}}}'{}; valid: {}", n,
                                           DidYouMean(n, valid), JoinNames(valid)));
    }
  }
  return Status::Ok();
}

// "argv" and "env": templates over the parameters and the special names.
Status ParseCommandTemplates(const JsonReader& r, const ObjectiveContext& context,
                             CommandOptions& c) {
  if (!r.Has("argv")) return r.Error("missing required key 'argv' (the program and its arguments)");
  TUNE_ASSIGN_OR_RETURN(c.argv, r.StringArray("argv"));
  if (c.argv.empty() || c.argv[0].empty()) {
    return r.ChildError("argv", "argv needs at least the program name");
  }
  std::vector<std::string> valid = context.param_names;
  for (const auto& s : CommandSpecialNames()) valid.push_back(s);
  for (size_t i = 0; i < c.argv.size(); ++i) {
    TUNE_RETURN_IF_ERROR(CheckTemplate(r, fmt::format("argv/{}", i), c.argv[i], valid));
  }
  if (!r.Has("env")) return Status::Ok();
  JsonReader env = r.Child("env");
  TUNE_RETURN_IF_ERROR(env.ExpectObject());
  for (const auto& [k, v] : env.json().items()) {
    if (!v.is_string())
      return env.ChildError(k, "expected a string, got " + JsonReader::Describe(v));
    TUNE_RETURN_IF_ERROR(CheckTemplate(env, k, v.get<std::string>(), valid));
    c.env[k] = v.get<std::string>();
  }
  return Status::Ok();
}

Status ParseCommandMemory(const JsonReader& parent, const ObjectiveContext& context,
                          ObjectiveConfig& out);

Status ParseCommand(const JsonReader& r, const ObjectiveContext& context, ObjectiveConfig& out) {
  CommandOptions& c = out.command;
  TUNE_RETURN_IF_ERROR(ParseCommandTemplates(r, context, c));
  auto absolute = [&](const std::string& p) {
    return fs::absolute(context.base_dir / p).lexically_normal().string();
  };
  TUNE_ASSIGN_OR_RETURN(auto cwd, r.OptString("cwd"));
  if (cwd) c.cwd = absolute(*cwd);
  // Absolute, so that trial paths stay valid for a program started in another `cwd`.
  TUNE_ASSIGN_OR_RETURN(auto work_dir, r.OptString("work_dir"));
  if (work_dir) c.work_dir = absolute(*work_dir);
  TUNE_ASSIGN_OR_RETURN(c.timeout_seconds, r.OptNumber("timeout"));
  if (c.timeout_seconds && *c.timeout_seconds <= 0) {
    return r.ChildError("timeout", "must be > 0 seconds");
  }
  TUNE_ASSIGN_OR_RETURN(c.oom_patterns, r.StringArray("oom_patterns"));
  TUNE_ASSIGN_OR_RETURN(auto tail, r.OptInt("stderr_tail_bytes"));
  if (tail) {
    if (*tail < 0) return r.ChildError("stderr_tail_bytes", "must be >= 0");
    c.stderr_tail_bytes = static_cast<size_t>(*tail);
  }
  if (r.Has("memory")) TUNE_RETURN_IF_ERROR(ParseCommandMemory(r, context, out));
  if (!r.Has("devices") || r.json().at("devices").is_null()) return Status::Ok();
  if (!out.command_memory) {
    return r.ChildError("devices",
                        "the command objective places trials on cards by their memory: add a "
                        "\"memory\" section (device_memory, model, ...)");
  }
  return ParseDevices(r, out.command_memory->guard.devices);
}

// "memory": the guard's options, the request's templates (hyperparameter names and
// num_labels; guard_planner.h) and the device model of the estimates.
Status ParseCommandMemory(const JsonReader& parent, const ObjectiveContext& context,
                          ObjectiveConfig& out) {
  JsonReader r = parent.Child("memory");
  std::vector<std::string> fields = HyperparamNamesAndAliases();
  fields.push_back("num_labels");
  std::vector<std::string> keys = fields;
  keys.push_back("device");
  keys.push_back("boundary_probes");
  CommandMemoryOptions m;
  TUNE_RETURN_IF_ERROR(ParseGuardOptions(r, m.guard, keys));
  if (!m.guard.device_memory) {
    return r.Error("missing required key 'device_memory' (the card's memory, e.g. \"24GiB\")");
  }
  TUNE_ASSIGN_OR_RETURN(m.device, r.String("device", m.device));
  if (m.device != "cpu" && m.device != "cuda") {
    return r.ChildError("device", fmt::format("unknown device model '{}'{}; valid: cuda, cpu",
                                              m.device, DidYouMean(m.device, {"cuda", "cpu"})));
  }
  TUNE_ASSIGN_OR_RETURN(m.boundary_probes, r.Bool("boundary_probes", m.boundary_probes));
  for (const auto& [key, value] : r.json().items()) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) continue;
    if (value.is_string()) {
      TUNE_RETURN_IF_ERROR(CheckTemplate(r, key, value.get<std::string>(), context.param_names));
    }
    m.request[key] = value;
  }
  if (!m.request.count("model")) {
    return r.Error("missing required key 'model' (a catalog name or \"{model}\")");
  }
  if (Status st = CheckOomRetry(m); !st.ok()) return r.ChildError("oom_retry", st.message());
  out.command_memory = std::move(m);
  return Status::Ok();
}

Result<std::unique_ptr<Objective>> MakeCommand(const StudyConfig& config,
                                               std::unique_ptr<Trainer>) {
  std::unique_ptr<MemoryPlanner> planner;
  if (config.objective.command_memory) {
    TUNE_ASSIGN_OR_RETURN(
        planner, NewGuardPlanner(*config.objective.command_memory, config.space.catalog()));
  }
  return NewCommandObjective(config.objective.command, std::move(planner));
}

Result<std::unique_ptr<Objective>> MakeTrain(const StudyConfig& config,
                                             std::unique_ptr<Trainer> trainer) {
  if (!trainer && config.objective.train.child_command.empty()) {
    return FailedPreconditionError(
        "the 'train' objective needs LibTorch, and this tune was built without it (CMake did "
        "not find Torch): install libtorch-dev (scripts/install-deps.sh) and rebuild");
  }
  return NewTrainObjective(config.objective.train, config.space.catalog(), std::move(trainer));
}

const std::vector<ObjectiveRow>& ObjectiveTable() {
  static const std::vector<ObjectiveRow> kRows = {
      {"function", ObjectiveType::kFunction, FunctionKeys, ParseFunction, MakeFunction},
      {"command", ObjectiveType::kCommand, CommandKeys, ParseCommand, MakeCommand},
      {"train", ObjectiveType::kTrain, TrainObjectiveKeys, ParseTrainObjective, MakeTrain},
  };
  return kRows;
}

const ObjectiveRow& RowOf(ObjectiveType type) {
  for (const ObjectiveRow& row : ObjectiveTable()) {
    if (row.type == type) return row;
  }
  return ObjectiveTable().front();  // unreachable: every type has a row
}

}  // namespace

Status ParseObjective(const JsonReader& r, const ObjectiveContext& context, ObjectiveConfig& out) {
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(std::string type, r.String("type", "function"));
  const ObjectiveRow* row = FindRow(ObjectiveTable(), type);
  if (row == nullptr) {
    return r.ChildError("type", UnknownNameMessage(ObjectiveTable(), "objective type", type));
  }
  out.type = row->type;
  std::vector<std::string> keys = {"type"};
  for (const OptionKey& k : row->keys()) keys.push_back(k.name);
  TUNE_RETURN_IF_ERROR(r.CheckKeys(keys));
  return row->parse(r, context, out);
}

}  // namespace internal

const char* ObjectiveTypeName(ObjectiveType type) { return internal::RowOf(type).name; }

std::vector<std::string> ObjectiveTypeNames() {
  return internal::RowNames(internal::ObjectiveTable());
}

std::vector<std::pair<std::string, Json>> ObjectiveOptionKeys(ObjectiveType type) {
  std::vector<std::pair<std::string, Json>> keys;
  for (const internal::OptionKey& k : internal::RowOf(type).keys()) {
    keys.emplace_back(k.name, k.default_value);
  }
  return keys;
}

Result<std::unique_ptr<Objective>> MakeObjective(const StudyConfig& config,
                                                 std::unique_ptr<Trainer> trainer) {
  return internal::RowOf(config.objective.type).make(config, std::move(trainer));
}

}  // namespace tune

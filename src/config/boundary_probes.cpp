// Boundary probes of a command study's measured models (boundary_probes.h).
#include "config/boundary_probes.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "measure/measured_fit.h"
#include "train/hyperparams.h"
#include "util/templates.h"

namespace tune {
namespace {

// The parameter a request field's template names when it is exactly "{param}" (a field written
// by an alias counts as its canonical name).
std::optional<std::string> MappedParam(const CommandMemoryOptions& memory,
                                       const std::string& field) {
  for (const auto& [key, spec] : memory.request) {
    if (CanonicalHyperparam(key) != field || !spec.is_string()) continue;
    const std::string& text = spec.get_ref<const std::string&>();
    auto names = TemplateNames(text);
    if (!names.ok() || names->size() != 1 || text != "{" + names->front() + "}") break;
    return names->front();
  }
  return std::nullopt;
}

// The models outside the catalog that memory.model names: its value, or the string choices of
// the parameter that "{param}" names (then also that parameter).
struct MeasuredModels {
  std::vector<std::string> models;
  std::optional<std::string> param;
};
MeasuredModels FindMeasuredModels(const StudyConfig& config, const CommandMemoryOptions& memory) {
  MeasuredModels out;
  auto it = memory.request.find("model");
  if (it == memory.request.end() || !it->second.is_string()) return out;
  const std::string& text = it->second.get_ref<const std::string&>();
  std::vector<Json> names;
  if (auto param = MappedParam(memory, "model")) {
    const ParamSpec* spec = config.space.FindParam(*param);
    const auto* choices =
        spec ? std::get_if<CategoricalDistribution>(&spec->distribution) : nullptr;
    if (choices == nullptr) return out;
    names = choices->choices;
    out.param = *param;
  } else if (auto plain = TemplateNames(text); plain.ok() && plain->empty()) {
    names.push_back(ExpandTemplate(text, {}).value_or(text));
  }
  for (const Json& name : names) {
    if (name.is_string() && !config.space.catalog().Find(name.get<std::string>()).ok()) {
      out.models.push_back(name.get<std::string>());
    }
  }
  return out;
}

// The declaration of `name` that a trial of `target`'s model activates (the first one when its
// condition reads another parameter).
const ParamSpec* SpecFor(const ConditionalSpace& space, const ProbeTarget& target,
                         const std::string& name) {
  Json values = Json::object();
  if (target.model_param) values[*target.model_param] = target.model;
  for (const ParamSpec* p : space.ActiveParams(values)) {
    if (p->name == name) return p;
  }
  return space.FindParam(name);
}

// True when the config's enqueue_trials fix the shape of trials of the target's model.
bool UserProbes(const StudyConfig& config, const ProbeTarget& target) {
  for (const StudyConfig::EnqueuedTrial& enqueued : config.enqueue_trials) {
    const Json& e = enqueued.params;
    if (target.model_param &&
        !(e.contains(*target.model_param) && ScalarEqual(e[*target.model_param], target.model))) {
      continue;
    }
    if (e.contains(target.batch_size_param) || e.contains(target.max_length_param)) return true;
  }
  return false;
}

// The target's shapes from the space; a reason when it cannot be probed.
Status SetShapes(const StudyConfig& config, ProbeTarget& target) {
  if (UserProbes(config, target)) {
    return FailedPreconditionError("enqueue_trials fix its shapes");
  }
  const ParamSpec* b = SpecFor(config.space, target, target.batch_size_param);
  const ParamSpec* t = SpecFor(config.space, target, target.max_length_param);
  if (b == nullptr || t == nullptr) {
    return FailedPreconditionError("its batch size and length are not both parameters");
  }
  TUNE_ASSIGN_OR_RETURN(target.shapes, BoundaryProbeShapes(b->distribution, t->distribution));
  return Status::Ok();
}

// A trial's value of `name`: its param, else (WAITING) its fixed one; null when it has neither.
Json TrialValue(const FrozenTrial& trial, const std::string& name) {
  if (trial.params.count(name)) return trial.param(name);
  auto fixed = trial.system_attrs.find("fixed_params");
  if (fixed != trial.system_attrs.end() && fixed->is_object() && fixed->contains(name)) {
    return fixed->at(name);
  }
  return nullptr;
}

bool HasShape(const std::vector<FrozenTrial>& trials, const ProbeTarget& target,
              const ProbeShape& shape) {
  return std::any_of(trials.begin(), trials.end(), [&](const FrozenTrial& t) {
    return (!target.model_param || ScalarEqual(TrialValue(t, *target.model_param), target.model)) &&
           ScalarEqual(TrialValue(t, target.batch_size_param), shape.batch_size) &&
           ScalarEqual(TrialValue(t, target.max_length_param), shape.max_length);
  });
}

// True when the study stored a fit of `model` at any precision (MeasuredFitKey; the precision
// has no '/', a model name may).
bool HasFit(const Json& study_system_attrs, const std::string& model) {
  if (!study_system_attrs.is_object()) return false;
  const std::string prefix = MeasuredFitKey(model, "");
  for (const auto& [key, value] : study_system_attrs.items()) {
    if (key.rfind(prefix, 0) == 0 && key.find('/', prefix.size()) == std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<ProbeTarget> BoundaryProbeTargets(const StudyConfig& config) {
  const std::optional<CommandMemoryOptions>& memory = config.objective.command_memory;
  if (config.objective.type != ObjectiveType::kCommand || !memory || !memory->boundary_probes) {
    return {};
  }
  const MeasuredModels measured = FindMeasuredModels(config, *memory);
  const std::optional<std::string> batch = MappedParam(*memory, "batch_size");
  const std::optional<std::string> length = MappedParam(*memory, "max_length");
  std::vector<ProbeTarget> targets;
  for (const std::string& model : measured.models) {
    if (!batch || !length) {
      spdlog::debug(
          "No boundary probes for measured model '{}': memory.batch_size and "
          "memory.max_length must each name a parameter (\"{{batch_size}}\")",
          model);
      continue;
    }
    ProbeTarget target{model, measured.param, *batch, *length, {}};
    if (Status s = SetShapes(config, target); !s.ok()) {
      spdlog::debug("No boundary probes for measured model '{}': {}", model, s.message());
      continue;
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

std::vector<BoundaryProbes> PlanBoundaryProbes(const std::vector<ProbeTarget>& targets,
                                               const std::vector<FrozenTrial>& trials,
                                               const Json& study_system_attrs) {
  std::vector<BoundaryProbes> out;
  for (const ProbeTarget& target : targets) {
    if (HasFit(study_system_attrs, target.model)) continue;
    BoundaryProbes probes{target.model, {}, {}};
    for (const ProbeShape& shape : target.shapes) {
      if (HasShape(trials, target, shape)) continue;
      Json params = {{target.batch_size_param, shape.batch_size},
                     {target.max_length_param, shape.max_length}};
      if (target.model_param) params[*target.model_param] = target.model;
      probes.shapes.push_back(shape);
      probes.params.push_back(std::move(params));
    }
    if (!probes.shapes.empty()) out.push_back(std::move(probes));
  }
  return out;
}

Status EnqueueBoundaryProbes(const StudyConfig& config, Study& study) {
  const std::vector<ProbeTarget> targets = BoundaryProbeTargets(config);
  if (targets.empty()) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(std::vector<FrozenTrial> trials, study.Trials());
  TUNE_ASSIGN_OR_RETURN(Json attrs, study.storage().GetStudySystemAttrs(study.study_id()));
  for (const BoundaryProbes& probes : PlanBoundaryProbes(targets, trials, attrs)) {
    for (const Json& params : probes.params) {
      TUNE_RETURN_IF_ERROR(study.EnqueueTrial(params).status());
    }
    spdlog::info("Enqueued {} boundary probe{} for measured model '{}': {}", probes.shapes.size(),
                 probes.shapes.size() == 1 ? "" : "s", probes.model,
                 ProbeShapesText(probes.shapes));
  }
  return Status::Ok();
}

}  // namespace tune

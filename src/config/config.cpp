// Study config files (config.h): the top-level keys. The search space is parsed by
// space_config.cpp, and each family by its own table: samplers/sampler_table.cpp,
// pruners/pruner_table.cpp, objectives/objective_table.cpp (+ train_config.cpp).
#include "config/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <sstream>

#include "checkpoints/pretrained.h"
#include "config/objective_config.h"
#include "util/json_file.h"
#include "util/json_reader.h"
#include "util/text.h"

namespace tune {

using internal::JsonReader;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTopKeys = {"description",
                                           "direction",
                                           "directions",
                                           "n_trials",
                                           "timeout",
                                           "storage",
                                           "sampler",
                                           "pruner",
                                           "models",
                                           "model_catalog",
                                           "search_space",
                                           "conditional",
                                           "objective",
                                           "enqueue_trials",
                                           "heartbeat_interval",
                                           "grace_period",
                                           "retry_failed",
                                           "retry_oom",
                                           "jobs",
                                           "max_jobs",
                                           "max_busy",
                                           "progress",
                                           "progress_interval",
                                           "tracking"};

// "direction": "maximize" or "directions": ["minimize", "maximize"].
Status ParseDirections(const JsonReader& r, StudyConfig& config) {
  if (r.Has("direction") && r.Has("directions")) {
    return r.Error("give either 'direction' or 'directions', not both");
  }
  if (r.Has("direction")) {
    TUNE_ASSIGN_OR_RETURN(std::string d, r.RequiredString("direction"));
    auto dir = ParseStudyDirection(d);
    if (!dir.ok() || *dir == StudyDirection::kNotSet) {
      return r.ChildError("direction", fmt::format("unknown direction '{}'{}; valid: minimize, "
                                                   "maximize",
                                                   d, DidYouMean(d, {"minimize", "maximize"})));
    }
    config.directions = {*dir};
  }
  if (!r.Has("directions")) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(auto ds, r.StringArray("directions"));
  if (ds.empty()) return r.ChildError("directions", "needs at least one direction");
  config.directions.clear();
  for (size_t i = 0; i < ds.size(); ++i) {
    auto dir = ParseStudyDirection(ds[i]);
    if (!dir.ok() || *dir == StudyDirection::kNotSet) {
      return r.ChildError(fmt::format("directions/{}", i),
                          fmt::format("unknown direction '{}'; valid: minimize, maximize", ds[i]));
    }
    config.directions.push_back(*dir);
  }
  return Status::Ok();
}

// "jobs": N or "auto", "max_jobs": N, "max_busy": a summed busy share (RunSettings).
Status ParseJobs(const JsonReader& r, StudyConfig& config) {
  if (r.Has("jobs")) {
    const Json& j = r.json().at("jobs");
    if (j.is_string() && j == "auto") {
      config.jobs = kJobsAuto;
    } else {
      auto jobs = ParseJobsValue(j.is_string() ? j.get<std::string>() : j.dump());
      if (!jobs.ok()) return r.ChildError("jobs", jobs.status().message());
      config.jobs = *jobs;
    }
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> max_jobs, r.OptInt("max_jobs"));
  if (max_jobs) {
    if (*max_jobs < 1 || *max_jobs > 256) return r.ChildError("max_jobs", "must be in 1..256");
    config.max_jobs = *max_jobs;
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<double> max_busy, r.OptNumber("max_busy"));
  if (max_busy) {
    if (!(*max_busy >= 0 && *max_busy <= 256))
      return r.ChildError("max_busy", "must be in [0, 256]");
    config.max_busy = *max_busy;
  }
  return Status::Ok();
}

// "progress": auto, bar, lines or off; "progress_interval": seconds > 0.
Status ParseProgress(const JsonReader& r, StudyConfig& config) {
  if (r.Has("progress")) {
    TUNE_ASSIGN_OR_RETURN(std::string name, r.RequiredString("progress"));
    auto mode = ParseProgressMode(name);
    if (!mode.ok()) return r.ChildError("progress", mode.status().message());
    config.progress = *mode;
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<double> interval, r.OptNumber("progress_interval"));
  if (interval) {
    if (*interval <= 0) return r.ChildError("progress_interval", "must be > 0 seconds");
    config.progress_interval = *interval;
  }
  return Status::Ok();
}

// "tracking": {"mlflow": {"uri": "http://...", "experiment": "...", "concurrency": N},
// "tensorboard": "DIR"}; the
// directory relative to the config's folder.
Status ParseTracking(const JsonReader& r, const fs::path& base_dir, StudyConfig& config) {
  if (!r.Has("tracking")) return Status::Ok();
  JsonReader t = r.Child("tracking");
  TUNE_RETURN_IF_ERROR(t.ExpectObject());
  TUNE_RETURN_IF_ERROR(t.CheckKeys({"mlflow", "tensorboard"}));
  if (t.Has("mlflow")) {
    JsonReader m = t.Child("mlflow");
    TUNE_RETURN_IF_ERROR(m.ExpectObject());
    TUNE_RETURN_IF_ERROR(m.CheckKeys({"uri", "experiment", "concurrency"}));
    MlflowOptions mlflow;
    TUNE_ASSIGN_OR_RETURN(mlflow.uri, m.RequiredString("uri"));
    if (Status st = CheckMlflowUri(mlflow.uri); !st.ok()) return m.ChildError("uri", st.message());
    TUNE_ASSIGN_OR_RETURN(mlflow.experiment, m.String("experiment", ""));
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> concurrency, m.OptInt("concurrency"));
    if (concurrency) {
      if (*concurrency < 1 || *concurrency > 64) {
        return m.ChildError("concurrency", fmt::format("must be 1 to 64 (got {})", *concurrency));
      }
      mlflow.concurrency = static_cast<int>(*concurrency);
    }
    if (Status st = CheckMlflowSupported(); !st.ok()) return m.ChildError("uri", st.message());
    config.tracking.mlflow = std::move(mlflow);
  }
  if (t.Has("tensorboard")) {
    TUNE_ASSIGN_OR_RETURN(std::string dir, t.RequiredString("tensorboard"));
    if (dir.empty()) return t.ChildError("tensorboard", "needs a directory");
    config.tracking.tensorboard = fs::absolute(base_dir / dir).lexically_normal().string();
  }
  return Status::Ok();
}

// n_trials, timeout, storage, heartbeat_interval, grace_period, retry_failed, retry_oom, jobs,
// max_jobs, max_busy.
Status ParseRunSettings(const JsonReader& r, StudyConfig& config) {
  TUNE_ASSIGN_OR_RETURN(config.n_trials, r.OptInt("n_trials"));
  if (config.n_trials && *config.n_trials < 0) return r.ChildError("n_trials", "must be >= 0");
  TUNE_ASSIGN_OR_RETURN(config.timeout_seconds, r.OptNumber("timeout"));
  if (config.timeout_seconds && *config.timeout_seconds <= 0) {
    return r.ChildError("timeout", "must be > 0 seconds");
  }
  TUNE_ASSIGN_OR_RETURN(config.storage, r.String("storage", kDefaultStorage));
  TUNE_ASSIGN_OR_RETURN(std::optional<double> interval, r.OptNumber("heartbeat_interval"));
  if (interval) {
    if (*interval < 0) return r.ChildError("heartbeat_interval", "must be >= 0 seconds (0: off)");
    config.heartbeat_interval = *interval;
  }
  TUNE_ASSIGN_OR_RETURN(config.grace_period, r.OptNumber("grace_period"));
  if (config.grace_period && *config.grace_period <= config.heartbeat_interval) {
    return r.ChildError("grace_period",
                        fmt::format("must be greater than heartbeat_interval ({}s), or running "
                                    "trials would be failed as stale between two heartbeats",
                                    config.heartbeat_interval));
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> retry_failed, r.OptInt("retry_failed"));
  if (retry_failed) {
    if (*retry_failed < 0) return r.ChildError("retry_failed", "must be >= 0");
    config.retry_failed = *retry_failed;
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> retry_oom, r.OptInt("retry_oom"));
  if (retry_oom) {
    if (*retry_oom < 0) return r.ChildError("retry_oom", "must be >= 0");
    config.retry_oom = *retry_oom;
  }
  TUNE_RETURN_IF_ERROR(ParseProgress(r, config));
  return ParseJobs(r, config);
}

// {"type": "tpe"} where {"name": "tpe"} is meant (the search space's parameters, and the
// objective, are chosen by "type"): an error that says so, rather than the chosen sampler's or
// pruner's list of options.
Status RefuseTypeForName(const JsonReader& r, const char* what) {
  if (!r.Has("type") || r.Has("name")) return Status::Ok();
  const Json& type = r.json()["type"];
  return r.ChildError("type",
                      fmt::format("unknown key 'type'; a {} is chosen by \"name\" (did you mean "
                                  "\"name\": {}?)",
                                  what, type.is_string() ? type.dump() : std::string("\"...\"")));
}

// "sampler" and "pruner": the name (and the sampler's seed), the rest is the row's options.
Status ParseSamplerAndPruner(const JsonReader& r, StudyConfig& config) {
  if (r.Has("sampler")) {
    JsonReader s = r.Child("sampler");
    TUNE_RETURN_IF_ERROR(s.ExpectObject());
    TUNE_RETURN_IF_ERROR(RefuseTypeForName(s, "sampler"));
    TUNE_ASSIGN_OR_RETURN(config.sampler.name, s.String("name", config.sampler.name));
    config.sampler.named = s.Has("name");
    TUNE_ASSIGN_OR_RETURN(auto seed, s.OptInt("seed"));
    if (seed) {
      if (*seed < 0) return s.ChildError("seed", "must be >= 0");
      config.sampler.seed = static_cast<uint64_t>(*seed);
    }
    config.sampler.options = s.json();
    config.sampler.options.erase("name");
    config.sampler.options.erase("seed");
  }
  config.sampler.source = config.source;
  TUNE_RETURN_IF_ERROR(MakeSampler(config.sampler).status());
  if (r.Has("pruner")) {
    JsonReader p = r.Child("pruner");
    TUNE_RETURN_IF_ERROR(p.ExpectObject());
    TUNE_RETURN_IF_ERROR(RefuseTypeForName(p, "pruner"));
    TUNE_ASSIGN_OR_RETURN(config.pruner.name, p.String("name", config.pruner.name));
    config.pruner.options = p.json();
    config.pruner.options.erase("name");
  }
  config.pruner.source = config.source;
  return MakePruner(config.pruner).status();
}

// "model_catalog": a catalog file merged into the built-in catalog.
Status MergeCatalogFile(const JsonReader& r, const fs::path& base_dir, ModelCatalog& catalog) {
  TUNE_ASSIGN_OR_RETURN(auto catalog_file, r.OptString("model_catalog"));
  if (!catalog_file) return Status::Ok();
  fs::path path = base_dir / *catalog_file;
  Result<Json> cat = ReadJsonFile(path.string());
  if (!cat.ok()) return r.ChildError("model_catalog", cat.status().message());
  JsonReader cr(*cat, path.string());
  TUNE_RETURN_IF_ERROR(cr.CheckKeys({"heavy_threshold_parameters", "models"}));
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> threshold, cr.OptInt("heavy_threshold_parameters"));
  if (threshold) {
    if (*threshold <= 0) return cr.ChildError("heavy_threshold_parameters", "must be > 0");
    catalog.SetHeavyThreshold(*threshold);
  }
  if (cat->contains("models")) {
    TUNE_RETURN_IF_ERROR(catalog.Merge((*cat)["models"], path.string(), "/models"));
  }
  return Status::Ok();
}

// The model catalog: built in, + a catalog file, + inline "models", + a train objective's
// pretrained checkpoint (its config.json, named as the key's value) or, with "init":
// "pretrained", every model name's checkpoint, before the search space and the objective look
// models up.
Result<ModelCatalog> BuildCatalog(const JsonReader& r, const fs::path& base_dir) {
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  TUNE_RETURN_IF_ERROR(MergeCatalogFile(r, base_dir, catalog));
  const Json& doc = r.json();
  if (r.Has("models")) TUNE_RETURN_IF_ERROR(catalog.Merge(doc["models"], r.file(), "/models"));
  if (doc.contains("objective") && doc["objective"].is_object() &&
      doc["objective"].value("type", Json()) == Json("train") &&
      doc["objective"].contains("pretrained")) {
    JsonReader obj = r.Child("objective");
    TUNE_ASSIGN_OR_RETURN(std::string dir, obj.RequiredString("pretrained"));
    auto checkpoint =
        ReadPretrainedCheckpoint(fs::absolute(base_dir / dir).lexically_normal().string(), dir);
    if (!checkpoint.ok()) return obj.ChildError("pretrained", checkpoint.status().message());
    catalog.Put(checkpoint->model);
  }
  TUNE_RETURN_IF_ERROR(internal::AddTorchScriptModels(r, base_dir, catalog));
  TUNE_RETURN_IF_ERROR(internal::ResolveCheckpoints(r, base_dir, catalog));
  return catalog;
}

// The search space, and the objective that reads its parameters. A function objective without
// a "search_space" brings its own (validated first: its errors beat "the search space has no
// parameters").
Status ParseSpaceAndObjective(const JsonReader& r, const fs::path& base_dir, ModelCatalog catalog,
                              const SpaceKeyOrder& key_order, StudyConfig& config) {
  const Json& doc = r.json();
  Json objective_json = doc.contains("objective") ? doc["objective"] : Json::object();
  Json space_json = doc.contains("search_space") ? doc["search_space"] : Json();
  // A "type" of another kind than a string is not "function" (value() would throw type_error):
  // the config is refused, for want of a search space or by ParseObjective, which names it.
  const auto type = objective_json.is_object() ? objective_json.find("type") : objective_json.end();
  const bool function_objective =
      objective_json.is_object() &&
      (type == objective_json.end() || (type->is_string() && *type == "function"));
  if (space_json.is_null() && function_objective) {
    TUNE_RETURN_IF_ERROR(internal::ParseObjective(
        JsonReader(objective_json, r.file(), "/objective"), {{}, base_dir}, config.objective));
    space_json = FunctionDefaultSpace(config.objective.function);
  }
  Json conditional_json = doc.contains("conditional") ? doc["conditional"] : Json();
  if (space_json.is_null() && conditional_json.is_null()) {
    return r.Error("missing 'search_space': declare the parameters to tune");
  }
  TUNE_ASSIGN_OR_RETURN(config.space, ParseSearchSpace(space_json, conditional_json,
                                                       std::move(catalog), r.file(), key_order));
  if (config.space.ParamNames().empty()) return r.Error("the search space has no parameters");
  if (!doc.contains("objective")) {
    return r.Error("missing 'objective' (\"function\", \"command\" or \"train\")");
  }
  JsonReader obj(objective_json, r.file(), "/objective");
  TUNE_RETURN_IF_ERROR(
      internal::ParseObjective(obj, {config.space.ParamNames(), base_dir}, config.objective));
  if (config.objective.type == ObjectiveType::kTrain) {
    TUNE_RETURN_IF_ERROR(internal::CheckTrainObjective(obj, config, config.objective.train));
  }
  if (config.objective.type == ObjectiveType::kFunction) {
    const std::string& name = config.objective.function.name;
    const size_t n = static_cast<size_t>(FunctionObjectives(name));
    if (n != config.directions.size()) {
      return obj.ChildError(
          "name", fmt::format("function '{}' returns {} value{}, but the study has {} "
                              "direction{}: set \"directions\" to {} entries (e.g. [{}])",
                              name, n, n == 1 ? "" : "s", config.directions.size(),
                              config.directions.size() == 1 ? "" : "s", n,
                              fmt::join(std::vector<std::string>(n, "\"minimize\""), ", ")));
    }
  }
  return Status::Ok();
}

// "enqueue_trials": params objects of the search space's parameters, or {"params": {...},
// "user_attrs": {...}} (Optuna's enqueue_trial(params, user_attrs)).
Status ParseEnqueuedTrials(const JsonReader& r, StudyConfig& config) {
  if (!r.Has("enqueue_trials")) return Status::Ok();
  JsonReader e = r.Child("enqueue_trials");
  if (!e.json().is_array()) return e.Error("expected an array of parameter objects");
  const auto names = config.space.ParamNames();
  for (size_t i = 0; i < e.json().size(); ++i) {
    JsonReader t = e.Index(i);
    TUNE_RETURN_IF_ERROR(t.ExpectObject());
    StudyConfig::EnqueuedTrial trial;
    // The long form, unless the space itself has a parameter named "params".
    const bool long_form = t.json().contains("params") &&
                           std::find(names.begin(), names.end(), "params") == names.end();
    const JsonReader params = long_form ? t.Child("params") : t;
    if (long_form) {
      TUNE_RETURN_IF_ERROR(t.CheckKeys({"params", "user_attrs"}));
      TUNE_RETURN_IF_ERROR(params.ExpectObject());
      if (t.Has("user_attrs")) {
        JsonReader attrs = t.Child("user_attrs");
        TUNE_RETURN_IF_ERROR(attrs.ExpectObject());
        trial.user_attrs = attrs.json();
      }
    }
    for (const auto& [k, v] : params.json().items()) {
      if (std::find(names.begin(), names.end(), k) == names.end()) {
        return params.ChildError(k,
                                 fmt::format("unknown parameter '{}'{}", k, DidYouMean(k, names)));
      }
    }
    trial.params = params.json();
    config.enqueue_trials.push_back(std::move(trial));
  }
  return Status::Ok();
}

// Records the key order of the search_space object at `pointer` of `doc` and of those nested in
// its "conditional" blocks.
void CollectKeyOrder(const nlohmann::ordered_json& doc, const std::string& pointer,
                     SpaceKeyOrder& out) {
  if (!doc.is_object()) return;
  if (auto s = doc.find("search_space"); s != doc.end() && s->is_object()) {
    std::vector<std::string>& keys = out[pointer + "/search_space"];
    for (const auto& [key, value] : s->items()) keys.push_back(key);
  }
  auto c = doc.find("conditional");
  if (c == doc.end() || !c->is_array()) return;
  for (size_t i = 0; i < c->size(); ++i) {
    CollectKeyOrder((*c)[i], fmt::format("{}/conditional/{}", pointer, i), out);
  }
}

}  // namespace

SpaceKeyOrder SearchSpaceKeyOrder(const std::string& text) {
  SpaceKeyOrder out;
  const auto doc = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) CollectKeyOrder(doc, "", out);
  return out;
}

Result<StudyConfig> ParseStudyConfig(const Json& doc, const std::string& source,
                                     const fs::path& base_dir, const SpaceKeyOrder& key_order) {
  JsonReader r(doc, source);
  TUNE_RETURN_IF_ERROR(r.CheckKeys(kTopKeys));
  StudyConfig config;
  config.source = source;
  TUNE_RETURN_IF_ERROR(ParseDirections(r, config));
  TUNE_RETURN_IF_ERROR(ParseRunSettings(r, config));
  TUNE_RETURN_IF_ERROR(ParseTracking(r, base_dir, config));
  TUNE_RETURN_IF_ERROR(ParseSamplerAndPruner(r, config));
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, BuildCatalog(r, base_dir));
  TUNE_RETURN_IF_ERROR(ParseSpaceAndObjective(r, base_dir, std::move(catalog), key_order, config));
  TUNE_RETURN_IF_ERROR(ParseEnqueuedTrials(r, config));
  return config;
}

Result<StudyConfig> LoadStudyConfig(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return NotFoundError(fmt::format("config file '{}' not found", path.string()));
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("cannot read config file '{}'", path.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseStudyConfigText(buf.str(), path);
}

Result<StudyConfig> ParseStudyConfigText(const std::string& text, const fs::path& path) {
  TUNE_ASSIGN_OR_RETURN(Json doc, ParseJsonText(text, path.string()));
  return ParseStudyConfig(doc, path.string(), path.parent_path(), SearchSpaceKeyOrder(text));
}

}  // namespace tune

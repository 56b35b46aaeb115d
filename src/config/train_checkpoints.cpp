// The train objective's checkpoints ("init", "models_dir", "hub_cache"; docs/config.md
// "Checkpoints"): with "init": "pretrained" every model name the config can choose is resolved,
// once, at load time, to a checkpoint directory whose config.json replaces the catalog's numbers
// for that name.
#include <fmt/format.h>

#include "checkpoints/pretrained.h"
#include "config/objective_config.h"
#include "train/hyperparams.h"
#include "util/text.h"

namespace tune::internal {
namespace {

namespace fs = std::filesystem;

// The string choices of a parameter declaration: ["a", "b"], {"choices": [...]}, or one name.
void CollectChoices(const Json& decl, std::vector<std::string>& out) {
  const Json* list = &decl;
  if (decl.is_object() && decl.contains("choices")) list = &decl["choices"];
  if (list->is_string()) out.push_back(list->get<std::string>());
  if (!list->is_array()) return;
  for (const Json& c : *list) {
    if (c.is_string()) out.push_back(c.get<std::string>());
  }
}

// Every model name the config may choose: the objective's "model" and each search-space
// parameter that sets the model (top level and conditional blocks).
std::vector<std::string> ModelNamesIn(const Json& doc) {
  std::vector<std::string> names;
  auto scan = [&](const Json& space) {
    if (!space.is_object()) return;
    for (const auto& [key, decl] : space.items()) {
      if (CanonicalHyperparam(key).value_or("") == "model") CollectChoices(decl, names);
    }
  };
  if (doc.contains("search_space")) scan(doc["search_space"]);
  if (doc.contains("conditional") && doc["conditional"].is_array()) {
    for (const Json& block : doc["conditional"]) {
      if (block.is_object() && block.contains("search_space")) scan(block["search_space"]);
    }
  }
  const Json& objective = doc["objective"];
  for (const auto& [key, value] : objective.items()) {
    if (CanonicalHyperparam(key).value_or("") == "model" && value.is_string()) {
      names.push_back(value.get<std::string>());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Result<CheckpointKeys> ReadKeys(const JsonReader& obj, const fs::path& base_dir) {
  CheckpointKeys keys;
  TUNE_ASSIGN_OR_RETURN(std::string init, obj.String("init", "pretrained"));
  const std::vector<std::string> valid = {"pretrained", "scratch"};
  if (init != "pretrained" && init != "scratch") {
    return obj.ChildError("init", fmt::format("unknown init '{}'{}; valid: {}", init,
                                              DidYouMean(init, valid), JoinNames(valid)));
  }
  keys.pretrained = init == "pretrained";
  TUNE_ASSIGN_OR_RETURN(auto models_dir, obj.OptString("models_dir"));
  if (models_dir)
    keys.models_dir = fs::absolute(base_dir / *models_dir).lexically_normal().string();
  TUNE_ASSIGN_OR_RETURN(auto hub_cache, obj.OptString("hub_cache"));
  keys.hub_cache = hub_cache ? fs::absolute(base_dir / *hub_cache).lexically_normal().string()
                             : HuggingFaceHubCache();
  return keys;
}

}  // namespace

Result<CheckpointKeys> ReadCheckpointKeys(const JsonReader& objective, const fs::path& base_dir) {
  return ReadKeys(objective, base_dir);
}

Result<std::string> ResolveModelCheckpoint(const std::string& name, const ModelCatalog& catalog,
                                           const CheckpointKeys& keys, const fs::path& base_dir) {
  CheckpointSearch search;
  search.base_dir = base_dir;
  search.models_dir = keys.models_dir;
  search.hub_cache = keys.hub_cache;
  if (auto spec = catalog.Find(name); spec.ok()) {
    const Json& extra = (*spec)->extra;
    if (extra.contains("checkpoint") && extra["checkpoint"].is_string()) {
      search.catalog_checkpoint = extra["checkpoint"].get<std::string>();
    }
  }
  return ResolveCheckpoint(name, search);
}

Status AddTorchScriptModels(const JsonReader& r, const fs::path& base_dir, ModelCatalog& catalog) {
  const Json& doc = r.json();
  if (!doc.contains("objective") || !doc["objective"].is_object() ||
      doc["objective"].value("type", Json()) != Json("train")) {
    return Status::Ok();
  }
  for (const std::string& name : ModelNamesIn(doc)) {
    if (catalog.Contains(name) || !LooksLikeTorchScriptFile(name)) continue;
    ModelSpec m;
    m.name = name;
    m.model_type = kTorchScriptModelType;
    m.torchscript = fs::absolute(base_dir / name).lexically_normal().string();
    std::error_code ec;
    if (!fs::is_regular_file(m.torchscript, ec)) {
      return NotFoundError(
          fmt::format("{}: model '{}': no TorchScript file {} (save one with "
                      "torch.jit.script(model).save(\"{}\"))",
                      r.file(), name, m.torchscript, fs::path(name).filename().string()));
    }
    catalog.Put(std::move(m));
  }
  return Status::Ok();
}

Status ResolveCheckpoints(const JsonReader& r, const fs::path& base_dir, ModelCatalog& catalog) {
  const Json& doc = r.json();
  if (!doc.contains("objective") || !doc["objective"].is_object() ||
      doc["objective"].value("type", Json()) != Json("train") ||
      doc["objective"].value("task", Json("text_classification")) != Json("text_classification") ||
      doc["objective"].contains("pretrained")) {
    return Status::Ok();
  }
  JsonReader obj = r.Child("objective");
  TUNE_ASSIGN_OR_RETURN(CheckpointKeys keys, ReadKeys(obj, base_dir));
  if (!keys.pretrained) return Status::Ok();
  std::vector<std::string> unresolved;
  for (const std::string& name : ModelNamesIn(doc)) {
    if (auto spec = catalog.Find(name); spec.ok() && IsTorchScriptModel(**spec)) continue;
    auto dir = ResolveModelCheckpoint(name, catalog, keys, base_dir);
    if (!dir.ok()) {
      unresolved.push_back(dir.status().message());
      continue;
    }
    auto checkpoint = ReadPretrainedCheckpoint(*dir, name);
    if (!checkpoint.ok()) {
      return obj.Error(
          fmt::format("model '{}' ({}): {}", name, *dir, checkpoint.status().message()));
    }
    ModelSpec m = checkpoint->model;
    if (auto old = catalog.Find(name); old.ok()) {  // keep the entry's own attributes
      for (const auto& [k, v] : (*old)->extra.items()) {
        if (!m.extra.contains(k)) m.extra[k] = v;
      }
    }
    catalog.Put(std::move(m));
  }
  if (unresolved.empty()) return Status::Ok();
  return NotFoundError(fmt::format(
      "{}: /objective: \"init\" is \"pretrained\" (the default), so every model must be a "
      "checkpoint, and {} {} not:\n  {}\nDownload the checkpoint{}, point \"models_dir\" or a "
      "catalog entry's \"checkpoint\" at it, or set \"init\": \"scratch\" to train from "
      "random weights",
      r.file(), unresolved.size(), unresolved.size() == 1 ? "is" : "are",
      JoinNames(unresolved, "\n  "), unresolved.size() == 1 ? "" : "s"));
}

}  // namespace tune::internal

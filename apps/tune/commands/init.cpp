// `tune init --from-cache`: a study config for fine-tuning the encoder checkpoints of the local
// Hugging Face cache (checkpoints/pretrained.h: FindHubCheckpoints), each marked heavy or base by
// the model catalog's rule, with configs/criteria.json's heavy/base spaces and a memory guard sized
// to the device. The config is loaded as `tune --config` loads it before it is written.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "app.h"
#include "checkpoints/pretrained.h"
#include "commands.h"
#include "config/config.h"
#include "measure/gpu_process_memory.h"
#include "memory/card_others.h"
#include "torch_loader.h"
#include "train/hyperparams.h"
#include "tune/model_catalog.h"
#include "util/device.h"
#include "util/json_file.h"
#include "util/text.h"

namespace tune::app {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;  // the written file keeps this file's key order

struct InitArgs {
  bool from_cache = false;
  std::optional<std::string> cache_dir;
  std::vector<std::string> models;  // globs on ORG/NAME
  std::string task = "classification";
  std::optional<std::string> data;
  std::string device_memory = "auto";
  std::optional<std::string> device;
  int64_t epochs = 3;
  std::optional<std::string> output;  // unset: stdout
  std::optional<std::string> study;
};

// One checkpoint as the study sees it.
struct FoundModel {
  std::string name;  // ORG/NAME
  int64_t num_parameters = 0;
  int64_t max_length = 0;  // the longest max_length it accepts
  bool heavy = false;
};

// The device's memory: --device-memory SIZE, or (auto) NVML's total memory of device 0.
struct DeviceChoice {
  std::string memory;  // as written to "device_memory"
  std::string device;  // "cpu", "cuda", "cuda:N"
};

Status CheckArgs(const InitArgs& args) {
  if (!args.from_cache) {
    return InvalidArgumentError(
        "tune init needs --from-cache (the only source for now): it writes a study of the "
        "checkpoints in the Hugging Face cache");
  }
  const std::vector<std::string> tasks = {"classification"};
  if (args.task != "classification") {
    return InvalidArgumentError(fmt::format("unknown --task '{}'{}; valid: {}", args.task,
                                            DidYouMean(args.task, tasks), JoinNames(tasks)));
  }
  std::error_code ec;
  if (!fs::is_regular_file(*args.data, ec)) {
    return NotFoundError(fmt::format("--data {}: no such file", *args.data));
  }
  if (args.device && !ParseDevice(*args.device).ok()) {
    return InvalidArgumentError(
        fmt::format("unknown --device '{}'; valid: cpu, cuda, cuda:N", *args.device));
  }
  return Status::Ok();
}

Result<DeviceChoice> ChooseDevice(const InitArgs& args) {
  std::string why;
  std::shared_ptr<GpuProcessMemory> nvml = GpuProcessMemory::Open(&why);
  const std::optional<int64_t> read = nvml ? nvml->TotalMemory(0) : std::nullopt;
  if (nvml && !read) why = "NVML reports no device 0";
  const bool total = read.has_value();
  const int64_t total_bytes = read.value_or(0);
  DeviceChoice out;
  out.device = args.device.value_or(total ? "cuda" : "cpu");
  if (!args.device && total && !TorchCudaUsable()) {
    spdlog::warn(
        "NVML sees a GPU, but this tune cannot train on it ({}): the config trains on "
        "the CPU; build tune against a CUDA LibTorch and write \"device\": \"cuda\"",
        TorchVersionText());
    out.device = "cpu";
  }
  if (args.device_memory != "auto") {
    if (auto bytes = ParseBytes(args.device_memory); !bytes.ok()) {
      return InvalidArgumentError("--device-memory: " + bytes.status().message());
    }
    out.memory = args.device_memory;
    return out;
  }
  if (!total) {
    return InvalidArgumentError(fmt::format(
        "--device-memory auto: cannot read the device's memory ({}); pass --device-memory SIZE, "
        "e.g. --device-memory 24GiB",
        why));
  }
  out.memory = fmt::format("{}MiB", total_bytes >> 20);
  spdlog::info("Device memory: {} (NVML, device 0)", FormatBytes(total_bytes));
  // device_memory stays the card's total: the guard takes what other processes hold off it at
  // each admission, as they come and go.
  std::string others_why;
  const std::optional<OthersReading> others = CardOthers("cuda:0", std::nullopt).Read(&others_why);
  if (!others) {
    spdlog::warn("Other processes on device 0: cannot tell ({})", others_why);
  } else if (others->others > 0) {
    const int64_t growth = OthersGrowthMargin(others->others, others->card_total);
    spdlog::info(
        "Other processes hold {} of device 0 now ({}): each trial's budget leaves them what they "
        "hold then, and {} more to grow (now {} of {})",
        FormatBytes(others->others), DescribeOthers(*others), FormatBytes(growth),
        FormatBytes(std::max<int64_t>(0, others->card_total - others->others - growth)),
        FormatBytes(others->card_total));
  } else {
    spdlog::info("Other processes hold no memory on device 0 now");
  }
  return out;
}

// The checkpoints of the cache, each skipped directory logged; NotFound when there are none.
Result<std::vector<FoundModel>> FindModels(const InitArgs& args, const std::string& cache) {
  const std::string looked = fmt::format(
      "no encoder checkpoints in {} (looked for models--ORG--NAME/snapshots/<rev>/config.json "
      "with weights and a tokenizer)",
      cache);
  auto scan = FindHubCheckpoints(cache, args.models);
  if (!scan.ok()) return NotFoundError(fmt::format("{}; {}", looked, scan.status().message()));
  for (const SkippedHubEntry& s : scan->skipped) spdlog::warn("Skipped {}: {}", s.path, s.reason);
  if (scan->found.empty()) {
    return NotFoundError(fmt::format(
        "{}; {}{}download one (huggingface-cli download ORG/NAME), or point --cache-dir, "
        "$HF_HUB_CACHE or $HF_HOME at another cache",
        looked,
        scan->skipped.empty() ? "" : fmt::format("{} skipped (see above); ", scan->skipped.size()),
        args.models.empty() ? "" : "none matched --models " + JoinNames(args.models) + "; "));
  }
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  std::vector<FoundModel> out;
  for (const PretrainedCheckpoint& c : scan->found) {
    catalog.Put(c.model);  // the catalog's heavy rule, as the config's load applies it
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(c.model.name));
    out.push_back({m->name, m->num_parameters, MaxSequenceLength(*m), m->heavy});
    spdlog::info("Found {} ({}, {} parameters: {}) in {}", m->name, m->model_type,
                 m->num_parameters, m->heavy ? "heavy" : "base", c.dir);
  }
  return out;
}

// max_length from 128 up to `cap` in steps of 32, within every model's positions (one value for
// models shorter than 128 positions). An int in both blocks: a parameter keeps its type.
OrderedJson MaxLengthSpace(const std::vector<FoundModel>& models, int64_t cap) {
  int64_t longest = cap;
  for (const FoundModel& m : models) longest = std::min(longest, m.max_length);
  const int64_t low = std::min<int64_t>(128, longest);
  const int64_t high = low + (longest - low) / 32 * 32;
  if (low == high) return {{"type", "int"}, {"low", low}, {"high", high}};
  return {{"type", "int"}, {"low", low}, {"high", high}, {"step", 32}};
}

// configs/criteria.json's heavy and base blocks, for the kinds of model found.
OrderedJson ConditionalBlocks(const std::vector<FoundModel>& models) {
  OrderedJson blocks = OrderedJson::array();
  for (const bool heavy : {true, false}) {
    std::vector<FoundModel> group;
    for (const FoundModel& m : models) {
      if (m.heavy == heavy) group.push_back(m);
    }
    if (group.empty()) continue;
    OrderedJson space = OrderedJson::object();
    space["batch_size"] = {
        {"type", "categorical"},
        {"choices", heavy ? OrderedJson{8, 12, 16} : OrderedJson{8, 12, 16, 24, 32, 48, 64}}};
    space["grad_accum"] = {
        {"type", "categorical"},
        {"choices", heavy ? OrderedJson{1, 2, 3, 4} : OrderedJson{1, 2, 3, 4, 6, 8}}};
    space["max_length"] = MaxLengthSpace(group, heavy ? 384 : 512);
    blocks.push_back({{"when", {{"model.heavy", heavy}}}, {"search_space", space}});
  }
  return blocks;
}

OrderedJson SearchSpace(const std::vector<FoundModel>& models) {
  OrderedJson names = OrderedJson::array();
  for (const FoundModel& m : models) names.push_back(m.name);
  OrderedJson space = OrderedJson::object();
  space["model"] = {{"type", "model"}, {"choices", names}};
  space["learning_rate"] = {{"type", "float"}, {"low", 5e-6}, {"high", 1e-4}, {"log", true}};
  space["weight_decay"] = {{"type", "float"}, {"low", 0.0}, {"high", 0.1}};
  space["warmup_ratio"] = {{"type", "float"}, {"low", 0.0}, {"high", 0.2}};
  space["dropout"] = {{"type", "float"}, {"low", 0.0}, {"high", 0.3}};
  space["classifier_layers"] = {{"type", "int"}, {"low", 0}, {"high", 3}};
  return space;
}

// A path as the config writes it: relative to the config's directory when it is written to a
// file, absolute on stdout.
std::string ConfigPath(const std::string& path, const InitArgs& args, const fs::path& base_dir) {
  const fs::path abs = fs::absolute(path).lexically_normal();
  if (!args.output) return abs.string();
  return abs.lexically_relative(base_dir).string();
}

OrderedJson Objective(const InitArgs& args, const std::string& cache, const DeviceChoice& device,
                      const fs::path& base) {
  OrderedJson o = OrderedJson::object();
  o["type"] = "train";
  o["task"] = "text_classification";
  o["init"] = "pretrained";
  if (args.cache_dir) o["hub_cache"] = cache;
  o["data"] = {{"train", ConfigPath(*args.data, args, base)}};
  o["metric"] = "macro_f1";
  o["device"] = device.device;
  o["epochs"] = args.epochs;
  o["seed"] = 0;
  o["memory"] = {{"device_memory", device.memory},
                 {"margin", 0.05},
                 {"admission", true},
                 {"levers", {"grad_accum", "gradient_checkpointing"}},
                 {"oom_retry", 2}};
  return o;
}

OrderedJson StudyDocument(const InitArgs& args, const std::string& study, const std::string& cache,
                          const std::vector<FoundModel>& models, const DeviceChoice& device,
                          const fs::path& base) {
  OrderedJson doc = OrderedJson::object();
  doc["description"] = fmt::format(
      "Written by tune init --from-cache: {} encoder checkpoint{} found in {}, fine-tuned from "
      "their weights, heavy/base spaces by parameter count (configs/criteria.json). `tune "
      "--study {} --config {}` runs or resumes it.",
      models.size(), models.size() == 1 ? "" : "s", cache, study,
      args.output ? fs::path(*args.output).filename().string() : "study.json");
  doc["direction"] = "maximize";
  doc["storage"] = fmt::format("sqlite:///{}.db", study);
  doc["sampler"] = {{"name", "tpe"}, {"n_startup_trials", 10}};
  doc["pruner"] = {{"name", "median"}, {"n_startup_trials", 5}, {"n_warmup_steps", 1}};
  doc["search_space"] = SearchSpace(models);
  doc["conditional"] = ConditionalBlocks(models);
  doc["objective"] = Objective(args, cache, device, base);
  return doc;
}

// `v` on one line, with a space after each ':' and ',' (as configs/criteria.json is written).
std::string Inline(const OrderedJson& v) {
  if (!v.is_structured()) return v.dump();
  std::string out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!out.empty()) out += ", ";
    if (v.is_object()) out += OrderedJson(it.key()).dump() + ": ";
    out += Inline(*it);
  }
  return v.is_object() ? "{" + out + "}" : "[" + out + "]";
}

// Pretty-printed, but each value that fits on its line (a distribution, a list of choices) kept
// on it.
std::string Pretty(const OrderedJson& v, size_t indent = 0) {
  const std::string one = Inline(v);
  if (!v.is_structured() || indent + one.size() <= 96 || v.empty()) return one;
  const std::string pad(indent + 2, ' ');
  std::string out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += out.empty() ? "\n" : ",\n";
    out +=
        pad + (v.is_object() ? OrderedJson(it.key()).dump() + ": " : "") + Pretty(*it, indent + 2);
  }
  return (v.is_object() ? "{" : "[") + out + "\n" + std::string(indent, ' ') +
         (v.is_object() ? "}" : "]");
}

// The text loaded as `tune --config` loads a file; a failure is tune init's bug (exit 1).
Status Validate(const std::string& text, const std::string& source, const fs::path& base) {
  auto loaded = [&]() -> Result<StudyConfig> {
    TUNE_ASSIGN_OR_RETURN(Json doc, ParseJsonText(text, source));
    return ParseStudyConfig(doc, source, base, SearchSpaceKeyOrder(text));
  }();
  if (loaded.ok()) return Status::Ok();
  return InternalError("the study config tune init wrote does not load, so it was not written: " +
                       loaded.status().message());
}

Status WriteOutput(const std::string& text, const InitArgs& args) {
  if (!args.output) {
    std::cout << text << "\n";
    return Status::Ok();
  }
  std::ofstream out(*args.output, std::ios::trunc);
  if (!(out << text << "\n") || !out.flush()) {
    return InvalidArgumentError(fmt::format("--output {}: cannot write", *args.output));
  }
  spdlog::info("Wrote {}", *args.output);
  return Status::Ok();
}

Status Init(const InitArgs& args) {
  TUNE_RETURN_IF_ERROR(CheckArgs(args));
  fs::path cache_path = fs::absolute(args.cache_dir.value_or(HuggingFaceHubCache()));
  cache_path = cache_path.lexically_normal();
  if (!cache_path.has_filename()) cache_path = cache_path.parent_path();  // "hub/"
  const std::string cache = cache_path.string();
  TUNE_ASSIGN_OR_RETURN(std::vector<FoundModel> models, FindModels(args, cache));
  TUNE_ASSIGN_OR_RETURN(DeviceChoice device, ChooseDevice(args));
  const fs::path base = args.output ? fs::absolute(*args.output).lexically_normal().parent_path()
                                    : fs::current_path();
  const std::string study =
      args.study.value_or(args.output ? fs::path(*args.output).stem().string() : "study");
  const std::string text = Pretty(StudyDocument(args, study, cache, models, device, base));
  const std::string source = args.output.value_or("<tune init output>");
  TUNE_RETURN_IF_ERROR(Validate(text, (base / fs::path(source).filename()).string(), base));
  return WriteOutput(text, args);
}

}  // namespace

std::function<int()> DeclareInit(CLI::App& command) {
  auto args = std::make_shared<InitArgs>();
  command.add_flag("--from-cache", args->from_cache,
                   "Fine-tune the encoder checkpoints of the Hugging Face cache (required)");
  command.add_option("--cache-dir", args->cache_dir,
                     "The cache (default: $HF_HUB_CACHE, else $HF_HOME/hub, else "
                     "~/.cache/huggingface/hub); written as the objective's \"hub_cache\"");
  command
      .add_option("--models", args->models,
                  "Only the checkpoints whose ORG/NAME matches one of these globs")
      ->expected(1, -1);
  command.add_option("--task", args->task, "classification (the only task for now)");
  command.add_option("--data", args->data, "The training data (JSONL, CSV or TSV)")->required();
  command.add_option("--device-memory", args->device_memory,
                     "auto (NVML's memory of device 0; the default) or SIZE, e.g. 24GiB");
  command.add_option(
      "--device", args->device,
      "cpu, cuda or cuda:N (default: cuda when NVML sees a GPU that this tune's LibTorch can "
      "use, else cpu)");
  command.add_option("--epochs", args->epochs, "Epochs per trial (3)")->check(CLI::PositiveNumber);
  command.add_option("--output", args->output, "Write to FILE instead of stdout");
  command.add_option("--study", args->study,
                     "The study name in the description and storage (default: --output's stem)");
  return [args] {
    const Status st = Init(*args);
    return st.ok() ? static_cast<int>(kExitOk) : Fail(st);
  };
}

}  // namespace tune::app

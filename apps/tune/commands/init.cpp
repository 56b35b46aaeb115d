// `tune init --from-cache`: a study config for fine-tuning the encoder checkpoints of the local
// Hugging Face cache (checkpoints/pretrained.h: FindHubCheckpoints), each marked heavy or base by
// the model catalog's rule, with configs/criteria.json's heavy/base spaces and a memory guard sized
// to the device. The config is loaded as `tune --config` loads it before it is written.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "app.h"
#include "checkpoints/pretrained.h"
#include "commands.h"
#include "config/config.h"
#include "measure/gpu_process_memory.h"
#include "memory/card_others.h"
#include "torch_loader.h"
#include "train/hyperparams.h"
#include "train/text_data.h"
#include "train/train_metric.h"
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
  // The data's columns and problem type; unset: inferred from the data (InferColumns).
  std::optional<std::string> text_column, text_pair_column, label_column, problem_type;
};

// What the study reads from the data: its columns and what the label column holds.
struct DataColumns {
  std::string text;
  std::optional<std::string> pair;
  std::string label;
  ProblemType problem_type = ProblemType::kSingleLabel;
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

// What one column holds over the rows read.
struct ColumnStats {
  int64_t strings = 0, arrays = 0, numbers = 0, fractions = 0, rows = 0;
  double mean_length = 0;  // of its strings, in bytes
  std::set<std::string> distinct;
};

ColumnStats StatsOf(const DataTable& table, const std::string& column) {
  ColumnStats st;
  double length = 0;
  for (const DataRow& row : table.rows) {
    const auto it = row.fields.find(column);
    if (it == row.fields.end()) continue;
    ++st.rows;
    if (st.distinct.size() <= 1000) st.distinct.insert(it->dump());
    const std::optional<double> x = FieldNumber(*it);
    if (it->is_array()) {
      ++st.arrays;
    } else if (x && std::isfinite(*x)) {
      ++st.numbers;
      st.fractions += *x != std::floor(*x);
    } else if (it->is_string()) {
      ++st.strings;
      length += static_cast<double>(it->get_ref<const std::string&>().size());
    }
  }
  st.mean_length = st.strings > 0 ? length / static_cast<double>(st.strings) : 0.0;
  return st;
}

// A column named on the command line must be in the data.
Status CheckColumn(const DataTable& table, const std::string& flag, const std::string& column) {
  if (std::find(table.columns.begin(), table.columns.end(), column) != table.columns.end()) {
    return Status::Ok();
  }
  return InvalidArgumentError(fmt::format("{} '{}': {} has no such column{}; columns: {}", flag,
                                          column, table.path, DidYouMean(column, table.columns),
                                          JoinNames(table.columns)));
}

// The label column (--label-column, else the first of the usual names, else the last column
// that is not free text), what it holds (arrays:
// multi-label; numbers with fractions or more than 20 values: regression; else single-label),
// and the text columns (--text-column, else "text", else the string columns: one is the text,
// the two longest on average are a sentence pair, in the data's column order). Logged, with the
// flags that override each choice.
Result<DataColumns> InferColumns(const InitArgs& args) {
  TUNE_ASSIGN_OR_RETURN(DataTable table, ReadDataTable(*args.data));
  std::map<std::string, ColumnStats> stats;  // each column read once
  for (const std::string& c : table.columns) stats.emplace(c, StatsOf(table, c));
  const auto has = [&](const std::string& c) { return stats.count(c) > 0; };
  DataColumns out;
  if (args.label_column) {
    TUNE_RETURN_IF_ERROR(CheckColumn(table, "--label-column", *args.label_column));
    out.label = *args.label_column;
  } else {
    for (const char* name :
         {"label", "labels", "tags", "target", "score", "class", "category", "y"}) {
      if (has(name)) {
        out.label = name;
        break;
      }
    }
    // Else the last column that is not free text: lists, numbers, or few distinct values.
    for (auto c = table.columns.rbegin(); out.label.empty() && c != table.columns.rend(); ++c) {
      const ColumnStats& st = stats.at(*c);
      if (st.rows > 0 &&
          (st.arrays > 0 || st.numbers == st.rows ||
           static_cast<int64_t>(st.distinct.size()) <= std::max<int64_t>(2, st.rows / 2))) {
        out.label = *c;
      }
    }
    if (out.label.empty()) {
      return InvalidArgumentError(fmt::format(
          "{}: cannot tell which column is the label (none is named label, labels, tags, target, "
          "score, class, category or y, and every column holds free text); columns: {}; pass "
          "--label-column",
          table.path, JoinNames(table.columns)));
    }
  }
  const ColumnStats& label = stats.at(out.label);
  if (args.problem_type) {
    TUNE_ASSIGN_OR_RETURN(out.problem_type, ParseProblemType(*args.problem_type));
  } else if (label.arrays > 0) {
    out.problem_type = ProblemType::kMultiLabel;
  } else if (label.numbers == label.rows && label.rows > 0 &&
             (label.fractions > 0 || label.distinct.size() > 20)) {
    out.problem_type = ProblemType::kRegression;
  }
  std::vector<std::string> texts;  // string columns but the label, longest first
  for (const std::string& c : table.columns) {
    if (c == out.label) continue;
    const ColumnStats& st = stats.at(c);
    if (st.strings > 0 && st.strings >= st.rows * 9 / 10) texts.push_back(c);
  }
  std::stable_sort(texts.begin(), texts.end(), [&](const std::string& a, const std::string& b) {
    return stats.at(a).mean_length > stats.at(b).mean_length;
  });
  if (args.text_column) {
    TUNE_RETURN_IF_ERROR(CheckColumn(table, "--text-column", *args.text_column));
    out.text = *args.text_column;
  } else if (has("text")) {
    out.text = "text";
  } else if (texts.size() >= 2 && !args.text_pair_column) {
    // A pair: the two longest text columns, in the data's order.
    const auto first = std::find(table.columns.begin(), table.columns.end(), texts[0]);
    const auto second = std::find(table.columns.begin(), table.columns.end(), texts[1]);
    out.text = first < second ? texts[0] : texts[1];
    out.pair = first < second ? texts[1] : texts[0];
  } else if (!texts.empty()) {
    out.text = texts[0];
  } else {
    return InvalidArgumentError(
        fmt::format("{}: no column holds text (columns: {}); pass --text-column", table.path,
                    JoinNames(table.columns)));
  }
  if (args.text_pair_column) {
    TUNE_RETURN_IF_ERROR(CheckColumn(table, "--text-pair-column", *args.text_pair_column));
    out.pair = *args.text_pair_column;
  }
  spdlog::info(
      "Data {}: {} rows; text column '{}'{}, label column '{}', problem_type {} ({}; "
      "--text-column, --text-pair-column, --label-column and --problem-type override)",
      table.path, table.rows.size(), out.text,
      out.pair ? fmt::format(", pairs with '{}'", *out.pair) : std::string(), out.label,
      ProblemTypeName(out.problem_type),
      args.problem_type                              ? "as given"
      : out.problem_type == ProblemType::kMultiLabel ? "its values are lists"
      : out.problem_type == ProblemType::kRegression ? "its values are numbers"
                                                     : "one label per row");
  return out;
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
                      const DataColumns& columns, const fs::path& base) {
  OrderedJson o = OrderedJson::object();
  o["type"] = "train";
  o["task"] = "text_classification";
  o["init"] = "pretrained";
  if (args.cache_dir) o["hub_cache"] = cache;
  o["data"] = {{"train", ConfigPath(*args.data, args, base)}, {"text_column", columns.text}};
  if (columns.pair) o["data"]["text_pair_column"] = *columns.pair;
  o["data"]["label_column"] = columns.label;
  o["data"]["problem_type"] = ProblemTypeName(columns.problem_type);
  o["metric"] = TrainMetricName(DefaultMetric(columns.problem_type));
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
                          const DataColumns& columns, const fs::path& base) {
  OrderedJson doc = OrderedJson::object();
  doc["description"] = fmt::format(
      "Written by tune init --from-cache: {} encoder checkpoint{} found in {}, fine-tuned from "
      "their weights, heavy/base spaces by parameter count (configs/criteria.json). `tune "
      "--study {} --config {}` runs or resumes it.",
      models.size(), models.size() == 1 ? "" : "s", cache, study,
      args.output ? fs::path(*args.output).filename().string() : "study.json");
  doc["direction"] =
      TrainMetricDirection(DefaultMetric(columns.problem_type)) == StudyDirection::kMaximize
          ? "maximize"
          : "minimize";
  doc["storage"] = fmt::format("sqlite:///{}.db", study);
  doc["sampler"] = {{"name", "tpe"}, {"n_startup_trials", 10}};
  doc["pruner"] = {{"name", "median"}, {"n_startup_trials", 5}, {"n_warmup_steps", 1}};
  doc["search_space"] = SearchSpace(models);
  doc["conditional"] = ConditionalBlocks(models);
  doc["objective"] = Objective(args, cache, device, columns, base);
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
  TUNE_ASSIGN_OR_RETURN(DataColumns columns, InferColumns(args));
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
  const std::string text = Pretty(StudyDocument(args, study, cache, models, device, columns, base));
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
  command.add_option("--text-column", args->text_column,
                     "The text column (default: 'text', else inferred from the data)");
  command.add_option("--text-pair-column", args->text_pair_column,
                     "The second text of sentence pairs (default: inferred: the two longest text "
                     "columns of a file without 'text')");
  command.add_option("--label-column", args->label_column,
                     "The label column (default: the first of label, labels, tags, target, "
                     "score, class, category, y; else the last column that is not free text)");
  command.add_option("--problem-type", args->problem_type,
                     "single_label_classification, multi_label_classification or regression "
                     "(default: inferred from the label column: lists are multi-label, numbers "
                     "with fractions or many values regression)");
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

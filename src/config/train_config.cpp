// The train objective's options in a study config ("objective": {"type": "train", ...};
// docs/config.md): the data, tokenizer, metric, device, pretrained checkpoint, memory guard and
// the hyperparameter defaults (every other key must be a training parameter, hyperparams.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "checkpoints/pretrained.h"
#include "config/objective_config.h"
#include "train/hyperparams.h"
#include "util/device.h"
#include "util/text.h"

namespace tune::internal {
namespace {

namespace fs = std::filesystem;

// The train objective's own keys (the others are hyperparameters), with their defaults.
std::vector<OptionKey> OwnKeys() {
  const TrainObjectiveOptions d;
  return {{"task", "text_classification"}, {"data", nullptr},
          {"tokenizer", nullptr},          {"metric", TrainMetricName(d.metric)},
          {"positive_label", nullptr},     {"objectives", nullptr},
          {"constraints", nullptr},        {"device", d.device},
          {"threads", d.threads},          {"ignore_params", Json::array()},
          {"pretrained", nullptr},         {"init", "pretrained"},
          {"models_dir", nullptr},         {"hub_cache", nullptr},
          {"save_best", nullptr},          {"memory", nullptr},
          {"devices", Json::array()}};
}

// Paths in the config are relative to its directory.
struct PathResolver {
  fs::path base_dir;
  std::string operator()(const std::string& p) const {
    return fs::absolute(base_dir / p).lexically_normal().string();
  }
};

Status ParseTask(const JsonReader& r, TrainObjectiveOptions& out) {
  TUNE_ASSIGN_OR_RETURN(std::string task, r.String("task", "text_classification"));
  const std::vector<std::string> tasks = {"text_classification", "tabular_classification"};
  if (task == "tabular_classification") {
    out.task = TrainTask::kTabularClassification;
    if (r.Has("tokenizer")) return r.ChildError("tokenizer", "applies to text_classification only");
    if (r.Has("model")) {
      return r.ChildError("model",
                          "tabular_classification trains an MLP (mlp_layers, mlp_hidden), "
                          "not a catalog model");
    }
  } else if (task != "text_classification") {
    return r.ChildError("task", fmt::format("unknown task '{}'{}; valid: {}", task,
                                            DidYouMean(task, tasks), JoinNames(tasks)));
  }
  return Status::Ok();
}

// "data": the second text of sentence pairs and how a pair is cut.
Status ParseTextPair(const JsonReader& d, TextDataOptions& data) {
  TUNE_ASSIGN_OR_RETURN(data.text_pair_column, d.OptString("text_pair_column"));
  if (data.text_pair_column && *data.text_pair_column == data.text_column) {
    return d.ChildError(
        "text_pair_column",
        fmt::format("is the text column '{}' too; a pair needs two columns", data.text_column));
  }
  TUNE_ASSIGN_OR_RETURN(auto truncation, d.OptString("truncation"));
  if (!truncation) return Status::Ok();
  if (!data.text_pair_column) {
    return d.ChildError("truncation",
                        "applies to sentence pairs: set \"text_pair_column\" (single texts keep "
                        "their first max_length tokens)");
  }
  auto parsed = ParseTruncation(*truncation);
  if (!parsed.ok()) return d.ChildError("truncation", parsed.status().message());
  data.truncation = *parsed;
  return Status::Ok();
}

// "data": the files, their format and columns.
Status ParseDataFiles(const JsonReader& d, bool tabular, const PathResolver& path,
                      TextDataOptions& data) {
  if (tabular) {
    TUNE_RETURN_IF_ERROR(d.CheckKeys({"train", "validation", "format", "label_column", "labels",
                                      "validation_fraction", "split_seed", "feature_columns"}));
  } else {
    TUNE_RETURN_IF_ERROR(
        d.CheckKeys({"train", "validation", "format", "text_column", "text_pair_column",
                     "truncation", "label_column", "labels", "problem_type", "label_separator",
                     "class_weights", "validation_fraction", "split_seed", "max_text_bytes"}));
  }
  TUNE_ASSIGN_OR_RETURN(std::string train, d.RequiredString("train"));
  data.train = path(train);
  TUNE_ASSIGN_OR_RETURN(auto validation, d.OptString("validation"));
  if (validation) data.validation = path(*validation);
  TUNE_ASSIGN_OR_RETURN(data.format, d.String("format", "auto"));
  if (Status st = DataFormatFor(data.train, data.format).status(); !st.ok()) {
    return d.ChildError(d.Has("format") ? "format" : "train", st.message());
  }
  if (data.validation) {
    if (Status st = DataFormatFor(*data.validation, data.format).status(); !st.ok()) {
      return d.ChildError("validation", st.message());
    }
  }
  TUNE_ASSIGN_OR_RETURN(data.text_column, d.String("text_column", "text"));
  TUNE_RETURN_IF_ERROR(ParseTextPair(d, data));
  TUNE_ASSIGN_OR_RETURN(data.label_column, d.String("label_column", "label"));
  TUNE_ASSIGN_OR_RETURN(data.labels, d.StringArray("labels"));
  return Status::Ok();
}

// "data": what the label column holds and the loss's class weights.
Status ParseTargets(const JsonReader& d, TextDataOptions& data) {
  TUNE_ASSIGN_OR_RETURN(auto type, d.OptString("problem_type"));
  if (type) {
    auto parsed = ParseProblemType(*type);
    if (!parsed.ok()) return d.ChildError("problem_type", parsed.status().message());
    data.problem_type = *parsed;
  }
  const bool multi = data.problem_type == ProblemType::kMultiLabel;
  TUNE_ASSIGN_OR_RETURN(auto separator, d.OptString("label_separator"));
  if (separator) {
    if (!multi) {
      return d.ChildError("label_separator",
                          "applies to \"problem_type\": \"multi_label_classification\"");
    }
    if (separator->empty()) return d.ChildError("label_separator", "must not be empty");
    data.label_separator = *separator;
  }
  if (data.problem_type == ProblemType::kRegression && d.Has("labels")) {
    return d.ChildError("labels",
                        "does not apply to problem_type regression (targets are numbers)");
  }
  if (!d.Has("class_weights")) return Status::Ok();
  if (data.problem_type == ProblemType::kRegression) {
    return d.ChildError("class_weights", "does not apply to problem_type regression");
  }
  const Json& w = d.json().at("class_weights");
  if (w.is_string() && w.get<std::string>() == "balanced") {
    data.class_weights.balanced = true;
    return Status::Ok();
  }
  if (w.is_array() && !w.empty()) {
    for (size_t i = 0; i < w.size(); ++i) {
      if (!w[i].is_number() || !(w[i].get<double>() > 0)) {
        return d.ChildError(fmt::format("class_weights/{}", i),
                            fmt::format("must be a positive number, got {}", w[i].dump()));
      }
      data.class_weights.values.push_back(w[i].get<double>());
    }
    if (!data.labels.empty() && data.labels.size() != data.class_weights.values.size()) {
      return d.ChildError("class_weights",
                          fmt::format("has {} weights for the {} labels ({}); one per label",
                                      data.class_weights.values.size(), data.labels.size(),
                                      JoinNames(data.labels)));
    }
    return Status::Ok();
  }
  return d.ChildError("class_weights",
                      fmt::format("expected \"balanced\" or a list of one positive weight per "
                                  "label (in the order of \"labels\"), got {}",
                                  Abbreviate(w.dump(), 40)));
}

// "data": the validation split and the text size limit.
Status ParseDataSplit(const JsonReader& d, TextDataOptions& data) {
  TUNE_ASSIGN_OR_RETURN(auto fraction, d.OptNumber("validation_fraction"));
  if (fraction) {
    if (!(*fraction > 0 && *fraction < 1)) {
      return d.ChildError("validation_fraction", "must be between 0 and 1 (exclusive)");
    }
    if (data.validation) {
      return d.ChildError("validation_fraction",
                          "give either 'validation' or 'validation_fraction'");
    }
    data.validation_fraction = *fraction;
  }
  TUNE_ASSIGN_OR_RETURN(auto split_seed, d.OptInt("split_seed"));
  if (split_seed) {
    if (*split_seed < 0) return d.ChildError("split_seed", "must be >= 0");
    data.split_seed = static_cast<uint64_t>(*split_seed);
  }
  TUNE_ASSIGN_OR_RETURN(auto max_bytes, d.OptInt("max_text_bytes"));
  if (max_bytes) {
    if (*max_bytes < 1) return d.ChildError("max_text_bytes", "must be >= 1");
    data.max_text_bytes = *max_bytes;
  }
  return Status::Ok();
}

Status ParseData(const JsonReader& r, const PathResolver& path, TrainObjectiveOptions& out) {
  if (!r.Has("data")) {
    return r.Error("missing required key 'data' ({\"train\": \"train.jsonl\", ...})");
  }
  const bool tabular = out.task == TrainTask::kTabularClassification;
  JsonReader d = r.Child("data");
  TUNE_RETURN_IF_ERROR(ParseDataFiles(d, tabular, path, out.data));
  if (!tabular) TUNE_RETURN_IF_ERROR(ParseTargets(d, out.data));
  TUNE_RETURN_IF_ERROR(ParseDataSplit(d, out.data));
  if (!tabular) return Status::Ok();
  TabularDataOptions& t = out.tabular;
  t.train = out.data.train;
  t.validation = out.data.validation;
  t.format = out.data.format;
  t.label_column = out.data.label_column;
  t.labels = out.data.labels;
  t.validation_fraction = out.data.validation_fraction;
  t.split_seed = out.data.split_seed;
  TUNE_ASSIGN_OR_RETURN(t.feature_columns, d.StringArray("feature_columns"));
  return Status::Ok();
}

Status ParseTokenizer(const JsonReader& r, const PathResolver& path, TrainObjectiveOptions& out) {
  if (!r.Has("tokenizer")) return Status::Ok();
  JsonReader t = r.Child("tokenizer");
  TUNE_RETURN_IF_ERROR(t.CheckKeys({"vocab", "lowercase", "vocab_size", "min_count"}));
  TUNE_ASSIGN_OR_RETURN(auto vocab, t.OptString("vocab"));
  if (vocab) out.vocab = path(*vocab);
  TUNE_ASSIGN_OR_RETURN(out.tokenizer.lowercase, t.Bool("lowercase", true));
  TUNE_ASSIGN_OR_RETURN(auto vocab_size, t.OptInt("vocab_size"));
  if (vocab_size) {
    if (out.vocab)
      return t.ChildError("vocab_size", "applies only without 'vocab' (a built vocabulary)");
    if (*vocab_size < 16) return t.ChildError("vocab_size", "must be >= 16");
    out.tokenizer.vocab_size = *vocab_size;
  }
  TUNE_ASSIGN_OR_RETURN(auto min_count, t.OptInt("min_count"));
  if (min_count) {
    if (*min_count < 1) return t.ChildError("min_count", "must be >= 1");
    out.tokenizer.min_count = *min_count;
  }
  return Status::Ok();
}

// "objectives": [metric, costs...], the metric first (it may repeat "metric").
Status ParseObjectives(const JsonReader& r, TrainObjectiveOptions& out) {
  if (!r.Has("objectives")) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(auto names, r.StringArray("objectives"));
  if (names.empty()) return r.ChildError("objectives", "needs the metric first");
  auto m = ParseTrainMetric(names[0]);
  if (!m.ok()) {
    return r.ChildError("objectives/0",
                        "the first objective is the metric: " + std::string(m.status().message()));
  }
  if (r.Has("metric") && *m != out.metric) {
    return r.ChildError("objectives/0", fmt::format("'{}' differs from \"metric\": '{}'", names[0],
                                                    TrainMetricName(out.metric)));
  }
  out.metric = *m;
  for (size_t i = 1; i < names.size(); ++i) {
    auto cost = ParseTrainCost(names[i]);
    if (!cost.ok()) return r.ChildError(fmt::format("objectives/{}", i), cost.status().message());
    if (std::find(out.costs.begin(), out.costs.end(), *cost) != out.costs.end()) {
      return r.ChildError(fmt::format("objectives/{}", i), "'" + names[i] + "' is listed twice");
    }
    out.costs.push_back(*cost);
  }
  return Status::Ok();
}

// "constraints": {"peak_memory": 2e9, ...}: upper bounds of costs.
Status ParseConstraints(const JsonReader& r, TrainObjectiveOptions& out) {
  if (!r.Has("constraints")) return Status::Ok();
  const Json& c = r.json().at("constraints");
  if (!c.is_object() || c.empty()) {
    return r.ChildError("constraints",
                        "expected an object of upper bounds, e.g. {\"peak_memory\": 2147483648}");
  }
  for (const auto& [name, bound] : c.items()) {
    auto cost = ParseTrainCost(name);
    if (!cost.ok()) return r.ChildError("constraints/" + name, cost.status().message());
    if (!bound.is_number()) return r.ChildError("constraints/" + name, "expected a number");
    out.constraints.emplace_back(*cost, bound.get<double>());
  }
  return Status::Ok();
}

// "metric", "objectives", "constraints", "device", "threads", "ignore_params".
Status ParseRunOptions(const JsonReader& r, TrainObjectiveOptions& out) {
  const ProblemType type = out.data.problem_type;
  TUNE_ASSIGN_OR_RETURN(std::string metric,
                        r.String("metric", TrainMetricName(DefaultMetric(type))));
  auto m = ParseTrainMetric(metric);
  if (!m.ok()) return r.ChildError("metric", m.status().message());
  out.metric = *m;
  TUNE_ASSIGN_OR_RETURN(out.positive_label, r.OptString("positive_label"));
  if (out.positive_label && type != ProblemType::kSingleLabel) {
    return r.ChildError("positive_label", fmt::format("applies to two-label single-label "
                                                      "classification, not to problem_type '{}'",
                                                      ProblemTypeName(type)));
  }
  TUNE_RETURN_IF_ERROR(ParseObjectives(r, out));
  if (Status st = CheckMetricFor(out.metric, type); !st.ok()) {
    return r.ChildError(r.Has("metric") || !r.Has("objectives") ? "metric" : "objectives/0",
                        st.message());
  }
  TUNE_RETURN_IF_ERROR(ParseConstraints(r, out));
  TUNE_ASSIGN_OR_RETURN(out.device, r.String("device", "cpu"));
  if (Status st = ParseDevice(out.device).status(); !st.ok()) {
    return r.ChildError("device", st.message());
  }
  TUNE_ASSIGN_OR_RETURN(auto threads, r.OptInt("threads"));
  if (threads) {
    if (*threads < 0) return r.ChildError("threads", "must be >= 0 (0: one per core)");
    out.threads = *threads;
  }
  TUNE_ASSIGN_OR_RETURN(out.ignore_params, r.StringArray("ignore_params"));
  return ParseDevices(r, out.guard.devices);
}

// A pretrained checkpoint directory (ParseStudyConfig put it in the catalog under the name as
// written): its tokenizer files (Tokenizer::FromCheckpointDir) are the vocabulary and it is the
// model.
Status ParsePretrained(const JsonReader& r, const PathResolver& path, TrainObjectiveOptions& out) {
  TUNE_ASSIGN_OR_RETURN(auto pretrained, r.OptString("pretrained"));
  if (!pretrained) return Status::Ok();
  if (out.task == TrainTask::kTabularClassification) {
    return r.ChildError("pretrained", "applies to text_classification only");
  }
  if (out.vocab) {
    return r.ChildError("pretrained",
                        "the checkpoint brings its own vocabulary; remove \"tokenizer\": "
                        "{\"vocab\": ...}");
  }
  if (r.Has("model")) {
    return r.ChildError("model", "\"pretrained\" is the model (its config.json); remove \"model\"");
  }
  out.pretrained = path(*pretrained);
  out.vocab = PretrainedVocabPath(*out.pretrained);
  out.defaults["model"] = *pretrained;  // the catalog entry is named as written
  return Status::Ok();
}

// "init", "models_dir" (read again where the checkpoints are resolved, ResolveCheckpoints) and
// "save_best".
Status ParseCheckpointOptions(const JsonReader& r, const ObjectiveContext& context,
                              TrainObjectiveOptions& out) {
  TUNE_ASSIGN_OR_RETURN(CheckpointKeys keys, ReadCheckpointKeys(r, context.base_dir));
  const bool text = out.task == TrainTask::kTextClassification;
  out.init_pretrained = text && keys.pretrained && !out.pretrained;
  if (out.init_pretrained && out.vocab) {
    return r.ChildError("tokenizer",
                        "with \"init\": \"pretrained\" each checkpoint brings its "
                        "own tokenizer; remove \"vocab\" or set \"init\": \"scratch\"");
  }
  TUNE_ASSIGN_OR_RETURN(auto save_best, r.OptString("save_best"));
  if (save_best) {
    if (!text) return r.ChildError("save_best", "applies to text_classification only");
    out.save_best = PathResolver{context.base_dir}(*save_best);
  }
  return Status::Ok();
}

// Hyperparameter defaults: every key that is not the objective's own, checked now and applied
// in every trial under the trial's params. Returns them applied to the built-in defaults.
Result<TrainHyperparams> ParseHyperparamDefaults(const JsonReader& r, TrainObjectiveOptions& out) {
  std::vector<std::string> own = KeyNames(OwnKeys());
  own.push_back("type");
  TrainHyperparams probe;
  for (const auto& [key, value] : r.json().items()) {
    if (std::find(own.begin(), own.end(), key) != own.end()) continue;
    const std::string canonical = *CanonicalHyperparam(key);
    if (out.defaults.contains(canonical)) {
      return r.ChildError(key, fmt::format("'{}' is set twice (as '{}' too)", canonical, key));
    }
    out.defaults[canonical] = value;
    if (canonical == "precision" && value == "auto") continue;  // resolved per study: AutoPrecision
    if (Status st = SetHyperparam(probe, key, value); !st.ok()) {
      std::string message = st.message();
      // The objective's precision may also be "auto".
      if (const size_t at = message.find("valid: "); canonical == "precision" && at != message.npos)
        message.insert(at + 7, "auto, ");
      return r.ChildError(key, message);
    }
  }
  return probe;
}

// "memory": {...} of a train objective: the memory guard's options (guard.h).
// "simulate": true (the card "tune") or a card name: every trial process charges one simulated
// card of device_memory bytes in shared memory (simulated_card.h).
Status ParseSimulate(const JsonReader& r, GuardOptions& out) {
  if (!r.Has("simulate") || r.json().at("simulate").is_null()) return Status::Ok();
  const Json& v = r.json().at("simulate");
  if (v.is_boolean()) {
    if (v.get<bool>()) out.simulate = "tune";
  } else if (v.is_string()) {
    out.simulate = v.get<std::string>();
  } else {
    return r.ChildError("simulate", "expected true or a card name, got " + JsonReader::Describe(v));
  }
  if (!out.simulate) return Status::Ok();
  const std::string& name = *out.simulate;
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      });
  if (!ok) {
    return r.ChildError("simulate", fmt::format("card name '{}': use 1-64 letters, digits, '-', "
                                                "'_' or '.'",
                                                name));
  }
  if (!out.device_memory) {
    return r.ChildError("simulate", "needs \"device_memory\": the simulated card's size");
  }
  return Status::Ok();
}

}  // namespace

Status ParseDevices(const JsonReader& r, std::vector<int>& out) {
  if (!r.Has("devices") || r.json().at("devices").is_null()) return Status::Ok();
  const Json& v = r.json().at("devices");
  if (!v.is_array() || v.empty()) {
    return r.ChildError("devices", "expected a list of CUDA card indices such as [0, 2], got " +
                                       JsonReader::Describe(v));
  }
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0 || v[i].get<int64_t>() > 1023) {
      return r.ChildError(fmt::format("devices/{}", i),
                          "expected a card index (0, 1, ...), got " + JsonReader::Describe(v[i]));
    }
    out.push_back(v[i].get<int>());
  }
  return Status::Ok();
}

Status ParseGuardOptions(const JsonReader& r, GuardOptions& out, std::vector<std::string> keys) {
  for (const char* k : {"device_memory", "margin", "admission", "levers", "oom_retry", "calibrate",
                        "cuda_context", "cuda_workspace", "fragmentation", "simulate",
                        "shrink_to_start", "min_micro_batch", "estimate_scale"}) {
    keys.emplace_back(k);
  }
  TUNE_RETURN_IF_ERROR(r.CheckKeys(keys));
  // A size: "24GiB", "512MiB" or a number of bytes.
  auto size = [&](const std::string& key, bool positive) -> Result<std::optional<int64_t>> {
    if (!r.Has(key) || r.json().at(key).is_null()) return std::optional<int64_t>();
    const Json& v = r.json().at(key);
    Result<int64_t> bytes =
        v.is_string() ? ParseBytes(v.get<std::string>())
        : v.is_number_integer()
            ? Result<int64_t>(v.get<int64_t>())
            : Result<int64_t>(InvalidArgumentError(
                  "expected a size such as \"24GiB\" or a number of bytes, got " +
                  JsonReader::Describe(v)));
    if (!bytes.ok()) return r.ChildError(key, bytes.status().message());
    if (*bytes < 0 || (positive && *bytes == 0)) {
      return r.ChildError(key, positive ? "must be > 0" : "must be >= 0");
    }
    return std::optional<int64_t>(*bytes);
  };
  if (r.Has("device_memory") && r.json().at("device_memory").is_array()) {
    // One size per card (memory/cards.h); device_memory is the largest.
    const JsonReader list = r.Child("device_memory");
    out.card_memory.clear();
    for (size_t i = 0; i < list.json().size(); ++i) {
      const std::string key = std::to_string(i);
      Result<int64_t> bytes =
          list.json().at(i).is_string() ? ParseBytes(list.json().at(i).get<std::string>())
          : list.json().at(i).is_number_integer()
              ? Result<int64_t>(list.json().at(i).get<int64_t>())
              : Result<int64_t>(
                    InvalidArgumentError("expected a size such as \"24GiB\" or a number of "
                                         "bytes, got " +
                                         JsonReader::Describe(list.json().at(i))));
      if (!bytes.ok()) return list.ChildError(key, bytes.status().message());
      if (*bytes <= 0) return list.ChildError(key, "must be > 0");
      out.card_memory.push_back(*bytes);
    }
    if (out.card_memory.empty()) {
      return r.ChildError("device_memory", "an empty list: give one size per card");
    }
    out.device_memory = *std::max_element(out.card_memory.begin(), out.card_memory.end());
    if (out.card_memory.size() == 1) out.card_memory.clear();
  } else {
    TUNE_ASSIGN_OR_RETURN(out.device_memory, size("device_memory", true));
  }
  TUNE_ASSIGN_OR_RETURN(out.cuda_context, size("cuda_context", false));
  TUNE_ASSIGN_OR_RETURN(out.cuda_workspace, size("cuda_workspace", false));
  TUNE_ASSIGN_OR_RETURN(auto fragmentation, r.OptNumber("fragmentation"));
  if (fragmentation) {
    if (!(*fragmentation >= 0.0 && *fragmentation <= 1.0)) {
      return r.ChildError("fragmentation", fmt::format("{} must be in [0, 1]", *fragmentation));
    }
    out.fragmentation = *fragmentation;
  }
  TUNE_ASSIGN_OR_RETURN(auto margin, r.OptNumber("margin"));
  if (margin) {
    if (!(*margin >= 0.0 && *margin < 1.0)) {
      return r.ChildError("margin", fmt::format("{} must be in [0, 1)", *margin));
    }
    out.margin = *margin;
  }
  TUNE_ASSIGN_OR_RETURN(auto scale, r.OptNumber("estimate_scale"));
  if (scale) {
    if (!(*scale >= 0.25 && *scale <= 4.0)) {
      return r.ChildError("estimate_scale", fmt::format("{} must be in [0.25, 4]", *scale));
    }
    out.estimate_scale = *scale;
  }
  TUNE_ASSIGN_OR_RETURN(out.admission, r.Bool("admission", out.admission));
  TUNE_ASSIGN_OR_RETURN(out.calibrate, r.Bool("calibrate", out.calibrate));
  TUNE_ASSIGN_OR_RETURN(out.shrink_to_start, r.Bool("shrink_to_start", out.shrink_to_start));
  TUNE_ASSIGN_OR_RETURN(auto floor, r.OptInt("min_micro_batch"));
  if (floor) {
    if (*floor < 1) return r.ChildError("min_micro_batch", fmt::format("{} must be >= 1", *floor));
    out.min_micro_batch = *floor;
  }
  TUNE_ASSIGN_OR_RETURN(auto retry, r.OptInt("oom_retry"));
  if (retry) {
    if (*retry < 0 || *retry > 10) {
      return r.ChildError("oom_retry", fmt::format("{} must be in [0, 10]", *retry));
    }
    out.oom_retry = *retry;
  }
  if (r.Has("levers")) {
    TUNE_ASSIGN_OR_RETURN(std::vector<std::string> levers, r.StringArray("levers"));
    const auto& valid = GuardLeverNames();
    out.lever_grad_accum = out.lever_checkpointing = false;
    for (const auto& lever : levers) {
      if (lever == "grad_accum") {
        out.lever_grad_accum = true;
      } else if (lever == "gradient_checkpointing") {
        out.lever_checkpointing = true;
      } else {
        return r.ChildError("levers", fmt::format("unknown lever '{}'{}; valid: {}", lever,
                                                  DidYouMean(lever, valid), JoinNames(valid)));
      }
    }
  }
  return ParseSimulate(r, out);
}

void CollectParams(const SpaceBlock& block, std::vector<const ParamSpec*>& out) {
  for (const auto& p : block.params) out.push_back(&p);
  for (const auto& c : block.children) CollectParams(c, out);
}

namespace {

// The models the search space's "model" parameter (and the objective's "model") may choose;
// every parameter must be a training parameter (or ignored) whose values fit the device.
Status CheckSpaceParams(const JsonReader& r, const StudyConfig& config,
                        const TrainObjectiveOptions& out, std::vector<std::string>& models) {
  std::vector<const ParamSpec*> params;
  CollectParams(config.space.root(), params);
  for (const ParamSpec* p : params) {
    if (std::find(out.ignore_params.begin(), out.ignore_params.end(), p->name) !=
        out.ignore_params.end()) {
      continue;
    }
    auto canonical = CanonicalHyperparam(p->name);
    const std::string where = fmt::format("search-space parameter '{}'", p->name);
    if (!canonical) {
      return r.Error(
          fmt::format("{} is not a training parameter{}; list it in \"ignore_params\" if "
                      "only conditions read it",
                      where, DidYouMean(p->name, HyperparamNamesAndAliases())));
    }
    std::vector<Json> values;
    if (const auto* c = std::get_if<CategoricalDistribution>(&p->distribution)) {
      values = c->choices;
    } else if (const auto* f = std::get_if<FloatDistribution>(&p->distribution)) {
      values = {f->low, f->high};
    } else if (const auto* i = std::get_if<IntDistribution>(&p->distribution)) {
      values = {i->low, i->high};
    }
    for (const Json& v : values) {
      TrainHyperparams probe;
      if (Status st = SetHyperparam(probe, p->name, v); !st.ok()) {
        return r.Error(fmt::format("{}: {}", where, st.message()));
      }
      if (*canonical == "model") models.push_back(v.get<std::string>());
      if (Status st = CheckPrecisionForDevice(probe.precision, out.device); !st.ok()) {
        return r.Error(fmt::format("{}: {}", where, st.message()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<OptionKey> TrainObjectiveKeys() {
  std::vector<OptionKey> keys = OwnKeys();
  Json defaults = HyperparamsToJson(TrainHyperparams{});
  defaults["precision"] = "auto";
  for (const auto& name : HyperparamNamesAndAliases()) {
    const std::string canonical = CanonicalHyperparam(name).value_or(name);
    keys.push_back({name, defaults.contains(canonical) ? defaults[canonical] : Json()});
  }
  return keys;
}

Status ParseTrainObjective(const JsonReader& r, const ObjectiveContext& context,
                           ObjectiveConfig& config) {
  TrainObjectiveOptions& out = config.train;
  const PathResolver path{context.base_dir};
  TUNE_RETURN_IF_ERROR(ParseTask(r, out));
  TUNE_RETURN_IF_ERROR(ParseData(r, path, out));
  TUNE_RETURN_IF_ERROR(ParseTokenizer(r, path, out));
  TUNE_RETURN_IF_ERROR(ParseRunOptions(r, out));
  TUNE_RETURN_IF_ERROR(ParsePretrained(r, path, out));
  TUNE_RETURN_IF_ERROR(ParseCheckpointOptions(r, context, out));
  TUNE_ASSIGN_OR_RETURN(TrainHyperparams probe, ParseHyperparamDefaults(r, out));
  if (r.Has("memory")) TUNE_RETURN_IF_ERROR(ParseGuardOptions(r.Child("memory"), out.guard));
  if (Status st = CheckPrecisionForDevice(probe.precision, out.device); !st.ok()) {
    return r.ChildError(r.Has("precision") ? "precision" : "mixed_precision", st.message());
  }
  return Status::Ok();
}

// The study's directions must be the objectives' (the metric's, then minimize per cost); costs
// and constraints need what they imply.
Status CheckObjectiveDirections(const JsonReader& r, const StudyConfig& config,
                                const TrainObjectiveOptions& out) {
  const StudyDirection want = TrainMetricDirection(out.metric);
  auto name = [](StudyDirection d) {
    return d == StudyDirection::kMaximize ? "maximize" : "minimize";
  };
  if (out.costs.empty() && (config.directions.size() != 1 || config.directions[0] != want)) {
    return InvalidArgumentError(fmt::format(
        "{}: /direction: the train objective's metric '{}' is {}d; set \"direction\": \"{}\"",
        r.file(), TrainMetricName(out.metric), name(want), name(want)));
  }
  std::vector<StudyDirection> wanted{want};
  std::vector<std::string> quoted{fmt::format("\"{}\"", name(want))};
  for (size_t i = 0; i < out.costs.size(); ++i) {
    wanted.push_back(StudyDirection::kMinimize);
    quoted.push_back("\"minimize\"");
  }
  if (config.directions != wanted) {
    return InvalidArgumentError(fmt::format(
        "{}: /directions: the train objective returns {} value(s) ({}{}); set \"directions\": "
        "[{}]",
        r.file(), wanted.size(), TrainMetricName(out.metric),
        out.costs.empty() ? "" : ", then the costs, each minimized", fmt::join(quoted, ", ")));
  }
  if (!out.costs.empty() && out.save_best) {
    return r.ChildError("save_best",
                        "a study with several objectives has no single best trial; list its "
                        "Pareto front with `tune best-trials` instead");
  }
  if (!out.constraints.empty() && config.sampler.name != "random") {
    // TPE's optuna-5.0 preset and NSGA-II read them unless told not to (Optuna 5.0).
    const Json& o = config.sampler.options;
    const auto p = o.find("preset");  // its type is checked with the sampler's options
    const std::string preset = p != o.end() && p->is_string() ? p->get<std::string>() : "";
    const bool reads_by_default =
        config.sampler.name == "nsgaii" || (preset != "optuna-4.9" && preset != "optuna");
    const auto c = o.find("constraints");
    if (!(c != o.end() && c->is_boolean() ? c->get<bool>() : reads_by_default)) {
      return r.ChildError("constraints",
                          "the sampler ignores them: set \"constraints\": true in \"sampler\"");
    }
  }
  return Status::Ok();
}

Status CheckTrainObjective(const JsonReader& r, const StudyConfig& config,
                           TrainObjectiveOptions& out) {
  TUNE_RETURN_IF_ERROR(CheckObjectiveDirections(r, config, out));
  std::vector<std::string> models;
  TUNE_RETURN_IF_ERROR(CheckSpaceParams(r, config, out, models));
  if (out.pretrained && !models.empty()) {
    return r.Error(
        "search-space parameter 'model': the objective trains its \"pretrained\" checkpoint; "
        "remove the parameter or the checkpoint");
  }
  if (out.task == TrainTask::kTabularClassification) {
    if (!models.empty()) {
      return r.Error(
          "search-space parameter 'model': tabular_classification trains an MLP, not a "
          "catalog model");
    }
    return Status::Ok();
  }
  if (out.defaults.contains("model")) models.push_back(out.defaults["model"].get<std::string>());
  if (models.empty()) {
    return r.Error("no model: set \"model\" here or add a 'model' parameter to the search space");
  }
  std::sort(models.begin(), models.end());
  models.erase(std::unique(models.begin(), models.end()), models.end());
  const ModelCatalog& catalog = config.space.catalog();
  for (const auto& name : models) {
    auto spec = catalog.Find(name);
    const bool script = spec.ok() && IsTorchScriptModel(**spec);
    if (out.init_pretrained && !script && (!spec.ok() || (*spec)->checkpoint.empty())) {
      // A name ResolveCheckpoints did not see (a "model" parameter without "choices").
      TUNE_ASSIGN_OR_RETURN(CheckpointKeys keys,
                            ReadCheckpointKeys(r, fs::path(r.file()).parent_path()));
      auto dir = ResolveModelCheckpoint(name, catalog, keys, fs::path(r.file()).parent_path());
      return NotFoundError(fmt::format(
          "{}: /objective: \"init\" is \"pretrained\", but {}; set \"init\": \"scratch\" to "
          "train it from random weights",
          r.file(),
          dir.ok() ? fmt::format("model '{}' was not resolved", name) : dir.status().message()));
    }
    if (!spec.ok()) return r.Error(spec.status().message());
    TrainHyperparams probe;
    probe.max_length = 2;
    if (Status st = CheckModelForTraining(**spec, probe); !st.ok()) return r.Error(st.message());
  }
  out.models = std::move(models);
  return Status::Ok();
}

}  // namespace tune::internal

namespace tune {

Status CheckTrainPrecisionOnCard(const StudyConfig& config, const std::string& card,
                                 std::pair<int, int> capability) {
  if (config.objective.type != ObjectiveType::kTrain) return Status::Ok();
  const Json& defaults = config.objective.train.defaults;
  if (auto p = defaults.find("precision"); p != defaults.end() && p->is_string()) {
    const Result<Precision> precision = ParsePrecision(p->get<std::string>());
    if (precision.ok()) {
      if (Status st = CheckPrecisionForCard(*precision, card, capability); !st.ok()) {
        return InvalidArgumentError(fmt::format(
            "{}: /objective/precision: {}: use \"precision\": \"fp16\" (autocast to float16 "
            "with loss scaling, which this card has) or \"auto\" (fp16 on such a card, bf16 on "
            "cards with bfloat16)",
            config.source, st.message()));
      }
    }
  }
  std::vector<const ParamSpec*> params;
  internal::CollectParams(config.space.root(), params);
  for (const ParamSpec* p : params) {
    const auto* choices = std::get_if<CategoricalDistribution>(&p->distribution);
    if (choices == nullptr || CanonicalHyperparam(p->name) != "precision") continue;
    for (const Json& choice : choices->choices) {
      const Result<Precision> precision = choice.is_string()
                                              ? ParsePrecision(choice.get<std::string>())
                                              : Result<Precision>(Precision::kFp32);
      if (!precision.ok()) continue;
      if (Status st = CheckPrecisionForCard(*precision, card, capability); !st.ok()) {
        return InvalidArgumentError(fmt::format(
            "{}: /objective: search-space parameter '{}', choice {}: {}: remove the choice (keep "
            "\"fp16\" or \"fp32\")",
            config.source, p->name, choice.dump(), st.message()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace tune

#include "tune/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "json_reader.h"
#include "tune/pruners/hyperband.h"
#include "tune/pruners/patient.h"
#include "tune/pruners/percentile.h"
#include "tune/pruners/successive_halving.h"
#include "tune/pruners/threshold.h"
#include "tune/samplers/random.h"
#include "tune/samplers/tpe.h"
#include "tune/train/hyperparams.h"
#include "tune/train/pretrained.h"
#include "tune/text.h"

namespace tune {

using internal::JsonReader;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTopKeys = {
    "description",  "direction",   "directions", "n_trials",       "timeout",
    "storage",      "sampler",     "pruner",     "models",         "model_catalog",
    "search_space", "conditional", "objective",  "enqueue_trials", "heartbeat_interval",
    "grace_period", "retry_failed"};
const std::vector<std::string> kParamTypes = {"float", "int", "categorical", "model"};
const std::vector<std::string> kConditionOps = {"==", "!=", "in", "not_in", "<", "<=", ">", ">="};

std::string RangeHint(double low, double high, double step) {
  double n = std::floor((high - low) / step);
  return fmt::format("use high = {} or {}", PyFloatRepr(low + n * step),
                     PyFloatRepr(low + (n + 1) * step));
}

Result<ParamSpec> ParseParam(const JsonReader& r, const std::string& name,
                             const ModelCatalog& catalog) {
  ParamSpec spec;
  spec.name = name;
  if (r.json().is_array()) {  // shorthand: "batch_size": [8, 16, 32]
    if (r.json().empty()) return r.Error("choices must not be empty");
    auto d = MakeCategoricalDistribution(r.json().get<std::vector<Json>>());
    if (!d.ok()) return r.Error(d.status().message());
    spec.distribution = *d;
    return spec;
  }
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(std::string type, r.RequiredString("type"));
  if (type == "float" || type == "int") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "low", "high", "log", "step"}));
    if (!r.Has("low")) return r.Error("missing required key 'low'");
    if (!r.Has("high")) return r.Error("missing required key 'high'");
    TUNE_ASSIGN_OR_RETURN(bool log, r.Bool("log", false));
    if (type == "float") {
      TUNE_ASSIGN_OR_RETURN(std::optional<double> low, r.OptNumber("low"));
      TUNE_ASSIGN_OR_RETURN(std::optional<double> high, r.OptNumber("high"));
      TUNE_ASSIGN_OR_RETURN(std::optional<double> step, r.OptNumber("step"));
      if (*low > *high) {
        return r.Error(fmt::format("low ({}) must be <= high ({})", PyFloatRepr(*low),
                                   PyFloatRepr(*high)));
      }
      if (log && *low <= 0) {
        return r.ChildError("low", fmt::format("log=true needs low > 0, got low={}",
                                               PyFloatRepr(*low)));
      }
      if (log && step) return r.ChildError("step", "step cannot be combined with log=true");
      if (step && *step <= 0) return r.ChildError("step", "step must be > 0");
      if (step && !StepDividesRange(*low, *high, *step)) {
        return r.ChildError("step", fmt::format("step {} does not divide the range [{}, {}] ({})",
                                                PyFloatRepr(*step), PyFloatRepr(*low),
                                                PyFloatRepr(*high), RangeHint(*low, *high, *step)));
      }
      auto d = MakeFloatDistribution(*low, *high, log, step);
      if (!d.ok()) return r.Error(d.status().message());
      spec.distribution = *d;
    } else {
      TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> low, r.OptInt("low"));
      TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> high, r.OptInt("high"));
      TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> step, r.OptInt("step"));
      if (!low) return r.ChildError("low", "expected an integer, got null");
      if (!high) return r.ChildError("high", "expected an integer, got null");
      if (*low > *high) {
        return r.Error(fmt::format("low ({}) must be <= high ({})", *low, *high));
      }
      if (log && *low <= 0) {
        return r.ChildError("low", fmt::format("log=true needs low >= 1, got low={}", *low));
      }
      if (log && step && *step != 1) return r.ChildError("step", "log=true needs step = 1");
      if (step && *step <= 0) return r.ChildError("step", "step must be > 0");
      if (step && (*high - *low) % *step != 0) {
        int64_t n = (*high - *low) / *step;
        return r.ChildError("step",
                            fmt::format("step {} does not divide the range [{}, {}] (use high = "
                                        "{} or {})",
                                        *step, *low, *high, *low + n * *step,
                                        *low + (n + 1) * *step));
      }
      auto d = MakeIntDistribution(*low, *high, log, step.value_or(1));
      if (!d.ok()) return r.Error(d.status().message());
      spec.distribution = *d;
    }
    return spec;
  }
  if (type == "categorical" || type == "model") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "choices"}));
    std::vector<Json> choices;
    if (!r.Has("choices")) {
      if (type == "categorical") return r.Error("missing required key 'choices'");
      for (const auto& n : catalog.names()) choices.push_back(n);
    } else {
      const Json& c = r.json().at("choices");
      if (!c.is_array()) {
        return r.ChildError("choices", "expected an array, got " + JsonReader::Describe(c));
      }
      if (c.empty()) return r.ChildError("choices", "choices must not be empty");
      choices = c.get<std::vector<Json>>();
    }
    for (size_t i = 0; i < choices.size(); ++i) {
      const Json& c = choices[i];
      if (type == "model") {
        if (!c.is_string()) {
          return r.ChildError(fmt::format("choices/{}", i),
                              "a model choice must be a catalog name, got " + JsonReader::Describe(c));
        }
        auto m = catalog.Find(c.get<std::string>());
        if (!m.ok()) return r.ChildError(fmt::format("choices/{}", i), m.status().message());
      }
      for (size_t k = 0; k < i; ++k) {
        if (ScalarEqual(choices[k], c)) {
          return r.ChildError(fmt::format("choices/{}", i), "duplicate choice " + c.dump());
        }
      }
    }
    auto d = MakeCategoricalDistribution(choices);
    if (!d.ok()) return r.ChildError("choices", d.status().message());
    spec.distribution = *d;
    spec.is_model = type == "model";
    return spec;
  }
  return r.ChildError("type", fmt::format("unknown parameter type '{}'{}; valid types: {}", type,
                                          DidYouMean(type, kParamTypes), JoinNames(kParamTypes)));
}

struct SpaceParser {
  const ModelCatalog& catalog;
  std::string source;
  std::vector<ParamSpec> declared;  // in sampling order

  std::vector<std::string> DeclaredNames() const {
    std::vector<std::string> names;
    for (const auto& p : declared) names.push_back(p.name);
    return names;
  }

  const ParamSpec* FindDeclared(const std::string& name) const {
    for (const auto& p : declared) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }

  Result<Condition> ParseCondition(const JsonReader& when, const std::string& key) {
    Condition c;
    c.key = key;
    if (const ParamSpec* p = FindDeclared(key)) {
      c.param = p->name;
    } else {
      auto dot = key.rfind('.');
      const ParamSpec* model = dot == std::string::npos ? nullptr : FindDeclared(key.substr(0, dot));
      if (model && model->is_model) {
        c.param = model->name;
        c.attribute = key.substr(dot + 1);
        std::vector<std::string> attrs;
        const Json base_attrs = ModelSpec().Attributes();
        for (const auto& [k, v] : base_attrs.items()) attrs.push_back(k);
        bool known = false;
        for (const auto& n : catalog.names()) {
          Json a = catalog.Find(n).value()->Attributes();
          known = known || a.contains(c.attribute);
          for (const auto& [k, v] : a.items()) {
            if (std::find(attrs.begin(), attrs.end(), k) == attrs.end()) attrs.push_back(k);
          }
        }
        if (!known) {
          return when.ChildError(key, fmt::format("unknown model attribute '{}'{}; catalog "
                                                  "attributes: {}",
                                                  c.attribute, DidYouMean(c.attribute, attrs),
                                                  JoinNames(attrs)));
        }
      } else if (model) {
        return when.ChildError(key, fmt::format("'{}' is not a parameter of type \"model\", so "
                                                "'{}' is not a catalog attribute",
                                                model->name, key));
      } else {
        std::vector<std::string> names = DeclaredNames();
        for (const auto& d : declared) {
          if (d.is_model) names.push_back(d.name + ".heavy");
        }
        return when.ChildError(
            key, fmt::format("condition on unknown parameter '{}'{}; a condition may read "
                             "parameters declared before it: {}",
                             key, DidYouMean(key, names),
                             names.empty() ? "(none yet)" : JoinNames(names)));
      }
    }
    const Json& v = when.json().at(key);
    if (v.is_object()) {
      if (v.size() != 1) {
        return when.ChildError(key, "an operator object has exactly one operator, e.g. "
                                    "{\">=\": 1}");
      }
      const std::string op = v.begin().key();
      c.operand = v.begin().value();
      static const std::map<std::string, Condition::Op> kOps = {
          {"==", Condition::Op::kEq}, {"!=", Condition::Op::kNe},
          {"in", Condition::Op::kIn}, {"not_in", Condition::Op::kNotIn},
          {"<", Condition::Op::kLt},  {"<=", Condition::Op::kLe},
          {">", Condition::Op::kGt},  {">=", Condition::Op::kGe}};
      auto it = kOps.find(op);
      if (it == kOps.end()) {
        return when.ChildError(key, fmt::format("unknown operator '{}'{}; valid: {}", op,
                                                DidYouMean(op, kConditionOps),
                                                JoinNames(kConditionOps)));
      }
      c.op = it->second;
      if ((c.op == Condition::Op::kIn || c.op == Condition::Op::kNotIn) != c.operand.is_array()) {
        return when.ChildError(key + "/" + op, c.operand.is_array()
                                                   ? "a list needs 'in' or 'not_in'"
                                                   : "'in' and 'not_in' need a list");
      }
    } else if (v.is_array()) {
      c.op = Condition::Op::kIn;
      c.operand = v;
    } else {
      c.op = Condition::Op::kEq;
      c.operand = v;
    }
    // A condition on a categorical parameter must be able to hold.
    if (c.attribute.empty() && (c.op == Condition::Op::kEq || c.op == Condition::Op::kIn)) {
      const ParamSpec* p = FindDeclared(c.param);
      if (const auto* cat = std::get_if<CategoricalDistribution>(&p->distribution)) {
        std::vector<Json> wanted =
            c.op == Condition::Op::kEq ? std::vector<Json>{c.operand} : c.operand.get<std::vector<Json>>();
        for (const Json& w : wanted) {
          if (!ToInternal(p->distribution, w).ok()) {
            std::vector<std::string> names;
            for (const auto& ch : cat->choices) names.push_back(ch.is_string() ? ch.get<std::string>() : ch.dump());
            return when.ChildError(key, fmt::format("{} is not a choice of '{}'{}; choices: {}",
                                                    w.dump(), c.param,
                                                    w.is_string() ? DidYouMean(w.get<std::string>(), names) : "",
                                                    JoinNames(names)));
          }
        }
      }
    }
    return c;
  }

  Status ParseBlock(const JsonReader* space, const JsonReader* conditional, SpaceBlock& block) {
    if (space) {
      TUNE_RETURN_IF_ERROR(space->ExpectObject());
      for (const auto& [name, value] : space->json().items()) {
        if (name.empty()) return space->Error("a parameter name must not be empty");
        TUNE_ASSIGN_OR_RETURN(ParamSpec p, ParseParam(space->Child(name), name, catalog));
        if (const ParamSpec* prev = FindDeclared(name)) {
          if (prev->distribution.index() != p.distribution.index() || prev->is_model != p.is_model) {
            return space->ChildError(
                name, fmt::format("'{}' was declared before as a {}; a parameter keeps its type "
                                  "across conditional blocks",
                                  name, DistributionClassName(prev->distribution)));
          }
        }
        declared.push_back(p);
        block.params.push_back(std::move(p));
      }
    }
    if (conditional) {
      if (!conditional->json().is_array()) {
        return conditional->Error("expected an array of {\"when\": ..., \"search_space\": ...} "
                                  "blocks, got " + JsonReader::Describe(conditional->json()));
      }
      for (size_t i = 0; i < conditional->json().size(); ++i) {
        JsonReader b = conditional->Index(i);
        TUNE_RETURN_IF_ERROR(b.CheckKeys({"when", "search_space", "conditional"}));
        if (!b.Has("when")) return b.Error("missing required key 'when'");
        SpaceBlock child;
        JsonReader when = b.Child("when");
        TUNE_RETURN_IF_ERROR(when.ExpectObject());
        if (when.json().empty()) return when.Error("'when' needs at least one condition");
        for (const auto& [key, v] : when.json().items()) {
          TUNE_ASSIGN_OR_RETURN(Condition c, ParseCondition(when, key));
          child.when.push_back(std::move(c));
        }
        std::optional<JsonReader> s, nested;
        if (b.Has("search_space")) s.emplace(b.Child("search_space"));
        if (b.Has("conditional")) nested.emplace(b.Child("conditional"));
        TUNE_RETURN_IF_ERROR(ParseBlock(s ? &*s : nullptr, nested ? &*nested : nullptr, child));
        block.children.push_back(std::move(child));
      }
    }
    return Status::Ok();
  }
};

Result<std::vector<std::string>> ReadStringArray(const JsonReader& r, const std::string& key) {
  std::vector<std::string> out;
  if (!r.Has(key)) return out;
  const Json& a = r.json().at(key);
  if (!a.is_array()) return r.ChildError(key, "expected an array of strings, got " + JsonReader::Describe(a));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) {
      return r.ChildError(fmt::format("{}/{}", key, i), "expected a string, got " + JsonReader::Describe(a[i]));
    }
    out.push_back(a[i].get<std::string>());
  }
  return out;
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

// "memory": {...} of a train objective: the memory guard's options (guard.h).
Status ParseGuardOptions(const JsonReader& r, GuardOptions& out) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys({"device_memory", "margin", "admission", "levers", "oom_retry",
                                    "calibrate", "cuda_context", "cuda_workspace",
                                    "fragmentation"}));
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
  TUNE_ASSIGN_OR_RETURN(out.device_memory, size("device_memory", true));
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
  TUNE_ASSIGN_OR_RETURN(out.admission, r.Bool("admission", out.admission));
  TUNE_ASSIGN_OR_RETURN(out.calibrate, r.Bool("calibrate", out.calibrate));
  TUNE_ASSIGN_OR_RETURN(auto retry, r.OptInt("oom_retry"));
  if (retry) {
    if (*retry < 0 || *retry > 10) {
      return r.ChildError("oom_retry", fmt::format("{} must be in [0, 10]", *retry));
    }
    out.oom_retry = *retry;
  }
  if (r.Has("levers")) {
    TUNE_ASSIGN_OR_RETURN(std::vector<std::string> levers, ReadStringArray(r, "levers"));
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
  return Status::Ok();
}

// "objective": {"type": "train", ...}: the data, tokenizer, metric, device and the hyperparameter
// defaults (every other key must be a training parameter, see hyperparams.h).
Status ParseTrainObjective(const JsonReader& r, const fs::path& base_dir,
                           TrainObjectiveOptions& out) {
  const std::vector<std::string> own = {"type",    "task",          "data",      "tokenizer",
                                        "metric",  "device",        "threads",   "ignore_params",
                                        "pretrained", "memory"};
  std::vector<std::string> allowed = own;
  for (const auto& n : HyperparamNamesAndAliases()) allowed.push_back(n);
  TUNE_RETURN_IF_ERROR(r.CheckKeys(allowed));
  auto path = [&](const std::string& p) {
    return fs::absolute(base_dir / p).lexically_normal().string();
  };

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
  const bool tabular = out.task == TrainTask::kTabularClassification;

  if (!r.Has("data")) {
    return r.Error("missing required key 'data' ({\"train\": \"train.jsonl\", ...})");
  }
  JsonReader d = r.Child("data");
  if (tabular) {
    TUNE_RETURN_IF_ERROR(d.CheckKeys({"train", "validation", "format", "label_column", "labels",
                                      "validation_fraction", "split_seed", "feature_columns"}));
  } else {
    TUNE_RETURN_IF_ERROR(
        d.CheckKeys({"train", "validation", "format", "text_column", "label_column", "labels",
                     "validation_fraction", "split_seed", "max_text_bytes"}));
  }
  TUNE_ASSIGN_OR_RETURN(std::string train, d.RequiredString("train"));
  out.data.train = path(train);
  TUNE_ASSIGN_OR_RETURN(auto validation, d.OptString("validation"));
  if (validation) out.data.validation = path(*validation);
  TUNE_ASSIGN_OR_RETURN(out.data.format, d.String("format", "auto"));
  if (Status st = DataFormatFor(out.data.train, out.data.format).status(); !st.ok()) {
    return d.ChildError(d.Has("format") ? "format" : "train", st.message());
  }
  if (out.data.validation) {
    if (Status st = DataFormatFor(*out.data.validation, out.data.format).status(); !st.ok()) {
      return d.ChildError("validation", st.message());
    }
  }
  TUNE_ASSIGN_OR_RETURN(out.data.text_column, d.String("text_column", "text"));
  TUNE_ASSIGN_OR_RETURN(out.data.label_column, d.String("label_column", "label"));
  TUNE_ASSIGN_OR_RETURN(out.data.labels, ReadStringArray(d, "labels"));
  TUNE_ASSIGN_OR_RETURN(auto fraction, d.OptNumber("validation_fraction"));
  if (fraction) {
    if (!(*fraction > 0 && *fraction < 1)) {
      return d.ChildError("validation_fraction", "must be between 0 and 1 (exclusive)");
    }
    if (out.data.validation) {
      return d.ChildError("validation_fraction",
                          "give either 'validation' or 'validation_fraction'");
    }
    out.data.validation_fraction = *fraction;
  }
  TUNE_ASSIGN_OR_RETURN(auto split_seed, d.OptInt("split_seed"));
  if (split_seed) {
    if (*split_seed < 0) return d.ChildError("split_seed", "must be >= 0");
    out.data.split_seed = static_cast<uint64_t>(*split_seed);
  }
  TUNE_ASSIGN_OR_RETURN(auto max_bytes, d.OptInt("max_text_bytes"));
  if (max_bytes) {
    if (*max_bytes < 1) return d.ChildError("max_text_bytes", "must be >= 1");
    out.data.max_text_bytes = *max_bytes;
  }

  if (tabular) {
    TabularDataOptions& t = out.tabular;
    t.train = out.data.train;
    t.validation = out.data.validation;
    t.format = out.data.format;
    t.label_column = out.data.label_column;
    t.labels = out.data.labels;
    t.validation_fraction = out.data.validation_fraction;
    t.split_seed = out.data.split_seed;
    TUNE_ASSIGN_OR_RETURN(t.feature_columns, ReadStringArray(d, "feature_columns"));
  }
  if (r.Has("tokenizer")) {
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
  }
  TUNE_ASSIGN_OR_RETURN(std::string metric, r.String("metric", "macro_f1"));
  auto m = ParseTrainMetric(metric);
  if (!m.ok()) return r.ChildError("metric", m.status().message());
  out.metric = *m;
  TUNE_ASSIGN_OR_RETURN(out.device, r.String("device", "cpu"));
  {
    const std::string& dev = out.device;
    bool ok = dev == "cpu" || dev == "cuda";
    if (!ok && dev.rfind("cuda:", 0) == 0 && dev.size() > 5) {
      ok = std::all_of(dev.begin() + 5, dev.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    if (!ok)
      return r.ChildError("device",
                          fmt::format("unknown device '{}'; valid: cpu, cuda, cuda:N", dev));
  }
  TUNE_ASSIGN_OR_RETURN(auto threads, r.OptInt("threads"));
  if (threads) {
    if (*threads < 0) return r.ChildError("threads", "must be >= 0 (0: one per core)");
    out.threads = *threads;
  }
  TUNE_ASSIGN_OR_RETURN(out.ignore_params, ReadStringArray(r, "ignore_params"));

  // A pretrained checkpoint directory (ReadPretrainedCheckpoint put it in the catalog under the
  // name as written): its vocab.txt (or vocab.json) is the vocabulary and it is the model.
  TUNE_ASSIGN_OR_RETURN(auto pretrained, r.OptString("pretrained"));
  if (pretrained) {
    if (tabular) return r.ChildError("pretrained", "applies to text_classification only");
    if (out.vocab) {
      return r.ChildError("pretrained",
                          "the checkpoint brings its own vocabulary; remove \"tokenizer\": "
                          "{\"vocab\": ...}");
    }
    if (r.Has("model")) {
      return r.ChildError("model",
                          "\"pretrained\" is the model (its config.json); remove \"model\"");
    }
    out.pretrained = path(*pretrained);
    out.vocab = PretrainedVocabPath(*out.pretrained);
  }

  // Hyperparameter defaults: checked now, applied in every trial under the trial's params.
  TrainHyperparams probe;
  for (const auto& [key, value] : r.json().items()) {
    if (std::find(own.begin(), own.end(), key) != own.end()) continue;
    const std::string canonical = *CanonicalHyperparam(key);
    if (out.defaults.contains(canonical)) {
      return r.ChildError(key, fmt::format("'{}' is set twice (as '{}' too)", canonical, key));
    }
    if (Status st = SetHyperparam(probe, key, value); !st.ok())
      return r.ChildError(key, st.message());
    out.defaults[canonical] = value;
  }
  if (pretrained) out.defaults["model"] = *pretrained;
  if (r.Has("memory")) TUNE_RETURN_IF_ERROR(ParseGuardOptions(r.Child("memory"), out.guard));
  if (Status st = CheckPrecisionForDevice(probe.precision, out.device); !st.ok()) {
    return r.ChildError(r.Has("precision") ? "precision" : "mixed_precision", st.message());
  }
  return Status::Ok();
}

void CollectParams(const SpaceBlock& block, std::vector<const ParamSpec*>& out) {
  for (const auto& p : block.params) out.push_back(&p);
  for (const auto& c : block.children) CollectParams(c, out);
}

// The train objective against the search space and the study direction: every parameter must be
// a training parameter (or ignored) whose values fit; every model must be trainable.
Status CheckTrainObjective(const JsonReader& r, const StudyConfig& config,
                           TrainObjectiveOptions& out) {
  const StudyDirection want = TrainMetricDirection(out.metric);
  if (config.directions.size() != 1 || config.directions[0] != want) {
    return InvalidArgumentError(fmt::format(
        "{}: /direction: the train objective's metric '{}' is {}d; set \"direction\": \"{}\"",
        r.file(), TrainMetricName(out.metric),
        want == StudyDirection::kMaximize ? "maximize" : "minimize",
        want == StudyDirection::kMaximize ? "maximize" : "minimize"));
  }
  std::vector<const ParamSpec*> params;
  CollectParams(config.space.root(), params);
  std::vector<std::string> models;
  const ModelCatalog& catalog = config.space.catalog();
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
  for (const auto& name : models) {
    auto spec = catalog.Find(name);
    if (!spec.ok()) return r.Error(spec.status().message());
    TrainHyperparams probe;
    probe.max_length = 2;
    if (Status st = CheckModelForTraining(**spec, probe); !st.ok()) return r.Error(st.message());
  }
  out.models = std::move(models);
  return Status::Ok();
}

Status ParseObjective(const JsonReader& r, const std::vector<std::string>& param_names,
                      const fs::path& base_dir, ObjectiveConfig& out) {
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(out.type, r.String("type", "function"));
  if (out.type == "function") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "name", "dims", "n_steps", "oom_threshold"}));
    TUNE_ASSIGN_OR_RETURN(out.function.name, r.String("name", "sphere"));
    auto names = FunctionNames();
    if (std::find(names.begin(), names.end(), out.function.name) == names.end()) {
      return r.ChildError("name", fmt::format("unknown function '{}'{}; valid: {}",
                                              out.function.name,
                                              DidYouMean(out.function.name, names),
                                              JoinNames(names)));
    }
    TUNE_ASSIGN_OR_RETURN(auto dims, r.OptInt("dims"));
    if (dims) {
      if (*dims < 1 || *dims > 1000) return r.ChildError("dims", "must be in 1..1000");
      out.function.dims = *dims;
    }
    TUNE_ASSIGN_OR_RETURN(auto n_steps, r.OptInt("n_steps"));
    if (n_steps) {
      if (*n_steps < 0) return r.ChildError("n_steps", "must be >= 0");
      out.function.n_steps = *n_steps;
    }
    TUNE_ASSIGN_OR_RETURN(out.function.oom_threshold, r.OptNumber("oom_threshold"));
    return Status::Ok();
  }
  if (out.type == "command") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "argv", "env", "cwd", "timeout", "work_dir",
                                      "oom_patterns", "stderr_tail_bytes"}));
    if (!r.Has("argv")) return r.Error("missing required key 'argv' (the program and its arguments)");
    TUNE_ASSIGN_OR_RETURN(out.command.argv, ReadStringArray(r, "argv"));
    if (out.command.argv.empty() || out.command.argv[0].empty()) {
      return r.ChildError("argv", "argv needs at least the program name");
    }
    std::vector<std::string> valid = param_names;
    for (const auto& s : CommandSpecialNames()) valid.push_back(s);
    for (size_t i = 0; i < out.command.argv.size(); ++i) {
      TUNE_RETURN_IF_ERROR(CheckTemplate(r, fmt::format("argv/{}", i), out.command.argv[i], valid));
    }
    if (r.Has("env")) {
      JsonReader env = r.Child("env");
      TUNE_RETURN_IF_ERROR(env.ExpectObject());
      for (const auto& [k, v] : env.json().items()) {
        if (!v.is_string()) return env.ChildError(k, "expected a string, got " + JsonReader::Describe(v));
        TUNE_RETURN_IF_ERROR(CheckTemplate(env, k, v.get<std::string>(), valid));
        out.command.env[k] = v.get<std::string>();
      }
    }
    TUNE_ASSIGN_OR_RETURN(auto cwd, r.OptString("cwd"));
    if (cwd) out.command.cwd = fs::absolute(base_dir / *cwd).lexically_normal().string();
    TUNE_ASSIGN_OR_RETURN(auto work_dir, r.OptString("work_dir"));
    if (work_dir) {
      // Absolute, so that trial paths stay valid for a program started in another `cwd`.
      out.command.work_dir = fs::absolute(base_dir / *work_dir).lexically_normal().string();
    }
    TUNE_ASSIGN_OR_RETURN(out.command.timeout_seconds, r.OptNumber("timeout"));
    if (out.command.timeout_seconds && *out.command.timeout_seconds <= 0) {
      return r.ChildError("timeout", "must be > 0 seconds");
    }
    TUNE_ASSIGN_OR_RETURN(out.command.oom_patterns, ReadStringArray(r, "oom_patterns"));
    TUNE_ASSIGN_OR_RETURN(auto tail, r.OptInt("stderr_tail_bytes"));
    if (tail) {
      if (*tail < 0) return r.ChildError("stderr_tail_bytes", "must be >= 0");
      out.command.stderr_tail_bytes = static_cast<size_t>(*tail);
    }
    return Status::Ok();
  }
  if (out.type == "train") return ParseTrainObjective(r, base_dir, out.train);
  const std::vector<std::string> types = {"function", "command", "train"};
  return r.ChildError("type", fmt::format("unknown objective type '{}'{}; valid: {}", out.type,
                                          DidYouMean(out.type, types), JoinNames(types)));
}

}  // namespace

Result<ConditionalSpace> ParseSearchSpace(const Json& search_space, const Json& conditional,
                                          ModelCatalog catalog, const std::string& source) {
  SpaceParser parser{catalog, source, {}};
  SpaceBlock root;
  std::optional<JsonReader> s, c;
  if (!search_space.is_null()) s.emplace(search_space, source, "/search_space");
  if (!conditional.is_null()) c.emplace(conditional, source, "/conditional");
  TUNE_RETURN_IF_ERROR(parser.ParseBlock(s ? &*s : nullptr, c ? &*c : nullptr, root));
  return ConditionalSpace(std::move(root), std::move(catalog));
}

Result<StudyConfig> ParseStudyConfig(const Json& doc, const std::string& source,
                                     const fs::path& base_dir) {
  JsonReader r(doc, source);
  TUNE_RETURN_IF_ERROR(r.CheckKeys(kTopKeys));
  StudyConfig config;
  config.source = source;

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
  if (r.Has("directions")) {
    TUNE_ASSIGN_OR_RETURN(auto ds, ReadStringArray(r, "directions"));
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
  }
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

  if (r.Has("sampler")) {
    JsonReader s = r.Child("sampler");
    TUNE_RETURN_IF_ERROR(s.ExpectObject());
    TUNE_ASSIGN_OR_RETURN(config.sampler.name, s.String("name", "random"));
    TUNE_ASSIGN_OR_RETURN(auto seed, s.OptInt("seed"));
    if (seed) {
      if (*seed < 0) return s.ChildError("seed", "must be >= 0");
      config.sampler.seed = static_cast<uint64_t>(*seed);
    }
    config.sampler.options = s.json();
    config.sampler.options.erase("name");
    config.sampler.options.erase("seed");
  }
  config.sampler.source = source;
  TUNE_RETURN_IF_ERROR(MakeSampler(config.sampler).status());
  if (r.Has("pruner")) {
    JsonReader p = r.Child("pruner");
    TUNE_RETURN_IF_ERROR(p.ExpectObject());
    TUNE_ASSIGN_OR_RETURN(config.pruner.name, p.String("name", "nop"));
    config.pruner.options = p.json();
    config.pruner.options.erase("name");
  }
  config.pruner.source = source;
  TUNE_RETURN_IF_ERROR(MakePruner(config.pruner).status());

  // The model catalog: built in, + a catalog file, + inline models.
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  TUNE_ASSIGN_OR_RETURN(auto catalog_file, r.OptString("model_catalog"));
  if (catalog_file) {
    fs::path path = base_dir / *catalog_file;
    std::ifstream in(path);
    if (!in) {
      return r.ChildError("model_catalog", fmt::format("cannot read '{}'", path.string()));
    }
    Json cat = Json::parse(in, nullptr, false);
    if (cat.is_discarded()) {
      return r.ChildError("model_catalog", fmt::format("'{}' is not valid JSON", path.string()));
    }
    JsonReader cr(cat, path.string());
    TUNE_RETURN_IF_ERROR(cr.CheckKeys({"heavy_threshold_parameters", "models"}));
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> threshold, cr.OptInt("heavy_threshold_parameters"));
    if (threshold) {
      if (*threshold <= 0) return cr.ChildError("heavy_threshold_parameters", "must be > 0");
      catalog.SetHeavyThreshold(*threshold);
    }
    if (cat.contains("models")) TUNE_RETURN_IF_ERROR(catalog.Merge(cat["models"], path.string(), "/models"));
  }
  if (r.Has("models")) TUNE_RETURN_IF_ERROR(catalog.Merge(doc["models"], source, "/models"));

  // A train objective's pretrained checkpoint: its config.json becomes a catalog model, named as
  // the key's value, before the search space and the objective look models up.
  if (doc.contains("objective") && doc["objective"].is_object() &&
      doc["objective"].value("type", Json()) == Json("train") &&
      doc["objective"].contains("pretrained")) {
    JsonReader obj(doc["objective"], source, "/objective");
    TUNE_ASSIGN_OR_RETURN(std::string dir, obj.RequiredString("pretrained"));
    auto checkpoint =
        ReadPretrainedCheckpoint(fs::absolute(base_dir / dir).lexically_normal().string(), dir);
    if (!checkpoint.ok()) return obj.ChildError("pretrained", checkpoint.status().message());
    catalog.Put(checkpoint->model);
  }

  // The objective (before the space: a function objective brings its own default space).
  Json objective_json = doc.contains("objective") ? doc["objective"] : Json::object();
  Json space_json = doc.contains("search_space") ? doc["search_space"] : Json();
  if (space_json.is_null() && objective_json.is_object() &&
      objective_json.value("type", "function") == "function") {
    // Validate the function first: its errors beat "the search space has no parameters".
    TUNE_RETURN_IF_ERROR(ParseObjective(JsonReader(objective_json, source, "/objective"), {},
                                        base_dir, config.objective));
    FunctionOptions fo;
    fo.name = objective_json.value("name", "sphere");
    if (objective_json.contains("dims") && objective_json["dims"].is_number_integer()) {
      fo.dims = objective_json["dims"].get<int64_t>();
    }
    space_json = FunctionDefaultSpace(fo);
  }
  Json conditional_json = doc.contains("conditional") ? doc["conditional"] : Json();
  if (space_json.is_null() && conditional_json.is_null()) {
    return r.Error("missing 'search_space': declare the parameters to tune");
  }
  TUNE_ASSIGN_OR_RETURN(config.space,
                        ParseSearchSpace(space_json, conditional_json, catalog, source));
  if (config.space.ParamNames().empty()) return r.Error("the search space has no parameters");

  JsonReader obj(objective_json, source, "/objective");
  if (!doc.contains("objective")) {
    return r.Error("missing 'objective' (\"function\", \"command\" or \"train\")");
  }
  TUNE_RETURN_IF_ERROR(ParseObjective(obj, config.space.ParamNames(), base_dir, config.objective));
  if (config.objective.type == "train") {
    TUNE_RETURN_IF_ERROR(CheckTrainObjective(obj, config, config.objective.train));
  }

  if (r.Has("enqueue_trials")) {
    JsonReader e = r.Child("enqueue_trials");
    if (!e.json().is_array()) return e.Error("expected an array of parameter objects");
    auto names = config.space.ParamNames();
    for (size_t i = 0; i < e.json().size(); ++i) {
      JsonReader t = e.Index(i);
      TUNE_RETURN_IF_ERROR(t.ExpectObject());
      for (const auto& [k, v] : t.json().items()) {
        if (std::find(names.begin(), names.end(), k) == names.end()) {
          return t.ChildError(k, fmt::format("unknown parameter '{}'{}", k, DidYouMean(k, names)));
        }
      }
      config.enqueue_trials.push_back(t.json());
    }
  }
  return config;
}

Status CheckHeartbeatSettings(const StudyConfig& config, const std::string& where) {
  if (!(config.heartbeat_interval >= 0)) {
    return InvalidArgumentError(
        fmt::format("{}: the heartbeat interval must be >= 0 seconds (0: off), got {}", where,
                    config.heartbeat_interval));
  }
  if (config.grace_period && !(*config.grace_period > config.heartbeat_interval)) {
    return InvalidArgumentError(fmt::format(
        "{}: the grace period ({}s) must be greater than the heartbeat interval ({}s), or running "
        "trials would be failed as stale between two heartbeats",
        where, *config.grace_period, config.heartbeat_interval));
  }
  if (config.retry_failed < 0) {
    return InvalidArgumentError(
        fmt::format("{}: the retry count must be >= 0, got {}", where, config.retry_failed));
  }
  return Status::Ok();
}

Result<StudyConfig> LoadStudyConfig(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFoundError(fmt::format("config file '{}' not found", path.string()));
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("cannot read config file '{}'", path.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  Json doc;
  try {
    doc = Json::parse(buf.str());
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column.
    std::string text = buf.str();
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    return InvalidArgumentError(fmt::format("{}:{}:{}: invalid JSON: {}", path.string(), line, col,
                                            pos == std::string::npos ? what : what.substr(pos)));
  }
  return ParseStudyConfig(doc, path.string(), path.parent_path());
}

std::vector<std::string> SamplerNames() { return {"random", "tpe"}; }
std::vector<std::string> PrunerNames() {
  return {"nop", "median", "percentile", "successive_halving", "hyperband", "threshold", "patient"};
}

namespace {

Status UnknownName(const std::string& source, const std::string& section, const std::string& kind,
                   const std::string& name, const std::vector<std::string>& names) {
  return InvalidArgumentError(fmt::format("{}: /{}/name: unknown {} '{}'{}; valid: {}", source,
                                          section, kind, name, DidYouMean(name, names),
                                          JoinNames(names)));
}

Result<TpeOptions> ParseTpeOptions(const JsonReader& r) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys({"n_startup_trials", "n_ei_candidates", "gamma", "weights",
                                    "prior_weight", "consider_magic_clip", "consider_endpoints",
                                    "multivariate", "multivariate_bandwidth", "group",
                                    "constant_liar", "constraints",
                                    "warn_independent_sampling", "oom_feasibility"}));
  TpeOptions o;
  TUNE_ASSIGN_OR_RETURN(auto startup, r.OptInt("n_startup_trials"));
  if (startup) {
    if (*startup < 0) return r.ChildError("n_startup_trials", "must be >= 0");
    o.n_startup_trials = static_cast<int>(std::min<int64_t>(*startup, 1'000'000'000));
  }
  TUNE_ASSIGN_OR_RETURN(auto candidates, r.OptInt("n_ei_candidates"));
  if (candidates) {
    if (*candidates < 1 || *candidates > 100000) {
      return r.ChildError("n_ei_candidates", "must be between 1 and 100000");
    }
    o.n_ei_candidates = static_cast<int>(*candidates);
  }
  if (r.Has("gamma") && !r.json().at("gamma").is_null()) {
    const Json& g = r.json().at("gamma");
    if (g.is_string() && g == "default") {
    } else if (g.is_string() && g == "hyperopt") {
      o.gamma_hyperopt = true;
    } else if (g.is_number() && g.get<double>() > 0.0 && g.get<double>() <= 1.0) {
      o.gamma_ratio = g.get<double>();
    } else {
      return r.ChildError("gamma", "expected \"default\" (min(ceil(0.1 n), 25)), \"hyperopt\" "
                                   "(min(ceil(0.25 sqrt(n)), 25)) or a ratio in (0, 1], got " +
                                       JsonReader::Describe(g));
    }
  }
  TUNE_ASSIGN_OR_RETURN(std::string weights, r.String("weights", "default"));
  if (weights != "default" && weights != "uniform") {
    return r.ChildError("weights", fmt::format("unknown weights '{}'{}; valid: default, uniform",
                                               weights,
                                               DidYouMean(weights, {"default", "uniform"})));
  }
  o.uniform_weights = weights == "uniform";
  TUNE_ASSIGN_OR_RETURN(auto prior, r.OptNumber("prior_weight"));
  if (prior) {
    if (!(*prior >= 0.0) || std::isinf(*prior)) {
      return r.ChildError("prior_weight", "must be a finite number >= 0");
    }
    o.prior_weight = *prior;
  }
  TUNE_ASSIGN_OR_RETURN(o.consider_magic_clip, r.Bool("consider_magic_clip", true));
  TUNE_ASSIGN_OR_RETURN(o.consider_endpoints, r.Bool("consider_endpoints", false));
  TUNE_ASSIGN_OR_RETURN(o.multivariate, r.Bool("multivariate", false));
  TUNE_ASSIGN_OR_RETURN(std::string bandwidth,
                        r.String("multivariate_bandwidth", "per_dimension"));
  if (bandwidth == "scott") {
    o.multivariate_bandwidth = MultivariateBandwidth::kScott;
  } else if (bandwidth != "per_dimension") {
    return r.ChildError("multivariate_bandwidth",
                        fmt::format("unknown bandwidth rule '{}'{}; valid: per_dimension (Optuna "
                                    "5.0), scott (Optuna 3.1-4.9)",
                                    bandwidth, DidYouMean(bandwidth, {"per_dimension", "scott"})));
  }
  TUNE_ASSIGN_OR_RETURN(o.group, r.Bool("group", false));
  if (o.group && !o.multivariate) {
    return r.ChildError("group", "group=true requires \"multivariate\": true (as in Optuna)");
  }
  TUNE_ASSIGN_OR_RETURN(o.constant_liar, r.Bool("constant_liar", false));
  TUNE_ASSIGN_OR_RETURN(o.constraints, r.Bool("constraints", false));
  TUNE_ASSIGN_OR_RETURN(o.warn_independent_sampling, r.Bool("warn_independent_sampling", false));
  TUNE_ASSIGN_OR_RETURN(o.oom_feasibility, r.Bool("oom_feasibility", true));
  return o;
}

}  // namespace

Result<std::unique_ptr<Sampler>> MakeSampler(const SamplerConfig& config) {
  JsonReader r(config.options, config.source, "/sampler");
  if (config.name == "random") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({}));
    return std::unique_ptr<Sampler>(std::make_unique<RandomSampler>());
  }
  if (config.name == "tpe") {
    TUNE_ASSIGN_OR_RETURN(TpeOptions options, ParseTpeOptions(r));
    return std::unique_ptr<Sampler>(std::make_unique<TpeSampler>(options));
  }
  return UnknownName(config.source, "sampler", "sampler", config.name, SamplerNames());
}

namespace {

// An integer option >= `min`; `fallback` when absent or null.
Result<int64_t> IntAtLeast(const JsonReader& r, const std::string& key, int64_t fallback,
                           int64_t min) {
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(key));
  if (!v) return fallback;
  if (*v < min) return r.ChildError(key, fmt::format("must be an integer >= {}, got {}", min, *v));
  return *v;
}

// "auto" (nullopt; also when absent or null) or an integer >= `min` (`min_text` names it).
Result<std::optional<int64_t>> AutoOrIntAtLeast(const JsonReader& r, const std::string& key,
                                                int64_t min, const std::string& min_text) {
  if (!r.Has(key) || r.json().at(key).is_null()) return std::optional<int64_t>();
  const Json& v = r.json().at(key);
  if (v.is_string() && v.get<std::string>() == "auto") return std::optional<int64_t>();
  const std::string expected = fmt::format("must be \"auto\" or an integer >= {}", min_text);
  if (!v.is_string()) {
    Result<std::optional<int64_t>> i = r.OptInt(key);
    if (i.ok() && **i >= min) return *i;
    if (i.ok()) return r.ChildError(key, fmt::format("{}, got {}", expected, **i));
  }
  return r.ChildError(key, expected + ", got " + JsonReader::Describe(v));
}

// A number option >= 0; `fallback` when absent or null.
Result<double> NonNegativeNumber(const JsonReader& r, const std::string& key, double fallback) {
  TUNE_ASSIGN_OR_RETURN(std::optional<double> v, r.OptNumber(key));
  if (!v) return fallback;
  if (!(*v >= 0)) {
    return r.ChildError(key, fmt::format("must be a number >= 0, got {}", PyFloatRepr(*v)));
  }
  return *v;
}

// "percentile" and "median" (which has no "percentile" key).
Result<PercentileOptions> ParsePercentileOptions(const JsonReader& r, bool median) {
  std::vector<std::string> keys = {"n_startup_trials", "n_warmup_steps", "interval_steps",
                                   "n_min_trials"};
  if (!median) keys.insert(keys.begin(), "percentile");
  TUNE_RETURN_IF_ERROR(r.CheckKeys(keys));
  PercentileOptions o;
  if (!median) {
    TUNE_ASSIGN_OR_RETURN(std::optional<double> p, r.OptNumber("percentile"));
    if (!p) {
      return r.Error(
          "missing required key 'percentile' (a number in [0, 100]; the \"median\" pruner is "
          "percentile 50)");
    }
    if (!(*p >= 0 && *p <= 100)) {
      return r.ChildError("percentile", fmt::format("must be between 0 and 100 inclusive, got {}",
                                                    PyFloatRepr(*p)));
    }
    o.percentile = *p;
  }
  TUNE_ASSIGN_OR_RETURN(o.n_startup_trials, IntAtLeast(r, "n_startup_trials", 5, 0));
  TUNE_ASSIGN_OR_RETURN(o.n_warmup_steps, IntAtLeast(r, "n_warmup_steps", 0, 0));
  TUNE_ASSIGN_OR_RETURN(o.interval_steps, IntAtLeast(r, "interval_steps", 1, 1));
  TUNE_ASSIGN_OR_RETURN(o.n_min_trials, IntAtLeast(r, "n_min_trials", 1, 1));
  return o;
}

Result<SuccessiveHalvingOptions> ParseSuccessiveHalvingOptions(const JsonReader& r) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys(
      {"min_resource", "reduction_factor", "min_early_stopping_rate", "bootstrap_count"}));
  SuccessiveHalvingOptions o;
  TUNE_ASSIGN_OR_RETURN(o.min_resource, AutoOrIntAtLeast(r, "min_resource", 1, "1"));
  TUNE_ASSIGN_OR_RETURN(o.reduction_factor, IntAtLeast(r, "reduction_factor", 4, 2));
  TUNE_ASSIGN_OR_RETURN(o.min_early_stopping_rate, IntAtLeast(r, "min_early_stopping_rate", 0, 0));
  TUNE_ASSIGN_OR_RETURN(o.bootstrap_count, IntAtLeast(r, "bootstrap_count", 0, 0));
  if (o.bootstrap_count > 0 && !o.min_resource) {
    return r.ChildError("bootstrap_count",
                        "must be 0 when min_resource is \"auto\" (they are incompatible, as in "
                        "Optuna); set min_resource to an integer");
  }
  return o;
}

Result<HyperbandOptions> ParseHyperbandOptions(const JsonReader& r) {
  TUNE_RETURN_IF_ERROR(
      r.CheckKeys({"min_resource", "max_resource", "reduction_factor", "bootstrap_count"}));
  HyperbandOptions o;
  TUNE_ASSIGN_OR_RETURN(o.min_resource, IntAtLeast(r, "min_resource", 1, 1));
  TUNE_ASSIGN_OR_RETURN(o.max_resource,
                        AutoOrIntAtLeast(r, "max_resource", o.min_resource,
                                         fmt::format("min_resource ({})", o.min_resource)));
  TUNE_ASSIGN_OR_RETURN(o.reduction_factor, IntAtLeast(r, "reduction_factor", 3, 2));
  TUNE_ASSIGN_OR_RETURN(o.bootstrap_count, IntAtLeast(r, "bootstrap_count", 0, 0));
  if (o.bootstrap_count > 0 && !o.max_resource) {
    return r.ChildError("bootstrap_count",
                        "must be 0 when max_resource is \"auto\" (they are incompatible, as in "
                        "Optuna); set max_resource to an integer");
  }
  return o;
}

Result<ThresholdOptions> ParseThresholdOptions(const JsonReader& r) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys({"lower", "upper", "n_warmup_steps", "interval_steps"}));
  ThresholdOptions o;
  TUNE_ASSIGN_OR_RETURN(o.lower, r.OptNumber("lower"));
  TUNE_ASSIGN_OR_RETURN(o.upper, r.OptNumber("upper"));
  if (!o.lower && !o.upper) {
    return r.Error("needs 'lower', 'upper' or both: the bounds outside which a trial is pruned");
  }
  if (o.lower && o.upper && *o.lower > *o.upper) {
    return r.ChildError("lower", fmt::format("must be <= upper ({}), got {}", PyFloatRepr(*o.upper),
                                             PyFloatRepr(*o.lower)));
  }
  TUNE_ASSIGN_OR_RETURN(o.n_warmup_steps, IntAtLeast(r, "n_warmup_steps", 0, 0));
  TUNE_ASSIGN_OR_RETURN(o.interval_steps, IntAtLeast(r, "interval_steps", 1, 1));
  return o;
}

// The pruner `name` with `options` (without "name"), found at JSON path `path` ("/pruner", or
// "/pruner/wrapped" for the patient pruner's wrapped pruner).
Result<std::unique_ptr<Pruner>> MakePrunerAt(const std::string& name, const Json& options,
                                             const std::string& source, const std::string& path) {
  JsonReader r(options, source, path);
  if (name == "nop") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({}));
    return std::unique_ptr<Pruner>(std::make_unique<NopPruner>());
  }
  if (name == "median" || name == "percentile") {
    TUNE_ASSIGN_OR_RETURN(PercentileOptions o, ParsePercentileOptions(r, name == "median"));
    if (name == "median") return std::unique_ptr<Pruner>(std::make_unique<MedianPruner>(o));
    return std::unique_ptr<Pruner>(std::make_unique<PercentilePruner>(o));
  }
  if (name == "successive_halving") {
    TUNE_ASSIGN_OR_RETURN(SuccessiveHalvingOptions o, ParseSuccessiveHalvingOptions(r));
    return std::unique_ptr<Pruner>(std::make_unique<SuccessiveHalvingPruner>(o));
  }
  if (name == "hyperband") {
    TUNE_ASSIGN_OR_RETURN(HyperbandOptions o, ParseHyperbandOptions(r));
    return std::unique_ptr<Pruner>(std::make_unique<HyperbandPruner>(o));
  }
  if (name == "threshold") {
    TUNE_ASSIGN_OR_RETURN(ThresholdOptions o, ParseThresholdOptions(r));
    return std::unique_ptr<Pruner>(std::make_unique<ThresholdPruner>(o));
  }
  if (name == "patient") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"wrapped", "patience", "min_delta"}));
    PatientOptions o;
    if (!r.Has("patience") || r.json().at("patience").is_null()) {
      return r.Error("missing required key 'patience' (an integer >= 0)");
    }
    TUNE_ASSIGN_OR_RETURN(o.patience, IntAtLeast(r, "patience", 0, 0));
    TUNE_ASSIGN_OR_RETURN(o.min_delta, NonNegativeNumber(r, "min_delta", 0.0));
    std::unique_ptr<Pruner> wrapped;
    if (r.Has("wrapped") && !r.json().at("wrapped").is_null()) {
      JsonReader w = r.Child("wrapped");
      TUNE_RETURN_IF_ERROR(w.ExpectObject());
      TUNE_ASSIGN_OR_RETURN(std::string wrapped_name, w.RequiredString("name"));
      Json wrapped_options = w.json();
      wrapped_options.erase("name");
      TUNE_ASSIGN_OR_RETURN(wrapped, MakePrunerAt(wrapped_name, wrapped_options, source, w.path()));
    }
    return std::unique_ptr<Pruner>(std::make_unique<PatientPruner>(std::move(wrapped), o));
  }
  return UnknownName(source, path.substr(1), "pruner", name, PrunerNames());
}

}  // namespace

Result<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& config) {
  return MakePrunerAt(config.name, config.options, config.source, "/pruner");
}

Result<std::unique_ptr<Objective>> MakeObjective(const StudyConfig& config,
                                                 std::unique_ptr<Trainer> trainer) {
  if (config.objective.type == "function") {
    return NewFunctionObjective(config.objective.function, config.space.catalog());
  }
  if (config.objective.type == "command") return NewCommandObjective(config.objective.command);
  if (config.objective.type == "train") {
    if (!trainer) {
      return FailedPreconditionError(
          "the 'train' objective needs LibTorch, and this tune was built without it (CMake did "
          "not find Torch): install libtorch-dev (scripts/install-deps.sh) and rebuild");
    }
    return NewTrainObjective(config.objective.train, config.space.catalog(), std::move(trainer));
  }
  return InvalidArgumentError("unknown objective type '" + config.objective.type + "'");
}

}  // namespace tune

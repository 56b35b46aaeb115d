#include "train/hyperparams.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "checkpoints/encoder_family.h"
#include "util/py_json.h"
#include "util/text.h"

namespace tune {
namespace {

using Setter = std::function<Status(TrainHyperparams&, const std::string&, const Json&)>;

struct Entry {
  std::string name;
  std::vector<std::string> aliases;
  Setter set;
};

std::string Shown(const Json& v) { return Abbreviate(v.dump(), 40); }

// Lower bound `lo` (inclusive unless lo_open), upper bound `hi` (exclusive if hi_open).
Setter Float(double TrainHyperparams::*field, double lo, bool lo_open, double hi, bool hi_open) {
  return [=](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
    if (!v.is_number() || v.is_boolean()) {
      return InvalidArgumentError(fmt::format("{} must be a number, got {}", name, Shown(v)));
    }
    double x = v.get<double>();
    bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (!ok) {
      return InvalidArgumentError(fmt::format(
          "{} must be in {}{}, {}{}, got {}", name, lo_open ? "(" : "[", PyFloatRepr(lo),
          std::isinf(hi) ? "inf" : PyFloatRepr(hi), hi_open ? ")" : "]", Shown(v)));
    }
    hp.*field = x;
    return Status::Ok();
  };
}

Result<int64_t> AsInt(const std::string& name, const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9e15)
      return static_cast<int64_t>(x);
  }
  return InvalidArgumentError(fmt::format("{} must be an integer, got {}", name, Shown(v)));
}

template <typename T>
Setter Int(T TrainHyperparams::*field, int64_t lo, int64_t hi) {
  return [=](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
    TUNE_ASSIGN_OR_RETURN(int64_t x, AsInt(name, v));
    if (x < lo || x > hi) {
      return InvalidArgumentError(
          hi == INT64_MAX ? fmt::format("{} must be >= {}, got {}", name, lo, x)
                          : fmt::format("{} must be in {}..{}, got {}", name, lo, hi, x));
    }
    hp.*field = static_cast<T>(x);
    return Status::Ok();
  };
}

Setter Bool(bool TrainHyperparams::*field) {
  return [=](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
    if (!v.is_boolean()) {
      return InvalidArgumentError(fmt::format("{} must be true or false, got {}", name, Shown(v)));
    }
    hp.*field = v.get<bool>();
    return Status::Ok();
  };
}

template <typename E>
Setter Choice(E TrainHyperparams::*field, std::vector<std::pair<std::string, E>> choices) {
  return [=](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
    std::vector<std::string> names;
    for (const auto& c : choices) names.push_back(c.first);
    if (v.is_string()) {
      for (const auto& [s, e] : choices) {
        if (s == v.get<std::string>()) {
          hp.*field = e;
          return Status::Ok();
        }
      }
      return InvalidArgumentError(
          fmt::format("unknown {} '{}'{}; valid: {}", name, v.get<std::string>(),
                      DidYouMean(v.get<std::string>(), names), JoinNames(names)));
    }
    return InvalidArgumentError(
        fmt::format("{} must be one of {}, got {}", name, JoinNames(names), Shown(v)));
  };
}

const std::vector<Entry>& Table() {
  constexpr double kInf = INFINITY;
  static const std::vector<Entry> table = [] {
    std::vector<Entry> t;
    t.push_back(
        {"model", {}, [](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
           if (!v.is_string() || v.get<std::string>().empty()) {
             return InvalidArgumentError(
                 fmt::format("{} must be a model name from the catalog, got {}", name, Shown(v)));
           }
           hp.model = v.get<std::string>();
           return Status::Ok();
         }});
    t.push_back(
        {"learning_rate", {"lr"}, Float(&TrainHyperparams::learning_rate, 0, true, kInf, true)});
    t.push_back({"batch_size",
                 {"per_device_train_batch_size", "train_batch_size"},
                 Int(&TrainHyperparams::batch_size, 1, INT64_MAX)});
    t.push_back({"eval_batch_size",
                 {"per_device_eval_batch_size"},
                 Int(&TrainHyperparams::eval_batch_size, 0, INT64_MAX)});
    t.push_back({"grad_accum",
                 {"gradient_accumulation_steps"},
                 Int(&TrainHyperparams::grad_accum, 1, INT64_MAX)});
    t.push_back(
        {"max_length", {"max_seq_length"}, Int(&TrainHyperparams::max_length, 2, INT64_MAX)});
    t.push_back(
        {"epochs", {"num_train_epochs", "num_epochs"}, Int(&TrainHyperparams::epochs, 1, 100000)});
    t.push_back(
        {"optimizer",
         {"optim"},
         Choice<OptimizerKind>(&TrainHyperparams::optimizer,
                               {{"adamw", OptimizerKind::kAdamW}, {"sgd", OptimizerKind::kSgd}})});
    t.push_back({"weight_decay", {}, Float(&TrainHyperparams::weight_decay, 0, false, kInf, true)});
    t.push_back({"momentum", {}, Float(&TrainHyperparams::momentum, 0, false, 1, true)});
    t.push_back({"nesterov", {}, Bool(&TrainHyperparams::nesterov)});
    t.push_back({"adam_beta1", {}, Float(&TrainHyperparams::adam_beta1, 0, false, 1, true)});
    t.push_back({"adam_beta2", {}, Float(&TrainHyperparams::adam_beta2, 0, false, 1, true)});
    t.push_back({"adam_epsilon", {}, Float(&TrainHyperparams::adam_epsilon, 0, true, kInf, true)});
    t.push_back(
        {"scheduler",
         {"lr_scheduler_type"},
         Choice<Schedule>(&TrainHyperparams::scheduler, {{"linear", Schedule::kLinear},
                                                         {"cosine", Schedule::kCosine},
                                                         {"constant", Schedule::kConstant}})});
    t.push_back(
        {"warmup_ratio", {"warmup"}, Float(&TrainHyperparams::warmup_ratio, 0, false, 1, true)});
    t.push_back({"max_grad_norm",
                 {"grad_clip"},
                 Float(&TrainHyperparams::max_grad_norm, 0, false, kInf, true)});
    t.push_back(
        {"dropout", {"hidden_dropout_prob"}, Float(&TrainHyperparams::dropout, 0, false, 1, true)});
    t.push_back({"attention_dropout",
                 {"attention_probs_dropout_prob"},
                 Float(&TrainHyperparams::attention_dropout, 0, false, 1, true)});
    t.push_back({"classifier_dropout",
                 {},
                 [](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
                   if (v.is_null()) {  // the same as dropout
                     hp.classifier_dropout.reset();
                     return Status::Ok();
                   }
                   TrainHyperparams checked;
                   TUNE_RETURN_IF_ERROR(
                       Float(&TrainHyperparams::dropout, 0, false, 1, true)(checked, name, v));
                   hp.classifier_dropout = checked.dropout;
                   return Status::Ok();
                 }});
    t.push_back({"classifier_layers",
                 {"num_classifier_layers"},
                 Int(&TrainHyperparams::classifier_layers, 0, 3)});
    t.push_back({"classifier_hidden",
                 {"classifier_hidden_size"},
                 Int(&TrainHyperparams::classifier_hidden, 0, 1 << 20)});
    for (int i = 1; i <= 3; ++i) {
      t.push_back({fmt::format("classifier_hidden_{}", i),
                   {},
                   [i](TrainHyperparams& hp, const std::string& name, const Json& v) -> Status {
                     TUNE_ASSIGN_OR_RETURN(int64_t x, AsInt(name, v));
                     if (x < 0 || x > (1 << 20)) {
                       return InvalidArgumentError(
                           fmt::format("{} must be in 0..{}, got {}", name, 1 << 20, x));
                     }
                     hp.classifier_hidden_sizes[static_cast<size_t>(i - 1)] = x;
                     return Status::Ok();
                   }});
    }
    t.push_back({"classifier_activation",
                 {},
                 Choice<Activation>(&TrainHyperparams::classifier_activation,
                                    {{"gelu", Activation::kGelu},
                                     {"relu", Activation::kRelu},
                                     {"tanh", Activation::kTanh}})});
    t.push_back(
        {"eval_strategy",
         {"evaluation_strategy"},
         Choice<EvalStrategy>(&TrainHyperparams::eval_strategy,
                              {{"epoch", EvalStrategy::kEpoch}, {"steps", EvalStrategy::kSteps}})});
    t.push_back({"eval_steps", {}, Int(&TrainHyperparams::eval_steps, 1, INT64_MAX)});
    t.push_back({"threshold", {}, Float(&TrainHyperparams::threshold, 0, true, 1, true)});
    t.push_back(
        {"patience", {"early_stopping_patience"}, Int(&TrainHyperparams::patience, 0, INT64_MAX)});
    t.push_back({"min_delta",
                 {"early_stopping_threshold"},
                 Float(&TrainHyperparams::min_delta, 0, false, kInf, true)});
    t.push_back(
        {"padding",
         {},
         Choice<Padding>(&TrainHyperparams::padding,
                         {{"longest", Padding::kLongest}, {"max_length", Padding::kMaxLength}})});
    t.push_back({"bucket_batches", {}, Int(&TrainHyperparams::bucket_batches, 0, INT64_MAX)});
    t.push_back({"seed", {}, Int(&TrainHyperparams::seed, 0, INT64_MAX)});
    t.push_back({"gradient_checkpointing",
                 {"grad_checkpointing"},
                 Bool(&TrainHyperparams::gradient_checkpointing)});
    t.push_back({"precision",
                 {"mixed_precision"},
                 Choice<Precision>(&TrainHyperparams::precision, {{"fp32", Precision::kFp32},
                                                                  {"bf16", Precision::kBf16},
                                                                  {"fp16", Precision::kFp16}})});
    t.push_back({"tf32", {"allow_tf32"}, Bool(&TrainHyperparams::tf32)});
    t.push_back({"attention",
                 {"attn_implementation"},
                 Choice<Attention>(&TrainHyperparams::attention, {{"auto", Attention::kAuto},
                                                                  {"sdpa", Attention::kSdpa},
                                                                  {"eager", Attention::kEager}})});
    t.push_back({"fused_qkv", {}, Bool(&TrainHyperparams::fused_qkv)});
    t.push_back({"fused_elementwise", {}, Bool(&TrainHyperparams::fused_elementwise)});
    t.push_back({"cuda_graphs",
                 {},
                 Choice<CudaGraphs>(&TrainHyperparams::cuda_graphs, {{"auto", CudaGraphs::kAuto},
                                                                     {"on", CudaGraphs::kOn},
                                                                     {"off", CudaGraphs::kOff}})});
    t.push_back({"mlp_layers", {}, Int(&TrainHyperparams::mlp_layers, 0, 16)});
    t.push_back({"mlp_hidden", {}, Int(&TrainHyperparams::mlp_hidden, 1, 1 << 20)});
    return t;
  }();
  return table;
}

const Entry* FindEntry(const std::string& name) {
  for (const Entry& e : Table()) {
    if (e.name == name) return &e;
    for (const auto& a : e.aliases) {
      if (a == name) return &e;
    }
  }
  return nullptr;
}

template <typename E>
std::string NameOf(E value, const std::vector<std::pair<std::string, E>>& choices) {
  for (const auto& [s, e] : choices) {
    if (e == value) return s;
  }
  return "";
}

}  // namespace

int64_t TrainHyperparams::ClassifierWidth(int64_t i, int64_t hidden_size) const {
  int64_t w = classifier_hidden_sizes[static_cast<size_t>(i)];
  if (w > 0) return w;
  return classifier_hidden > 0 ? classifier_hidden : hidden_size;
}

const std::vector<std::string>& HyperparamNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Entry& e : Table()) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::vector<std::string> HyperparamNamesAndAliases() {
  std::vector<std::string> n;
  for (const Entry& e : Table()) {
    n.push_back(e.name);
    for (const auto& a : e.aliases) n.push_back(a);
  }
  return n;
}

std::optional<std::string> CanonicalHyperparam(const std::string& name) {
  const Entry* e = FindEntry(name);
  return e ? std::optional<std::string>(e->name) : std::nullopt;
}

Status SetHyperparam(TrainHyperparams& hp, const std::string& name, const Json& value) {
  const Entry* e = FindEntry(name);
  if (!e) {
    return InvalidArgumentError(fmt::format("unknown training parameter '{}'{}", name,
                                            DidYouMean(name, HyperparamNamesAndAliases())));
  }
  return e->set(hp, name, value);
}

Json HyperparamsToJson(const TrainHyperparams& hp) {
  Json j;
  j["model"] = hp.model;
  j["learning_rate"] = hp.learning_rate;
  j["batch_size"] = hp.batch_size;
  j["eval_batch_size"] = hp.eval_batch_size;
  j["grad_accum"] = hp.grad_accum;
  j["max_length"] = hp.max_length;
  j["epochs"] = hp.epochs;
  j["optimizer"] = hp.optimizer == OptimizerKind::kAdamW ? "adamw" : "sgd";
  j["weight_decay"] = hp.weight_decay;
  j["momentum"] = hp.momentum;
  j["nesterov"] = hp.nesterov;
  j["adam_beta1"] = hp.adam_beta1;
  j["adam_beta2"] = hp.adam_beta2;
  j["adam_epsilon"] = hp.adam_epsilon;
  j["scheduler"] = NameOf<Schedule>(hp.scheduler, {{"linear", Schedule::kLinear},
                                                   {"cosine", Schedule::kCosine},
                                                   {"constant", Schedule::kConstant}});
  j["warmup_ratio"] = hp.warmup_ratio;
  j["max_grad_norm"] = hp.max_grad_norm;
  j["dropout"] = hp.dropout;
  j["attention_dropout"] = hp.attention_dropout;
  j["classifier_dropout"] = hp.classifier_dropout ? Json(*hp.classifier_dropout) : Json(nullptr);
  j["classifier_layers"] = hp.classifier_layers;
  j["classifier_hidden"] = hp.classifier_hidden;
  for (int i = 0; i < 3; ++i) {
    j[fmt::format("classifier_hidden_{}", i + 1)] =
        hp.classifier_hidden_sizes[static_cast<size_t>(i)];
  }
  j["classifier_activation"] = NameOf<Activation>(
      hp.classifier_activation,
      {{"gelu", Activation::kGelu}, {"relu", Activation::kRelu}, {"tanh", Activation::kTanh}});
  j["eval_strategy"] = hp.eval_strategy == EvalStrategy::kSteps ? "steps" : "epoch";
  j["eval_steps"] = hp.eval_steps;
  j["threshold"] = hp.threshold;
  j["patience"] = hp.patience;
  j["min_delta"] = hp.min_delta;
  j["padding"] = hp.padding == Padding::kLongest ? "longest" : "max_length";
  j["bucket_batches"] = hp.bucket_batches;
  j["seed"] = hp.seed;
  j["gradient_checkpointing"] = hp.gradient_checkpointing;
  j["precision"] = PrecisionName(hp.precision);
  j["tf32"] = hp.tf32;
  j["attention"] = AttentionName(hp.attention);
  j["fused_qkv"] = hp.fused_qkv;
  j["fused_elementwise"] = hp.fused_elementwise;
  j["cuda_graphs"] = CudaGraphsName(hp.cuda_graphs);
  j["mlp_layers"] = hp.mlp_layers;
  j["mlp_hidden"] = hp.mlp_hidden;
  return j;
}

const char* AttentionName(Attention attention) {
  switch (attention) {
    case Attention::kAuto:
      return "auto";
    case Attention::kSdpa:
      return "sdpa";
    case Attention::kEager:
      return "eager";
  }
  return "auto";
}

const char* CudaGraphsName(CudaGraphs graphs) {
  switch (graphs) {
    case CudaGraphs::kAuto:
      return "auto";
    case CudaGraphs::kOn:
      return "on";
    case CudaGraphs::kOff:
      return "off";
  }
  return "auto";
}

Result<Precision> ParsePrecision(std::string_view name) {
  static const std::vector<std::string> names = {"fp32", "bf16", "fp16", "pure_bf16"};
  for (size_t k = 0; k < names.size(); ++k) {
    if (name == names[k]) return static_cast<Precision>(k);
  }
  return Status(StatusCode::kInvalidArgument,
                fmt::format("unknown precision '{}'{}; valid: {}", name,
                            DidYouMean(std::string(name), names), JoinNames(names)));
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kPureBf16:
      return "pure_bf16";
  }
  return "?";
}

Precision AutoPrecision(const std::string& device, std::optional<int> compute_major) {
  if (device.rfind("cuda", 0) != 0 || !compute_major) return Precision::kFp32;
  return *compute_major >= 8 ? Precision::kBf16 : Precision::kFp16;
}

Status CheckPrecisionForDevice(Precision precision, const std::string& device) {
  if (precision == Precision::kFp16 && device.rfind("cuda", 0) != 0) {
    return InvalidArgumentError(fmt::format(
        "precision 'fp16' needs a CUDA device (autocast to float16 with loss scaling), and the "
        "device is '{}'; use \"precision\": \"bf16\" on CPU",
        device));
  }
  return Status::Ok();
}

Status CheckPrecisionForCard(Precision precision, const std::string& card,
                             std::pair<int, int> capability) {
  if ((precision != Precision::kBf16 && precision != Precision::kPureBf16) ||
      capability.first >= 8) {
    return Status::Ok();
  }
  return InvalidArgumentError(fmt::format(
      "precision '{}' needs a card with bfloat16, which CUDA cards have from compute capability "
      "8.0 (A100, RTX 30xx, H100 and newer), and {} has compute capability {}.{}",
      PrecisionName(precision), card, capability.first, capability.second));
}

bool UsesRobertaPositions(const ModelSpec& model) {
  const EncoderFamily* family = FindEncoderFamily(model.model_type);
  return family != nullptr && family->roberta_positions;
}

int64_t MaxSequenceLength(const ModelSpec& model) {
  if (IsTorchScriptModel(model)) {
    return model.max_position_embeddings > 0 ? model.max_position_embeddings
                                             : kDefaultTorchScriptMaxLength;
  }
  return UsesRobertaPositions(model) ? model.max_position_embeddings - 2
                                     : model.max_position_embeddings;
}

bool UsesRelativePositions(const ModelSpec& model) {
  return model.model_type == "deberta-v2" || model.position_buckets > 0;
}

// A TorchScript model: max_length within the entry's max_position_embeddings (default 512);
// gradient checkpointing only when the module declares it (a bool attribute
// `gradient_checkpointing`, which the trainer sets; checked when the module is loaded).
Status CheckTorchScriptForTraining(const ModelSpec& model, const TrainHyperparams& hp) {
  if (hp.max_length > MaxSequenceLength(model)) {
    return InvalidArgumentError(
        fmt::format("max_length {} is longer than model '{}' allows ({}: its catalog entry's "
                    "max_position_embeddings{})",
                    hp.max_length, model.name, MaxSequenceLength(model),
                    model.max_position_embeddings > 0 ? "" : ", 512 when unset"));
  }
  return Status::Ok();
}

Status CheckModelForTraining(const ModelSpec& model, const TrainHyperparams& hp) {
  if (IsTorchScriptModel(model)) return CheckTorchScriptForTraining(model, hp);
  if (!model.model_type.empty() && FindEncoderFamily(model.model_type) == nullptr) {
    return InvalidArgumentError(
        fmt::format("model '{}': model_type '{}' is not supported by the trainer; valid: {}",
                    model.name, model.model_type, fmt::join(EncoderModelTypes(), ", ")));
  }
  if (UsesRelativePositions(model) && model.position_buckets <= 0) {
    return InvalidArgumentError(fmt::format(
        "model '{}' (deberta-v2): set position_buckets (256 for DeBERTa-v3); the trainer builds "
        "DeBERTa's log-bucketed relative positions only",
        model.name));
  }
  if (UsesRelativePositions(model) && UsesRobertaPositions(model)) {
    return InvalidArgumentError(
        fmt::format("model '{}': position_buckets {} with model_type '{}': relative positions are "
                    "DeBERTa's (model_type deberta-v2)",
                    model.name, model.position_buckets, model.model_type));
  }
  if (model.num_attention_heads <= 0 || model.hidden_size % model.num_attention_heads != 0) {
    return InvalidArgumentError(
        fmt::format("model '{}': hidden_size {} is not divisible by "
                    "num_attention_heads {}",
                    model.name, model.hidden_size, model.num_attention_heads));
  }
  if (hp.max_length > MaxSequenceLength(model)) {
    return InvalidArgumentError(fmt::format(
        "max_length {} is longer than model '{}' allows ({} positions{})", hp.max_length,
        model.name, MaxSequenceLength(model),
        UsesRobertaPositions(model) ? ", 2 of its max_position_embeddings are reserved" : ""));
  }
  return Status::Ok();
}

}  // namespace tune

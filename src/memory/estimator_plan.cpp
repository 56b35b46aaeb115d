// `tune plan`'s library side: Hugging Face config.json files and the HF cache, plan files, the
// plan's total and the largest request count that fits, and the suggested changes
// (docs/memory.md#inference-tune-plan, docs/cli.md#tune-plan).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "checkpoints/hub_cache.h"
#include "memory/inference.h"
#include "util/json_file.h"
#include "util/json_reader.h"
#include "util/text.h"

namespace tune {

using internal::JsonReader;
namespace fs = std::filesystem;

namespace {

Result<int64_t> ConfigInt(const JsonReader& r, const char* key, bool required, int64_t fallback) {
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(key));
  if (!v) {
    if (required) return r.Error(fmt::format("missing required key '{}'", key));
    return fallback;
  }
  if (*v < 0) return r.ChildError(key, fmt::format("must be >= 0, got {}", *v));
  return *v;
}

// GPT-2's config names its sizes n_layer, n_embd, n_head, n_inner, n_positions.
Status ReadGpt2Config(const JsonReader& r, ModelSpec& m) {
  TUNE_ASSIGN_OR_RETURN(m.num_hidden_layers, ConfigInt(r, "n_layer", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.hidden_size, ConfigInt(r, "n_embd", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.num_attention_heads, ConfigInt(r, "n_head", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.intermediate_size, ConfigInt(r, "n_inner", false, 4 * m.hidden_size));
  TUNE_ASSIGN_OR_RETURN(m.vocab_size, ConfigInt(r, "vocab_size", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.max_position_embeddings, ConfigInt(r, "n_positions", true, 0));
  return Status::Ok();
}

Status ReadCommonConfig(const JsonReader& r, ModelSpec& m, bool decoder) {
  TUNE_ASSIGN_OR_RETURN(m.num_hidden_layers, ConfigInt(r, "num_hidden_layers", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.hidden_size, ConfigInt(r, "hidden_size", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.num_attention_heads, ConfigInt(r, "num_attention_heads", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.intermediate_size, ConfigInt(r, "intermediate_size", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.vocab_size, ConfigInt(r, "vocab_size", true, 0));
  TUNE_ASSIGN_OR_RETURN(m.max_position_embeddings,
                        ConfigInt(r, "max_position_embeddings", !decoder, 0));
  if (!decoder) {
    TUNE_ASSIGN_OR_RETURN(m.type_vocab_size, ConfigInt(r, "type_vocab_size", false, 0));
    if (m.model_type == "deberta-v2") {
      TUNE_ASSIGN_OR_RETURN(m.position_buckets, ConfigInt(r, "position_buckets", false, 256));
    }
    return Status::Ok();
  }
  for (const char* key : {"num_key_value_heads", "head_dim"}) {
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(key));
    if (v) m.extra[key] = *v;
  }
  for (const char* key : {"tie_word_embeddings", "attention_bias", "mlp_bias"}) {
    if (r.Has(key)) {
      TUNE_ASSIGN_OR_RETURN(bool v, r.Bool(key, false));
      m.extra[key] = v;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ModelSpecFromHfConfig(const Json& config, const std::string& name,
                                        const std::string& source) {
  JsonReader r(config, source);
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  ModelSpec m;
  m.name = name;
  TUNE_ASSIGN_OR_RETURN(m.model_type, r.RequiredString("model_type"));
  static const std::vector<std::string> kTypes = {
      "gpt2", "llama", "mistral", "bert", "roberta", "xlm-roberta", "camembert", "deberta-v2"};
  if (std::find(kTypes.begin(), kTypes.end(), m.model_type) == kTypes.end()) {
    return r.ChildError("model_type",
                        fmt::format("'{}' is not supported{}; supported: {}", m.model_type,
                                    DidYouMean(m.model_type, kTypes), JoinNames(kTypes)));
  }
  if (m.model_type == "gpt2") {
    TUNE_RETURN_IF_ERROR(ReadGpt2Config(r, m));
  } else {
    TUNE_RETURN_IF_ERROR(ReadCommonConfig(r, m, IsDecoderModelType(m.model_type)));
  }
  if (IsDecoderModelType(m.model_type)) {
    auto shape = DecoderShapeOf(m);
    if (!shape.ok()) return InvalidArgumentError(source + ": " + shape.status().message());
    m.num_parameters = DecoderParameterCount(*shape);
  } else {
    if (m.hidden_size == 0 || m.num_attention_heads == 0 ||
        m.hidden_size % m.num_attention_heads != 0) {
      return r.Error(fmt::format("num_attention_heads {} does not divide hidden_size {}",
                                 m.num_attention_heads, m.hidden_size));
    }
    m.num_parameters = EncoderParameterCount(m);
  }
  return m;
}

Result<std::string> FindHfCachedConfig(const std::string& repo_id) {
  const std::string cache = HuggingFaceHubCache();
  std::string where;
  std::error_code ec;
  if (auto snapshot = HubSnapshot(repo_id, cache, where)) {
    const fs::path config = *snapshot / "config.json";
    if (fs::is_regular_file(config, ec)) return config.string();
  }
  return NotFoundError(
      fmt::format("'{}' is not in the Hugging Face cache (looked for {}/"
                  "snapshots/<refs/main>/config.json in: {})",
                  repo_id, HubRepoFolder(repo_id), cache));
}

Result<ModelSpec> ResolveModel(const std::string& ref, const ModelCatalog& catalog) {
  std::error_code ec;
  const fs::path path(ref);
  if (fs::exists(path, ec)) {
    const std::string file =
        fs::is_directory(path, ec) ? (path / "config.json").string() : path.string();
    TUNE_ASSIGN_OR_RETURN(Json doc, ReadJsonFile(file));
    return ModelSpecFromHfConfig(doc, ref, file);
  }
  if (catalog.Contains(ref)) return **catalog.Find(ref);
  auto cached = FindHfCachedConfig(ref);
  if (cached.ok()) {
    TUNE_ASSIGN_OR_RETURN(Json doc, ReadJsonFile(*cached));
    return ModelSpecFromHfConfig(doc, ref, *cached);
  }
  return NotFoundError(
      fmt::format("unknown model '{}'{}: not in the catalog, not a path to a config.json, and {}",
                  ref, DidYouMean(ref, catalog.names()), cached.status().message()));
}

namespace {

const std::vector<std::string> kPlanKeys = {"device_memory", "margin",        "requests",
                                            "models",        "prompt_tokens", "max_new_tokens",
                                            "max_length"};
const std::vector<std::string> kModelKeys = {
    "name",           "model",          "format",     "double_quant", "role",
    "prompt_tokens",  "max_new_tokens", "max_length", "batch_size",   "num_labels",
    "kv_cache_dtype", "attention",      "sampling",   "cache"};

// Plan-wide lengths that models inherit.
struct Defaults {
  std::optional<int64_t> prompt_tokens, max_new_tokens, max_length;
};

Result<int64_t> Length(const JsonReader& r, const char* key, std::optional<int64_t> fallback,
                       const std::string& why) {
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(key));
  if (!v) v = fallback;
  if (!v) return r.Error(fmt::format("missing required key '{}' ({})", key, why));
  if (*v <= 0) return r.ChildError(key, fmt::format("must be > 0, got {}", *v));
  return *v;
}

Result<std::string> Choice(const JsonReader& r, const char* key, const std::string& fallback,
                           const std::vector<std::string>& valid) {
  TUNE_ASSIGN_OR_RETURN(std::string v, r.String(key, fallback));
  if (std::find(valid.begin(), valid.end(), v) == valid.end()) {
    return r.ChildError(key, fmt::format("unknown value '{}'{}; valid: {}", v, DidYouMean(v, valid),
                                         JoinNames(valid)));
  }
  return v;
}

Status ReadModelOptions(const JsonReader& r, InferenceModel& im) {
  TUNE_ASSIGN_OR_RETURN(std::string format, r.String("format", "fp16"));
  auto f = ParseWeightFormat(format);
  if (!f.ok()) return r.ChildError("format", f.status().message());
  im.format = *f;
  TUNE_ASSIGN_OR_RETURN(im.double_quant, r.Bool("double_quant", false));
  if (im.double_quant && im.format != WeightFormat::kNf4 && im.format != WeightFormat::kFp4) {
    return r.ChildError("double_quant", fmt::format("applies to nf4 and fp4, not {}", format));
  }
  TUNE_ASSIGN_OR_RETURN(std::string kv, Choice(r, "kv_cache_dtype",
                                               im.format == WeightFormat::kFp32 ? "fp32" : "fp16",
                                               {"fp32", "fp16", "bf16"}));
  im.kv_cache_dtype = *ParseWeightFormat(kv);
  TUNE_ASSIGN_OR_RETURN(std::string attention, Choice(r, "attention", "eager", {"eager", "sdpa"}));
  im.attention = attention == "sdpa" ? AttentionKernel::kSdpa : AttentionKernel::kEager;
  TUNE_ASSIGN_OR_RETURN(std::string sampling,
                        Choice(r, "sampling", "sample", {"sample", "greedy"}));
  im.sample = sampling == "sample";
  TUNE_ASSIGN_OR_RETURN(std::string cache, Choice(r, "cache", "dynamic", {"dynamic", "static"}));
  im.static_cache = cache == "static";
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> batch, r.OptInt("batch_size"));
  if (batch && *batch <= 0)
    return r.ChildError("batch_size", fmt::format("must be > 0, got {}", *batch));
  im.batch_size = batch.value_or(1);
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> labels, r.OptInt("num_labels"));
  if (labels && *labels <= 0) return r.ChildError("num_labels", "must be > 0");
  im.num_labels = labels.value_or(3);
  return Status::Ok();
}

Status ReadLengths(const JsonReader& r, const Defaults& d, InferenceModel& im) {
  if (im.role == InferenceRole::kClassify) {
    TUNE_ASSIGN_OR_RETURN(
        im.max_length, Length(r, "max_length", d.max_length, "role classify: tokens per sequence"));
    return Status::Ok();
  }
  const bool generate = im.role == InferenceRole::kGenerate;
  TUNE_ASSIGN_OR_RETURN(im.prompt_tokens, Length(r, "prompt_tokens", d.prompt_tokens,
                                                 generate ? "role generate: the prompt's tokens"
                                                          : "role score: the tokens scored"));
  if (generate) {
    TUNE_ASSIGN_OR_RETURN(im.max_new_tokens, Length(r, "max_new_tokens", d.max_new_tokens,
                                                    "role generate: tokens generated"));
  }
  return Status::Ok();
}

Result<InferenceModel> ReadPlanModel(const JsonReader& r, const Defaults& d,
                                     const ModelCatalog& catalog) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys(kModelKeys));
  InferenceModel im;
  TUNE_ASSIGN_OR_RETURN(std::string ref, r.RequiredString("model"));
  auto spec = ResolveModel(ref, catalog);
  if (!spec.ok()) return r.ChildError("model", spec.status().message());
  im.model = *spec;
  TUNE_ASSIGN_OR_RETURN(im.label, r.String("name", ref));
  const bool decoder = IsDecoderModelType(im.model.model_type);
  if (decoder) {
    auto shape = DecoderShapeOf(im.model);
    if (!shape.ok()) return r.ChildError("model", shape.status().message());
  }
  TUNE_ASSIGN_OR_RETURN(std::string role, Choice(r, "role", decoder ? "generate" : "classify",
                                                 {"generate", "score", "classify"}));
  im.role = *ParseInferenceRole(role);
  if (decoder == (im.role == InferenceRole::kClassify)) {
    return r.ChildError("role", fmt::format("'{}' is {}: its roles are {}", ref,
                                            decoder ? "a decoder LM" : "an encoder",
                                            decoder ? "generate, score" : "classify"));
  }
  TUNE_RETURN_IF_ERROR(ReadModelOptions(r, im));
  TUNE_RETURN_IF_ERROR(ReadLengths(r, d, im));
  return im;
}

}  // namespace

Result<InferencePlan> ParseInferencePlan(const Json& doc, const std::string& file,
                                         const ModelCatalog& catalog) {
  JsonReader r(doc, file);
  TUNE_RETURN_IF_ERROR(r.CheckKeys(kPlanKeys));
  InferencePlan plan;
  if (r.Has("device_memory")) {
    const Json& v = doc.at("device_memory");
    auto bytes = v.is_string() ? ParseBytes(v.get<std::string>())
                 : v.is_number_integer()
                     ? Result<int64_t>(v.get<int64_t>())
                     : Result<int64_t>(InvalidArgumentError("expected a size such as \"80GiB\""));
    if (!bytes.ok()) return r.ChildError("device_memory", bytes.status().message());
    plan.device_memory = *bytes;
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<double> margin, r.OptNumber("margin"));
  plan.margin = margin.value_or(0.05);
  if (plan.margin < 0 || plan.margin >= 1) return r.ChildError("margin", "must be in [0, 1)");
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> requests, r.OptInt("requests"));
  plan.requests = requests.value_or(1);
  if (plan.requests <= 0) return r.ChildError("requests", "must be > 0");
  Defaults d;
  TUNE_ASSIGN_OR_RETURN(d.prompt_tokens, r.OptInt("prompt_tokens"));
  TUNE_ASSIGN_OR_RETURN(d.max_new_tokens, r.OptInt("max_new_tokens"));
  TUNE_ASSIGN_OR_RETURN(d.max_length, r.OptInt("max_length"));
  if (!r.Has("models") || !doc.at("models").is_array() || doc.at("models").empty()) {
    return r.Error(
        "a plan needs \"models\": a non-empty array of {\"model\": ..., \"format\": "
        "..., \"role\": ...}");
  }
  const JsonReader models = r.Child("models");
  for (size_t k = 0; k < doc.at("models").size(); ++k) {
    TUNE_ASSIGN_OR_RETURN(InferenceModel im, ReadPlanModel(models.Index(k), d, catalog));
    auto check = EstimateInference(im, DeviceMemoryModel::Cuda());
    if (!check.ok()) return models.Index(k).Error(check.status().message());
    plan.models.push_back(std::move(im));
  }
  return plan;
}

namespace {

struct Totals {
  int64_t fixed = 0;  // weights + context + workspace
  int64_t per_request = 0;
};

int64_t TotalAt(const Totals& t, int64_t n, double fragmentation) {
  const int64_t dynamic = n * t.per_request;
  return t.fixed + dynamic +
         static_cast<int64_t>(std::llround(fragmentation * static_cast<double>(dynamic)));
}

// The largest n in [0, limit] whose total fits `usable`.
int64_t MaxRequests(const Totals& t, double fragmentation, int64_t usable, int64_t limit) {
  int64_t lo = 0, hi = limit;
  if (TotalAt(t, 0, fragmentation) > usable) return 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (TotalAt(t, mid, fragmentation) <= usable) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

Result<PlanResult> EvaluatePlan(const InferencePlan& plan, const DeviceMemoryModel& device) {
  PlanResult out;
  out.requests = plan.requests;
  for (const InferenceModel& im : plan.models) {
    TUNE_ASSIGN_OR_RETURN(InferenceEstimate e, EstimateInference(im, device));
    PlanModelResult pm{e, e.weights.total() + plan.requests * e.per_request};
    out.weights += e.weights.total();
    out.per_request += e.per_request;
    out.models.push_back(pm);
  }
  out.context = device.context_bytes;
  out.workspace = device.caching_allocator ? device.workspace_bytes : 0;
  const Totals t{out.weights + out.context + out.workspace, out.per_request};
  out.total = TotalAt(t, plan.requests, device.fragmentation);
  out.fragmentation = out.total - t.fixed - plan.requests * out.per_request;
  if (plan.device_memory) {
    out.usable =
        static_cast<int64_t>(static_cast<double>(*plan.device_memory) * (1.0 - plan.margin));
    out.fits = out.total <= out.usable;
    out.max_requests = MaxRequests(t, device.fragmentation, out.usable, 1'000'000);
  }
  return out;
}

namespace {

struct Candidate {
  std::string change;
  InferencePlan plan;
};

// The longest generation of model k that fits at the plan's request count (0: none).
int64_t LongestGeneration(InferencePlan plan, size_t k, const DeviceMemoryModel& device) {
  int64_t lo = 0, hi = plan.models[k].max_new_tokens - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    plan.models[k].max_new_tokens = mid;
    auto r = EvaluatePlan(plan, device);
    if (r.ok() && r->fits) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::vector<Candidate> Candidates(const InferencePlan& plan, const PlanResult& now,
                                  const DeviceMemoryModel& device) {
  std::vector<Candidate> out;
  for (size_t k = 0; k < plan.models.size(); ++k) {
    const InferenceModel& m = plan.models[k];
    auto quantise = [&](WeightFormat f, bool dq, const std::string& what) {
      Candidate c{fmt::format("quantise '{}' to {}", m.label, what), plan};
      c.plan.models[k].format = f;
      c.plan.models[k].double_quant = dq;
      out.push_back(std::move(c));
    };
    if (!IsQuantized(m.format)) quantise(WeightFormat::kInt8, false, "int8 (LLM.int8)");
    if (m.format != WeightFormat::kNf4 && m.format != WeightFormat::kFp4) {
      quantise(WeightFormat::kNf4, true, "nf4 with double quantisation");
    }
    if (IsDecoderModelType(m.model.model_type) && m.attention == AttentionKernel::kEager) {
      Candidate c{fmt::format("fused attention (sdpa/flash) for '{}'", m.label), plan};
      c.plan.models[k].attention = AttentionKernel::kSdpa;
      out.push_back(std::move(c));
    }
    if (m.role == InferenceRole::kGenerate && m.max_new_tokens > 1) {
      const int64_t longest = LongestGeneration(plan, k, device);
      if (longest > 0) {
        Candidate c{
            fmt::format("max_new_tokens {} for '{}' (from {})", longest, m.label, m.max_new_tokens),
            plan};
        c.plan.models[k].max_new_tokens = longest;
        out.push_back(std::move(c));
      }
    }
  }
  if (now.max_requests >= 1 && now.max_requests < plan.requests) {
    Candidate c{fmt::format("{} parallel requests (from {})", now.max_requests, plan.requests),
                plan};
    c.plan.requests = now.max_requests;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<std::vector<PlanSuggestion>> SuggestPlanChanges(const InferencePlan& plan,
                                                       const DeviceMemoryModel& device) {
  TUNE_ASSIGN_OR_RETURN(PlanResult now, EvaluatePlan(plan, device));
  std::vector<PlanSuggestion> out;
  for (Candidate& c : Candidates(plan, now, device)) {
    TUNE_ASSIGN_OR_RETURN(PlanResult after, EvaluatePlan(c.plan, device));
    if (after.total >= now.total) continue;
    out.push_back({c.change, now.total - after.total, after.total, after.fits, after.max_requests});
  }
  std::stable_sort(out.begin(), out.end(), [](const PlanSuggestion& a, const PlanSuggestion& b) {
    if (a.fits != b.fits) return a.fits;
    return a.saved > b.saved;
  });
  return out;
}

}  // namespace tune

#include "tune/model_catalog.h"

#include <filesystem>

#include "util/json_reader.h"

namespace tune {

namespace internal {
const char* BuiltinModelCatalogJson();  // generated from configs/models.json
}  // namespace internal

using internal::JsonReader;

Json ModelSpec::Attributes() const {
  Json a = extra;
  a["name"] = name;
  a["model_type"] = model_type;
  a["num_hidden_layers"] = num_hidden_layers;
  a["hidden_size"] = hidden_size;
  a["num_attention_heads"] = num_attention_heads;
  a["intermediate_size"] = intermediate_size;
  a["vocab_size"] = vocab_size;
  a["max_position_embeddings"] = max_position_embeddings;
  a["type_vocab_size"] = type_vocab_size;
  a["position_buckets"] = position_buckets;
  a["num_parameters"] = num_parameters;
  a["heavy"] = heavy;
  if (!pretrained.empty()) a["pretrained"] = pretrained;
  if (!checkpoint.empty()) a["checkpoint"] = checkpoint;
  if (!torchscript.empty()) a["torchscript"] = torchscript;
  return a;
}

int64_t EncoderParameterCount(const ModelSpec& m) {
  const int64_t h = m.hidden_size;
  const int64_t i = m.intermediate_size;
  // Self-attention Q, K, V, output (+biases), 2 LayerNorms, feed-forward in/out (+biases).
  const int64_t layer = 4 * (h * h + h) + 2 * (2 * h) + (h * i + i) + (i * h + h);
  int64_t embeddings = m.vocab_size * h + 2 * h;  // word embeddings + LayerNorm
  int64_t extra = 0;
  if (m.position_buckets > 0) {
    // DeBERTa-v2/v3: no absolute positions; shared relative embeddings (2 * buckets) + LayerNorm.
    // The pooler is not part of DebertaV2Model (HF's ContextPooler sits in the classifier).
    embeddings += m.type_vocab_size * h;
    extra = 2 * m.position_buckets * h + 2 * h;
  } else {
    embeddings += (m.max_position_embeddings + m.type_vocab_size) * h;
    extra = h * h + h;  // pooler
  }
  return embeddings + m.num_hidden_layers * layer + extra;
}

bool IsDecoderModelType(const std::string& model_type) {
  return model_type == "gpt2" || model_type == "llama" || model_type == "mistral";
}

namespace {

// An integer in ModelSpec::extra, or `fallback` when absent.
Result<int64_t> ExtraInt(const ModelSpec& m, const char* key, int64_t fallback) {
  if (!m.extra.contains(key) || m.extra.at(key).is_null()) return fallback;
  const Json& v = m.extra.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return InvalidArgumentError(
        fmt::format("model '{}': {} must be a positive integer, got {}", m.name, key, v.dump()));
  }
  return v.get<int64_t>();
}

bool ExtraBool(const ModelSpec& m, const char* key, bool fallback) {
  if (!m.extra.contains(key) || !m.extra.at(key).is_boolean()) return fallback;
  return m.extra.at(key).get<bool>();
}

}  // namespace

Result<DecoderShape> DecoderShapeOf(const ModelSpec& m) {
  if (!IsDecoderModelType(m.model_type)) {
    return InvalidArgumentError(
        fmt::format("model '{}': model_type '{}' is not a decoder LM (gpt2, llama, mistral)",
                    m.name, m.model_type));
  }
  DecoderShape s;
  const bool gpt2 = m.model_type == "gpt2";
  s.family = gpt2 ? DecoderFamily::kGpt2 : DecoderFamily::kLlama;
  s.layers = m.num_hidden_layers;
  s.hidden = m.hidden_size;
  s.heads = m.num_attention_heads;
  s.vocab = m.vocab_size;
  s.max_positions = m.max_position_embeddings;
  s.intermediate = m.intermediate_size > 0 ? m.intermediate_size : (gpt2 ? 4 * s.hidden : 0);
  if (s.layers <= 0 || s.hidden <= 0 || s.heads <= 0 || s.vocab <= 0 || s.intermediate <= 0) {
    return InvalidArgumentError(
        fmt::format("model '{}' needs num_hidden_layers, hidden_size, num_attention_heads, "
                    "intermediate_size and vocab_size > 0",
                    m.name));
  }
  if (!m.extra.contains("head_dim") && s.hidden % s.heads != 0) {
    return InvalidArgumentError(
        fmt::format("model '{}': num_attention_heads {} does not divide hidden_size {}", m.name,
                    s.heads, s.hidden));
  }
  TUNE_ASSIGN_OR_RETURN(s.head_dim, ExtraInt(m, "head_dim", s.hidden / s.heads));
  TUNE_ASSIGN_OR_RETURN(s.kv_heads, ExtraInt(m, "num_key_value_heads", s.heads));
  if (s.heads % s.kv_heads != 0) {
    return InvalidArgumentError(fmt::format(
        "model '{}': num_key_value_heads {} does not divide num_attention_heads {} (grouped-query "
        "attention shares each key/value head among a whole number of query heads)",
        m.name, s.kv_heads, s.heads));
  }
  s.tie_word_embeddings = ExtraBool(m, "tie_word_embeddings", gpt2);
  s.attention_bias = ExtraBool(m, "attention_bias", gpt2);
  s.mlp_bias = ExtraBool(m, "mlp_bias", gpt2);
  return s;
}

int64_t DecoderParameterCount(const DecoderShape& s) {
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim,
                i = s.intermediate;
  const int64_t embeddings = s.vocab * h;
  const int64_t head = s.tie_word_embeddings ? 0 : s.vocab * h;
  if (s.family == DecoderFamily::kGpt2) {
    // wte, wpe; per layer ln_1, c_attn (h -> 3h), c_proj, ln_2, c_fc, c_proj (all with biases);
    // ln_f.
    const int64_t layer =
        2 * h + (h * 3 * q + 3 * q) + (q * h + h) + 2 * h + (h * i + i) + (i * h + h);
    return embeddings + s.max_positions * h + s.layers * layer + 2 * h + head;
  }
  // embed_tokens; per layer input_layernorm, q/k/v/o projections, post_attention_layernorm,
  // gate/up/down projections; the final norm (RMSNorm: a weight only).
  const int64_t attention = h * q + 2 * h * kv + q * h + (s.attention_bias ? q + 2 * kv + h : 0);
  const int64_t mlp = 3 * h * i + (s.mlp_bias ? 2 * i + h : 0);
  return embeddings + s.layers * (2 * h + attention + mlp) + h + head;
}

int64_t DecoderParameterCount(const ModelSpec& m) {
  auto s = DecoderShapeOf(m);
  return s.ok() ? DecoderParameterCount(*s) : 0;
}

namespace {

const std::vector<std::string> kModelKeys = {"model_type",
                                             "num_hidden_layers",
                                             "hidden_size",
                                             "num_attention_heads",
                                             "intermediate_size",
                                             "vocab_size",
                                             "max_position_embeddings",
                                             "type_vocab_size",
                                             "position_buckets",
                                             "num_parameters",
                                             "heavy",
                                             "torchscript"};

// A path of a catalog entry, relative to the file the entry is in.
std::string EntryPath(const JsonReader& r, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path base = fs::path(r.file()).parent_path();
  return fs::absolute(base / path).lexically_normal().string();
}

// A TorchScript entry: {"torchscript": FILE, "vocab": FILE | "tokenizer": DIR, "vocab_size",
// "max_position_embeddings"}; the file's module brings the architecture.
Status ReadTorchScriptModel(const JsonReader& r, ModelSpec& m) {
  TUNE_ASSIGN_OR_RETURN(std::string file, r.RequiredString("torchscript"));
  m.torchscript = EntryPath(r, file);
  m.model_type = kTorchScriptModelType;
  for (const char* key : {"vocab", "tokenizer"}) {
    TUNE_ASSIGN_OR_RETURN(std::optional<std::string> path, r.OptString(key));
    if (path) m.extra[key] = EntryPath(r, *path);
  }
  if (m.extra.contains("vocab") && m.extra.contains("tokenizer")) {
    return r.Error(
        "set \"vocab\" (a vocab.txt) or \"tokenizer\" (a checkpoint directory), "
        "not both");
  }
  return Status::Ok();
}

Status ReadModel(const JsonReader& r, ModelSpec& m, std::optional<bool>& heavy_stated) {
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(m.model_type, r.String("model_type", m.model_type));
  struct IntField {
    const char* key;
    int64_t* dst;
    bool positive;
  };
  for (IntField f : {IntField{"num_hidden_layers", &m.num_hidden_layers, true},
                     IntField{"hidden_size", &m.hidden_size, true},
                     IntField{"num_attention_heads", &m.num_attention_heads, true},
                     IntField{"intermediate_size", &m.intermediate_size, true},
                     IntField{"vocab_size", &m.vocab_size, true},
                     IntField{"max_position_embeddings", &m.max_position_embeddings, true},
                     IntField{"type_vocab_size", &m.type_vocab_size, false},
                     IntField{"position_buckets", &m.position_buckets, false},
                     IntField{"num_parameters", &m.num_parameters, false}}) {
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(f.key));
    if (!v) continue;
    if (*v < 0 || (f.positive && *v == 0)) {
      return r.ChildError(f.key, fmt::format("must be {} 0, got {}", f.positive ? ">" : ">=", *v));
    }
    *f.dst = *v;
  }
  if (r.Has("heavy")) {
    TUNE_ASSIGN_OR_RETURN(bool h, r.Bool("heavy", false));
    heavy_stated = h;
  }
  for (const auto& [key, value] : r.json().items()) {
    bool known = false;
    for (const auto& k : kModelKeys) known = known || k == key;
    if (!known) m.extra[key] = value;
  }
  if (r.Has("torchscript")) return ReadTorchScriptModel(r, m);
  if (m.num_hidden_layers == 0 || m.hidden_size == 0 || m.num_attention_heads == 0 ||
      m.intermediate_size == 0 || m.vocab_size == 0 || m.max_position_embeddings == 0) {
    return r.Error(
        "a model needs num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, "
        "vocab_size and max_position_embeddings");
  }
  if (m.hidden_size % m.num_attention_heads != 0) {
    return r.Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}",
                               m.hidden_size, m.num_attention_heads));
  }
  return Status::Ok();
}

}  // namespace

Status ModelCatalog::Merge(const Json& models, const std::string& file, const std::string& path) {
  JsonReader r(models, file, path);
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  for (const auto& [name, value] : models.items()) {
    ModelSpec m;
    if (auto it = models_.find(name); it != models_.end()) m = it->second;
    m.name = name;
    std::optional<bool> heavy_stated;
    TUNE_RETURN_IF_ERROR(ReadModel(r.Child(name), m, heavy_stated));
    if (!r.json().at(name).contains("num_parameters") && !IsTorchScriptModel(m)) {
      m.num_parameters =
          IsDecoderModelType(m.model_type) ? DecoderParameterCount(m) : EncoderParameterCount(m);
    }
    if (heavy_stated) heavy_stated_[name] = *heavy_stated;
    auto stated = heavy_stated_.find(name);
    m.heavy = stated != heavy_stated_.end() ? stated->second : m.num_parameters >= heavy_threshold_;
    models_[name] = std::move(m);
  }
  return Status::Ok();
}

void ModelCatalog::Put(ModelSpec model) {
  heavy_stated_.erase(model.name);
  model.heavy = model.num_parameters >= heavy_threshold_;
  models_[model.name] = std::move(model);
}

void ModelCatalog::SetHeavyThreshold(int64_t threshold) {
  heavy_threshold_ = threshold;
  for (auto& [name, m] : models_) {
    if (!heavy_stated_.count(name)) m.heavy = m.num_parameters >= heavy_threshold_;
  }
}

Result<ModelCatalog> ModelCatalog::Parse(const Json& doc, const std::string& source) {
  JsonReader r(doc, source);
  TUNE_RETURN_IF_ERROR(r.CheckKeys({"heavy_threshold_parameters", "models"}));
  ModelCatalog c;
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> threshold, r.OptInt("heavy_threshold_parameters"));
  if (threshold) {
    if (*threshold <= 0) {
      return r.ChildError("heavy_threshold_parameters", "must be > 0");
    }
    c.heavy_threshold_ = *threshold;
  }
  if (r.Has("models")) TUNE_RETURN_IF_ERROR(c.Merge(doc.at("models"), source, "/models"));
  return c;
}

Result<ModelCatalog> ModelCatalog::Builtin() {
  // Parsed once per process (the catalog is compiled in); each caller gets its own copy.
  static const Result<ModelCatalog> builtin = []() -> Result<ModelCatalog> {
    Json doc = Json::parse(internal::BuiltinModelCatalogJson(), nullptr, false);
    if (doc.is_discarded()) return InternalError("the built-in model catalog is not valid JSON");
    return Parse(doc, "<built-in configs/models.json>");
  }();
  return builtin;
}

bool LooksLikeTorchScriptFile(const std::string& name) {
  const std::string ext = std::filesystem::path(name).extension().string();
  return ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript";
}

Result<const ModelSpec*> ModelCatalog::Find(const std::string& name) const {
  auto it = models_.find(name);
  if (it != models_.end()) return &it->second;
  return NotFoundError(fmt::format("unknown model '{}'{}; known models: {}", name,
                                   DidYouMean(name, names()), JoinNames(names())));
}

std::vector<std::string> ModelCatalog::names() const {
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

}  // namespace tune

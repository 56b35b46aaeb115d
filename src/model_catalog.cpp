#include "tune/model_catalog.h"

#include "json_reader.h"

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

namespace {

const std::vector<std::string> kModelKeys = {
    "model_type",        "num_hidden_layers", "hidden_size",
    "num_attention_heads", "intermediate_size", "vocab_size",
    "max_position_embeddings", "type_vocab_size", "position_buckets",
    "num_parameters",    "heavy"};

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

Status ModelCatalog::Merge(const Json& models, const std::string& file,
                          const std::string& path) {
  JsonReader r(models, file, path);
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  for (const auto& [name, value] : models.items()) {
    ModelSpec m;
    if (auto it = models_.find(name); it != models_.end()) m = it->second;
    m.name = name;
    std::optional<bool> heavy_stated;
    TUNE_RETURN_IF_ERROR(ReadModel(r.Child(name), m, heavy_stated));
    if (!r.json().at(name).contains("num_parameters")) m.num_parameters = EncoderParameterCount(m);
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
  Json doc = Json::parse(internal::BuiltinModelCatalogJson(), nullptr, false);
  if (doc.is_discarded()) return InternalError("the built-in model catalog is not valid JSON");
  return Parse(doc, "<built-in configs/models.json>");
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

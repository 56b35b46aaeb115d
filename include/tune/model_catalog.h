// The model catalog: architecture facts about the models a study may choose from.
//
// The built-in catalog is configs/models.json, compiled into the binary. A study config may add
// models or override entries ("models": {...}) or merge another catalog file ("model_catalog").
// Keys follow Hugging Face config.json names (num_hidden_layers, hidden_size, ...), so users can
// copy them from a checkpoint's config.json.
//
// `heavy`: stated per model, or derived as num_parameters >= heavy_threshold_parameters
// (default 200,000,000: bert-large, roberta-large, deberta-v3-large and xlm-roberta-base are
// heavy; the base models are not). `num_parameters`: stated, or derived from the architecture
// with the BERT / DeBERTa-v2 encoder formula (EncoderParameterCount).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tune/distributions.h"
#include "tune/status.h"

namespace tune {

inline constexpr int64_t kDefaultHeavyThresholdParameters = 200'000'000;

struct ModelSpec {
  std::string name;
  std::string model_type;  // "bert", "roberta", "xlm-roberta", "deberta-v2"
  int64_t num_hidden_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  int64_t position_buckets = 0;  // DeBERTa-v2/v3 relative positions (0: absolute positions)
  int64_t num_parameters = 0;
  bool heavy = false;
  // A model.safetensors whose weights initialise the encoder (objective key "pretrained",
  // pretrained.h); empty: trained from scratch.
  std::string pretrained;
  // The checkpoint directory the model was read from (config.json, tokenizer); empty: scratch.
  std::string checkpoint;
  // A TorchScript model file (model_type "torchscript"; catalog key "torchscript", or a model
  // name ending in .pt/.pth/.ts): the trainer trains the module's own parameters. Absolute.
  std::string torchscript;
  Json extra = Json::object();  // any other keys, usable in conditions

  // All attributes as JSON (what conditions such as "model.heavy" read).
  Json Attributes() const;
};

inline constexpr const char* kTorchScriptModelType = "torchscript";

// Whether `m` is a TorchScript model (its `torchscript` file is set).
inline bool IsTorchScriptModel(const ModelSpec& m) { return !m.torchscript.empty(); }

// Whether a model name that is not in the catalog names a TorchScript file by its extension
// (.pt, .pth, .ts, .torchscript).
bool LooksLikeTorchScriptFile(const std::string& name);

// Parameters of the encoder (embeddings, layers, pooler) for BERT-like and DeBERTa-v2 models.
int64_t EncoderParameterCount(const ModelSpec& m);

// Decoder LMs (model_type "gpt2", or "llama"/"mistral": RMSNorm, rotary positions, SwiGLU MLP,
// grouped-query attention). Their extra config.json keys live in ModelSpec::extra under the
// Hugging Face names: num_key_value_heads, head_dim, tie_word_embeddings, attention_bias,
// mlp_bias.
bool IsDecoderModelType(const std::string& model_type);

enum class DecoderFamily { kGpt2, kLlama };

// A decoder's shape, with the Hugging Face defaults filled in (num_key_value_heads: the heads;
// head_dim: hidden / heads; GPT-2: intermediate 4 x hidden, biases, tied embeddings).
struct DecoderShape {
  DecoderFamily family = DecoderFamily::kLlama;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t vocab = 0, max_positions = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (GPT-2: true)
  bool mlp_bias = false;        // MLP biases (GPT-2: true)
};

// InvalidArgument naming the model and the key for an impossible shape (heads not dividing the
// hidden size without head_dim, num_key_value_heads not dividing num_attention_heads, ...).
Result<DecoderShape> DecoderShapeOf(const ModelSpec& m);
// Parameters of a decoder LM with its LM head (counted once when tied), as Hugging Face's
// model.num_parameters() counts them; 0 for an invalid shape.
int64_t DecoderParameterCount(const DecoderShape& s);
int64_t DecoderParameterCount(const ModelSpec& m);

class ModelCatalog {
 public:
  // The catalog compiled in from configs/models.json.
  static Result<ModelCatalog> Builtin();
  // Parses a catalog document ({"heavy_threshold_parameters": N, "models": {...}}); `source`
  // names the file in errors.
  static Result<ModelCatalog> Parse(const Json& doc, const std::string& source);

  // Adds or replaces models from a {"name": {...}} object found in `file` at JSON pointer
  // `path` (both for errors). Entries that override an existing model start from its values.
  Status Merge(const Json& models, const std::string& file, const std::string& path);

  // Adds or replaces one model; `heavy` is derived from the threshold.
  void Put(ModelSpec model);

  // NotFound with the closest known name.
  Result<const ModelSpec*> Find(const std::string& name) const;
  bool Contains(const std::string& name) const { return models_.count(name) > 0; }
  // Changes the threshold and re-derives `heavy` for every model that does not state it.
  void SetHeavyThreshold(int64_t threshold);
  std::vector<std::string> names() const;
  int64_t heavy_threshold() const { return heavy_threshold_; }

 private:
  std::map<std::string, ModelSpec> models_;
  std::map<std::string, bool> heavy_stated_;  // models whose `heavy` is given, not derived
  int64_t heavy_threshold_ = kDefaultHeavyThresholdParameters;
};

}  // namespace tune

#include "tune/train/pretrained.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "json_reader.h"
#include "tune/text.h"
#include "tune/train/safetensors.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& list, const std::string& item) {
  // "p2c|c2p" or "c2p, p2c".
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of("|,", start);
    if (end == std::string::npos) end = list.size();
    std::string part = list.substr(start, end - start);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (part == item) return true;
    start = end + 1;
  }
  return false;
}

std::string JoinedStrings(const Json& v) {  // a "a|b" string or ["a", "b"]
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  if (v.is_array()) {
    for (const auto& e : v) out += (e.is_string() ? e.get<std::string>() : e.dump()) + "|";
  }
  return out;
}

}  // namespace

std::string PretrainedVocabPath(const std::string& dir) {
  std::error_code ec;
  const fs::path txt = fs::path(dir) / "vocab.txt", json = fs::path(dir) / "vocab.json";
  return (!fs::exists(txt, ec) && fs::exists(json, ec) ? json : txt).string();
}

Result<PretrainedCheckpoint> ReadPretrainedCheckpoint(const std::string& dir,
                                                      const std::string& name) {
  PretrainedCheckpoint c;
  c.dir = dir;
  c.config_path = (fs::path(dir) / "config.json").string();
  c.weights_path = (fs::path(dir) / "model.safetensors").string();
  c.vocab_path = PretrainedVocabPath(dir);
  const bool bpe = fs::path(c.vocab_path).extension() == ".json";
  std::string merges_path = (fs::path(dir) / "merges.txt").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError(fmt::format("pretrained checkpoint '{}' is not a directory", dir));
  }
  for (const std::string* f : {&c.config_path, &c.weights_path, &c.vocab_path, &merges_path}) {
    if (f == &merges_path && !bpe) continue;
    if (fs::exists(*f, ec)) continue;
    std::string hint;
    if (f == &c.weights_path && fs::exists(fs::path(dir) / "pytorch_model.bin", ec)) {
      hint = " (pytorch_model.bin is a pickle tune cannot read; convert it to safetensors)";
    }
    if (f == &c.vocab_path && fs::exists(fs::path(dir) / "sentencepiece.bpe.model", ec)) {
      hint = " (sentencepiece.bpe.model, XLM-RoBERTa's SentencePiece vocabulary, is not "
             "supported)";
    }
    return NotFoundError(fmt::format(
        "{}: not found; a pretrained checkpoint directory needs config.json, model.safetensors "
        "and vocab.txt (WordPiece) or vocab.json + merges.txt (byte-level BPE){}",
        *f, hint));
  }
  std::ifstream in(c.config_path);
  Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError(c.config_path + ": not valid JSON");
  internal::JsonReader r(doc, c.config_path);
  TUNE_RETURN_IF_ERROR(r.ExpectObject());

  ModelSpec& m = c.model;
  m.name = name;
  m.pretrained = c.weights_path;
  TUNE_ASSIGN_OR_RETURN(m.model_type, r.RequiredString("model_type"));
  const std::vector<std::string> types = {"bert", "roberta", "xlm-roberta", "camembert",
                                          "deberta-v2"};
  if (std::find(types.begin(), types.end(), m.model_type) == types.end()) {
    return r.ChildError("model_type", fmt::format("'{}' is not supported; valid: {}", m.model_type,
                                                  JoinNames(types)));
  }
  const bool deberta = m.model_type == "deberta-v2";
  struct IntField {
    const char* key;
    int64_t* dst;
    int64_t fallback;  // -1: required
  };
  // HF defaults: BertConfig type_vocab_size 2; DebertaV2Config 0 and position_buckets -1.
  for (IntField f : {IntField{"num_hidden_layers", &m.num_hidden_layers, -1},
                     IntField{"hidden_size", &m.hidden_size, -1},
                     IntField{"num_attention_heads", &m.num_attention_heads, -1},
                     IntField{"intermediate_size", &m.intermediate_size, -1},
                     IntField{"vocab_size", &m.vocab_size, -1},
                     IntField{"max_position_embeddings", &m.max_position_embeddings, -1},
                     IntField{"type_vocab_size", &m.type_vocab_size, deberta ? 0 : 2}}) {
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(f.key));
    if (!v && f.fallback < 0) return r.Error(fmt::format("missing required key '{}'", f.key));
    *f.dst = v.value_or(f.fallback);
    if (*f.dst < 0 || (f.fallback < 0 && *f.dst == 0)) {
      return r.ChildError(f.key, fmt::format("must be {} 0, got {}", f.fallback < 0 ? ">" : ">=",
                                             *f.dst));
    }
  }
  if (m.hidden_size % m.num_attention_heads != 0) {
    return r.Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}",
                               m.hidden_size, m.num_attention_heads));
  }
  TUNE_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu"));
  if (act != "gelu") {
    return r.ChildError("hidden_act",
                        fmt::format("'{}' is not supported; the trainer's encoders use 'gelu'", act));
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<double> eps, r.OptNumber("layer_norm_eps"));
  if (eps) {
    if (!(*eps > 0)) return r.ChildError("layer_norm_eps", "must be > 0");
    m.extra["layer_norm_eps"] = *eps;
  }
  if (r.Has("embedding_size") && doc["embedding_size"] != doc["hidden_size"]) {
    return r.ChildError("embedding_size", "an embedding size other than hidden_size is not supported");
  }
  if (deberta) {
    // What the published DeBERTa-v3 checkpoints use; other variants are rejected, not misread.
    TUNE_ASSIGN_OR_RETURN(bool relative, r.Bool("relative_attention", false));
    if (!relative) return r.ChildError("relative_attention", "must be true (DeBERTa-v3)");
    TUNE_ASSIGN_OR_RETURN(bool biased, r.Bool("position_biased_input", true));
    if (biased) return r.ChildError("position_biased_input", "must be false (DeBERTa-v3)");
    TUNE_ASSIGN_OR_RETURN(bool share, r.Bool("share_att_key", false));
    if (!share) return r.ChildError("share_att_key", "must be true (DeBERTa-v3)");
    const std::string att = r.Has("pos_att_type") ? JoinedStrings(doc["pos_att_type"]) : "";
    if (!Contains(att, "c2p") || !Contains(att, "p2c")) {
      return r.ChildError("pos_att_type", "must contain c2p and p2c (DeBERTa-v3: \"p2c|c2p\")");
    }
    TUNE_ASSIGN_OR_RETURN(std::string norm, r.String("norm_rel_ebd", "none"));
    if (!Contains(norm, "layer_norm")) {
      return r.ChildError("norm_rel_ebd", "must be \"layer_norm\" (DeBERTa-v3)");
    }
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> buckets, r.OptInt("position_buckets"));
    if (!buckets || *buckets <= 0) {
      return r.ChildError("position_buckets", "must be > 0 (DeBERTa-v3: 256)");
    }
    m.position_buckets = *buckets;
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> max_rel, r.OptInt("max_relative_positions"));
    if (max_rel && *max_rel >= 1 && *max_rel != m.max_position_embeddings) {
      return r.ChildError("max_relative_positions",
                          fmt::format("must be -1 or max_position_embeddings ({})",
                                      m.max_position_embeddings));
    }
    TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> conv, r.OptInt("conv_kernel_size"));
    if (conv && *conv > 0) return r.ChildError("conv_kernel_size", "convolution layers are not supported");
  }
  m.num_parameters = EncoderParameterCount(m);
  TUNE_RETURN_IF_ERROR(SafetensorsFile::Open(c.weights_path).status());
  return c;
}

}  // namespace tune

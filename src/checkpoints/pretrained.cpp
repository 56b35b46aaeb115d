#include "checkpoints/pretrained.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "checkpoints/checkpoint_weights.h"
#include "checkpoints/encoder_family.h"
#include "tokenizers/tokenizer.h"
#include "util/json_file.h"
#include "util/json_reader.h"
#include "util/text.h"

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

// DeBERTa-v2/v3's keys: what the published v3 checkpoints use; other variants are rejected, not
// misread.
Status ReadDebertaConfig(const internal::JsonReader& r, const Json& doc, ModelSpec& m) {
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
    return r.ChildError(
        "max_relative_positions",
        fmt::format("must be -1 or max_position_embeddings ({})", m.max_position_embeddings));
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> conv, r.OptInt("conv_kernel_size"));
  if (conv && *conv > 0)
    return r.ChildError("conv_kernel_size", "convolution layers are not supported");
  return Status::Ok();
}

// config.json's architecture into `m` (model_type, sizes, layer_norm_eps, DeBERTa's settings).
Status ReadCheckpointConfig(const Json& doc, const std::string& config_path, ModelSpec& m) {
  internal::JsonReader r(doc, config_path);
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(m.model_type, r.RequiredString("model_type"));
  if (FindEncoderFamily(m.model_type) == nullptr) {
    const std::vector<std::string> types = EncoderModelTypes();
    return r.ChildError("model_type",
                        fmt::format("'{}' is not supported{}; valid: {}", m.model_type,
                                    DidYouMean(m.model_type, types), JoinNames(types)));
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
      return r.ChildError(f.key,
                          fmt::format("must be {} 0, got {}", f.fallback < 0 ? ">" : ">=", *f.dst));
    }
  }
  if (m.hidden_size % m.num_attention_heads != 0) {
    return r.Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}",
                               m.hidden_size, m.num_attention_heads));
  }
  TUNE_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu"));
  if (act != "gelu") {
    return r.ChildError(
        "hidden_act", fmt::format("'{}' is not supported; the trainer's encoders use 'gelu'", act));
  }
  TUNE_ASSIGN_OR_RETURN(std::optional<double> eps, r.OptNumber("layer_norm_eps"));
  if (eps) {
    if (!(*eps > 0)) return r.ChildError("layer_norm_eps", "must be > 0");
    m.extra["layer_norm_eps"] = *eps;
  }
  if (r.Has("embedding_size") && doc["embedding_size"] != doc["hidden_size"]) {
    return r.ChildError("embedding_size",
                        "an embedding size other than hidden_size is not supported");
  }
  if (deberta) TUNE_RETURN_IF_ERROR(ReadDebertaConfig(r, doc, m));
  return Status::Ok();
}

// The files a checkpoint directory needs, each missing one named with what to do.
Status CheckCheckpointFiles(const PretrainedCheckpoint& c) {
  const fs::path dir(c.dir);
  std::error_code ec;
  if (!fs::exists(c.config_path, ec)) {
    return NotFoundError(
        fmt::format("{}: not found; a checkpoint directory needs config.json, "
                    "its weights (model.safetensors or pytorch_model.bin) and its tokenizer files",
                    c.config_path));
  }
  if (!fs::exists(c.weights_path, ec)) {
    return NotFoundError(fmt::format(
        "{}: not found; the checkpoint directory has no weights: tune reads model.safetensors, "
        "pytorch_model.bin, or either sharded behind model.safetensors.index.json / "
        "pytorch_model.bin.index.json",
        c.weights_path));
  }
  if (!fs::exists(c.vocab_path, ec) ||
      (fs::path(c.vocab_path).filename() == "vocab.json" && !fs::exists(dir / "merges.txt", ec))) {
    return NotFoundError(fmt::format(
        "{}: not found; a pretrained checkpoint directory needs config.json, its weights "
        "(model.safetensors or pytorch_model.bin) and a tokenizer: vocab.txt (WordPiece), "
        "vocab.json + merges.txt (byte-level BPE), "
        "spm.model (DeBERTa), sentencepiece.bpe.model (XLM-RoBERTa) or tokenizer.json",
        fs::exists(c.vocab_path, ec) ? (dir / "merges.txt").string() : c.vocab_path));
  }
  return Status::Ok();
}

}  // namespace

std::string PretrainedVocabPath(const std::string& dir) {
  return Tokenizer::CheckpointTokenizerFile(dir);
}

Result<PretrainedCheckpoint> ReadPretrainedCheckpoint(const std::string& dir,
                                                      const std::string& name) {
  PretrainedCheckpoint c;
  c.dir = dir;
  c.config_path = (fs::path(dir) / "config.json").string();
  // The weights file from_pretrained would read; model.safetensors (reported missing) if none.
  c.weights_path = FindWeightsFile(dir).value_or((fs::path(dir) / "model.safetensors").string());
  c.vocab_path = PretrainedVocabPath(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError(fmt::format("pretrained checkpoint '{}' is not a directory", dir));
  }
  TUNE_RETURN_IF_ERROR(CheckCheckpointFiles(c));
  TUNE_ASSIGN_OR_RETURN(Json doc, ReadJsonFile(c.config_path));
  TUNE_RETURN_IF_ERROR(ReadCheckpointConfig(doc, c.config_path, c.model));
  c.model.name = name;
  c.model.pretrained = c.weights_path;
  c.model.checkpoint = dir;
  c.model.num_parameters = EncoderParameterCount(c.model);
  TUNE_RETURN_IF_ERROR(CheckpointWeights::Open(c.weights_path).status());
  TUNE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromCheckpointDir(dir, TokenizerOptions{}));
  if (tokenizer.vocab_size() > c.model.vocab_size) {
    return InvalidArgumentError(fmt::format(
        "{}: the tokenizer has {} tokens but {} says vocab_size {}: the tokenizer does not "
        "belong to this model",
        c.vocab_path, tokenizer.vocab_size(), c.config_path, c.model.vocab_size));
  }
  return c;
}

std::vector<std::string> CheckpointTokenizerFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const char* f :
       {"vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "spm.model", "sentencepiece.bpe.model", "added_tokens.json"}) {
    if (fs::exists(fs::path(dir) / f, ec)) out.push_back((fs::path(dir) / f).string());
  }
  return out;
}

Result<std::string> ResolveCheckpoint(const std::string& name, const CheckpointSearch& search) {
  std::vector<std::string> searched;
  std::error_code ec;
  auto at = [&](const fs::path& p, const std::string& what) -> std::optional<std::string> {
    const fs::path abs = fs::absolute(p, ec).lexically_normal();
    searched.push_back(fmt::format("{} {}", what, abs.string()));
    if (fs::is_directory(abs, ec)) return abs.string();
    return std::nullopt;
  };
  const fs::path as_path = fs::path(name).is_absolute() ? fs::path(name) : search.base_dir / name;
  if (auto d = at(as_path, "path")) return *d;
  if (search.catalog_checkpoint) {
    const fs::path p = fs::path(*search.catalog_checkpoint).is_absolute()
                           ? fs::path(*search.catalog_checkpoint)
                           : search.base_dir / *search.catalog_checkpoint;
    if (auto d = at(p, "the catalog entry's \"checkpoint\"")) return *d;
  }
  if (search.models_dir) {
    if (auto d = at(fs::path(*search.models_dir) / name, "models_dir")) return *d;
  }
  const std::string cache = search.hub_cache.empty() ? HuggingFaceHubCache() : search.hub_cache;
  std::string where;
  if (auto d = HubSnapshot(name, cache, where)) return fs::absolute(*d, ec).string();
  searched.push_back("the Hugging Face cache " + where);
  return NotFoundError(fmt::format("model '{}' names no checkpoint directory; searched: {}", name,
                                   JoinNames(searched, "; ")));
}

namespace {

// "models--ORG--NAME" -> "ORG/NAME" (Hugging Face's folder name for a repo id).
std::string RepoIdOfFolder(const std::string& folder) {
  const std::string_view rest =
      std::string_view(folder).substr(std::string_view("models--").size());
  std::string id;
  id.reserve(rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest.compare(i, 2, "--") == 0) {
      id += '/';
      ++i;
    } else {
      id += rest[i];
    }
  }
  return id;
}

bool Wanted(const std::string& name, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return fnmatch(p.c_str(), name.c_str(), 0) == 0;
  });
}

}  // namespace

Result<HubCheckpoints> FindHubCheckpoints(const std::string& cache,
                                          const std::vector<std::string>& patterns) {
  std::error_code ec;
  if (!fs::is_directory(cache, ec)) {
    return NotFoundError(fmt::format("{}: not a directory", cache));
  }
  std::vector<fs::path> repos;
  for (fs::directory_iterator it(cache, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string folder = it->path().filename().string();
    if (folder.rfind("models--", 0) == 0 && it->is_directory(ec)) repos.push_back(it->path());
  }
  std::sort(repos.begin(), repos.end());
  HubCheckpoints out;
  for (const fs::path& repo : repos) {
    const std::string name = RepoIdOfFolder(repo.filename().string());
    if (!Wanted(name, patterns)) continue;
    std::string where;
    const std::optional<fs::path> snapshot = HubSnapshot(name, cache, where);
    if (!snapshot) {
      out.skipped.push_back({repo.string(), "no snapshot at " + where});
      continue;
    }
    auto checkpoint = ReadPretrainedCheckpoint(fs::absolute(*snapshot, ec).string(), name);
    if (!checkpoint.ok()) {
      out.skipped.push_back({repo.string(), checkpoint.status().message()});
      continue;
    }
    out.found.push_back(std::move(checkpoint).value());
  }
  return out;
}

}  // namespace tune

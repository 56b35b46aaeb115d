// Tokenizer: a checkpoint directory's tokenizer files (Tokenizer::FromCheckpointDir lists them).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "tokenizers/byte_bpe.h"
#include "tokenizers/sentencepiece.h"
#include "tokenizers/tokenizer.h"
#include "tokenizers/unicode.h"
#include "util/json_file.h"
#include "util/text.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

// In the order FromCheckpointDir looks for them.
constexpr const char* kTokenizerFiles[] = {"vocab.txt", "vocab.json", "spm.model",
                                           "sentencepiece.bpe.model", "tokenizer.json"};

// An optional boolean key of tokenizer_config.json (null counts as absent, as in Hugging Face).
Result<std::optional<bool>> OptBool(const nlohmann::json& doc, const char* key,
                                    const std::string& path) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return InvalidArgumentError(
        fmt::format("{}: \"{}\" is {}; expected true or false", path, key, it->dump()));
  }
  return std::optional<bool>(it->get<bool>());
}

// How many ids a tokenizer's files may leave without a token. Vocabularies number their tokens
// from 0 and added tokens follow them, so the largest id is about the number of tokens; tokens are
// kept in a table by id, and without a bound one id of 2^31 - 1 in a 20-byte file would make
// that table 2^31 strings (64 GiB).
constexpr size_t kMaxIdsWithoutToken = size_t{1} << 16;

// Grows `tokens` (by id) to hold id `id` of `token`, unless the id is not below the number of
// tokens the files define (`defined`) + kMaxIdsWithoutToken: then an error naming `where`.
Status MakeRoomForId(std::vector<std::string>& tokens, size_t id, size_t defined,
                     const std::string& where, const std::string& token) {
  if (id >= defined + kMaxIdsWithoutToken) {
    return InvalidArgumentError(
        fmt::format("{}: token '{}' has id {}, but there are {} tokens; ids must be below {} (the "
                    "number of tokens + {})",
                    where, token, id, defined, defined + kMaxIdsWithoutToken, kMaxIdsWithoutToken));
  }
  if (id >= tokens.size()) tokens.resize(id + 1);
  return Status::Ok();
}

// A JSON object of token -> id (vocab.json, a tokenizer.json's model.vocab) as a list by id;
// ids no token has stay "".
Status ReadVocabObject(const nlohmann::json& vocab, const std::string& where,
                       std::vector<std::string>& tokens) {
  if (!vocab.is_object()) {
    return InvalidArgumentError(fmt::format("{}: not a JSON object of token -> id", where));
  }
  if (vocab.empty()) return InvalidArgumentError(fmt::format("{}: the vocabulary is empty", where));
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return InvalidArgumentError(
          fmt::format("{}: token '{}' has id {}; ids are integers >= 0", where, token, id.dump()));
    }
    const auto i = static_cast<size_t>(id.get<int64_t>());
    TUNE_RETURN_IF_ERROR(MakeRoomForId(tokens, i, vocab.size(), where, token));
    if (!tokens[i].empty()) {
      return InvalidArgumentError(
          fmt::format("{}: tokens '{}' and '{}' share id {}", where, tokens[i], token, i));
    }
    tokens[i] = token;
  }
  return Status::Ok();
}

// A tokenizer.json's merges: "left right" strings, or [left, right] pairs (newer files).
Result<std::vector<std::string>> MergeStrings(const nlohmann::json& merges,
                                              const std::string& path) {
  if (!merges.is_array()) {
    return InvalidArgumentError(fmt::format("{}: model.merges is not an array", path));
  }
  std::vector<std::string> out;
  for (const auto& m : merges) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return InvalidArgumentError(
          fmt::format("{}: model.merges[{}] is {}; expected \"left right\" or [left, right]", path,
                      out.size(), m.dump().substr(0, 80)));
    }
  }
  return out;
}

// The class and separator tokens a tokenizer.json's post_processor adds (BertProcessing,
// RobertaProcessing: cls and sep; TemplateProcessing: the first and last special token of
// "single"), else `cls` and `sep` unchanged.
void PostProcessorSpecials(const nlohmann::json& doc, std::string& cls, std::string& sep) {
  const auto pp = doc.find("post_processor");
  if (pp == doc.end() || !pp->is_object()) return;
  auto first_string = [](const nlohmann::json& v) {
    return v.is_array() && !v.empty() && v[0].is_string() ? v[0].get<std::string>() : "";
  };
  if (pp->contains("cls") && pp->contains("sep")) {
    if (!first_string((*pp)["cls"]).empty()) cls = first_string((*pp)["cls"]);
    if (!first_string((*pp)["sep"]).empty()) sep = first_string((*pp)["sep"]);
    return;
  }
  std::vector<std::string> specials;
  for (const auto& piece : pp->value("single", nlohmann::json::array())) {
    const auto st = piece.find("SpecialToken");
    if (st != piece.end() && st->contains("id") && (*st)["id"].is_string()) {
      specials.push_back((*st)["id"].get<std::string>());
    }
  }
  if (specials.size() >= 2) cls = specials.front(), sep = specials.back();
}

std::string TypeOf(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_object()) return "";
  const auto type = it->find("type");
  return type != it->end() && type->is_string() ? type->get<std::string>() : "";
}

}  // namespace

std::string Tokenizer::CheckpointTokenizerFile(const std::string& dir) {
  std::error_code ec;
  for (const char* name : kTokenizerFiles) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p, ec)) return p.string();
  }
  return (fs::path(dir) / "vocab.txt").string();
}

Result<Tokenizer> Tokenizer::FromCheckpointDir(const std::string& dir,
                                               const TokenizerOptions& options) {
  // The files' JSON is read with nlohmann's typed accessors, which throw type_error for a value
  // of another type than the format's: the module's edge.
  try {
    return ReadCheckpointDir(dir, options);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(
        fmt::format("{}: a JSON value of the wrong type in the tokenizer files: {}",
                    CheckpointTokenizerFile(dir), JsonSyntaxMessage(e.what())));
  }
}

Result<Tokenizer> Tokenizer::ReadCheckpointDir(const std::string& dir,
                                               const TokenizerOptions& options) {
  const std::string path = CheckpointTokenizerFile(dir);
  const std::string name = fs::path(path).filename().string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return NotFoundError(fmt::format(
        "{}: no tokenizer file; a checkpoint directory needs vocab.txt (WordPiece), vocab.json + "
        "merges.txt (byte-level BPE), spm.model (DeBERTa's SentencePiece), "
        "sentencepiece.bpe.model (XLM-RoBERTa's SentencePiece) or tokenizer.json",
        dir));
  }
  if (name == "tokenizer.json") return FromTokenizerJson(path, options);
  Result<Tokenizer> t = InvalidArgumentError("");
  if (name == "vocab.txt") {
    t = FromVocabFile(path, options.lowercase);
    if (t.ok()) TUNE_RETURN_IF_ERROR(t->ReadTokenizerConfig(dir, options));
  } else if (name == "vocab.json") {
    t = FromBpeFiles(path, (fs::path(dir) / "merges.txt").string());
    if (t.ok()) TUNE_RETURN_IF_ERROR(t->ReadBpeConfig(dir));
  } else {
    t = FromSentencePiece(path, /*fairseq=*/name == "sentencepiece.bpe.model");
    if (t.ok()) TUNE_RETURN_IF_ERROR(t->ReadSentencePieceConfig(dir));
  }
  if (t.ok()) TUNE_RETURN_IF_ERROR(t->ReadAddedTokens(dir));
  return t;
}

namespace {

// dir/tokenizer_config.json, or null when there is none.
Result<nlohmann::json> TokenizerConfig(const std::string& dir) {
  const std::string path = (fs::path(dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return nlohmann::json();
  return ReadJsonObjectFile(path);
}

}  // namespace

// RobertaTokenizer's add_prefix_space from dir/tokenizer_config.json.
Status Tokenizer::ReadBpeConfig(const std::string& dir) {
  TUNE_ASSIGN_OR_RETURN(nlohmann::json doc, TokenizerConfig(dir));
  if (doc.is_null()) return Status::Ok();
  const std::string path = (fs::path(dir) / "tokenizer_config.json").string();
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> prefix, OptBool(doc, "add_prefix_space", path));
  bpe_prefix_space_ = prefix.value_or(false);
  return Status::Ok();
}

// DebertaV2Tokenizer's do_lower_case, split_by_punct and add_prefix_space (Metaspace "always", or
// "first" without it); XLMRobertaTokenizer's add_prefix_space ("always", or "never").
Status Tokenizer::ReadSentencePieceConfig(const std::string& dir) {
  TUNE_ASSIGN_OR_RETURN(nlohmann::json doc, TokenizerConfig(dir));
  if (doc.is_null()) return Status::Ok();
  const std::string path = (fs::path(dir) / "tokenizer_config.json").string();
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> prefix, OptBool(doc, "add_prefix_space", path));
  const bool xlmr = spm_offset_ == 1;
  prepend_ = prefix.value_or(true)
                 ? internal::PrependScheme::kAlways
                 : (xlmr ? internal::PrependScheme::kNever : internal::PrependScheme::kFirst);
  if (xlmr) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> lower, OptBool(doc, "do_lower_case", path));
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> punct, OptBool(doc, "split_by_punct", path));
  lowercase_ = lower.value_or(false);
  split_by_punct_ = punct.value_or(false);
  return Status::Ok();
}

// Hugging Face's AddedToken entries (added_tokens_decoder's values, tokenizer.json's
// added_tokens) into added_: those matched in the raw text (normalized: false), by content.
Status Tokenizer::AddTokensFromJson(const nlohmann::json& tokens, const std::string& where) {
  const size_t defined = tokens_.size() + tokens.size();
  for (const auto& [key, entry] : tokens.items()) {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string()) {
      return InvalidArgumentError(
          fmt::format("{}: entry {} has no \"content\" string", where, key));
    }
    AddedToken t;
    t.content = entry["content"].get<std::string>();
    // added_tokens_decoder is keyed by the id; tokenizer.json's entries carry it.
    int64_t id = -1;
    if (tokens.is_object()) {
      char* end = nullptr;
      id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0') id = -1;
    } else if (entry.contains("id") && entry["id"].is_number_integer()) {
      id = entry["id"].get<int64_t>();
    }
    if (id < 0 || id > INT32_MAX) {
      return InvalidArgumentError(
          fmt::format("{}: entry {} ('{}') has no id >= 0", where, key, t.content));
    }
    t.id = static_cast<int32_t>(id);
    // (An init-capture: clang before 16 cannot capture a structured binding.)
    auto flag = [&e = entry](const char* name, bool fallback) {
      const auto f = e.find(name);
      return f != e.end() && f->is_boolean() ? f->get<bool>() : fallback;
    };
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.single_word = flag("single_word", false);
    // A normalized token is matched in the normalized text, which tune does not do: the family's
    // special tokens are never normalized.
    if (flag("normalized", !flag("special", false)) || t.content.empty()) continue;
    TUNE_RETURN_IF_ERROR(
        MakeRoomForId(tokens_, static_cast<size_t>(t.id), defined, where, t.content));
    if (tokens_[static_cast<size_t>(t.id)].empty()) {
      tokens_[static_cast<size_t>(t.id)] = t.content;
      ids_[t.content] = t.id;
    }
    auto same = std::find_if(added_.begin(), added_.end(),
                             [&](const AddedToken& a) { return a.content == t.content; });
    if (same != added_.end()) {
      *same = t;
    } else {
      added_.push_back(t);
    }
  }
  return Status::Ok();
}

Status Tokenizer::ReadAddedTokens(const std::string& dir) {
  TUNE_ASSIGN_OR_RETURN(nlohmann::json config, TokenizerConfig(dir));
  const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (config.is_object() && config.contains("added_tokens_decoder")) {
    TUNE_RETURN_IF_ERROR(AddTokensFromJson(
        config["added_tokens_decoder"],
        (fs::path(dir) / "tokenizer_config.json").string() + ": added_tokens_decoder"));
  } else if (fs::exists(json_path, ec)) {
    TUNE_ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonObjectFile(json_path));
    TUNE_RETURN_IF_ERROR(AddTokensFromJson(doc.value("added_tokens", nlohmann::json::array()),
                                           json_path + ": added_tokens"));
  }
  SortAddedTokens();
  return Status::Ok();
}

// The family's special tokens, as its tokenizer class adds them (no flags).
void Tokenizer::AddFamilySpecials() {
  for (int32_t id : {pad_id_, unk_id_, cls_id_, sep_id_, mask_id_}) {
    if (id < 0 || TokenText(id).empty()) continue;
    if (std::none_of(added_.begin(), added_.end(),
                     [&](const AddedToken& a) { return a.content == TokenText(id); })) {
      added_.push_back(AddedToken{TokenText(id), id});
    }
  }
  SortAddedTokens();
}

// Leftmost-longest: at one position the longest token wins.
void Tokenizer::SortAddedTokens() {
  std::stable_sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
}

// BertTokenizer's settings from dir/tokenizer_config.json, when it is there.
Status Tokenizer::ReadTokenizerConfig(const std::string& dir, const TokenizerOptions& options) {
  const std::string path = (fs::path(dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonObjectFile(path));
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> lower, OptBool(doc, "do_lower_case", path));
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> strip, OptBool(doc, "strip_accents", path));
  TUNE_ASSIGN_OR_RETURN(std::optional<bool> chinese, OptBool(doc, "tokenize_chinese_chars", path));
  lowercase_ = lower.value_or(options.lowercase);
  strip_accents_ = strip.value_or(options.strip_accents.value_or(lowercase_));
  chinese_chars_ = chinese.value_or(options.tokenize_chinese_chars);
  description_ += fmt::format(", {} from {}", lowercase_ ? "lowercased" : "cased", path);
  return Status::Ok();
}

// The ids of pad, unk, cls and sep (`names`, in that order) and of `mask` (-1 without it).
Status Tokenizer::FindSpecials(const std::string& path, const char* const names[4],
                               const char* mask, const char* expected) {
  int32_t* ids[4] = {&pad_id_, &unk_id_, &cls_id_, &sep_id_};
  for (int i = 0; i < 4; ++i) {
    *ids[i] = TokenId(names[i]);
    if (*ids[i] < 0) {
      return InvalidArgumentError(fmt::format("{}: the vocabulary has no {} token ({} is expected)",
                                              path, names[i], expected));
    }
  }
  mask_id_ = TokenId(mask);
  return Status::Ok();
}

Result<Tokenizer> Tokenizer::FromBpeFiles(const std::string& path, const std::string& merges) {
  TUNE_ASSIGN_OR_RETURN(const nlohmann::json vocab, ReadJsonFile(path));
  if (!vocab.is_object()) {
    return InvalidArgumentError(fmt::format(
        "{}: not a JSON object of token -> id (a byte-level BPE vocab.json is expected)", path));
  }
  Tokenizer t;
  t.lowercase_ = false;
  TUNE_RETURN_IF_ERROR(ReadVocabObject(vocab, path, t.tokens_));
  t.Index();
  t.ids_.erase("");  // ids no token has
  static const char* const kNames[4] = {"<pad>", "<unk>", "<s>", "</s>"};
  TUNE_RETURN_IF_ERROR(
      t.FindSpecials(path, kNames, "<mask>", "a RoBERTa-style byte-level BPE vocab.json"));
  TUNE_ASSIGN_OR_RETURN(internal::ByteBpe bpe, internal::ByteBpe::FromMergesFile(merges));
  t.description_ =
      fmt::format("byte-level BPE {} ({} tokens, {} merges)", path, vocab.size(), bpe.size());
  t.bpe_ = std::make_shared<const internal::ByteBpe>(std::move(bpe));
  t.AddFamilySpecials();
  return t;
}

Result<Tokenizer> Tokenizer::FromSentencePiece(const std::string& path, bool fairseq) {
  TUNE_ASSIGN_OR_RETURN(auto model, internal::SentencePieceModel::Load(path));
  Tokenizer t;
  t.lowercase_ = false;
  const int n = model->size();
  // The Unigram vocabulary transformers' converters build: piece and score by id.
  std::vector<std::pair<std::string, double>> vocab;
  if (fairseq) {
    // XLMRobertaTokenizer: fairseq's four specials, the pieces one id up, <mask> last.
    t.spm_offset_ = 1;
    vocab = {{"<s>", 0.0}, {"<pad>", 0.0}, {"</s>", 0.0}, {"<unk>", 0.0}};
    for (int i = 3; i < n; ++i) vocab.emplace_back(model->Piece(i), model->Score(i));
    vocab.emplace_back("<mask>", 0.0);
    TUNE_ASSIGN_OR_RETURN(internal::PrecompiledCharsmap map,
                          internal::PrecompiledCharsmap::Parse(model->Charsmap(), path));
    t.charsmap_ = std::make_shared<const internal::PrecompiledCharsmap>(std::move(map));
  } else {
    // DebertaV2Tokenizer: the model's own ids; [MASK] added after the pieces when absent.
    for (int i = 0; i < n; ++i) vocab.emplace_back(model->Piece(i), model->Score(i));
  }
  for (const auto& [piece, score] : vocab) t.tokens_.push_back(piece);
  if (!fairseq && model->PieceId("[MASK]") < 0) t.tokens_.push_back("[MASK]");
  t.Index();
  static const char* const kXlmr[4] = {"<pad>", "<unk>", "<s>", "</s>"};
  static const char* const kDeberta[4] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
  if (fairseq) {
    TUNE_RETURN_IF_ERROR(t.FindSpecials(path, kXlmr, "<mask>", "XLM-RoBERTa's model"));
  } else {
    TUNE_RETURN_IF_ERROR(t.FindSpecials(
        path, kDeberta, "[MASK]", "DeBERTa's spm.model, with [PAD] [UNK] [CLS] [SEP] pieces"));
  }
  t.unigram_ = std::make_shared<const internal::Unigram>(vocab, t.unk_id_);
  t.AddFamilySpecials();
  t.description_ = fmt::format("SentencePiece {} ({} pieces, {} ids)", path, n,
                               fairseq ? "XLM-RoBERTa's fairseq" : "DeBERTa's");
  return t;
}

// A Hugging Face tokenizers file: model.type WordPiece (normalizer BertNormalizer or none,
// pre_tokenizer BertPreTokenizer) or BPE (pre_tokenizer ByteLevel).
Result<Tokenizer> Tokenizer::FromTokenizerJson(const std::string& path,
                                               const TokenizerOptions& options) {
  TUNE_ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonObjectFile(path));
  TUNE_RETURN_IF_ERROR(internal::CheckUnicodeData());
  const std::string model_type = TypeOf(doc, "model");
  if (model_type != "WordPiece" && model_type != "BPE") {
    return InvalidArgumentError(fmt::format(
        "{}: model.type is '{}'; tune reads tokenizer.json files of type WordPiece and BPE (for "
        "SentencePiece models give the checkpoint's spm.model or sentencepiece.bpe.model)",
        path, model_type));
  }
  const nlohmann::json& model = doc["model"];
  Tokenizer t;
  TUNE_RETURN_IF_ERROR(
      ReadVocabObject(model.value("vocab", nlohmann::json()), path + ": model.vocab", t.tokens_));
  const nlohmann::json added_tokens = doc.value("added_tokens", nlohmann::json::array());
  const size_t defined = t.tokens_.size() + added_tokens.size();
  for (const auto& added : added_tokens) {
    const int64_t id = added.value("id", int64_t{-1});
    const std::string content = added.value("content", std::string());
    if (id < 0 || id > INT32_MAX || content.empty()) continue;
    TUNE_RETURN_IF_ERROR(MakeRoomForId(t.tokens_, static_cast<size_t>(id), defined,
                                       path + ": added_tokens", content));
    if (t.tokens_[static_cast<size_t>(id)].empty()) t.tokens_[static_cast<size_t>(id)] = content;
  }
  t.Index();
  t.ids_.erase("");
  // tokenizers.Tokenizer matches only the file's added tokens in the text.
  TUNE_RETURN_IF_ERROR(t.AddTokensFromJson(added_tokens, path + ": added_tokens"));
  t.SortAddedTokens();
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string()
                              ? model["unk_token"].get<std::string>()
                              : "";
  if (model_type == "WordPiece") {
    TUNE_RETURN_IF_ERROR(t.ReadWordPieceJson(doc, path, options));
  } else {
    TUNE_RETURN_IF_ERROR(t.ReadBpeJson(doc, path));
  }
  std::string cls = model_type == "BPE" ? "<s>" : "[CLS]",
              sep = model_type == "BPE" ? "</s>" : "[SEP]";
  PostProcessorSpecials(doc, cls, sep);
  const std::string pad = model_type == "BPE" ? "<pad>" : "[PAD]";
  const std::string unk_name = !unk.empty() ? unk : model_type == "BPE" ? "<unk>" : "[UNK]";
  const char* const names[4] = {pad.c_str(), unk_name.c_str(), cls.c_str(), sep.c_str()};
  TUNE_RETURN_IF_ERROR(t.FindSpecials(path, names, model_type == "BPE" ? "<mask>" : "[MASK]",
                                      "a BERT- or RoBERTa-style tokenizer.json"));
  t.description_ =
      fmt::format("{} tokenizer.json {} ({} tokens)", model_type, path, t.tokens_.size());
  return t;
}

Status Tokenizer::ReadWordPieceJson(const nlohmann::json& doc, const std::string& path,
                                    const TokenizerOptions& options) {
  const nlohmann::json& model = doc["model"];
  continuation_ = model.value("continuing_subword_prefix", std::string("##"));
  max_chars_per_word_ = model.value("max_input_chars_per_word", size_t{100});
  const std::string norm = TypeOf(doc, "normalizer"), pre = TypeOf(doc, "pre_tokenizer");
  if (pre != "BertPreTokenizer") {
    return InvalidArgumentError(fmt::format(
        "{}: pre_tokenizer.type is '{}'; a WordPiece tokenizer.json needs BertPreTokenizer", path,
        pre));
  }
  if (norm.empty()) {
    lowercase_ = strip_accents_ = chinese_chars_ = clean_text_ = false;
    return Status::Ok();
  }
  if (norm != "BertNormalizer") {
    return InvalidArgumentError(
        fmt::format("{}: normalizer.type is '{}'; a WordPiece tokenizer.json needs BertNormalizer",
                    path, norm));
  }
  const nlohmann::json& n = doc["normalizer"];
  lowercase_ = n.value("lowercase", options.lowercase);
  const auto strip = n.find("strip_accents");
  strip_accents_ = strip != n.end() && strip->is_boolean() ? strip->get<bool>() : lowercase_;
  chinese_chars_ = n.value("handle_chinese_chars", true);
  clean_text_ = n.value("clean_text", true);
  return Status::Ok();
}

Status Tokenizer::ReadBpeJson(const nlohmann::json& doc, const std::string& path) {
  lowercase_ = false;
  const nlohmann::json& model = doc["model"];
  if (TypeOf(doc, "pre_tokenizer") != "ByteLevel" ||
      !doc["pre_tokenizer"].value("use_regex", true)) {
    return InvalidArgumentError(fmt::format(
        "{}: pre_tokenizer.type is '{}'; a BPE tokenizer.json needs ByteLevel (with use_regex), "
        "as GPT-2 and RoBERTa have",
        path, TypeOf(doc, "pre_tokenizer")));
  }
  bpe_prefix_space_ = doc["pre_tokenizer"].value("add_prefix_space", false);
  TUNE_ASSIGN_OR_RETURN(std::vector<std::string> merges,
                        MergeStrings(model.value("merges", nlohmann::json()), path));
  TUNE_ASSIGN_OR_RETURN(internal::ByteBpe bpe, internal::ByteBpe::FromMerges(merges, path));
  bpe_ = std::make_shared<const internal::ByteBpe>(std::move(bpe));
  return Status::Ok();
}

}  // namespace tune

#include "train/save_best.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoints/encoder_family.h"
#include "util/json_file.h"
#include "util/text.h"

namespace tune {
namespace internal {
const char* TuneClassifierPy();  // generated from src/train/tune_classifier.py
}  // namespace internal

namespace {

namespace fs = std::filesystem;

// The Python module a head with hidden layers is loaded with (src/train/tune_classifier.py).
constexpr const char* kTuneClassifierModule = "tune_classifier";

// config.json of a model trained from scratch: what ReadPretrainedCheckpoint reads back.
Json ScratchConfig(const ModelSpec& m) {
  Json c = {{"model_type", m.model_type},
            {"num_hidden_layers", m.num_hidden_layers},
            {"hidden_size", m.hidden_size},
            {"num_attention_heads", m.num_attention_heads},
            {"intermediate_size", m.intermediate_size},
            {"vocab_size", m.vocab_size},
            {"max_position_embeddings", m.max_position_embeddings},
            {"type_vocab_size", m.type_vocab_size},
            {"hidden_act", "gelu"}};
  if (m.extra.contains("layer_norm_eps")) c["layer_norm_eps"] = m.extra["layer_norm_eps"];
  if (m.position_buckets > 0) {
    c["relative_attention"] = true;
    c["position_biased_input"] = false;
    c["share_att_key"] = true;
    c["pos_att_type"] = {"p2c", "c2p"};
    c["norm_rel_ebd"] = "layer_norm";
    c["position_buckets"] = m.position_buckets;
    c["max_relative_positions"] = -1;
  }
  return c;
}

// What Hugging Face's AutoModelForSequenceClassification needs to load a saved encoder with its
// head: the class (architectures), the problem type, and DeBERTa's ContextPooler settings (tune's
// pooler: dense + gelu, no dropout). A head with hidden layers (classifier_layers > 0) is tune's
// own: "auto_map" names its class in tune_classifier.py (written beside the weights), which
// from_pretrained(DIR, trust_remote_code=True) builds from "tune_classifier_head".
void AddHuggingFaceHead(Json& c, const ModelSpec& m, const TrainHyperparams& hp) {
  const EncoderFamily* family = FindEncoderFamily(m.model_type);
  if (family == nullptr) return;
  c["architectures"] = {family->sequence_class};
  if (m.model_type == "deberta-v2") {
    c["pooler_hidden_size"] = m.hidden_size;
    c["pooler_hidden_act"] = "gelu";
    c["pooler_dropout"] = 0;
  }
  // The checkpoint's own remote code (if any) does not build tune's weights.
  if (c.contains("auto_map") && c["auto_map"].is_object()) {
    c["auto_map"].erase("AutoModelForSequenceClassification");
    if (c["auto_map"].empty()) c.erase("auto_map");
  }
  c.erase("tune_classifier_head");
  if (hp.classifier_layers == 0) return;
  const std::string custom = fmt::format("Tune{}", family->sequence_class);
  c["architectures"] = {custom};
  c["auto_map"]["AutoModelForSequenceClassification"] =
      fmt::format("{}.{}", kTuneClassifierModule, custom);
  Json hidden = Json::array();
  for (int64_t i = 0; i < hp.classifier_layers; ++i) {
    hidden.push_back(hp.ClassifierWidth(i, m.hidden_size));
  }
  c["tune_classifier_head"] = {
      {"hidden_sizes", hidden},
      {"activation", HyperparamsToJson(hp)["classifier_activation"]},
      {"dropout", hp.classifier_dropout.value_or(hp.dropout)},
      {"note", fmt::format("tune's own head: {} hidden layer(s) (classifier.hidden.N.*) before "
                           "classifier.out.*, which {} lacks; load it with "
                           "AutoModelForSequenceClassification.from_pretrained(DIR, "
                           "trust_remote_code=True) ({}.py), or predict with `tune predict "
                           "--model DIR` (docs/config.md, save_best)",
                           hp.classifier_layers, family->sequence_class, kTuneClassifierModule)}};
}

// A TorchScript model's config.json: its module is model.pt beside it.
Json TorchScriptConfig(const ModelSpec& m) {
  Json c = {{"model_type", kTorchScriptModelType},
            {"torchscript", "model.pt"},
            {"max_position_embeddings", MaxSequenceLength(m)}};
  if (m.vocab_size > 0) c["vocab_size"] = m.vocab_size;
  return c;
}

Status WriteJson(const fs::path& path, const Json& doc) {
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) return InternalError(fmt::format("{}: cannot write", path.string()));
  return Status::Ok();
}

// A scratch trial's vocabulary file (and merges.txt beside a vocab.json) under the name
// Tokenizer::FromCheckpointDir reads.
Status CopyVocabFile(const fs::path& staging, const std::string& vocab_file) {
  const fs::path from(vocab_file);
  const bool bpe = from.extension() == ".json";
  std::vector<std::pair<fs::path, fs::path>> copies = {
      {from, staging / (bpe ? "vocab.json" : "vocab.txt")}};
  if (bpe) copies.emplace_back(from.parent_path() / "merges.txt", staging / "merges.txt");
  for (const auto& [src, dst] : copies) {
    std::error_code ec;
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) return InternalError(fmt::format("cannot copy {}: {}", src.string(), ec.message()));
  }
  return Status::Ok();
}

// The tokenizer files: copied from the checkpoint or the vocabulary file, or the built
// vocabulary as vocab.txt.
Status WriteTokenizer(const fs::path& staging, const ModelSpec& model, const Tokenizer* built,
                      const std::string& vocab_file) {
  std::error_code ec;
  if (IsTorchScriptModel(model) && built == nullptr && model.extra.contains("tokenizer")) {
    for (const std::string& file : CheckpointTokenizerFiles(model.extra["tokenizer"])) {
      fs::copy_file(file, staging / fs::path(file).filename(), fs::copy_options::overwrite_existing,
                    ec);
      if (ec) return InternalError(fmt::format("cannot copy {}: {}", file, ec.message()));
    }
    return Status::Ok();
  }
  if (built != nullptr || model.checkpoint.empty()) {
    if (built == nullptr) return InvalidArgumentError("no tokenizer to save");
    if (!vocab_file.empty()) {
      TUNE_RETURN_IF_ERROR(CopyVocabFile(staging, vocab_file));
    } else {
      std::ofstream vocab(staging / "vocab.txt", std::ios::trunc);
      for (int32_t id = 0; id < built->vocab_size(); ++id) vocab << built->TokenText(id) << "\n";
    }
    return WriteJson(staging / "tokenizer_config.json", {{"do_lower_case", built->lowercase()}});
  }
  for (const std::string& file : CheckpointTokenizerFiles(model.checkpoint)) {
    fs::copy_file(file, staging / fs::path(file).filename(), fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return InternalError(fmt::format("cannot copy {}: {}", file, ec.message()));
  }
  return Status::Ok();
}

// The save_best directory as an absolute path without a trailing separator ("best/" and "best"
// are the same directory).
fs::path SaveBestPath(const std::string& save_best) {
  fs::path dir = fs::absolute(save_best).lexically_normal();
  return dir.has_filename() ? dir : dir.parent_path();
}

}  // namespace

std::string SaveBestStagingDir(const std::string& save_best, int64_t trial_number) {
  const fs::path dir = SaveBestPath(save_best);
  return (dir.parent_path() / fmt::format(".{}.trial-{}", dir.filename().string(), trial_number))
      .string();
}

Status WriteSavedModelFiles(const std::string& staging, const ModelSpec& model,
                            const TrainHyperparams& hp, const std::vector<std::string>& labels,
                            const SavedTrial& trial, const Tokenizer* built,
                            const std::string& vocab_file) {
  const fs::path dir(staging);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InternalError(fmt::format("cannot create {}: {}", staging, ec.message()));
  Json config = IsTorchScriptModel(model) ? TorchScriptConfig(model) : ScratchConfig(model);
  if (!model.checkpoint.empty() && !IsTorchScriptModel(model)) {
    TUNE_ASSIGN_OR_RETURN(config,
                          ReadJsonFile((fs::path(model.checkpoint) / "config.json").string()));
  }
  // Regression has one output, which Hugging Face names LABEL_0.
  const std::vector<std::string> outputs = trial.inputs.problem_type == ProblemType::kRegression
                                               ? std::vector<std::string>{"LABEL_0"}
                                               : labels;
  Json id2label = Json::object(), label2id = Json::object();
  for (size_t i = 0; i < outputs.size(); ++i) {
    id2label[std::to_string(i)] = outputs[i];
    label2id[outputs[i]] = i;
  }
  config["num_labels"] = outputs.size();
  config["id2label"] = id2label;
  config["label2id"] = label2id;
  config["problem_type"] = ProblemTypeName(trial.inputs.problem_type);
  if (!IsTorchScriptModel(model)) AddHuggingFaceHead(config, model, hp);
  config["tune"] = {
      {"hyperparams", HyperparamsToJson(hp)}, {"metric", trial.metric}, {"model", model.name}};
  Json inputs = {{"text_column", trial.inputs.text_column},
                 {"label_column", trial.inputs.label_column}};
  if (trial.inputs.problem_type == ProblemType::kMultiLabel) {
    inputs["label_separator"] = trial.inputs.label_separator;
  }
  if (trial.inputs.text_pair_column) {
    inputs["text_pair_column"] = *trial.inputs.text_pair_column;
    inputs["truncation"] = TruncationName(trial.inputs.truncation);
  }
  if (!trial.inputs.positive_label.empty()) inputs["positive_label"] = trial.inputs.positive_label;
  config["tune"]["inputs"] = inputs;
  TUNE_RETURN_IF_ERROR(WriteJson(dir / "config.json", config));
  if (config.contains("tune_classifier_head")) {
    const fs::path module = dir / (std::string(kTuneClassifierModule) + ".py");
    std::ofstream out(module, std::ios::trunc);
    out << internal::TuneClassifierPy();
    out.close();
    if (!out) return InternalError(fmt::format("{}: cannot write", module.string()));
  }
  TUNE_RETURN_IF_ERROR(WriteTokenizer(dir, model, built, vocab_file));
  return WriteJson(dir / "trial.json", {{"study", trial.study},
                                        {"number", trial.number},
                                        {"params", trial.params},
                                        {"value", trial.value},
                                        {"metric", trial.metric}});
}

std::optional<double> BestCompleteValue(const TrialHistory& history) {
  std::optional<double> best;
  for (const auto& t : history.trials) {
    if (t->state != TrialState::kComplete || t->values.size() != 1) continue;
    if (!best || IsBetter(history.direction(), t->values[0], *best)) best = t->values[0];
  }
  return best;
}

namespace {

// Swaps two paths in one step where the kernel can (renameat2 RENAME_EXCHANGE); else moves
// `to` aside first. Afterwards `from` holds the old contents, if there were any.
Status Swap(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) {
    fs::rename(from, to, ec);
    if (ec)
      return InternalError(
          fmt::format("cannot rename {} to {}: {}", from.string(), to.string(), ec.message()));
    return Status::Ok();
  }
#ifdef RENAME_EXCHANGE
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
    return Status::Ok();
  }
#endif
  const fs::path aside = from.string() + ".old";
  fs::rename(to, aside, ec);
  if (!ec) fs::rename(from, to, ec);
  if (ec) return InternalError(fmt::format("cannot replace {}: {}", to.string(), ec.message()));
  fs::rename(aside, from, ec);
  return Status::Ok();
}

}  // namespace

Result<bool> PromoteIfBest(const std::string& staging, const std::string& save_best, double value,
                           StudyDirection direction, std::optional<double> study_best) {
  const fs::path target = SaveBestPath(save_best);
  std::error_code ec;
  const std::string lock_path = target.string() + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(fmt::format("cannot open the lock file {}", lock_path));
  ::flock(fd, LOCK_EX);
  std::optional<double> saved;
  if (auto doc = ReadJsonFile((target / "trial.json").string());
      doc.ok() && (*doc)["value"].is_number()) {
    saved = (*doc)["value"].get<double>();
  }
  const bool better =
      (!saved || IsBetter(direction, value, *saved)) &&
      (!study_best || IsBetter(direction, value, *study_best) || value == *study_best);
  Status st = better ? Swap(staging, target) : Status::Ok();
  fs::remove_all(staging, ec);  // the old best, or the trial that did not win
  ::flock(fd, LOCK_UN);
  ::close(fd);
  if (!st.ok()) return st;
  return better;
}

BestModelSaver::BestModelSaver(std::string dir, TrainMetric metric, SavedInputs inputs)
    : dir_(std::move(dir)), metric_(metric), inputs_(std::move(inputs)) {}

Status BestModelSaver::Prepare(int64_t trial_number, TrainJob& job) const {
  if (job.data == nullptr) return Status::Ok();
  const std::string staging = SaveBestStagingDir(dir_, trial_number);
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return InternalError(fmt::format("cannot create {}: {}", staging, ec.message()));
  job.save_weights =
      (fs::path(staging) / (IsTorchScriptModel(job.model) ? "model.pt" : "model.safetensors"))
          .string();
  return Status::Ok();
}

Result<bool> BestModelSaver::Stage(const std::string& study, int64_t trial_number,
                                   const Json& params, const TrainJob& job,
                                   const TrialOutcome& outcome, const Tokenizer* built,
                                   const std::string& vocab_file) const {
  if (job.save_weights.empty()) return false;
  const std::string staging = SaveBestStagingDir(dir_, trial_number);
  std::error_code ec;
  if (outcome.state != TrialState::kComplete || outcome.values.size() != 1 ||
      !fs::exists(job.save_weights, ec)) {
    fs::remove_all(staging, ec);
    return false;
  }
  const SavedTrial saved{study,  trial_number, params, outcome.values[0], TrainMetricName(metric_),
                         inputs_};
  TUNE_RETURN_IF_ERROR(WriteSavedModelFiles(staging, job.model, job.hp, job.data->label_names,
                                            saved, built, vocab_file));
  return true;
}

Status BestModelSaver::Promote(int64_t number, const TrialOutcome& outcome,
                               std::optional<double> study_best) const {
  const std::string staging = SaveBestStagingDir(dir_, number);
  std::error_code ec;
  if (outcome.state != TrialState::kComplete || outcome.values.size() != 1 ||
      !fs::exists(fs::path(staging) / "trial.json", ec)) {
    fs::remove_all(staging, ec);
    return Status::Ok();
  }
  TUNE_ASSIGN_OR_RETURN(bool promoted, PromoteIfBest(staging, dir_, outcome.values[0],
                                                     TrainMetricDirection(metric_), study_best));
  if (promoted) {
    spdlog::info("Trial {} is the best so far ({} {}): saved its model to {}", number,
                 TrainMetricName(metric_), outcome.values[0], dir_);
  }
  return Status::Ok();
}

// A saved TorchScript model: config.json says model_type "torchscript"; model.pt and the
// tokenizer files sit beside it.
Result<PretrainedCheckpoint> ReadSavedTorchScript(const std::string& dir, const Json& config) {
  PretrainedCheckpoint c;
  c.dir = dir;
  c.config_path = (fs::path(dir) / "config.json").string();
  c.weights_path = (fs::path(dir) / config.value("torchscript", "model.pt")).string();
  c.vocab_path = PretrainedVocabPath(dir);
  std::error_code ec;
  if (!fs::is_regular_file(c.weights_path, ec)) {
    return NotFoundError(fmt::format("{}: no TorchScript model {}", c.config_path, c.weights_path));
  }
  c.model.name = dir;
  c.model.model_type = kTorchScriptModelType;
  c.model.torchscript = c.weights_path;
  c.model.checkpoint = dir;
  c.model.max_position_embeddings =
      config.value("max_position_embeddings", kDefaultTorchScriptMaxLength);
  c.model.vocab_size = config.value("vocab_size", int64_t{0});
  return c;
}

namespace {

// config.json's "tune"/"inputs" into `inputs` (absent: single texts in "text").
Status ReadSavedInputs(const Json& tune, const std::string& path, SavedInputs& inputs) {
  if (!tune.contains("inputs")) return Status::Ok();
  const Json& j = tune["inputs"];
  auto string_at = [&](const char* key) -> Result<std::optional<std::string>> {
    if (!j.is_object() || !j.contains(key)) return std::optional<std::string>();
    if (!j[key].is_string() || j[key].get_ref<const std::string&>().empty()) {
      return InvalidArgumentError(
          fmt::format("{}: /tune/inputs/{} must be a non-empty string", path, key));
    }
    return std::make_optional(j[key].get<std::string>());
  };
  TUNE_ASSIGN_OR_RETURN(auto text, string_at("text_column"));
  if (text) inputs.text_column = *text;
  TUNE_ASSIGN_OR_RETURN(inputs.text_pair_column, string_at("text_pair_column"));
  TUNE_ASSIGN_OR_RETURN(auto positive, string_at("positive_label"));
  if (positive) inputs.positive_label = *positive;
  TUNE_ASSIGN_OR_RETURN(auto label_column, string_at("label_column"));
  if (label_column) inputs.label_column = *label_column;
  TUNE_ASSIGN_OR_RETURN(auto separator, string_at("label_separator"));
  if (separator) inputs.label_separator = *separator;
  TUNE_ASSIGN_OR_RETURN(auto truncation, string_at("truncation"));
  if (truncation) {
    auto parsed = ParseTruncation(*truncation);
    if (!parsed.ok()) {
      return InvalidArgumentError(
          fmt::format("{}: /tune/inputs/truncation: {}", path, parsed.status().message()));
    }
    inputs.truncation = *parsed;
  }
  return Status::Ok();
}

}  // namespace

Result<SavedModel> ReadSavedModel(const std::string& dir) {
  SavedModel s;
  TUNE_ASSIGN_OR_RETURN(Json config, ReadJsonFile((fs::path(dir) / "config.json").string()));
  if (config.value("model_type", std::string()) == kTorchScriptModelType) {
    TUNE_ASSIGN_OR_RETURN(s.checkpoint, ReadSavedTorchScript(dir, config));
  } else {
    TUNE_ASSIGN_OR_RETURN(s.checkpoint, ReadPretrainedCheckpoint(dir, dir));
  }
  const Json id2label = config.value("id2label", Json::object());
  const int64_t n = config.value("num_labels", static_cast<int64_t>(id2label.size()));
  for (int64_t i = 0; i < n; ++i) {
    const std::string key = std::to_string(i);
    s.labels.push_back(id2label.contains(key) && id2label[key].is_string()
                           ? id2label[key].get<std::string>()
                           : "LABEL_" + key);
  }
  // Hugging Face's rule without a problem_type: one output is a regression.
  const std::string type = config.contains("problem_type") && config["problem_type"].is_string()
                               ? config["problem_type"].get<std::string>()
                               : std::string(n == 1 ? "regression" : "single_label_classification");
  auto problem_type = ParseProblemType(type);
  if (!problem_type.ok()) {
    return InvalidArgumentError(fmt::format("{}: /problem_type: {}", s.checkpoint.config_path,
                                            problem_type.status().message()));
  }
  s.inputs.problem_type = *problem_type;
  const size_t least = *problem_type == ProblemType::kSingleLabel ? 2 : 1;
  if (s.labels.size() < least) {
    return InvalidArgumentError(
        fmt::format("{}: no classifier labels (num_labels / id2label); is this a saved tune model?",
                    s.checkpoint.config_path));
  }
  if (*problem_type == ProblemType::kRegression && s.labels.size() != 1) {
    return InvalidArgumentError(fmt::format(
        "{}: problem_type regression with {} outputs; tune predicts one number (num_labels 1)",
        s.checkpoint.config_path, s.labels.size()));
  }
  const Json tune = config.value("tune", Json::object());
  s.metric = tune.value("metric", s.metric);
  TUNE_RETURN_IF_ERROR(ReadSavedInputs(tune, s.checkpoint.config_path, s.inputs));
  const Json hyperparams = tune.contains("hyperparams") && tune["hyperparams"].is_object()
                               ? tune["hyperparams"]
                               : Json::object();
  for (const auto& [key, value] : hyperparams.items()) {
    if (value.is_null()) continue;
    if (Status st = SetHyperparam(s.hp, key, value); !st.ok()) {
      return InvalidArgumentError(
          fmt::format("{}: /tune/hyperparams/{}: {}", s.checkpoint.config_path, key, st.message()));
    }
  }
  // trial.json only says which trial the model came from: predicting goes on without it.
  const fs::path trial_file = fs::path(dir) / "trial.json";
  if (auto trial = ReadJsonFile(trial_file.string()); trial.ok()) {
    s.trial = *trial;
  } else if (std::error_code ec; fs::exists(trial_file, ec)) {
    spdlog::warn("{}; going on without it (it only records the trial the model came from)",
                 trial.status().message());
  }
  return s;
}

}  // namespace tune

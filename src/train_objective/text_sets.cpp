// The train objective's data (text_sets.h).
#include "train_objective/text_sets.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "checkpoints/pretrained.h"
#include "train/text_data.h"
#include "util/text.h"

namespace tune {
namespace {

// The tokenizer of the models under `key` (TokenizerKey): the checkpoint's (each model's with
// "init": "pretrained", else "pretrained"'s; Tokenizer::FromCheckpointDir), the vocabulary
// file's, or one built from the training texts no larger than the smallest model's vocabulary;
// checked against every model's embedding table.
Result<Tokenizer> MakeTokenizer(const TrainObjectiveOptions& options, const std::string& key,
                                const TextDataset& dataset,
                                const std::vector<const ModelSpec*>& models) {
  if (key.empty() && !options.vocab) {
    TokenizerOptions to = options.tokenizer;
    for (const ModelSpec* m : models) {
      if (m->vocab_size > 0) to.vocab_size = std::min(to.vocab_size, m->vocab_size);
    }
    std::vector<std::string> texts;
    texts.reserve(dataset.train.size());
    for (const auto& e : dataset.train) {
      texts.push_back(e.text);
      if (dataset.pair_truncation) texts.push_back(e.text_pair);  // a pair's second text too
    }
    return Tokenizer::Build(texts, to);
  }
  const bool vocab_key = key.rfind(kVocabKeyPrefix, 0) == 0;
  const std::optional<std::string> dir = vocab_key     ? std::nullopt
                                         : key.empty() ? options.pretrained
                                                       : key;
  const std::string file = dir         ? PretrainedVocabPath(*dir)
                           : vocab_key ? key.substr(std::string(kVocabKeyPrefix).size())
                                       : *options.vocab;
  TUNE_ASSIGN_OR_RETURN(Tokenizer t,
                        dir ? Tokenizer::FromCheckpointDir(*dir, options.tokenizer)
                            : Tokenizer::FromVocabFile(file, options.tokenizer.lowercase));
  for (const ModelSpec* m : models) {
    if (m->vocab_size > 0 && t.vocab_size() > m->vocab_size) {
      return InvalidArgumentError(
          fmt::format("{} has {} tokens but model '{}' embeds only {} "
                      "(vocab_size)",
                      file, t.vocab_size(), m->name, m->vocab_size));
    }
  }
  return t;
}

// "3 labels", "5 labels, several per example (1.4 on average)", "a number per example (mean
// 2.41, standard deviation 1.02)", and the class weights when set.
std::string TargetsText(const TextTrainData& data) {
  std::string text;
  const auto n = static_cast<double>(data.train_ids.size());
  if (data.problem_type == ProblemType::kRegression) {
    double mean = 0, sq = 0;
    for (float v : data.train_targets) mean += v;
    mean /= std::max(1.0, n);
    for (float v : data.train_targets) sq += (v - mean) * (v - mean);
    text = fmt::format("a number per example (mean {:.4g}, standard deviation {:.4g})", mean,
                       std::sqrt(sq / std::max(1.0, n)));
  } else if (data.problem_type == ProblemType::kMultiLabel) {
    double on = 0;
    for (float v : data.train_targets) on += v;
    text = fmt::format("{} labels, any number per example ({:.2f} on average)", data.num_labels,
                       on / std::max(1.0, n));
  } else {
    text = fmt::format("{} labels", data.num_labels);
  }
  if (!data.class_weights.empty()) {
    std::vector<std::string> w;
    for (size_t c = 0; c < data.class_weights.size(); ++c) {
      w.push_back(fmt::format("{} {:.3g}", data.label_names[c], data.class_weights[c]));
    }
    text += fmt::format(" ({} weights: {})",
                        data.problem_type == ProblemType::kMultiLabel ? "positive" : "class",
                        JoinNames(w));
  }
  return text;
}

// Every text tokenized once by `tokenizer` (TokenizeTextDataset), with a log line.
TextTrainData Tokenize(const TextDataset& dataset, const Tokenizer& tokenizer, int64_t max_length) {
  const auto start = std::chrono::steady_clock::now();
  TrainTokenCounts counts;
  TextTrainData data = TokenizeTextDataset(dataset, tokenizer, max_length, &counts);
  const int64_t tokens = counts.tokens, longest = counts.longest;
  const int64_t cap = std::max<int64_t>(max_length - 2, 0);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info(
      "Train data: {} training {} ({}), {} validation examples ({}), {}; "
      "{}; {:.1f} tokens per training {} on average{}; prepared in {:.1f}s",
      data.train_ids.size(),
      data.pairs ? fmt::format("pairs (joined as {}, truncation {})",
                               data.pairs->layout.separators == 1 ? "[CLS] a [SEP] b [SEP]"
                                                                  : "<s> a </s></s> b </s>",
                               TruncationName(data.pairs->layout.truncation))
                 : std::string("examples"),
      dataset.train_source, data.validation_ids.size(), dataset.validation_source,
      TargetsText(data), tokenizer.description(),
      data.train_ids.empty()
          ? 0.0
          : static_cast<double>(tokens) / static_cast<double>(data.train_ids.size()),
      data.pairs ? "pair" : "text",
      longest > cap ? fmt::format(", the longest over {} (truncated)", cap) : "", secs);
  return data;
}

}  // namespace

std::string TokenizerKey(const TrainObjectiveOptions& options, const ModelSpec& model) {
  if (IsTorchScriptModel(model)) {
    if (model.extra.contains("tokenizer")) return model.extra["tokenizer"].get<std::string>();
    if (model.extra.contains("vocab"))
      return kVocabKeyPrefix + model.extra["vocab"].get<std::string>();
    return std::string();
  }
  return options.init_pretrained ? model.checkpoint : std::string();
}

Result<std::vector<const ModelSpec*>> ModelsOf(const TrainObjectiveOptions& options,
                                               const ModelCatalog& catalog,
                                               const std::string& default_model) {
  std::vector<const ModelSpec*> models;
  for (const auto& name : options.models) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(name));
    models.push_back(m);
  }
  if (!default_model.empty()) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(default_model));
    models.push_back(m);
  }
  return models;
}

Result<int64_t> PositiveLabelIndex(const TrainObjectiveOptions& options,
                                   const std::vector<std::string>& labels) {
  if (options.data.problem_type != ProblemType::kSingleLabel) return 1;
  const bool f1 = options.metric == TrainMetric::kF1;
  if (f1 && labels.size() != 2) {
    return InvalidArgumentError(fmt::format(
        "metric 'f1' is the F1 of the positive class, for two labels; the data has {} ({}): use "
        "macro_f1, micro_f1 or weighted_f1",
        labels.size(), JoinNames(labels)));
  }
  int64_t index = 1;
  if (options.positive_label) {
    auto at = std::find(labels.begin(), labels.end(), *options.positive_label);
    if (at == labels.end()) {
      return InvalidArgumentError(
          fmt::format("positive_label '{}' is not a label{}; labels: {}", *options.positive_label,
                      DidYouMean(*options.positive_label, labels), JoinNames(labels)));
    }
    index = at - labels.begin();
  }
  if (f1) {
    spdlog::info("Metric f1: the F1 of label '{}' (the positive class{})",
                 labels[static_cast<size_t>(index)],
                 options.positive_label ? "" : "; set \"positive_label\" to choose the other");
  }
  return index;
}

Result<TextSets> LoadText(const TrainObjectiveOptions& options,
                          const std::vector<const ModelSpec*>& models) {
  TUNE_ASSIGN_OR_RETURN(TextDataset dataset, LoadTextDataset(options.data));
  TUNE_ASSIGN_OR_RETURN(int64_t positive, PositiveLabelIndex(options, dataset.labels));
  std::map<std::string, std::vector<const ModelSpec*>> groups;
  for (const ModelSpec* m : models) groups[TokenizerKey(options, *m)].push_back(m);
  if (groups.empty()) groups[""];
  TextSets sets;
  sets.positive = positive;
  for (const auto& [key, group] : groups) {
    int64_t max_length = group.empty() ? 512 : 0;
    for (const ModelSpec* m : group) max_length = std::max(max_length, MaxSequenceLength(*m));
    TUNE_ASSIGN_OR_RETURN(Tokenizer tokenizer, MakeTokenizer(options, key, dataset, group));
    sets.data[key] = Tokenize(dataset, tokenizer, max_length);
    if (key.rfind(kVocabKeyPrefix, 0) == 0) {
      sets.vocab_files.emplace(key, std::move(tokenizer));
    } else if (key.empty() && !options.pretrained) {
      sets.built = std::move(tokenizer);
    }
  }
  return sets;
}

Result<TabularTrainData> LoadTabular(const TabularDataOptions& options) {
  TUNE_ASSIGN_OR_RETURN(TabularDataset dataset, LoadTabularDataset(options));
  TabularTrainData tabular;
  tabular.num_features = static_cast<int64_t>(dataset.features.size());
  tabular.num_labels = static_cast<int64_t>(dataset.labels.size());
  tabular.train_x = std::move(dataset.train_x);
  tabular.train_labels = std::move(dataset.train_y);
  tabular.validation_x = std::move(dataset.validation_x);
  tabular.validation_labels = std::move(dataset.validation_y);
  spdlog::info(
      "Train data: {} training rows ({}), {} validation rows ({}), {} features ({}), {} "
      "labels",
      tabular.train_labels.size(), dataset.train_source, tabular.validation_labels.size(),
      dataset.validation_source, tabular.num_features, JoinNames(dataset.features),
      tabular.num_labels);
  return tabular;
}

Status CheckTorchScriptModels(const TrainObjectiveOptions& options,
                              const std::vector<const ModelSpec*>& models, const TextSets& text,
                              Trainer& trainer, ModelCatalog& catalog) {
  std::set<std::string> checked;
  for (const ModelSpec* m : models) {
    if (!IsTorchScriptModel(*m) || !checked.insert(m->name).second) continue;
    const TextTrainData& data = text.data.at(TokenizerKey(options, *m));
    TextTrainData vocabulary;  // what the check reads: the vocabulary; any width, compared below
    vocabulary.vocab_size = data.vocab_size;
    vocabulary.num_labels = 0;
    TrainJob job;
    job.model = *m;
    job.data = &vocabulary;
    TUNE_ASSIGN_OR_RETURN(const ScriptModelInfo info, trainer.CheckTorchScriptModel(job));
    if (info.num_labels != data.num_labels) {
      return InvalidArgumentError(fmt::format(
          "the data set has {} {} ({}), but TorchScript model {} returns {} logit{} per example "
          "(forward at B=1, T=8 returned Tensor[1, {}]); export the module with one output per "
          "{}",
          data.num_labels, data.problem_type == ProblemType::kRegression ? "target" : "labels",
          data.problem_type == ProblemType::kRegression ? "regression"
                                                        : JoinNames(data.label_names),
          m->torchscript, info.num_labels, info.num_labels == 1 ? "" : "s", info.num_labels,
          data.problem_type == ProblemType::kRegression ? "target" : "label"));
    }
    spdlog::info("TorchScript model {}: {} parameters; forward checked at B=1, T=8", m->name,
                 info.parameters);
    ModelSpec updated = *m;
    updated.num_parameters = info.parameters;
    catalog.Put(std::move(updated));
  }
  return Status::Ok();
}

}  // namespace tune

// The train objective's data, read once when the objective is made: the text data set tokenized
// by each tokenizer its models need (TextSets), or the tabular data set.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"
#include "train/trainer.h"
#include "train_objective/train_objective.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

// The texts tokenized once per tokenizer: by checkpoint directory with "init": "pretrained",
// else one set under "" (`built`: a vocabulary file's tokenizer, or one built from the training
// text; none for a `pretrained` directory's). A TorchScript model's entry may name its own
// tokenizer: a checkpoint directory (its key) or a vocabulary file ("vocab:" + the file, its
// tokenizer in `vocab_files`).
struct TextSets {
  std::map<std::string, TextTrainData> data;
  int64_t positive = 1;  // the positive class's index (PositiveLabelIndex)
  std::optional<Tokenizer> built;
  std::map<std::string, Tokenizer> vocab_files;
};

inline constexpr const char* kVocabKeyPrefix = "vocab:";

// The index of the positive class among `labels` for metric "f1" (options.positive_label, else
// the second label), logged once; InvalidArgument when "f1" meets more than two labels or
// positive_label is not a label.
Result<int64_t> PositiveLabelIndex(const TrainObjectiveOptions& options,
                                   const std::vector<std::string>& labels);

// Which of the TextSets a model trains on.
std::string TokenizerKey(const TrainObjectiveOptions& options, const ModelSpec& model);

// The models trials may use (they bound the vocabulary and the sequence length): the options'
// models and the objective's own "model", if set.
Result<std::vector<const ModelSpec*>> ModelsOf(const TrainObjectiveOptions& options,
                                               const ModelCatalog& catalog,
                                               const std::string& default_model);

// The data set read once and tokenized by each tokenizer `models` need.
Result<TextSets> LoadText(const TrainObjectiveOptions& options,
                          const std::vector<const ModelSpec*>& models);

// The tabular data set, standardized (text_data.h).
Result<TabularTrainData> LoadTabular(const TabularDataOptions& options);

// The checked load of every TorchScript model before the first trial (Trainer::
// CheckTorchScriptModel); its parameter count goes into the catalog.
Status CheckTorchScriptModels(const TrainObjectiveOptions& options,
                              const std::vector<const ModelSpec*>& models, const TextSets& text,
                              Trainer& trainer, ModelCatalog& catalog);

}  // namespace tune

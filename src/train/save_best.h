// Keeping the study's best model [tune_train] (objective key "save_best", `tune --save-best DIR`;
// docs/config.md "save_best"), plain C++: staged while a trial trains, swapped into DIR when the
// trial beats the study's best, read back by `tune predict` (ReadSavedModel).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoints/pretrained.h"
#include "tokenizers/tokenizer.h"
#include "train/hyperparams.h"
#include "train/targets.h"
#include "train/train_metric.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// <parent of save_best>/.<name of save_best>.trial-<number>: on the same file system as DIR.
std::string SaveBestStagingDir(const std::string& save_best, int64_t trial_number);

// The data columns a model was trained on (config.json's "tune"/"inputs"): `tune predict` reads
// the same columns by default, and cuts pairs the same way.
struct SavedInputs {
  // What the model predicts (config.json's "problem_type", Hugging Face's key); the label column
  // `tune predict` compares against, and how a multi-label row lists its labels.
  ProblemType problem_type = ProblemType::kSingleLabel;
  std::string label_column = "label";
  std::string label_separator = ",";
  std::string text_column = "text";
  std::optional<std::string> text_pair_column;  // sentence pairs
  Truncation truncation = Truncation::kLongestFirst;
  std::string positive_label;  // two labels: the positive class (metric "f1"); else empty
};

struct SavedTrial {
  std::string study;
  int64_t number = 0;
  Json params = Json::object();
  double value = 0.0;
  std::string metric;  // "macro_f1", "accuracy" or "loss"
  SavedInputs inputs;
};

// Everything but model.safetensors (which the trainer writes: the encoder and head under the names
// of Hugging Face's *ForSequenceClassification) into `staging` (created if needed): config.json
// (the checkpoint's, or one written from the catalog model for scratch trials, with num_labels,
// id2label, label2id and a "tune" object: hyperparams, metric, model, inputs); for a head with
// hidden layers (classifier.hidden.N, classifier.out), tune_classifier.py, whose class
// config.json's auto_map names; the tokenizer files; trial.json ({"study", "number", "params",
// "value", "metric"}). `built` is a scratch trial's tokenizer (built from the training text, then
// written as vocab.txt, or read from the objective's vocabulary file `vocab_file`, which is then
// copied, with merges.txt beside a vocab.json), else null (the checkpoint's tokenizer files are
// copied). Internal when a file cannot be written or copied.
Status WriteSavedModelFiles(const std::string& staging, const ModelSpec& model,
                            const TrainHyperparams& hp, const std::vector<std::string>& labels,
                            const SavedTrial& trial, const Tokenizer* built,
                            const std::string& vocab_file = "");

// Moves `staging` to `save_best` when `value` is better (under `direction`) than the value in
// save_best/trial.json (if any) and than `study_best` (the study's best COMPLETE value in the
// storage, if any); otherwise removes it. Serialised by a lock file (<save_best>.lock) so that
// several workers agree; the swap is one rename (renameat2 RENAME_EXCHANGE where the file system
// has it), so DIR is never half-written. Returns whether it was promoted.
Result<bool> PromoteIfBest(const std::string& staging, const std::string& save_best, double value,
                           StudyDirection direction, std::optional<double> study_best);

// The best COMPLETE value in `history`, if any.
std::optional<double> BestCompleteValue(const TrialHistory& history);

// --save-best for one study: a trial's model is staged while it trains and promoted to the
// directory when it beats the study's best.
class BestModelSaver {
 public:
  // `dir`: the save_best directory; `metric`: the study's (its name and direction).
  // `inputs`: the data's columns, recorded in the saved model.
  BestModelSaver(std::string dir, TrainMetric metric, SavedInputs inputs = {});
  const std::string& dir() const { return dir_; }

  // Before a trial trains: its staging directory (SaveBestStagingDir), emptied, and
  // job.save_weights set to the weights file the trainer writes there (model.safetensors, or
  // model.pt for a TorchScript model). Nothing for a job without text data (tabular).
  Status Prepare(int64_t trial_number, TrainJob& job) const;

  // After the trial ran: a COMPLETE single-objective trial whose weights were written gets the
  // rest of the directory in its staging (WriteSavedModelFiles: `built` and `vocab_file` as
  // there); any other trial's staging is removed. Returns whether the trial was staged.
  Result<bool> Stage(const std::string& study, int64_t trial_number, const Json& params,
                     const TrainJob& job, const TrialOutcome& outcome, const Tokenizer* built,
                     const std::string& vocab_file) const;

  // Moves trial `number`'s staged model to the directory when it beats `study_best` and the
  // directory's own (PromoteIfBest), logging it; otherwise removes the staging.
  Status Promote(int64_t number, const TrialOutcome& outcome,
                 std::optional<double> study_best) const;

 private:
  std::string dir_;
  TrainMetric metric_;
  SavedInputs inputs_;
};

struct SavedModel {
  PretrainedCheckpoint checkpoint;  // config.json, model.safetensors, tokenizer
  TrainHyperparams hp;              // config.json's "tune"/"hyperparams" (defaults when absent)
  std::vector<std::string> labels;  // id2label, by id (regression: LABEL_0, its one output)
  std::string metric = "macro_f1";  // config.json's "tune"/"metric"
  SavedInputs inputs;               // config.json's "tune"/"inputs" (defaults when absent)
  Json trial;                       // trial.json, or null
};

// A directory written above, or any checkpoint directory with a classifier head (num_labels /
// id2label in config.json). NotFound/InvalidArgument naming the file.
Result<SavedModel> ReadSavedModel(const std::string& dir);

}  // namespace tune

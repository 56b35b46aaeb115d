// The train objective ("objective": {"type": "train", ...}) [tune_train]: trains a transformer
// classifier on text (or an MLP on tabular data) in process for every trial and returns its
// validation metric. The LibTorch Trainer it runs lives in tune_torch (torch_trainer.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/guard.h"
#include "tokenizers/tokenizer.h"
#include "train/text_data.h"
#include "train/train_metric.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"
#include "tune/objectives/objective.h"

namespace tune {

enum class TrainTask {
  kTextClassification,     // a transformer encoder from the catalog on text
  kTabularClassification,  // an MLP on numeric feature columns
};

struct TrainObjectiveOptions {
  TrainTask task = TrainTask::kTextClassification;
  TextDataOptions data;              // text_classification
  TabularDataOptions tabular;        // tabular_classification
  std::optional<std::string> vocab;  // a BERT WordPiece vocab.txt; unset: built from the text
  // A Hugging Face-style checkpoint directory (pretrained.h): the model (defaults["model"] names
  // its catalog entry, whose `pretrained` points at the weights) and its tokenizer
  // (Tokenizer::FromCheckpointDir; `vocab` above is then its tokenizer file, for messages).
  std::optional<std::string> pretrained;
  // "init": true (pretrained, the default): every model is a checkpoint directory (its catalog
  // entry's `checkpoint`), tokenized with its own tokenizer; false (scratch): random weights
  // and one tokenizer (`vocab` or built from the text) for all models.
  bool init_pretrained = true;
  // "save_best" / --save-best: the directory that holds the study's best trial's model
  // (save_best.h); unset: nothing is saved.
  std::optional<std::string> save_best;
  TokenizerOptions tokenizer;
  TrainMetric metric = TrainMetric::kMacroF1;
  // The positive class of a two-label task (metric "f1"): one of the labels; unset: the second
  // label in class order (scikit-learn's pos_label=1 on 0/1 labels).
  std::optional<std::string> positive_label;
  // "objectives": [metric, costs...]: the values after the metric (a multi-objective study).
  std::vector<TrainCost> costs;
  // "constraints": {cost: bound}: written as the trial system attributes "constraints:<cost>"
  // (value - bound, <= 0 = satisfied; Optuna 5.0's trial.set_constraint), which TPE reads.
  std::vector<std::pair<TrainCost, double>> constraints;
  std::string device = "cpu";              // "cpu", "cuda" or "cuda:N"
  int64_t threads = 0;                     // intra-op threads on CPU; 0: one per core
  std::vector<std::string> ignore_params;  // search-space params the objective does not read
  Json defaults = Json::object();   // hyperparameters set by the objective's keys (canonical)
  std::vector<std::string> models;  // every model a trial may choose (vocabulary and length checks)
  GuardOptions guard;               // the memory guard ("memory": {...}; guard.h)
  // --jobs: the command that runs one trial in a child process (`tune run-trial ...`), set by
  // the tune binary; the objective appends the trial's number, params, plan and memory budget.
  // Empty: trials run in this process only.
  std::vector<std::string> child_command;
  // In a child process: the parent's admission of this trial (TrialPlanToJson), used instead of
  // admitting it again (the parent holds the study's history).
  std::optional<Json> planned;
};

// The train objective. Once, here: the data set is read and checked (text_data.h), the tokenizer
// is loaded from a vocab.txt or a checkpoint's tokenizer files, or built from the training text
// (tokenizer.h), and every text is tokenized; InvalidArgument/NotFound for bad data (see
// text_data.h) or a vocabulary larger than one of `options.models` can embed.
//
// Per trial: the hyperparameters are the objective's keys overridden by the trial's params
// (hyperparams.h); the Trainer trains the model; after each epoch the metric is reported
// (trial.Report(value, epoch)) and the pruner asked. Early stopping ends a trial after `patience`
// epochs without an improvement larger than `min_delta`. The memory guard (memory/train_guard.h)
// logs memory at trial start and end; with a device_memory (always on CUDA) and admission on,
// the trial is estimated and run as it is, run with levers, or PRUNED without running (oom=true,
// reason="predicted", oom_config); a run-time OOM is retried `oom_retry` times at half the
// micro-batch and twice the accumulation. User attribute "memory" records the admission, the
// estimate of what ran, the measured peak and the memory before and after (calibration reads it).
//
// A trial's outcome: COMPLETE with the best epoch's metric (the value Hugging Face's
// load_best_model_at_end would keep); PRUNED by the pruner (keeping the last report); PRUNED with
// oom=true, reason="oom" and oom_config (RecordOom) when the run runs out of memory; FAIL with
// fail_reason when the run fails (a LibTorch error, a non-finite loss, a max_length the model
// cannot take, no evaluated epoch). Every finished run stores user attribute "train": epochs run,
// best epoch, per-epoch metrics, parameter count, peak memory when measured.
//
// REQUIRES: trainer != nullptr, unless options.child_command is set (then trials run only in
// child processes, and this process never initialises the device).
Result<std::unique_ptr<Objective>> NewTrainObjective(TrainObjectiveOptions options,
                                                     ModelCatalog catalog,
                                                     std::unique_ptr<Trainer> trainer);

}  // namespace tune

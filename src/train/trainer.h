// Trainer: trains one model for one trial and reports its evaluations [tune_train]. The seam
// between the train objective (data, params, reporting, pruning, outcomes) and the code that runs
// the network (tune_torch's NewTorchTrainer, torch_trainer.h); tests of the objective use a
// scripted trainer that replays learning curves.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/hyperparams.h"
#include "train/targets.h"
#include "tune/distributions.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

// Tokenized text classification data, shared by all trials. Ids are WordPiece ids without the
// special tokens, already cut to the longest max_length any trial may use.
struct TextTrainData {
  std::vector<std::vector<int32_t>> train_ids;
  std::vector<int64_t> train_labels;  // single-label: class indices (else empty)
  std::vector<std::vector<int32_t>> validation_ids;
  std::vector<int64_t> validation_labels;
  // What the model predicts (targets.h). Multi-label: the targets are row-major [examples x
  // num_labels] 0/1; regression: one per example (num_labels is 1, the model's one output).
  ProblemType problem_type = ProblemType::kSingleLabel;
  std::vector<float> train_targets, validation_targets;
  // The loss's class weights (single-label) or positive weights (multi-label), by label; empty:
  // none.
  std::vector<float> class_weights;
  int64_t num_labels = 0;
  int64_t vocab_size = 0;  // of the tokenizer; <= the model's vocab_size
  int32_t pad_id = 0, cls_id = 2, sep_id = 3;
  std::vector<std::string> label_names;  // by label index
  // Sentence pairs (set): each example's second text, its ids cut as train_ids are, and both
  // texts' token counts before the cut (truncation compares them); how the two are joined.
  struct Pairs {
    std::vector<std::vector<int32_t>> train_ids, validation_ids;
    std::vector<std::pair<int64_t, int64_t>> train_counts, validation_counts;
    PairLayout layout;
  };
  std::optional<Pairs> pairs;
};

// The length of example `i` of the training (`train`) or validation split in a batch of
// `max_length`: with its special tokens, at most max_length.
int64_t ExampleLength(const TextTrainData& data, bool train, size_t i, int64_t max_length);
// The split's pairs for BuildTokenBatch; null for single texts.
std::optional<PairSplit> PairSplitOf(const TextTrainData& data, bool train, bool token_types);

// Standardized tabular data: row-major [rows x num_features] floats.
struct TabularTrainData {
  std::vector<float> train_x;
  std::vector<int64_t> train_labels;
  std::vector<float> validation_x;
  std::vector<int64_t> validation_labels;
  int64_t num_features = 0;
  int64_t num_labels = 0;
};

// One optimizer step, as the trainer took it (TrainJob::on_step).
struct StepRecord {
  int64_t step = 0;            // 1-based, across epochs
  double loss = 0.0;           // the summed loss of the step's examples / their count
  double learning_rate = 0.0;  // the rate the step used
  std::vector<std::vector<int64_t>> micro_batches;  // indices into the training split
};
using StepCallback = std::function<void(const StepRecord&)>;

// REQUIRES: exactly one of `data` (a transformer on text) and `tabular` (an MLP) is set, and it
// outlives Train().
struct TrainJob {
  ModelSpec model;  // the encoder; its vocab_size sets the embedding table (unused for tabular)
  TrainHyperparams hp;
  const TextTrainData* data = nullptr;
  const TabularTrainData* tabular = nullptr;
  // Text: a model.safetensors path the trainer (re)writes, atomically, after every epoch whose
  // callback answers kKeep (the best epoch so far); empty: nothing is written.
  // A TorchScript model (model.torchscript set) writes its trained module (model.pt) instead.
  std::string save_weights;
  // Called after every optimizer step when set (the trajectory test, logs).
  StepCallback on_step;
  // Called with each evaluation's outputs (row-major: a probability per label, or regression's
  // value, per validation example) and the optimizer step, before they are checked for non-finite
  // values and scored, when set: tests make them non-finite while the training loss stays finite.
  std::function<void(int64_t step, std::vector<float>& outputs)> on_eval_outputs;
};

// One evaluation: after an epoch, or every eval_steps optimizer steps (eval_strategy "steps").
// Classification fills accuracy to auroc (multi-label: ComputeMultiLabelMetrics's), regression
// `regression`.
struct EpochMetrics {
  ProblemType problem_type = ProblemType::kSingleLabel;
  int64_t epoch = 0;        // 0-based: the epoch it ran in
  double train_loss = 0.0;  // mean over the epoch's training examples (so far)
  double validation_loss = 0.0;
  // The evaluation's metrics (metrics.h), one struct per kind of problem: `classification` for
  // single- and multi-label tasks, `regression` for regression; the other stays at its defaults.
  // train_metric.h's table reads them.
  ClassificationMetrics classification;
  RegressionMetrics regression;
  int64_t optimizer_steps = 0;  // cumulative
  double seconds = 0.0;         // training + evaluation time since the previous evaluation
  double eval_seconds = 0.0;    // of which evaluating
  double learning_rate = 0.0;   // the last step's
};

// kKeep: continue; this epoch is the best so far (TrainJob::save_weights keeps its weights).
enum class EpochDecision { kContinue, kStop, kKeep };
using EpochCallback = std::function<Result<EpochDecision>(const EpochMetrics&)>;

struct TrainResult {
  enum class End {
    kCompleted,    // all epochs ran
    kStopped,      // on_epoch returned kStop
    kOutOfMemory,  // the run ran out of memory (details say where)
    kFailed,       // the run failed (a LibTorch error); message says why
    kNonFinite,    // a training or validation loss, the evaluation's outputs or the pretrained
                   // weights were NaN or infinite: message says which and where, details is
                   // the NonFiniteAttr (trial_attrs.h) as JSON
    kInterrupted,  // Ctrl-C (InterruptRequested())
    kDeviceLost,   // a sticky CUDA error (device-side assert, illegal address...): the failed
                   // run's process can no longer use the device; message says which error
  };
  End end = End::kCompleted;
  std::vector<EpochMetrics> epochs;
  std::string message;            // kOutOfMemory / kFailed: the error text
  Json details = Json::object();  // kOutOfMemory: phase, epoch, step, batch shape, peak bytes...
                                  // kNonFinite: the NonFiniteAttr
  int64_t num_parameters = 0;     // of the model built
  // Measured by the device (-1: not measured): the peak of allocated bytes during the run above
  // the level before it (CPU: the counting allocator; CUDA: allocated_bytes.peak), the peak of
  // reserved bytes (CUDA), and the allocated bytes before the run and after its release.
  int64_t peak_memory_bytes = -1;
  int64_t peak_reserved_bytes = -1;
  int64_t memory_before_bytes = -1;
  int64_t memory_after_bytes = -1;
};

// The device's memory now, for logs and admission (-1: unknown).
struct DeviceMemoryStatus {
  int64_t allocated = -1;  // bytes held by tensors
  int64_t reserved = -1;   // CUDA: held by the caching allocator
  int64_t free = -1;       // CUDA: cudaMemGetInfo's free memory (all processes)
  int64_t total = -1;      // CUDA: the card's memory
  // The device_memory limit enforced (CPU counting allocator / CUDA memory fraction); unset: none.
  std::optional<int64_t> device_memory;
};

// "allocated 12.0 MiB, reserved 20.0 MiB, free 3.1 GiB of 24.0 GiB, device_memory 22.0 GiB" (the
// known parts).
std::string DeviceMemoryStatusText(const DeviceMemoryStatus& s);

// This process's resident set size in bytes (/proc/self/statm), or -1 where it cannot be read.
int64_t ProcessResidentBytes();
// Bytes malloc has handed out and not had back (glibc mallinfo2: heap plus mmapped chunks), or
// -1 without glibc 2.33. Unlike the resident set it does not count freed memory malloc keeps.
int64_t ProcessHeapInUseBytes();

const char* TrainEndName(TrainResult::End end);

// What the checked load of a TorchScript model found (Trainer::CheckTorchScriptModel).
struct ScriptModelInfo {
  int64_t parameters = 0;  // trainable
  int64_t num_labels = 0;  // the width of its logits
};

// Thread safety: one Train() call at a time per Trainer.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // "torch 1.13.0 cpu (2 threads)".
  virtual std::string name() const = 0;
  // Trains job.model, calling `on_epoch` after every evaluation and stopping when it returns
  // kStop. Failures of the run itself are results, not errors, returned after the run's model,
  // optimizer state and gradients have been released: End::kOutOfMemory (message the error text,
  // details phase, epoch, step and batch shape), kFailed and kDeviceLost (message says why), and
  // kNonFinite, kInterrupted. After an out-of-memory error the device's cached memory is returned
  // (CUDA: emptyCache); memory_after_bytes then says whether allocated memory came back to
  // memory_before_bytes. A non-OK Status means tune could not run at all (for example an
  // unusable device, or `on_epoch` failed to store a report): the study stops.
  virtual Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) = 0;
  virtual DeviceMemoryStatus MemoryStatus() const { return {}; }
  // The logits ([examples][labels]) of job.data's validation texts from the model job.model
  // names, its weights (classifier head included) read from job.model.pretrained, in evaluation
  // mode. InvalidArgument when the weights do not fit the model; FailedPrecondition by default.
  virtual Result<std::vector<std::vector<float>>> Predict(const TrainJob& job) {
    (void)job;
    return FailedPreconditionError("this trainer cannot predict");
  }
  // The checked load of a TorchScript model (job.model.torchscript) before the first trial: the
  // file is loaded and its forward run at B=1, T=8 with token ids up to job.data's vocabulary.
  // Returns the module's trainable parameter count and the width of its logits; NotFound for a
  // missing file; InvalidArgument saying what was expected and how to export a model for a file
  // that is not TorchScript, a forward that does not take (input_ids, attention_mask) or an
  // output that is not Tensor[1, job.data->num_labels] (any Tensor[1, K] when num_labels <= 0).
  // FailedPrecondition by default.
  virtual Result<ScriptModelInfo> CheckTorchScriptModel(const TrainJob& job) {
    (void)job;
    return FailedPreconditionError("this trainer cannot load TorchScript models");
  }
};

}  // namespace tune

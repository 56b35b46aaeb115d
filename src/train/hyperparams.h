// The hyperparameters of one training run (plain C++). The train objective fills them from its
// config keys (defaults) and then from the trial's params, which win. docs/config.md lists them.
//
// Names follow the user reports and Hugging Face's TrainingArguments; common aliases are
// accepted ("lr" = learning_rate, "gradient_accumulation_steps" = grad_accum, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "train/batching.h"
#include "train/metrics.h"
#include "tune/distributions.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

enum class OptimizerKind { kAdamW, kSgd };
enum class Activation { kGelu, kRelu, kTanh };
// fp32; bf16: autocast to bfloat16 (CPU and CUDA), fp32 weights, gradients and optimizer state;
// fp16: autocast to float16 with dynamic loss scaling (CUDA only); pure_bf16: the model itself in
// bfloat16 (weights, gradients and optimizer state) -- the memory estimator models it, the
// trainer does not train that way (the `precision` hyperparameter offers fp32, bf16 and fp16).
enum class Precision { kFp32, kBf16, kFp16, kPureBf16 };

enum class EvalStrategy { kEpoch, kSteps };

// How BERT, RoBERTa and XLM-R layers compute attention (Hugging Face's attn_implementation):
// eager: softmax(Q K^T / sqrt(d) + mask) V in separate kernels, the probabilities kept for
// backward; sdpa: one at::scaled_dot_product_attention call (LibTorch 2.0 or newer), which picks
// a fused kernel (FlashAttention or memory-efficient on CUDA, a flash kernel on the CPU) where the
// inputs allow, dropout inside it (DeBERTa: its relative terms as SDPA's additive bias, LibTorch
// 2.1 or newer); auto: eager until a card has confirmed the memory estimator's SDPA terms.
// TorchScript models are always their own.
enum class Attention { kAuto, kSdpa, kEager };

// Whether the trainer captures its CUDA training step in CUDA graphs (docs/config.md).
enum class CudaGraphs { kAuto, kOn, kOff };

struct TrainHyperparams {
  std::string model;            // catalog name of the encoder
  double learning_rate = 5e-5;  // peak learning rate
  int64_t batch_size = 16;      // examples per micro-batch
  int64_t eval_batch_size = 0;  // 0: batch_size
  int64_t grad_accum = 1;       // micro-batches per optimizer step
  int64_t max_length = 128;     // tokens per example, [CLS] and [SEP] included
  int64_t epochs = 3;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double weight_decay = 0.01;  // decoupled (AdamW) / L2 (SGD); not on biases and LayerNorms
  double momentum = 0.9;       // SGD
  bool nesterov = false;       // SGD
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  Schedule scheduler = Schedule::kLinear;
  double warmup_ratio = 0.0;   // share of the optimizer steps spent warming up
  double max_grad_norm = 1.0;  // gradient clipping; 0: off
  double dropout = 0.1;        // hidden dropout (embeddings, attention output, FFN)
  double attention_dropout = 0.1;
  std::optional<double> classifier_dropout;  // unset: dropout
  int64_t classifier_layers = 0;             // hidden layers in the head, 0-3
  int64_t classifier_hidden = 0;             // their width; 0: the model's hidden size
  std::vector<int64_t> classifier_hidden_sizes = {0, 0, 0};  // classifier_hidden_1..3 (0: above)
  Activation classifier_activation = Activation::kGelu;
  // When the validation set is evaluated (each evaluation a report the pruner sees, early
  // stopping's and the best checkpoint's unit): after every epoch, or every eval_steps optimizer
  // steps and at the end of training (Hugging Face's eval_strategy and eval_steps).
  EvalStrategy eval_strategy = EvalStrategy::kEpoch;
  int64_t eval_steps = 500;
  // Multi-label: a label is predicted when its probability is >= threshold (one for every label,
  // fixed for the run; a search-space parameter like any other).
  double threshold = 0.5;
  int64_t patience = 0;    // early stopping: evaluations without improvement; 0: off
  double min_delta = 0.0;  // smallest change that counts as an improvement
  // Recompute each encoder layer in the backward pass instead of keeping its activations
  // (reentrant checkpointing, as torch.utils.checkpoint): less memory, about a third more compute.
  bool gradient_checkpointing = false;
  // Mixed precision of the forward pass. The objective's default is "auto" (AutoPrecision, kept
  // per study: train_objective's trainer defaults); fp32 here.
  Precision precision = Precision::kFp32;
  // CUDA: fp32 matmuls and convolutions may use TF32 tensor cores (torch.backends.cuda.matmul.
  // allow_tf32 and cudnn.allow_tf32). No effect on the CPU.
  bool tf32 = true;
  Attention attention = Attention::kAuto;
  // BERT, RoBERTa and XLM-R: the query, key and value projections as one GEMM over their packed
  // weights (and one in backward for their gradients) instead of three. Off until a card shows
  // it faster; DeBERTa's layers ignore it.
  bool fused_qkv = false;
  // CUDA: each layer's bias + dropout + residual + LayerNorm, and its feed-forward bias + GELU,
  // as one fused kernel each way (tune's own CUDA kernels). No effect on the CPU (ATen's
  // vectorised kernels are faster there than tune's loops). Off until a card shows it faster.
  bool fused_elementwise = false;
  // CUDA graphs: the training step captured once per batch shape and replayed (kAuto: off until
  // a card has measured it; kOn: on CUDA; kOff). No effect on the CPU.
  CudaGraphs cuda_graphs = CudaGraphs::kAuto;
  Padding padding = Padding::kLongest;
  int64_t bucket_batches = 50;  // length bucketing chunk, in batches; 0 or 1: off
  uint64_t seed = 0;            // weights, dropout and data order
  int64_t mlp_layers = 2;       // tabular MLP: hidden layers (0: logistic regression)
  int64_t mlp_hidden = 128;     // tabular MLP: their width

  // The width of head layer `i` (0-based). REQUIRES: 0 <= i < 3.
  int64_t ClassifierWidth(int64_t i, int64_t hidden_size) const;
};

// "fp32", "bf16", "fp16", "pure_bf16".
const char* PrecisionName(Precision precision);
// "auto", "sdpa", "eager".
const char* AttentionName(Attention attention);
// "auto", "on", "off".
const char* CudaGraphsName(CudaGraphs graphs);
// The inverse of PrecisionName; InvalidArgument naming the closest valid choice.
Result<Precision> ParsePrecision(std::string_view name);
// InvalidArgument for fp16 on a device that is not CUDA.
Status CheckPrecisionForDevice(Precision precision, const std::string& device);

// bf16 (autocast, or pure_bf16) needs a card with bfloat16: CUDA compute capability 8.0 or newer
// (A100, RTX 30xx, H100 and later). InvalidArgument for it on a card of `capability` (major,
// minor) below that, naming `card` ("cuda:0 (Tesla T4)") and its capability (the caller says
// the fix); OK for other precisions and cards.
Status CheckPrecisionForCard(Precision precision, const std::string& card,
                             std::pair<int, int> capability);

// What precision "auto" means on `device` ("cpu", "cuda", "cuda:N"): fp32 on the CPU; on CUDA
// bf16 autocast where the card has bf16 tensor cores (compute capability >= 8.0: Ampere and
// newer), else fp16 with loss scaling; fp32 when the capability is unknown.
Precision AutoPrecision(const std::string& device, std::optional<int> compute_major);

// Canonical names, in documentation order.
const std::vector<std::string>& HyperparamNames();
// The canonical name for a name or alias, or nullopt.
std::optional<std::string> CanonicalHyperparam(const std::string& name);
// Every accepted name, aliases included (for "did you mean").
std::vector<std::string> HyperparamNamesAndAliases();

// Sets one hyperparameter from a JSON value. InvalidArgument naming the parameter and the valid
// range or choices when the value does not fit. REQUIRES: CanonicalHyperparam(name).
Status SetHyperparam(TrainHyperparams& hp, const std::string& name, const Json& value);

// All hyperparameters as JSON (canonical names; enums as their config strings).
Json HyperparamsToJson(const TrainHyperparams& hp);

// Whether the trainer can build `model` with these settings: a TorchScript model (max_length
// within its entry's max_position_embeddings), or a supported model_type (bert,
// roberta, xlm-roberta, camembert, deberta-v2 with position_buckets > 0), heads dividing the hidden
// size, max_length within the model's positions (RoBERTa-style models reserve two). InvalidArgument
// says why not.
Status CheckModelForTraining(const ModelSpec& model, const TrainHyperparams& hp);
// The longest max_length a TorchScript model accepts when its entry sets no
// max_position_embeddings.
inline constexpr int64_t kDefaultTorchScriptMaxLength = 512;
// The longest max_length `model` accepts.
int64_t MaxSequenceLength(const ModelSpec& model);
// True for RoBERTa-style absolute positions (offset by padding_idx + 1 = 2).
bool UsesRobertaPositions(const ModelSpec& model);
// True for DeBERTa-v2/v3: relative positions and disentangled attention, no absolute positions.
bool UsesRelativePositions(const ModelSpec& model);

}  // namespace tune

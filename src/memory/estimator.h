// The memory estimator [tune_train]: predicts the peak memory of a training (or evaluation) run
// before it starts, term by term, for the models tune's trainer builds: BERT/RoBERTa and
// DeBERTa-v3 encoder classifiers with 0-3 head layers, MLPs on tabular data, and decoder LMs.
// No LibTorch here; an estimate takes a few microseconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/hyperparams.h"
#include "tune/distributions.h"
#include "tune/model_catalog.h"
#include "tune/status.h"
#include "util/text.h"

namespace tune {

enum class Architecture { kEncoder, kMlp, kDecoder };

struct MemoryRequest {
  Architecture architecture = Architecture::kEncoder;
  ModelSpec model;                   // encoder or decoder (catalog keys)
  int64_t num_labels = 2;            // classifier outputs
  std::vector<int64_t> head_hidden;  // widths of the classifier's hidden layers (0-3)
  Activation head_activation = Activation::kGelu;
  int64_t num_features = 0;         // MLP input width
  std::vector<int64_t> mlp_hidden;  // MLP hidden widths
  int64_t batch_size = 16;          // micro-batch
  int64_t max_length = 128;         // tokens per example (the padded batch width)
  int64_t grad_accum = 1;
  int64_t eval_batch_size = 0;  // 0: batch_size
  Precision precision = Precision::kFp32;
  bool gradient_checkpointing = false;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double momentum = 0.9;  // SGD; 0: no momentum buffer
  bool nesterov = false;
  double weight_decay = 0.01;
  double dropout = 0.1;
  double attention_dropout = 0.1;
  double classifier_dropout = 0.1;
  bool train = true;  // false: evaluation only (weights and one forward pass)
  // The layers attend through at::scaled_dot_product_attention (the attention hyperparameter
  // "sdpa"; "auto" is eager today): the terms of the kernel LibTorch picks (docs/memory.md#sdpa).
  bool sdpa = false;
  // BERT-type layers project q, k and v as one GEMM (fused_qkv): under autocast the layer input
  // is cast, and the copy saved, once instead of once per projection.
  bool fused_qkv = false;
  // The training step in CUDA graphs (cuda_graphs "on"; with a caching allocator only): the
  // gradients stay allocated from step to step (zeroed in place), and the graphs' private
  // memory pool holds a micro-batch's working set beside the blocks the eager warm-up steps
  // left in the cache.
  bool cuda_graphs = false;
};

// The request for a train-objective trial: its model (model_type "mlp": the tabular MLP, whose
// input has `num_features` columns), hyperparameters and label count.
MemoryRequest MemoryRequestFor(const ModelSpec& model, const TrainHyperparams& hp,
                               int64_t num_labels, int64_t num_features = 0);

// How a device turns allocated bytes into memory it must have. Defaults: Cpu() counts bytes as
// the counting allocator does (no rounding, no overhead); Cuda() models PyTorch's caching
// allocator (512 B blocks; requests <= 1 MiB share 2 MiB segments, 1-10 MiB requests take 20 MiB
// segments, larger ones are rounded to 2 MiB), a 512 MiB context, 65 MiB of cuBLAS workspaces and
// fragmentation: 5% of the allocated peak, in training at least three word-embedding-sized blocks
// (and with checkpointing 0.9 x the backward transient). The guard replaces context and
// fragmentation with measured values.
struct DeviceMemoryModel {
  bool caching_allocator = false;
  int64_t context_bytes = 0;    // CUDA context and kernels, outside the allocator
  int64_t workspace_bytes = 0;  // cuBLAS/cuDNN workspaces inside the allocator
  double fragmentation = 0.0;   // extra reserved memory, as a share of the allocated peak
  double correction = 1.0;      // multiplies the allocated terms (fitted per model family)
  // LibTorch's CPU kernels under autocast (measured on 1.13): a bf16 Linear (addmm) holds an fp32
  // temporary of twice its output (8 B per output element) while it runs, and adding an fp32
  // tensor into a bf16 one (the attention mask) or a bf16 one to an fp32 one (the residuals)
  // makes fp32 copies of the bf16 operand. CUDA's kernels cast on the fly: false for Cuda().
  // Also: the trainer's AdamW step on the CPU is fused (no temporaries; see optimizer_transient).
  bool cpu_kernels = true;

  static DeviceMemoryModel Cpu();
  static DeviceMemoryModel Cuda();
};

enum class MemoryPhase { kForward, kBackward, kOptimizerStep, kEval };
const char* MemoryPhaseName(MemoryPhase p);

struct MemoryEstimate {
  int64_t num_parameters = 0;
  // Breakdown, bytes.
  int64_t weights = 0;
  int64_t gradients = 0;            // all parameter gradients (live from backward to the step)
  int64_t optimizer_state = 0;      // AdamW m and v; SGD momentum buffers
  int64_t activations = 0;          // saved for backward by one micro-batch's forward
  int64_t inputs = 0;               // token ids, masks, labels (or features) of one micro-batch
  int64_t autocast_cache = 0;       // low-precision weight copies held during forward/backward
  int64_t logits_loss = 0;          // logits and what the loss keeps
  int64_t backward_transient = 0;   // the largest temporaries of one layer's backward
  int64_t embedding_gradient = 0;   // dense word-embedding gradient (a temporary with accumulation)
  int64_t optimizer_transient = 0;  // temporaries of step() (AdamW: 2x the largest parameter;
                                    // 0 for the trainer's fused CPU AdamW)
  int64_t workspace = 0;            // cuBLAS workspaces (CUDA)
  // Peak of allocated bytes in each phase and overall.
  int64_t forward_peak = 0;
  int64_t backward_peak = 0;
  int64_t optimizer_step_peak = 0;
  int64_t eval_peak = 0;
  int64_t allocated_peak = 0;
  MemoryPhase peak_phase = MemoryPhase::kBackward;
  // Device view.
  int64_t rounding = 0;       // caching-allocator rounding at the peak
  int64_t fragmentation = 0;  // fragmentation allowance
  int64_t context = 0;
  // CUDA graphs' private pool: the micro-batch's working set above weights, gradients and
  // optimizer state (0 without graphs).
  int64_t graph_pool = 0;
  // allocated_peak + rounding + fragmentation + context + workspace + graph_pool
  int64_t device_peak = 0;
};

// Replays one optimizer step of the run as a timeline of tensor allocations and frees -- the
// parameters, the tensors each operation saves for backward (as LibTorch's autograd saves them
// for the layers in src/torch/torch_models.cpp), the gradients as backward produces them layer
// by layer, the optimizer state and the optimizer's temporaries -- and takes the largest live
// total in each phase (forward, backward, optimizer step, evaluation). Steady state: the
// optimizer state exists (it appears at the first step() and stays). With `device`'s caching
// allocator every allocation is rounded as it rounds it, and the context, workspaces and a
// fragmentation allowance are added (docs/memory.md lists every formula and default).
// InvalidArgument for an impossible request (zero sizes, heads not dividing hidden, ...).
Result<MemoryEstimate> EstimateMemory(const MemoryRequest& request,
                                      const DeviceMemoryModel& device);

// One term of an estimate: its JSON key, its label in `tune estimate`'s table and its bytes.
struct MemoryTerm {
  const char* key;
  const char* label;
  int64_t bytes;
};
// What one step holds, term by term (weights ... optimizer step temporaries; the workspaces are
// a device term).
std::vector<MemoryTerm> BreakdownTerms(const MemoryEstimate& e);
// The allocated peak of each phase (forward, backward, optimizer step, evaluation).
std::vector<MemoryTerm> PhaseTerms(const MemoryEstimate& e);
// The terms whose sum is device_peak: the allocated peak, the allocator's rounding,
// fragmentation, the context and the workspaces.
std::vector<MemoryTerm> DeviceTerms(const MemoryEstimate& e);

Json MemoryEstimateToJson(const MemoryEstimate& e);

// MaxBatchSize, over this estimator or a measured fit, is in memory_model.h.

// FormatBytes and ParseBytes are in text.h.

}  // namespace tune

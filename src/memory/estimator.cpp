#include "tune/memory/estimator.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tune/text.h"

namespace tune {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;

// Sizes of the caching allocator (memory-reference §2.1).
constexpr int64_t kMinBlock = 512;
constexpr int64_t kSmallSize = 1 * kMiB;   // requests up to this share small segments
constexpr int64_t kSmallBuffer = 2 * kMiB; // a small segment
constexpr int64_t kMinLargeAlloc = 10 * kMiB;
constexpr int64_t kRoundLarge = 2 * kMiB;

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// What the caching allocator reserves for one live request of n bytes, amortised: blocks are
// 512-byte multiples; small requests pack into 2 MiB segments (no extra); 1-10 MiB requests are
// carved from 20 MiB segments, so on average they leave up to one block's worth of the segment
// unused, modelled as rounding to 2 MiB; larger ones round to 2 MiB.
int64_t CachingAllocatorSize(int64_t n) {
  if (n <= 0) return 0;
  const int64_t block = RoundUp(n, kMinBlock);
  if (block <= kSmallSize) return block;
  if (block < kMinLargeAlloc) return RoundUp(block, kSmallBuffer);
  return RoundUp(block, kRoundLarge);
}

// Live tensors over one optimizer step. Each Alloc is one tensor (so the caching allocator's
// rounding applies per tensor); the peak is kept per phase.
class Timeline {
 public:
  explicit Timeline(bool caching) : caching_(caching) {}

  void Phase(MemoryPhase p) { phase_ = p; }
  void Alloc(int64_t bytes, int64_t count = 1) {
    if (bytes <= 0 || count <= 0) return;
    live_ += bytes * count;
    rounded_ += (caching_ ? CachingAllocatorSize(bytes) : bytes) * count;
    Touch();
  }
  void Free(int64_t bytes, int64_t count = 1) {
    if (bytes <= 0 || count <= 0) return;
    live_ -= bytes * count;
    rounded_ -= (caching_ ? CachingAllocatorSize(bytes) : bytes) * count;
  }
  // A temporary: allocated and freed at once (it only raises the peak).
  void Transient(int64_t bytes) {
    Alloc(bytes);
    Free(bytes);
  }
  int64_t live() const { return live_; }
  int64_t peak(MemoryPhase p) const { return peak_[static_cast<size_t>(p)]; }
  int64_t rounded_peak() const { return rounded_peak_; }

 private:
  void Touch() {
    auto& p = peak_[static_cast<size_t>(phase_)];
    p = std::max(p, live_);
    rounded_peak_ = std::max(rounded_peak_, rounded_);
  }
  bool caching_;
  MemoryPhase phase_ = MemoryPhase::kForward;
  int64_t live_ = 0, rounded_ = 0, rounded_peak_ = 0;
  std::array<int64_t, 4> peak_{};
};

// Byte widths of a run's tensors.
struct Widths {
  int64_t param;   // weights, gradients
  int64_t state;   // optimizer state
  int64_t mm;      // outputs of matmuls/linears and what follows them in the same dtype
  int64_t fp;      // outputs that stay in the parameters' dtype (embeddings, residual sums,
                   // LayerNorm, the additive mask)
  bool autocast;   // linear inputs in fp32 are cast (a saved copy) and weights cast (cached)
};

Widths WidthsFor(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return {4, 4, 4, 4, false};
    case Precision::kBf16:
    case Precision::kFp16:
      return {4, 4, 2, 4, true};
    case Precision::kPureBf16:
      return {2, 2, 2, 2, false};
  }
  return {4, 4, 4, 4, false};
}

// One parameter tensor (elements) and whether it is a linear weight (cast under autocast) and
// under weight decay (SGD's decay makes a temporary of its size).
struct Param {
  int64_t numel;
  bool linear_weight;
  bool decay;
};

struct Layer {
  std::vector<Param> params;
  int64_t saved = 0;      // bytes saved for backward by its forward
  int64_t fwd_extra = 0;  // temporaries of its forward beyond what it saves (bytes)
  int64_t bwd_transient = 0;  // temporaries alive together in its backward (bytes)
  int64_t autocast_weights = 0;        // low-precision weight copies its saved ops hold
  // Its saved tensors are all released before its gradients appear (a Linear after the
  // activation and dropout above it) rather than while they are produced (a transformer layer).
  bool grads_after_free = false;
};

void AddLinear(std::vector<Param>& ps, int64_t in, int64_t out) {
  ps.push_back({in * out, true, true});
  ps.push_back({out, false, false});
}
void AddLayerNorm(std::vector<Param>& ps, int64_t h) {
  ps.push_back({h, false, false});
  ps.push_back({h, false, false});
}

int64_t LinearWeightBytes(const std::vector<Param>& ps, int64_t width) {
  int64_t n = 0;
  for (const Param& p : ps) n += p.linear_weight ? p.numel * width : 0;
  return n;
}

Status Check(bool ok, const std::string& message) {
  return ok ? Status::Ok() : Status(StatusCode::kInvalidArgument, message);
}

// The run, built as layers in forward order; backward walks them in reverse.
struct Plan {
  std::vector<Layer> layers;
  int64_t inputs = 0;       // ids, masks, labels: live for the whole step
  int64_t logits_loss = 0;  // saved by the loss
  int64_t eval_transient = 0;       // the largest temporaries of an evaluation forward
  int64_t eval_inputs = 0;
  int64_t embedding_gradient = 0;   // dense word-embedding gradient (bytes)
};

// Dropout in training: the noise tensor (input dtype) is saved; its output is the next op's.
int64_t Noise(double p, int64_t bytes) { return p > 0 ? bytes : 0; }

Status PlanEncoder(const MemoryRequest& r, const Widths& w, Plan& plan) {
  const ModelSpec& m = r.model;
  TUNE_RETURN_IF_ERROR(Check(m.hidden_size > 0 && m.num_hidden_layers > 0 &&
                                 m.num_attention_heads > 0 && m.intermediate_size > 0 &&
                                 m.vocab_size > 0,
                             fmt::format("model '{}' lacks hidden_size, num_hidden_layers, "
                                         "num_attention_heads, intermediate_size or vocab_size",
                                         m.name)));
  TUNE_RETURN_IF_ERROR(Check(m.hidden_size % m.num_attention_heads == 0,
                             fmt::format("model '{}': hidden_size {} is not a multiple of "
                                         "num_attention_heads {}",
                                         m.name, m.hidden_size, m.num_attention_heads)));
  const bool deberta = m.position_buckets > 0;
  const int64_t b = r.batch_size, t = r.max_length, h = m.hidden_size, i = m.intermediate_size,
                a = m.num_attention_heads;
  const int64_t bth = b * t * h, bti = b * t * i, batt = b * a * t * t, bt = b * t;
  const double pd = r.train ? r.dropout : 0, pa = r.train ? r.attention_dropout : 0,
               pc = r.train ? r.classifier_dropout : 0;

  // Embeddings (named_parameters order of the trainer's model).
  Layer emb;
  emb.params.push_back({m.vocab_size * h, false, true});
  if (!deberta) {
    emb.params.push_back({m.max_position_embeddings * h, false, true});
    if (m.type_vocab_size > 0) emb.params.push_back({m.type_vocab_size * h, false, true});
  }
  AddLayerNorm(emb.params, h);
  // Saved: the LayerNorm's input and statistics, the dropout noise, and the output (layer 0's
  // input). Without dropout the LayerNorm's output is the layer input.
  emb.saved = bth * w.fp + 2 * bt * 4 + Noise(pd, bth * w.fp) + bth * w.fp;
  emb.fwd_extra = 2 * bth * w.fp;  // word + position lookups before they are summed
  emb.bwd_transient = 2 * bth * w.fp;
  plan.embedding_gradient = m.vocab_size * h * w.param;
  // Token ids, attention mask (int64) and the float additive mask; positions for RoBERTa.
  plan.inputs = 2 * bt * 8 + bt * w.fp + b * 8 + (UsesRobertaPositions(m) ? bt * 8 : t * 8);
  plan.layers.push_back(std::move(emb));

  const int64_t buckets = m.position_buckets;
  if (deberta) {
    // Shared relative embeddings and their LayerNorm (encoder.rel_embeddings, LayerNorm).
    Layer rel;
    rel.params.push_back({2 * buckets * h, false, true});
    AddLayerNorm(rel.params, h);
    rel.saved = 2 * buckets * h * w.fp;  // the normalised table, used by every layer
    plan.layers.push_back(std::move(rel));
  }

  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    Layer layer;
    for (int k = 0; k < 4; ++k) AddLinear(layer.params, h, h);  // q, k, v, attention output
    AddLayerNorm(layer.params, h);
    AddLinear(layer.params, h, i);
    AddLinear(layer.params, i, h);
    AddLayerNorm(layer.params, h);
    // Attention: q, k, v made contiguous per head for the batched matmuls (saved by them), the
    // softmax output, the dropout noise and the dropped probabilities (saved by the matmul with
    // v), the context (saved by the output projection).
    int64_t attention_saved =
        3 * bth * w.mm + batt * w.mm + (pa > 0 ? 2 * batt * w.mm : 0) + bth * w.mm;
    if (w.autocast) {
      // Linear inputs in fp32 are cast to the low dtype and the copies saved: the layer input
      // once per q/k/v projection.
      attention_saved += 3 * bth * w.mm;
    }
    if (deberta) {
      // Disentangled attention: per layer the relative key/query projections of the shared
      // table, repeated per example and head ([B*heads, 2k, d], saved by the c2p/p2c matmuls).
      attention_saved += 2 * b * 2 * buckets * h * w.mm;
    }
    int64_t saved = attention_saved;
    // Attention output: dropout noise, the residual sum (LayerNorm input) and statistics, the
    // LayerNorm output (the feed-forward input and residual).
    saved += Noise(pd, bth * w.mm) + bth * w.fp + 2 * bt * 4 + bth * w.fp;
    // Feed-forward: the GELU input and output.
    saved += 2 * bti * w.mm;
    // Output: dropout noise, residual sum, statistics, output (the next layer's input).
    saved += Noise(pd, bth * w.mm) + bth * w.fp + 2 * bt * 4 + bth * w.fp;
    if (w.autocast) {
      // The feed-forward input is cast (a saved copy); the fp32 LayerNorm outputs themselves are
      // then not saved.
      saved += bth * w.mm - 2 * bth * w.fp;
    }
    // Forward temporaries: while the attention runs, the q/k/v projections and the raw scores
    // are alive on top of what the attention saves; they are gone before the rest of the layer
    // saves anything. Only what exceeds the layer's full saved set raises the peak.
    int64_t attention_temporaries = 3 * bth * w.mm + batt * w.mm;
    if (deberta) {
      // c2p/p2c scores against the relative table, before and after the gather.
      attention_temporaries +=
          2 * b * a * t * std::min<int64_t>(2 * buckets, 2 * t) * w.mm + 2 * batt * w.mm;
    }
    const int64_t fwd_extra = std::max<int64_t>(0, attention_saved + attention_temporaries - saved);
    layer.saved = saved;
    layer.fwd_extra = fwd_extra;
    // Backward temporaries: each op frees what it saved as it produces its gradients, so above
    // the saved tensors only the incoming gradient and the one being produced are alive
    // (measured: the peak sits at the top layer's first ops, about 2 x [B, T, H]).
    layer.bwd_transient = 2 * bth * w.fp + (deberta ? batt * w.mm : 0);
    if (w.autocast) layer.autocast_weights = LinearWeightBytes(layer.params, w.mm);
    if (r.gradient_checkpointing && r.train) {
      // Only the layer's input is kept; its activations come back while its backward runs,
      // with the recomputed output and the detached input's gradient (2 x [B, T, H] more).
      layer.bwd_transient = saved + layer.bwd_transient + 2 * bth * w.fp;
      layer.saved = bth * w.fp;
      // Computed without recording: one op's inputs and outputs at a time.
      layer.fwd_extra = std::max(6 * bth * w.mm + 2 * batt * w.mm, 2 * bth * w.fp + 2 * bti * w.mm);
    }
    plan.layers.push_back(std::move(layer));
  }

  // Pooler (dense + tanh on [CLS]) and the classifier head.
  Layer head;
  AddLinear(head.params, h, h);
  int64_t width = h;
  int64_t saved = b * h * w.fp + Noise(pc, b * h * w.fp) + b * h * w.fp;  // tanh out, noise, out
  for (int64_t hidden : r.head_hidden) {
    AddLinear(head.params, width, hidden);
    saved += b * hidden * w.fp * (pc > 0 ? 3 : 2);
    width = hidden;
  }
  AddLinear(head.params, width, r.num_labels);
  head.saved = saved;
  if (w.autocast) head.autocast_weights = LinearWeightBytes(head.params, w.mm);
  plan.layers.push_back(std::move(head));
  plan.logits_loss = 2 * b * r.num_labels * 4;  // logits, log-softmax output

  // Evaluation: no graph; one layer's temporaries at a time.
  const int64_t eb = r.eval_batch_size > 0 ? r.eval_batch_size : r.batch_size;
  const int64_t ebth = eb * t * h, ebti = eb * t * i, ebatt = eb * a * t * t;
  plan.eval_inputs = 2 * eb * t * 8 + eb * t * w.fp + eb * 8;
  plan.eval_transient =
      std::max(ebth * w.fp + 3 * ebth * w.mm + 2 * ebth * w.mm + 2 * ebatt * w.mm +
                   (deberta ? 2 * ebatt * w.mm : 0),
               2 * ebth * w.fp + 2 * ebti * w.mm);
  return Status::Ok();
}

Status PlanMlp(const MemoryRequest& r, const Widths& w, Plan& plan) {
  TUNE_RETURN_IF_ERROR(Check(r.num_features > 0, "an MLP needs num_features > 0"));
  const int64_t b = r.batch_size;
  const double pd = r.train ? r.dropout : 0;
  // One plan layer per Linear, so that backward frees each one's activations as it produces its
  // gradients. The first also holds the input batch.
  int64_t width = r.num_features;
  int64_t input = b * width * w.fp;
  for (int64_t hidden : r.mlp_hidden) {
    TUNE_RETURN_IF_ERROR(Check(hidden > 0, "MLP hidden widths must be > 0"));
    Layer layer;
    AddLinear(layer.params, width, hidden);
    // The activation's input (GELU) or output (ReLU, tanh), the dropout noise, the dropped
    // output (saved by the next Linear); without dropout the activation's output is that input.
    layer.saved = input + b * hidden * w.mm * (pd > 0 ? 3 : 2);
    layer.bwd_transient = b * hidden * w.mm;  // the incoming gradient
    layer.grads_after_free = true;
    if (w.autocast) layer.autocast_weights = LinearWeightBytes(layer.params, w.mm);
    plan.layers.push_back(std::move(layer));
    input = 0;
    width = hidden;
  }
  Layer out;
  AddLinear(out.params, width, r.num_labels);
  out.saved = input;
  if (w.autocast) out.autocast_weights = LinearWeightBytes(out.params, w.mm);
  plan.layers.push_back(std::move(out));
  plan.inputs = b * 8;
  plan.logits_loss = 2 * b * r.num_labels * 4;
  const int64_t eb = r.eval_batch_size > 0 ? r.eval_batch_size : r.batch_size;
  int64_t widest = r.num_features;
  for (int64_t hidden : r.mlp_hidden) widest = std::max(widest, hidden);
  plan.eval_inputs = eb * r.num_features * w.fp + eb * 8;
  plan.eval_transient = 2 * eb * widest * w.mm;
  return Status::Ok();
}

// A GPT-2-style decoder LM: learned positions, pre-LN causal self-attention and GELU MLP, a final
// LayerNorm and an LM head tied to the word embeddings; the loss over the vocabulary.
Status PlanDecoder(const MemoryRequest& r, const Widths& w, Plan& plan) {
  const ModelSpec& m = r.model;
  TUNE_RETURN_IF_ERROR(Check(m.hidden_size > 0 && m.num_hidden_layers > 0 &&
                                 m.num_attention_heads > 0 && m.vocab_size > 0 &&
                                 m.hidden_size % m.num_attention_heads == 0,
                             fmt::format("decoder '{}' needs hidden_size, num_hidden_layers, "
                                         "num_attention_heads (dividing hidden_size), vocab_size",
                                         m.name)));
  const int64_t b = r.batch_size, t = r.max_length, h = m.hidden_size,
                i = m.intermediate_size > 0 ? m.intermediate_size : 4 * h,
                a = m.num_attention_heads, v = m.vocab_size;
  const int64_t bth = b * t * h, bti = b * t * i, batt = b * a * t * t, bt = b * t;
  const double pd = r.train ? r.dropout : 0, pa = r.train ? r.attention_dropout : 0;
  Layer emb;
  emb.params.push_back({v * h, false, true});
  emb.params.push_back({m.max_position_embeddings * h, false, true});
  emb.saved = Noise(pd, bth * w.fp) + bth * w.fp;
  plan.embedding_gradient = v * h * w.param;
  plan.inputs = 2 * bt * 8;
  plan.layers.push_back(std::move(emb));
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    Layer layer;
    AddLayerNorm(layer.params, h);
    AddLinear(layer.params, h, 3 * h);
    AddLinear(layer.params, h, h);
    AddLayerNorm(layer.params, h);
    AddLinear(layer.params, h, i);
    AddLinear(layer.params, i, h);
    int64_t saved = bth * w.fp + 2 * bt * 4 + bth * w.fp;      // LN1 input/stats/output
    saved += 3 * bth * w.mm + batt * w.mm + (pa > 0 ? 2 * batt * w.mm : 0) + bth * w.mm;
    saved += Noise(pd, bth * w.mm);
    saved += bth * w.fp + 2 * bt * 4 + bth * w.fp;            // LN2 input/stats/output
    saved += 2 * bti * w.mm + Noise(pd, bth * w.mm);
    if (w.autocast) saved += 2 * bth * w.mm - 2 * bth * w.fp;
    layer.saved = saved;
    layer.fwd_extra = 3 * bth * w.mm + batt * w.mm;
    layer.bwd_transient =
        std::max(2 * batt * w.mm + 3 * bth * w.fp, 2 * bti * w.mm + 2 * bth * w.fp);
    if (w.autocast) layer.autocast_weights = LinearWeightBytes(layer.params, w.mm);
    if (r.gradient_checkpointing && r.train) {
      layer.bwd_transient = saved + layer.bwd_transient;
      layer.saved = bth * w.fp;
      layer.fwd_extra += saved;
    }
    plan.layers.push_back(std::move(layer));
  }
  Layer head;
  AddLayerNorm(head.params, h);
  head.saved = 2 * bth * w.fp + 2 * bt * 4;
  // Logits [B, T, V], their shifted copy and the log-softmax output.
  plan.logits_loss = 3 * b * t * v * 4;
  head.bwd_transient = 2 * b * t * v * 4;
  plan.layers.push_back(std::move(head));
  const int64_t eb = r.eval_batch_size > 0 ? r.eval_batch_size : r.batch_size;
  plan.eval_inputs = 2 * eb * t * 8;
  plan.eval_transient = std::max(3 * eb * t * v * 4, 2 * eb * a * t * t * w.mm + 6 * eb * t * h * w.fp);
  return Status::Ok();
}

}  // namespace

const char* MemoryPhaseName(MemoryPhase p) {
  switch (p) {
    case MemoryPhase::kForward:
      return "forward";
    case MemoryPhase::kBackward:
      return "backward";
    case MemoryPhase::kOptimizerStep:
      return "optimizer_step";
    case MemoryPhase::kEval:
      return "eval";
  }
  return "?";
}

DeviceMemoryModel DeviceMemoryModel::Cpu() { return DeviceMemoryModel{}; }

DeviceMemoryModel DeviceMemoryModel::Cuda() {
  DeviceMemoryModel d;
  d.caching_allocator = true;
  d.context_bytes = 512 * kMiB;
  d.workspace_bytes = 8 * kMiB + 4 * kMiB;  // cuBLAS: one handle's workspace on the stream
  d.fragmentation = 0.10;
  return d;
}

MemoryRequest MemoryRequestFor(const ModelSpec& model, const TrainHyperparams& hp,
                               int64_t num_labels, int64_t num_features) {
  MemoryRequest r;
  r.model = model;
  r.num_labels = num_labels;
  if (model.model_type == "mlp") {
    r.architecture = Architecture::kMlp;
    r.num_features = num_features;
    r.mlp_hidden.assign(static_cast<size_t>(std::max<int64_t>(hp.mlp_layers, 0)), hp.mlp_hidden);
  }
  for (int64_t k = 0; k < hp.classifier_layers; ++k) {
    r.head_hidden.push_back(hp.ClassifierWidth(k, model.hidden_size));
  }
  r.head_activation = hp.classifier_activation;
  r.batch_size = hp.batch_size;
  r.max_length = hp.max_length;
  r.grad_accum = hp.grad_accum;
  r.eval_batch_size = hp.eval_batch_size;
  r.gradient_checkpointing = hp.gradient_checkpointing;
  r.optimizer = hp.optimizer;
  r.momentum = hp.momentum;
  r.nesterov = hp.nesterov;
  r.weight_decay = hp.weight_decay;
  r.dropout = hp.dropout;
  r.attention_dropout = hp.attention_dropout;
  r.classifier_dropout = hp.classifier_dropout.value_or(hp.dropout);
  r.precision = hp.precision;
  return r;
}

Result<MemoryEstimate> EstimateMemory(const MemoryRequest& r, const DeviceMemoryModel& device) {
  TUNE_RETURN_IF_ERROR(Check(r.batch_size > 0, fmt::format("batch size {} must be > 0", r.batch_size)));
  TUNE_RETURN_IF_ERROR(Check(r.grad_accum > 0, fmt::format("grad_accum {} must be > 0", r.grad_accum)));
  TUNE_RETURN_IF_ERROR(Check(r.num_labels > 0, "num_labels must be > 0"));
  TUNE_RETURN_IF_ERROR(Check(r.head_hidden.size() <= 3, "at most 3 classifier hidden layers"));
  if (r.architecture != Architecture::kMlp) {
    TUNE_RETURN_IF_ERROR(
        Check(r.max_length > 0, fmt::format("max_length {} must be > 0", r.max_length)));
    if (r.model.max_position_embeddings > 0 && r.model.position_buckets == 0) {
      TUNE_RETURN_IF_ERROR(Check(r.max_length <= r.model.max_position_embeddings,
                                 fmt::format("max_length {} exceeds model '{}''s {} positions",
                                             r.max_length, r.model.name,
                                             r.model.max_position_embeddings)));
    }
  }
  const Widths w = WidthsFor(r.precision);
  Plan plan;
  switch (r.architecture) {
    case Architecture::kEncoder:
      TUNE_RETURN_IF_ERROR(PlanEncoder(r, w, plan));
      break;
    case Architecture::kMlp:
      TUNE_RETURN_IF_ERROR(PlanMlp(r, w, plan));
      break;
    case Architecture::kDecoder:
      TUNE_RETURN_IF_ERROR(PlanDecoder(r, w, plan));
      break;
  }

  MemoryEstimate e;
  int64_t largest_param = 0, largest_decay_param = 0, autocast_weights = 0;
  for (const Layer& layer : plan.layers) {
    for (const Param& p : layer.params) {
      e.num_parameters += p.numel;
      largest_param = std::max(largest_param, p.numel);
      if (p.decay) largest_decay_param = std::max(largest_decay_param, p.numel);
    }
    e.activations += layer.saved;
    autocast_weights += layer.autocast_weights;
  }
  e.weights = e.num_parameters * w.param;
  e.inputs = plan.inputs;
  e.logits_loss = plan.logits_loss;
  e.embedding_gradient = plan.embedding_gradient;
  e.autocast_cache = autocast_weights;
  if (r.train) {
    e.gradients = e.num_parameters * w.param;
    if (r.optimizer == OptimizerKind::kAdamW) {
      e.optimizer_state = 2 * e.num_parameters * w.state;
      // denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps): two temporaries of the
      // parameter's size while the largest parameter is stepped.
      e.optimizer_transient = 2 * largest_param * w.state;
    } else {
      e.optimizer_state = r.momentum > 0 ? e.num_parameters * w.state : 0;
      // d_p = grad.add(p, weight_decay) and, with Nesterov, d_p.add(buf, momentum).
      const int64_t sgd = (r.weight_decay > 0 ? largest_decay_param : 0) +
                          (r.nesterov && r.momentum > 0 ? largest_param : 0);
      e.optimizer_transient = sgd * w.state;
    }
  }
  for (const Layer& layer : plan.layers) {
    e.backward_transient = std::max(e.backward_transient, layer.bwd_transient);
  }

  Timeline tl(device.caching_allocator);
  tl.Phase(MemoryPhase::kForward);
  for (const Layer& layer : plan.layers) {
    for (const Param& p : layer.params) tl.Alloc(p.numel * w.param);
  }
  if (r.train) {
    const int64_t state_copies = r.optimizer == OptimizerKind::kAdamW ? 2
                                 : r.momentum > 0                     ? 1
                                                                      : 0;
    for (const Layer& layer : plan.layers) {
      for (const Param& p : layer.params) tl.Alloc(p.numel * w.state, state_copies);
    }
    // Micro-batches after the second repeat the second's timeline exactly (same live set, same
    // peaks), so two passes give the step's peaks for any accumulation.
    for (int64_t micro = 0; micro < std::min<int64_t>(r.grad_accum, 2); ++micro) {
      const bool grads_exist = micro > 0;
      tl.Phase(MemoryPhase::kForward);
      tl.Alloc(plan.inputs);
      for (const Layer& layer : plan.layers) {
        tl.Alloc(layer.autocast_weights);
        tl.Alloc(layer.saved);
        tl.Transient(layer.fwd_extra);
      }
      tl.Alloc(plan.logits_loss);
      tl.Phase(MemoryPhase::kBackward);
      tl.Free(plan.logits_loss);
      for (auto it = plan.layers.rbegin(); it != plan.layers.rend(); ++it) {
        const Layer& layer = *it;
        // The layer's gradients appear while its saved tensors are still alive; with
        // accumulation they are temporaries added into the existing ones.
        std::vector<int64_t> grads;
        for (const Param& p : layer.params) grads.push_back(p.numel * w.param);
        if (layer.grads_after_free) {
          tl.Transient(layer.bwd_transient);
          tl.Free(layer.saved);
          tl.Free(layer.autocast_weights);
        }
        for (int64_t g : grads) tl.Alloc(g);
        if (!layer.grads_after_free) tl.Transient(layer.bwd_transient);
        if (grads_exist) {
          for (int64_t g : grads) tl.Free(g);
        }
        if (!layer.grads_after_free) {
          tl.Free(layer.saved);
          tl.Free(layer.autocast_weights);
        }
      }
      tl.Free(plan.inputs);
    }
    tl.Phase(MemoryPhase::kOptimizerStep);
    tl.Transient(e.optimizer_transient);
    // zero_grad(set_to_none): the gradients go.
    for (const Layer& layer : plan.layers) {
      for (const Param& p : layer.params) tl.Free(p.numel * w.param);
    }
  }
  tl.Phase(MemoryPhase::kEval);
  tl.Alloc(plan.eval_inputs);
  tl.Transient(plan.eval_transient);
  tl.Free(plan.eval_inputs);

  const double c = device.correction;
  auto scaled = [c](int64_t v) { return static_cast<int64_t>(std::llround(static_cast<double>(v) * c)); };
  e.forward_peak = scaled(tl.peak(MemoryPhase::kForward));
  e.backward_peak = scaled(tl.peak(MemoryPhase::kBackward));
  e.optimizer_step_peak = scaled(tl.peak(MemoryPhase::kOptimizerStep));
  e.eval_peak = scaled(tl.peak(MemoryPhase::kEval));
  e.allocated_peak = 0;
  for (MemoryPhase p : {MemoryPhase::kForward, MemoryPhase::kBackward,
                        MemoryPhase::kOptimizerStep, MemoryPhase::kEval}) {
    const int64_t v = scaled(tl.peak(p));
    if (v > e.allocated_peak) {
      e.allocated_peak = v;
      e.peak_phase = p;
    }
  }
  if (device.caching_allocator) {
    e.rounding = std::max<int64_t>(0, scaled(tl.rounded_peak()) - e.allocated_peak);
    e.workspace = device.workspace_bytes;
  }
  e.fragmentation = static_cast<int64_t>(
      std::llround(device.fragmentation * static_cast<double>(e.allocated_peak)));
  e.context = device.context_bytes;
  e.device_peak = e.allocated_peak + e.rounding + e.fragmentation + e.context + e.workspace;
  return e;
}

Json MemoryEstimateToJson(const MemoryEstimate& e) {
  return Json{{"num_parameters", e.num_parameters},
              {"breakdown",
               {{"weights", e.weights},
                {"gradients", e.gradients},
                {"optimizer_state", e.optimizer_state},
                {"activations", e.activations},
                {"inputs", e.inputs},
                {"autocast_cache", e.autocast_cache},
                {"logits_loss", e.logits_loss},
                {"backward_transient", e.backward_transient},
                {"embedding_gradient", e.embedding_gradient},
                {"optimizer_transient", e.optimizer_transient},
                {"workspace", e.workspace}}},
              {"phases",
               {{"forward", e.forward_peak},
                {"backward", e.backward_peak},
                {"optimizer_step", e.optimizer_step_peak},
                {"eval", e.eval_peak}}},
              {"allocated_peak", e.allocated_peak},
              {"peak_phase", MemoryPhaseName(e.peak_phase)},
              {"rounding", e.rounding},
              {"fragmentation", e.fragmentation},
              {"context", e.context},
              {"device_peak", e.device_peak}};
}

Result<int64_t> MaxBatchSize(MemoryRequest request, const DeviceMemoryModel& device,
                             int64_t budget_bytes, int64_t limit) {
  auto fits = [&](int64_t b) -> Result<bool> {
    request.batch_size = b;
    TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(request, device));
    return e.device_peak <= budget_bytes;
  };
  TUNE_ASSIGN_OR_RETURN(bool one, fits(1));
  if (!one) return int64_t{0};
  int64_t lo = 1, hi = limit;  // lo fits
  TUNE_ASSIGN_OR_RETURN(bool top, fits(hi));
  if (top) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    TUNE_ASSIGN_OR_RETURN(bool ok, fits(mid));
    (ok ? lo : hi) = mid;
  }
  return lo;
}

std::string FormatBytes(int64_t bytes) {
  const double v = static_cast<double>(bytes);
  const int64_t mag = bytes < 0 ? -bytes : bytes;
  if (mag >= kGiB) return fmt::format("{:.2f} GiB", v / static_cast<double>(kGiB));
  if (mag >= kMiB) return fmt::format("{:.1f} MiB", v / static_cast<double>(kMiB));
  if (mag >= kKiB) return fmt::format("{:.1f} KiB", v / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

Result<int64_t> ParseBytes(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("invalid memory size '{}': {} (examples: 24GiB, 1.5GB, 512MiB, "
                              "1000000)",
                              text, why));
  };
  size_t k = 0;
  while (k < text.size() && (std::isdigit(static_cast<unsigned char>(text[k])) || text[k] == '.')) {
    ++k;
  }
  if (k == 0) return bad("no number");
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(0, k)), &used);
    if (used != k) return bad("not a number");
  } catch (const std::exception&) {
    return bad("not a number");
  }
  std::string unit(text.substr(k));
  unit.erase(0, unit.find_first_not_of(' '));
  std::string lower;
  for (char ch : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (lower.empty() || lower == "b") scale = 1;
  else if (lower == "k" || lower == "kib") scale = static_cast<double>(kKiB);
  else if (lower == "kb") scale = 1e3;
  else if (lower == "m" || lower == "mib") scale = static_cast<double>(kMiB);
  else if (lower == "mb") scale = 1e6;
  else if (lower == "g" || lower == "gib") scale = static_cast<double>(kGiB);
  else if (lower == "gb") scale = 1e9;
  else if (lower == "t" || lower == "tib") scale = static_cast<double>(kGiB) * 1024;
  else if (lower == "tb") scale = 1e12;
  else return bad(fmt::format("unknown unit '{}'", unit));
  const double bytes = number * scale;
  if (!(bytes > 0) || bytes > 9e18) return bad("out of range");
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace tune

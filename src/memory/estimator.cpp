#include "memory/estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "train/batching.h"
#include "util/text.h"

namespace tune {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

// Sizes of the caching allocator (docs/memory.md#caching-allocator-sizes).
constexpr int64_t kMinBlock = 512;
constexpr int64_t kSmallSize = 1 * kMiB;    // requests up to this share small segments
constexpr int64_t kSmallBuffer = 2 * kMiB;  // a small segment
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

  // A phase's peak is at least what is live when it begins (a fused optimizer step allocates
  // nothing, yet weights, gradients and state are all live during it).
  void Phase(MemoryPhase p) {
    phase_ = p;
    Touch();
  }
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
  int64_t param;  // weights, gradients
  int64_t state;  // optimizer state
  int64_t mm;     // outputs of matmuls/linears and what follows them in the same dtype
  int64_t fp;     // outputs that stay in the parameters' dtype (embeddings, residual sums,
                  // LayerNorm, the additive mask)
  bool autocast;  // linear inputs in fp32 are cast (a saved copy) and weights cast (cached)
  bool cpu_autocast = false;  // autocast on LibTorch's CPU kernels (their fp32 temporaries)
  // LibTorch's CUDA kernels: dropout is fused (native_dropout saves a bool mask, 1 byte per
  // element, where the CPU saves noise in the input's dtype) and autocast runs softmax in fp32.
  bool cuda_kernels = false;
  // Bytes per element of a dropout's saved mask for an input `width` bytes wide.
  int64_t Mask(int64_t width) const { return cuda_kernels ? 1 : width; }
  // Bytes per element of the attention probabilities softmax returns.
  int64_t Softmax() const { return cuda_kernels && autocast ? 4 : mm; }
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
  int64_t saved = 0;             // bytes saved for backward by its forward
  int64_t fwd_extra = 0;         // temporaries of its forward beyond what it saves (bytes)
  int64_t bwd_transient = 0;     // temporaries alive together in its backward (bytes)
  int64_t autocast_weights = 0;  // low-precision weight copies its saved ops hold
  int64_t forward_cache = 0;     // low-precision weight copies cached only until the forward ends
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
  int64_t inputs = 0;          // ids, masks, labels: live for the whole step
  int64_t logits_loss = 0;     // saved by the loss
  int64_t eval_transient = 0;  // the largest temporaries of an evaluation forward
  int64_t eval_inputs = 0;
  int64_t embedding_gradient = 0;  // dense word-embedding gradient (bytes)
};

// Dropout in training of `elems` elements `width` bytes wide: its mask is saved (the noise
// tensor in the input's dtype on CPU, a bool mask on CUDA); its output is the next op's.
int64_t Noise(double p, const Widths& w, int64_t elems, int64_t width) {
  return p > 0 ? elems * w.Mask(width) : 0;
}

// The bytes a forward without a graph holds at once for softmax and attention dropout.
int64_t NoGradProbabilities(const Widths& w, int64_t batt, double pa) {
  const int64_t sm = w.Softmax();
  const int64_t cast = sm == w.mm ? 0 : batt * w.mm;
  return pa > 0 ? batt * (2 * sm + w.Mask(sm)) + cast : batt * sm + cast;
}

// The forward of one encoder layer, op by op in the order of the trainer's code: what autograd
// saves (kept until the layer's backward), the named temporaries (freed when the function that
// holds them returns) and what one op allocates while it runs. Gives the bytes the layer saves
// and its peak above the live set it started from.
class LayerTrace {
 public:
  void Save(int64_t bytes) {
    saved_ += bytes;
    live_ += bytes;
    Touch();
  }
  void Temp(int64_t bytes) {
    live_ += bytes;
    Touch();
  }
  void Drop(int64_t bytes) { live_ -= bytes; }
  // A temporary that an op then saves for backward (it stays alive until the layer's backward).
  void Keep(int64_t bytes) { saved_ += bytes; }
  void During(int64_t bytes) { peak_ = std::max(peak_, live_ + bytes); }
  // Remembers how much is saved at this point of the forward (two marks: `slot` 0 or 1).
  void Mark(int slot = 0) { marked_[slot] = saved_; }
  int64_t saved() const { return saved_; }
  int64_t marked(int slot = 0) const { return marked_[slot]; }
  // What the peak exceeds the saved set by.
  int64_t extra() const { return std::max<int64_t>(0, peak_ - saved_); }

 private:
  void Touch() { peak_ = std::max(peak_, live_); }
  int64_t saved_ = 0, live_ = 0, peak_ = 0;
  std::array<int64_t, 2> marked_{};
};

// The attention probabilities one layer's forward saves: the softmax output, and with
// attention dropout its mask and the dropped probabilities; under autocast on CUDA the fp32
// probabilities are cast for the matmul with v (the cast saved, the fp32 dropped ones freed).
void TraceProbabilities(LayerTrace& tr, const Widths& w, int64_t batt, double pa) {
  const int64_t sm = w.Softmax();
  tr.Save(batt * sm);
  if (pa > 0) tr.Save(batt * w.Mask(sm));
  if (sm == w.mm) {
    if (pa > 0) tr.Save(batt * sm);
    return;
  }
  if (pa > 0) tr.Temp(batt * sm);
  tr.Save(batt * w.mm);
  if (pa > 0) tr.Drop(batt * sm);
}

// How an encoder layer attends (src/torch/torch_models.cpp).
enum class AttentionKernel {
  kEager,  // softmax(Q K^T / sqrt(d) + mask) V op by op
  // at::scaled_dot_product_attention's composite math path: LibTorch takes it on the CPU when
  // the attention dropout is on (its CPU flash kernel has no dropout), and computes it in fp32
  // whatever the dtype of q, k and v.
  kSdpaMath,
  // A fused SDPA kernel: the CPU's flash kernel (no dropout), CUDA's FlashAttention (bf16, fp16;
  // no mask) or memory-efficient kernel (a mask, or fp32). Each saves q, k, v, its output and the
  // log-sum-exp of every query row; none keeps a [B, heads, T, T] tensor.
  kSdpaFused,
};

// Shapes of an encoder layer's forward.
struct EncoderShape {
  int64_t b, t, h, i, a;
  int64_t rows;  // DeBERTa: relative rows the c2p/p2c scores are computed against (2 x buckets)
  bool deberta;
  double pd, pa;  // hidden and attention dropout (0 outside training)
  AttentionKernel kernel = AttentionKernel::kEager;
  bool fused_qkv = false;  // q, k, v as one projection (BERT-type layers)
};

// The kernel SDPA runs for a layer with attention dropout `pa` (0 outside training), in
// training (`grad`) or not: on CUDA a fused one always (FlashAttention and the memory-efficient
// kernel both take dropout, the latter DeBERTa's bias and its gradient); on the CPU the flash
// kernel without dropout, the math path with it, and for DeBERTa's bias, which needs a gradient
// the CPU's flash kernel does not give, the math path whenever there is a graph.
AttentionKernel SdpaKernel(bool sdpa, bool deberta, const Widths& w, double pa, bool grad) {
  if (!sdpa) return AttentionKernel::kEager;
  if (w.cuda_kernels) return AttentionKernel::kSdpaFused;
  return pa == 0 && !(deberta && grad) ? AttentionKernel::kSdpaFused : AttentionKernel::kSdpaMath;
}

// The log-sum-exp a fused SDPA kernel saves per query row and head, fp32: the memory-efficient
// kernel pads the rows to a multiple of 32 (the larger of CUDA's two).
int64_t SdpaLogSumExp(const EncoderShape& s, const Widths& w) {
  const int64_t rows = w.cuda_kernels ? (s.t + 31) / 32 * 32 : s.t;
  return s.b * s.a * rows * 4;
}

// A Linear from `in_elems` to `out_elems` elements: under autocast an fp32 input is cast and the
// copy saved (`cast_input`); the output is a temporary. Returns the output's bytes.
int64_t TraceLinear(LayerTrace& tr, const Widths& w, int64_t in_elems, int64_t out_elems,
                    bool cast_input) {
  if (w.autocast && cast_input) tr.Save(in_elems * w.mm);
  tr.Temp(out_elems * w.mm);
  // LibTorch 1.13's CPU addmm in bf16 holds, beside its output, an fp32 temporary of twice it.
  if (w.cpu_autocast) tr.During(out_elems * 8);
  return out_elems * w.mm;
}

// The q, k, v projections of a layer's input: three Linears, or with `s.fused_qkv` one GEMM
// (QkvProjection) that casts the input once under autocast. Returns the outputs' bytes.
int64_t TraceProjections(LayerTrace& tr, const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h;
  if (!s.fused_qkv || s.deberta) {
    int64_t out = 0;
    for (int k = 0; k < 3; ++k) out += TraceLinear(tr, w, bth, bth, true);
    return out;
  }
  return TraceLinear(tr, w, bth, 3 * bth, true);
}

// DeBERTa's relative scores in one layer's forward (c2p and p2c against all `rows` relative
// rows, then gathered to T columns). Returns the bytes of the temporaries it adds that stay alive
// until the attention returns.
int64_t TraceRelativeScores(LayerTrace& tr, const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t;
  const int64_t rh = s.rows * s.h, brh = s.b * rh, batr = s.b * s.a * s.t * s.rows,
                index = s.t * s.t * 8;
  int64_t temps = 0;
  // r = pos_dropout(rel[0:rows]): the noise is saved; r is saved by the two projections in
  // fp32, or cast by each of them under autocast (r itself then a local).
  if (s.pd > 0) {
    tr.Save(rh * w.fp);
    if (w.autocast) {
      tr.Temp(rh * w.fp);
      temps += rh * w.fp;
    } else {
      tr.Save(rh * w.fp);
    }
  }
  // pos_key = key_proj(r), pos_query = query_proj(r): [heads, rows, d] locals.
  temps += TraceLinear(tr, w, rh, rh, true);
  temps += TraceLinear(tr, w, rh, rh, true);
  for (int k = 0; k < 2; ++k) {
    // The clamped index (int64 [T, T], saved by gather), from one or two temporaries.
    tr.During((k + 2) * index);
    tr.Save(index);
    // matmul(q, pos_key^T) broadcasts pos_key over the batch: q copied again and pos_key
    // repeated per example (both saved by bmm); the [B, heads, T, rows] scores are saved by
    // gather; the gathered [B, heads, T, T] scores stay a named local.
    tr.Save(bth * w.mm + brh * w.mm + batr * w.mm);
    tr.Temp(batt * w.mm);
    temps += batt * w.mm;
  }
  return temps;
}

// The q, k, v projections and the attention scores up to the mask. Returns the bytes of the
// temporaries alive until the attention returns (the projections and the score locals).
int64_t TraceScores(LayerTrace& tr, const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t;
  // q, k, v projections (temporaries until the attention returns).
  int64_t temps = TraceProjections(tr, s, w);
  // matmul(q, k^T) copies q and k per head (saved by bmm); the scores stay a named local.
  tr.Save(2 * bth * w.mm);
  tr.Temp(batt * w.mm);
  temps += batt * w.mm;
  int64_t pre_softmax_extra = 0;  // what the score sum allocates beyond the three score locals
  if (s.deberta) {
    temps += TraceRelativeScores(tr, s, w);
    // scores = (scores + c2p + p2c).mul_(scale): two sums alive at once; the first sum and the
    // first scores go at the end of that statement (the second sum replaces them as `scores`).
    pre_softmax_extra = 2 * batt * w.mm;
  }
  tr.Temp(pre_softmax_extra);
  tr.Drop(pre_softmax_extra);
  // add_(mask) of the fp32 mask into bf16 scores: CPU makes fp32 copies of the scores and of the
  // result.
  if (w.cpu_autocast) tr.During(2 * batt * 4);
  return temps;
}

// Softmax, attention dropout and the context; frees the attention's temporaries (`temps`).
void TraceContext(LayerTrace& tr, const EncoderShape& s, const Widths& w, int64_t temps) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t;
  tr.Mark();
  // softmax output (saved), dropout noise and the dropped probabilities (saved by the matmul).
  TraceProbabilities(tr, w, batt, s.pa);
  // matmul(probs, v): v copied per head (saved), its output, and the context reshaped from it
  // (saved by the output projection).
  tr.Save(bth * w.mm);
  tr.Temp(bth * w.mm);
  tr.Save(bth * w.mm);
  tr.Drop(bth * w.mm + temps);
}

// SDPA's math path (at::_scaled_dot_product_attention_math, LibTorch 2.x) after the q, k, v
// projections (`temps`, their bytes): the key-padding mask made additive in q's dtype; bf16 q, k
// and v copied to fp32; q and k^T scaled by sqrt(scale) and copied per head by the matmul (both
// saved); the scores; _safe_softmax (softmax, the -inf test, the all-masked rows, its result,
// saved); dropout's noise (saved) and output (saved by the matmul with v); v copied per head
// (saved); the fp32 output cast back with the probabilities' copy. Then the context, reshaped
// (saved by the output projection). Frees the attention's temporaries.
void TraceSdpaMath(LayerTrace& tr, const EncoderShape& s, const Widths& w, int64_t temps) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t, bat = s.b * s.a * s.t;
  const bool cast = w.mm != 4;
  // The boolean mask made additive (DeBERTa's bias comes additive), the fp32 copies, scaled q.
  const int64_t local = (s.deberta ? 0 : s.b * s.t * w.mm) + (cast ? 3 * bth * 4 : 0) + bth * 4;
  tr.Temp(local);
  tr.Temp(bth * 4);  // k^T * sqrt(scale)
  tr.Save(2 * bth * 4);
  tr.Temp(batt * 4);
  tr.Drop(bth * 4);
  // DeBERTa's low-precision bias added into the fp32 scores: the CPU copies it to fp32 first.
  if (s.deberta && cast && w.cpu_autocast) tr.During(batt * 4);
  tr.During(2 * batt * 4 + batt + bat);
  tr.Save(batt * 4);
  tr.Drop(batt * 4);
  if (s.pa > 0) {
    // at::dropout's noise: bernoulli_ on the CPU (MKL) draws into an int32 tensor of its size.
    tr.Save(batt * 4);
    tr.During(batt * 4);
  }
  tr.Mark();  // the backward's peak comes when what follows is freed
  if (s.pa > 0) tr.Save(batt * 4);
  tr.Save(bth * 4);
  // make_tuple's arguments, right to left: the probabilities' copy, then the output and its cast.
  const int64_t probs_copy = cast ? batt * w.mm : 0;
  tr.Temp(probs_copy + bth * 4);
  if (cast) {
    tr.Temp(bth * w.mm);
    tr.Drop(bth * 4);
  }
  tr.Drop(local + probs_copy);
  tr.Save(bth * w.mm);
  tr.Drop(bth * w.mm + temps);
}

// A fused SDPA kernel after the q, k, v projections (`temps`, which it saves): the additive mask
// and the kernel's output and log-sum-exp (saved). The output is laid out as [B, T, heads, d], as
// q is, so the context ([B, T, H], the output projection's input) is a view of it.
void TraceSdpaFused(LayerTrace& tr, const EncoderShape& s, const Widths& w, int64_t temps) {
  const int64_t bth = s.b * s.t * s.h;
  tr.Keep(temps);
  // DeBERTa's bias (DebertaBias, kept by the kernel) stands for the mask.
  tr.Save((s.deberta ? 0 : s.b * s.t * w.mm) + bth * w.mm + SdpaLogSumExp(s, w));
  tr.Mark();
}

// DeBERTa's SDPA path after its relative scores: the bias (c2p + p2c) * scale, plus the additive
// mask (fp32: under autocast the sum is promoted, the CPU copying the low-precision operand),
// cast to q's dtype for SDPA. Returns the bytes of {the bias, its cast}, locals until the
// attention returns; the kernel that saves the bias saves the last of them.
std::pair<int64_t, int64_t> TraceDebertaBias(LayerTrace& tr, const EncoderShape& s,
                                             const Widths& w) {
  const int64_t batt = s.b * s.a * s.t * s.t;
  tr.Temp(batt * w.mm);  // c2p + p2c, scaled in place
  if (w.cpu_autocast) tr.During(batt * 4);
  tr.Temp(batt * w.fp);
  tr.Drop(batt * w.mm);
  const int64_t cast = w.fp != w.mm ? batt * w.mm : 0;
  tr.Temp(cast);
  return {batt * w.fp, cast};
}

// A residual block (the attention output, or the feed-forward output): dense (its output freed
// inside dropout, which takes it by value), dropout noise, the residual sum (LayerNorm input) and
// statistics; the LayerNorm output h is saved by the next Linear in fp32 (`output_saved`), a
// local (the residual) under autocast.
void TraceResidualBlock(LayerTrace& tr, const EncoderShape& s, const Widths& w, int64_t in_elems,
                        bool output_saved) {
  const int64_t bth = s.b * s.t * s.h, bt = s.b * s.t;
  // (its input is already in the compute dtype: no cast)
  const int64_t dense = TraceLinear(tr, w, in_elems, bth, false);
  if (s.pd > 0) {
    tr.Save(Noise(s.pd, w, bth, w.mm));
    tr.Temp(bth * w.mm);  // dropped output
    tr.Drop(dense);
  }
  if (w.cpu_autocast) tr.During(bth * 4);  // the bf16 operand promoted to fp32
  tr.Save(bth * w.fp + 2 * bt * 4);
  if (output_saved) {
    tr.Save(bth * w.fp);
  } else {
    tr.Temp(bth * w.fp);
  }
  tr.Drop(s.pd > 0 ? bth * w.mm : dense);
}

// One encoder layer's forward in training (src/torch/torch_models.cpp): BertLayer, or
// DebertaLayer with DisentangledSelfAttention. The layer's input is counted by whoever produced
// it (the previous layer or the embeddings); its output is counted here when something saves it.
LayerTrace TraceEncoderLayer(const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, bti = s.b * s.t * s.i;
  LayerTrace tr;
  // Under autocast nothing saves the fp32 input (the Linears save their bf16 casts); it stays
  // alive as the residual until the layer returns.
  if (w.autocast) tr.Temp(bth * w.fp);
  if (s.kernel == AttentionKernel::kEager) {
    TraceContext(tr, s, w, TraceScores(tr, s, w));
  } else {
    const int64_t projections = TraceProjections(tr, s, w);
    int64_t relative = 0, bias = 0, bias_cast = 0;
    if (s.deberta) {
      relative = TraceRelativeScores(tr, s, w);
      tr.Mark(1);  // the gather's backward comes when what follows is freed
      std::tie(bias, bias_cast) = TraceDebertaBias(tr, s, w);
    }
    if (s.kernel == AttentionKernel::kSdpaMath) {
      TraceSdpaMath(tr, s, w, projections + relative + bias + bias_cast);
    } else {
      const int64_t kept = bias_cast > 0 ? bias_cast : bias;
      TraceSdpaFused(tr, s, w, projections + kept);
      tr.Drop(relative + bias + bias_cast - kept);
    }
  }
  TraceResidualBlock(tr, s, w, bth, !w.autocast);  // the attention output
  // Feed-forward: the dense input (h, cast under autocast), its output (saved by GELU) and the
  // GELU output (saved by the output projection).
  tr.Drop(TraceLinear(tr, w, bth, bti, true));
  tr.Save(bti * w.mm);
  tr.Save(bti * w.mm);
  // Output block; in fp32 its output is saved by the next layer (or the pooler).
  TraceResidualBlock(tr, s, w, bti, !w.autocast);
  return tr;
}

// SDPA's largest live total in a forward without a graph, above the layer's input: q, k, v and
// the mask, then the math path's steps one at a time (as TraceSdpaMath, nothing saved), or a
// fused kernel's output and log-sum-exp; last the context copied from the output.
int64_t NoGradSdpaPeak(const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t, bat = s.b * s.a * s.t;
  const int64_t qkv = 3 * bth * w.mm + s.b * s.t * w.mm;
  const int64_t context = 3 * bth * w.mm + 2 * bth * w.mm;
  if (s.kernel == AttentionKernel::kSdpaFused) return qkv + bth * w.mm + SdpaLogSumExp(s, w);
  const bool cast = w.mm != 4;
  const int64_t base = qkv + (cast ? 3 * bth * 4 : 0) + bth * 4;  // the fp32 copies, scaled q
  return std::max({base + 3 * bth * 4 + batt * 4,                 // k^T, the two copies, scores
                   base + 3 * batt * 4 + batt + bat,              // _safe_softmax
                   base + (s.pa > 0 ? 3 * batt * 4 : 0),          // dropout
                   base + batt * 4 + 2 * bth * 4 +                // the matmul with v, the casts
                       (cast ? batt * w.mm + bth * w.mm : 0),
                   context});
}

// The largest live total of one encoder layer's forward without a graph (evaluation, and the
// forward of a checkpointed layer), above its input: one op's inputs and outputs at a time.
int64_t NoGradEncoderLayerPeak(const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, bti = s.b * s.t * s.i, batt = s.b * s.a * s.t * s.t;
  const int64_t linear = w.cpu_autocast ? 8 : 0;  // CPU bf16 addmm's fp32 temporary, per output
  const int64_t cast = w.autocast ? bth * w.mm : 0;
  // Feed-forward: h, the cast, the dense output and GELU output.
  const int64_t ffn = bth * w.fp + cast + bti * w.mm + std::max(bti * linear, bti * w.mm);
  if (s.kernel != AttentionKernel::kEager) {
    int64_t attention = NoGradSdpaPeak(s, w);  // q, k, v onwards
    if (s.deberta) {
      // r, pos_key, pos_query and the two indices stay alive through the attention; then the
      // relative steps (as eager's, without the content scores), the bias and its cast beside
      // c2p and p2c, and SDPA.
      const int64_t rh = s.rows * s.h, brh = s.b * rh, batr = s.b * s.a * s.t * s.rows,
                    index = s.t * s.t * 8, qkv = 3 * bth * w.mm;
      const int64_t held = (s.pd > 0 ? rh * w.fp : 0) + 2 * rh * w.mm + 2 * index;
      const int64_t bias = 2 * batt * w.mm + batt * w.fp + (w.fp != w.mm ? batt * w.mm : 0);
      attention = held + std::max({qkv + bth * w.mm + brh * w.mm + batr * w.mm,  // c2p's matmul
                                   qkv + batt * w.mm + batr * w.mm,              // c2p's gather
                                   qkv + batt * w.mm + bth * w.mm + brh * w.mm + batr * w.mm,
                                   qkv + 2 * batt * w.mm + batr * w.mm,  // p2c's gather
                                   qkv + bias + (w.cpu_autocast ? batt * 4 : 0), bias + attention});
    }
    return std::max(attention, ffn);
  }
  if (!s.deberta) {
    return std::max({6 * bth * w.mm + batt * w.mm + NoGradProbabilities(w, batt, s.pa),
                     2 * bth * w.fp + 2 * bti * w.mm, ffn});
  }
  const int64_t rh = s.rows * s.h, brh = s.b * rh, batr = s.b * s.a * s.t * s.rows,
                index = s.t * s.t * 8;
  // q, k, v, r, pos_key, pos_query and the two indices stay alive through the attention.
  const int64_t held = 3 * bth * w.mm + (s.pd > 0 ? rh * w.fp : 0) + 2 * rh * w.mm + 2 * index;
  const int64_t probs = NoGradProbabilities(w, batt, s.pa);  // softmax, noise, dropped
  const int64_t attention =
      std::max({batt * w.mm + bth * w.mm + brh * w.mm + batr * w.mm,      // c2p's matmul
                2 * batt * w.mm + batr * w.mm,                            // c2p's gather
                2 * batt * w.mm + bth * w.mm + brh * w.mm + batr * w.mm,  // p2c's matmul
                3 * batt * w.mm + batr * w.mm,                            // p2c's gather
                5 * batt * w.mm,                                          // the score sum
                3 * batt * w.mm + (w.cpu_autocast ? 2 * batt * 4 : 0),    // the mask's add
                3 * batt * w.mm + probs,                                  // softmax and dropout
                3 * batt * w.mm + batt * w.mm + 2 * bth * w.mm});         // matmul with v
  return std::max(held + attention, ffn);
}

Status CheckEncoder(const ModelSpec& m) {
  TUNE_RETURN_IF_ERROR(Check(m.hidden_size > 0 && m.num_hidden_layers > 0 &&
                                 m.num_attention_heads > 0 && m.intermediate_size > 0 &&
                                 m.vocab_size > 0,
                             fmt::format("model '{}' lacks hidden_size, num_hidden_layers, "
                                         "num_attention_heads, intermediate_size or vocab_size",
                                         m.name)));
  return Check(m.hidden_size % m.num_attention_heads == 0,
               fmt::format("model '{}': hidden_size {} is not a multiple of "
                           "num_attention_heads {}",
                           m.name, m.hidden_size, m.num_attention_heads));
}

bool Checkpointing(const MemoryRequest& r) { return r.gradient_checkpointing && r.train; }

// The encoder's embeddings (named_parameters order of the trainer's model); sets the plan's
// inputs and embedding gradient.
Layer EncoderEmbeddings(const MemoryRequest& r, const Widths& w, Plan& plan) {
  const ModelSpec& m = r.model;
  const bool deberta = m.position_buckets > 0;
  const int64_t b = r.batch_size, t = r.max_length, h = m.hidden_size;
  const int64_t bth = b * t * h, bt = b * t;
  const double pd = r.train ? r.dropout : 0;
  Layer emb;
  emb.params.push_back({m.vocab_size * h, false, true});
  if (!deberta) {
    emb.params.push_back({m.max_position_embeddings * h, false, true});
    if (m.type_vocab_size > 0) emb.params.push_back({m.type_vocab_size * h, false, true});
  }
  AddLayerNorm(emb.params, h);
  // Saved: the LayerNorm's input and statistics, the dropout noise, and the output (layer 0's
  // input) -- except under autocast, where layer 0 saves bf16 casts of it instead (the fp32
  // output is then layer 0's temporary). Without dropout the LayerNorm's output is the layer input.
  // DeBERTa multiplies the LayerNorm output by the float attention mask, which the product saves.
  // With gradient checkpointing the first checkpoint holds it (counted as layer 0's).
  const bool output_saved = !w.autocast && !Checkpointing(r);
  emb.saved = bth * w.fp + 2 * bt * 4 + Noise(pd, w, bth, w.fp) + (output_saved ? bth * w.fp : 0) +
              (deberta ? bt * w.fp : 0);
  emb.fwd_extra = 2 * bth * w.fp;  // word + position lookups before they are summed
  emb.bwd_transient = 2 * bth * w.fp;
  plan.embedding_gradient = m.vocab_size * h * w.param;
  // Token ids, attention mask (int64) and the float additive mask; positions for BERT/RoBERTa;
  // DeBERTa's bucketed relative positions ([T, T] int64, cached by the model after the first
  // forward).
  plan.inputs = 2 * bt * 8 + bt * w.fp + b * 8 +
                (deberta                   ? t * t * 8
                 : UsesRobertaPositions(m) ? bt * 8
                                           : t * 8);
  return emb;
}

// DeBERTa's shared relative embeddings and their LayerNorm (encoder.rel_embeddings, LayerNorm).
// The normalised table (and its statistics) is made once per forward and used by every layer.
Layer RelativeEmbeddings(int64_t rows, int64_t h, const Widths& w) {
  Layer rel;
  rel.params.push_back({rows * h, false, true});
  AddLayerNorm(rel.params, h);
  rel.saved = rows * h * w.fp + 2 * rows * 4;
  return rel;
}

// With gradient checkpointing only the layer's input is kept; in backward the layer runs again
// with the graph (its saved tensors and forward temporaries, with the incoming gradient alive),
// then back-propagates with its own temporaries, the incoming gradient, and the detached input's
// gradient and the recomputed output's alive (3 x [B, T, H] more, measured). Under autocast the
// recomputation casts its weights again, and its input (a leaf requiring grad) is cast once, the
// cast cached for q, k and v; the checkpoint already holds that fp32 input. The recomputation
// peaks before the layer's parameter gradients exist.
void CheckpointEncoderLayer(const EncoderShape& s, const Widths& w, Layer& layer) {
  const int64_t bth = s.b * s.t * s.h;
  int64_t recompute_saved = layer.saved, recompute_extra = layer.fwd_extra;
  if (w.autocast) {
    // (QkvProjection casts its input itself, once, as the trace counts.)
    recompute_saved += layer.autocast_weights - (s.fused_qkv && !s.deberta ? 0 : 2 * bth * w.mm);
    recompute_extra = std::max<int64_t>(0, recompute_extra - bth * w.fp);
    // The forward (without a graph) only caches the weight copies until it ends.
    layer.forward_cache = layer.autocast_weights;
    layer.autocast_weights = 0;
  }
  int64_t grads = 0;
  for (const Param& p : layer.params) grads += p.numel * w.param;
  layer.bwd_transient = recompute_saved + std::max(recompute_extra + bth * w.fp - grads,
                                                   layer.bwd_transient + 3 * bth * w.fp);
  // The checkpoint keeps the layer's input until the layer's backward is done.
  layer.saved = bth * w.fp;
  // Computed without recording: one op's inputs and outputs at a time.
  layer.fwd_extra = NoGradEncoderLayerPeak(s, w);
}

// One encoder layer (all are alike).
Layer EncoderLayer(const MemoryRequest& r, const EncoderShape& s, const Widths& w) {
  const int64_t bth = s.b * s.t * s.h, batt = s.b * s.a * s.t * s.t;
  const LayerTrace trace = TraceEncoderLayer(s, w);
  Layer layer;
  layer.params.reserve(16);
  for (int k = 0; k < 4; ++k) AddLinear(layer.params, s.h, s.h);  // q, k, v, attention output
  AddLayerNorm(layer.params, s.h);
  AddLinear(layer.params, s.h, s.i);
  AddLinear(layer.params, s.i, s.h);
  AddLayerNorm(layer.params, s.h);
  // Per layer, in elements (fp32, dropout on; TraceEncoderLayer counts op by op):
  //   BERT: q, k, v, context 4 BTH; softmax output, dropout noise, dropped probabilities
  //   3 BAT^2; output blocks 6 BTH + 2 BTI + 4 BT (noise, residual sum, LayerNorm statistics
  //   and output, twice; GELU input and output).
  //   DeBERTa adds 2 BTH (q and k copied again for the relative matmuls), 2 B R H (pos_key and
  //   pos_query repeated per example), 2 B A T R (the c2p/p2c scores before the gather), 2 T^2
  //   int64 indices and 2 R H (the relative table's dropout noise and output), R = 2 buckets.
  layer.saved = trace.saved();
  // Forward temporaries beyond what the layer saves: at the end of the attention the q/k/v
  // projections and the score locals (1 for BERT, 3 for DeBERTa) are still alive.
  layer.fwd_extra = trace.extra();
  // Backward temporaries: each op frees what it saved as it produces its gradients, so above
  // the saved tensors only the incoming gradient and the one being produced are alive
  // (measured: the peak sits at the top layer's first ops, about 2 x [B, T, H]). DeBERTa's
  // gather backward scatters into a zero [B, A, T, R] tensor while the c2p/p2c scores are
  // still saved, but by then the softmax chain and the output blocks have been freed.
  // The output projection's backward then makes the feed-forward gradient ([B, T, I]) beside the
  // residual's, once the output block has freed its LayerNorm input and noise (measured on the
  // CPU, 2-layer encoders at I = 2H, 4H and 8H: within 0.2 MB of this; it decides in fp32).
  const int64_t bti = s.b * s.t * s.i;
  layer.bwd_transient = std::max(2 * bth * w.fp, bti * w.mm - 3 * bth * w.fp / 2);
  if (s.kernel == AttentionKernel::kSdpaMath) {
    // The matmul with v's backward, once the output blocks and the context have freed what they
    // saved: the dropped probabilities and the v copy it saved, the incoming gradient (cast to
    // fp32 under autocast) and its per-head copy, the probabilities' gradient and v's.
    const int64_t freed = trace.saved() - trace.marked();
    layer.bwd_transient = std::max(layer.bwd_transient, 2 * batt * 4 + 3 * bth * 4 + bth * w.mm +
                                                            (w.mm != 4 ? bth * 4 : 0) - freed);
  }
  if (s.kernel == AttentionKernel::kSdpaFused) {
    // The kernel's backward: the incoming gradient and dq, dk, dv; on CUDA also fp32 dq
    // accumulators and the per-row delta (FlashAttention's and the memory-efficient kernel's).
    // By then the layer's output blocks have freed what they saved.
    // DeBERTa's bias gets its gradient from the memory-efficient kernel ([B, heads, T, T]).
    const int64_t freed = trace.saved() - trace.marked();
    layer.bwd_transient = std::max(
        layer.bwd_transient, 4 * bth * w.mm + (w.cuda_kernels ? bth * 4 + SdpaLogSumExp(s, w) : 0) +
                                 (s.deberta ? batt * w.mm : 0) - freed);
  }
  if (s.deberta) {
    // Eager: the softmax onwards; SDPA: the bias onwards.
    const int64_t freed = trace.saved() - trace.marked(s.kernel == AttentionKernel::kEager ? 0 : 1);
    layer.bwd_transient =
        std::max(layer.bwd_transient,
                 batt * w.mm + s.b * s.a * s.t * s.rows * w.mm + 2 * bth * w.fp - freed);
  }
  if (w.autocast) layer.autocast_weights = LinearWeightBytes(layer.params, w.mm);
  if (Checkpointing(r)) CheckpointEncoderLayer(s, w, layer);
  return layer;
}

// The pooler (dense + tanh on [CLS]) and the classifier head.
Layer EncoderHead(const MemoryRequest& r, const Widths& w) {
  const int64_t b = r.batch_size, h = r.model.hidden_size, bth = b * r.max_length * h;
  const double pc = r.train ? r.classifier_dropout : 0;
  Layer head;
  AddLinear(head.params, h, h);
  int64_t width = h;
  int64_t saved = b * h * w.fp + Noise(pc, w, b * h, w.fp) + b * h * w.fp;  // tanh out, noise, out
  // With checkpointing in fp32 the pooler's input, a view of the last layer's output, keeps that
  // output alive (under autocast the pooler saves a bf16 cast of the [CLS] rows instead).
  if (Checkpointing(r) && !w.autocast) saved += bth * w.fp;
  for (int64_t hidden : r.head_hidden) {
    AddLinear(head.params, width, hidden);
    saved += b * hidden * w.fp * (pc > 0 ? 3 : 2);
    width = hidden;
  }
  AddLinear(head.params, width, r.num_labels);
  head.saved = saved;
  if (w.autocast) head.autocast_weights = LinearWeightBytes(head.params, w.mm);
  return head;
}

// Evaluation: no graph; one layer's temporaries at a time.
void EncoderEval(const MemoryRequest& r, const Widths& w, int64_t rows, Plan& plan) {
  const ModelSpec& m = r.model;
  const bool deberta = m.position_buckets > 0;
  const int64_t t = r.max_length, h = m.hidden_size, i = m.intermediate_size,
                a = m.num_attention_heads;
  const int64_t eb = r.eval_batch_size > 0 ? r.eval_batch_size : r.batch_size;
  const int64_t ebth = eb * t * h, ebti = eb * t * i, ebatt = eb * a * t * t;
  plan.eval_inputs = 2 * eb * t * 8 + eb * t * w.fp + eb * 8 + (deberta ? t * t * 8 : 0);
  const EncoderShape eval_shape{eb,   t,       h, i, a,
                                rows, deberta, 0, 0, SdpaKernel(r.sdpa, deberta, w, 0, false)};
  if (deberta || eval_shape.kernel != AttentionKernel::kEager) {
    // The layer input (and DeBERTa's normalised relative table), then the layer's own
    // temporaries.
    plan.eval_transient = ebth * w.fp + rows * h * w.fp + NoGradEncoderLayerPeak(eval_shape, w);
  } else {
    plan.eval_transient =
        std::max(ebth * w.fp + 3 * ebth * w.mm + 2 * ebth * w.mm + 2 * ebatt * w.mm,
                 2 * ebth * w.fp + 2 * ebti * w.mm);
    if (w.autocast) {
      plan.eval_transient =
          std::max(plan.eval_transient, ebth * w.fp + NoGradEncoderLayerPeak(eval_shape, w));
    }
  }
}

Status PlanEncoder(const MemoryRequest& r, const Widths& w, Plan& plan) {
  const ModelSpec& m = r.model;
  TUNE_RETURN_IF_ERROR(CheckEncoder(m));
  const bool deberta = m.position_buckets > 0;
  plan.layers.push_back(EncoderEmbeddings(r, w, plan));
  // DeBERTa's disentangled attention scores every query against all 2 x position_buckets rows of
  // the relative table (as Hugging Face's DebertaV2 does), then gathers the T columns it needs.
  const int64_t rows = deberta ? 2 * m.position_buckets : 0;
  if (deberta) plan.layers.push_back(RelativeEmbeddings(rows, m.hidden_size, w));
  const EncoderShape shape{
      r.batch_size,
      r.max_length,
      m.hidden_size,
      m.intermediate_size,
      m.num_attention_heads,
      rows,
      deberta,
      r.train ? r.dropout : 0,
      r.train ? r.attention_dropout : 0,
      SdpaKernel(r.sdpa, deberta, w, r.train ? r.attention_dropout : 0, r.train),
      r.fused_qkv};
  const Layer layer = EncoderLayer(r, shape, w);
  plan.layers.reserve(plan.layers.size() + static_cast<size_t>(m.num_hidden_layers) + 1);
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) plan.layers.push_back(layer);
  plan.layers.push_back(EncoderHead(r, w));
  plan.logits_loss = 2 * r.batch_size * r.num_labels * 4;  // logits, log-softmax output
  EncoderEval(r, w, rows, plan);
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
  emb.saved = Noise(pd, w, bth, w.fp) + bth * w.fp;
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
    int64_t saved = bth * w.fp + 2 * bt * 4 + bth * w.fp;  // LN1 input/stats/output
    saved += 3 * bth * w.mm + batt * w.mm + (pa > 0 ? 2 * batt * w.mm : 0) + bth * w.mm;
    saved += Noise(pd, w, bth, w.mm);
    saved += bth * w.fp + 2 * bt * 4 + bth * w.fp;  // LN2 input/stats/output
    saved += 2 * bti * w.mm + Noise(pd, w, bth, w.mm);
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
  plan.eval_transient =
      std::max(3 * eb * t * v * 4, 2 * eb * a * t * t * w.mm + 6 * eb * t * h * w.fp);
  return Status::Ok();
}

Status CheckRequest(const MemoryRequest& r) {
  TUNE_RETURN_IF_ERROR(
      Check(r.batch_size > 0, fmt::format("batch size {} must be > 0", r.batch_size)));
  TUNE_RETURN_IF_ERROR(
      Check(r.grad_accum > 0, fmt::format("grad_accum {} must be > 0", r.grad_accum)));
  TUNE_RETURN_IF_ERROR(Check(r.num_labels > 0, "num_labels must be > 0"));
  TUNE_RETURN_IF_ERROR(Check(r.head_hidden.size() <= 3, "at most 3 classifier hidden layers"));
  if (r.architecture == Architecture::kMlp) return Status::Ok();
  TUNE_RETURN_IF_ERROR(
      Check(r.max_length > 0, fmt::format("max_length {} must be > 0", r.max_length)));
  if (r.model.max_position_embeddings > 0 && r.model.position_buckets == 0) {
    TUNE_RETURN_IF_ERROR(
        Check(r.max_length <= r.model.max_position_embeddings,
              fmt::format("max_length {} exceeds model '{}''s {} positions", r.max_length,
                          r.model.name, r.model.max_position_embeddings)));
  }
  return Status::Ok();
}

Status BuildPlan(const MemoryRequest& r, const Widths& w, Plan& plan) {
  switch (r.architecture) {
    case Architecture::kEncoder:
      return PlanEncoder(r, w, plan);
    case Architecture::kMlp:
      return PlanMlp(r, w, plan);
    case Architecture::kDecoder:
      return PlanDecoder(r, w, plan);
  }
  return Status::Ok();
}

// The plan's parameters and what the optimizer's terms need of them.
struct ParamStats {
  int64_t count = 0;
  int64_t largest = 0;        // elements of the largest parameter
  int64_t largest_decay = 0;  // ... of the largest one under weight decay
};

ParamStats CountParams(const Plan& plan) {
  ParamStats s;
  for (const Layer& layer : plan.layers) {
    for (const Param& p : layer.params) {
      s.count += p.numel;
      s.largest = std::max(s.largest, p.numel);
      if (p.decay) s.largest_decay = std::max(s.largest_decay, p.numel);
    }
  }
  return s;
}

// The terms of the model and its step that do not depend on the timeline: weights, saved
// activations, inputs, autocast copies, logits, gradients and the optimizer's state and
// temporaries, the largest backward temporaries.
MemoryEstimate StaticTerms(const MemoryRequest& r, const Widths& w, const Plan& plan,
                           const DeviceMemoryModel& device) {
  const ParamStats ps = CountParams(plan);
  MemoryEstimate e;
  e.num_parameters = ps.count;
  for (const Layer& layer : plan.layers) {
    e.activations += layer.saved;
    e.autocast_cache += layer.autocast_weights + layer.forward_cache;
    e.backward_transient = std::max(e.backward_transient, layer.bwd_transient);
  }
  e.weights = e.num_parameters * w.param;
  e.inputs = plan.inputs;
  e.logits_loss = plan.logits_loss;
  e.embedding_gradient = plan.embedding_gradient;
  if (!r.train) return e;
  e.gradients = e.num_parameters * w.param;
  if (r.optimizer == OptimizerKind::kAdamW) {
    e.optimizer_state = 2 * e.num_parameters * w.state;
    // torch::optim::AdamW's denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps):
    // two temporaries of the parameter's size while the largest parameter is stepped. The
    // trainer's fused CPU step (src/torch/torch_fused_adamw.h) updates fp32 parameters in
    // place, without temporaries.
    const bool fused = device.cpu_kernels && w.param == 4;
    e.optimizer_transient = fused ? 0 : 2 * ps.largest * w.state;
  } else {
    e.optimizer_state = r.momentum > 0 ? e.num_parameters * w.state : 0;
    // d_p = grad.add(p, weight_decay) and, with Nesterov, d_p.add(buf, momentum).
    const int64_t sgd = (r.weight_decay > 0 ? ps.largest_decay : 0) +
                        (r.nesterov && r.momentum > 0 ? ps.largest : 0);
    e.optimizer_transient = sgd * w.state;
  }
  return e;
}

// Allocates (or frees) one tensor per parameter, `bytes_per_element` wide, `copies` times.
void AllocParams(Timeline& tl, const Plan& plan, int64_t bytes_per_element, int64_t copies = 1) {
  for (const Layer& layer : plan.layers) {
    for (const Param& p : layer.params) tl.Alloc(p.numel * bytes_per_element, copies);
  }
}
void FreeParams(Timeline& tl, const Plan& plan, int64_t bytes_per_element) {
  for (const Layer& layer : plan.layers) {
    for (const Param& p : layer.params) tl.Free(p.numel * bytes_per_element);
  }
}

// One micro-batch's forward and backward. `grads_exist`: an earlier micro-batch of the step left
// its gradients, into which this one's are added (temporaries).
void ReplayMicroBatch(Timeline& tl, const Plan& plan, const Widths& w, bool grads_exist) {
  tl.Phase(MemoryPhase::kForward);
  tl.Alloc(plan.inputs);
  for (const Layer& layer : plan.layers) {
    tl.Alloc(layer.autocast_weights + layer.forward_cache);
    tl.Alloc(layer.saved);
    tl.Transient(layer.fwd_extra);
  }
  for (const Layer& layer : plan.layers) tl.Free(layer.forward_cache);
  tl.Alloc(plan.logits_loss);
  tl.Phase(MemoryPhase::kBackward);
  tl.Free(plan.logits_loss);
  for (auto it = plan.layers.rbegin(); it != plan.layers.rend(); ++it) {
    const Layer& layer = *it;
    // The layer's gradients appear while its saved tensors are still alive; with
    // accumulation they are temporaries added into the existing ones.
    if (layer.grads_after_free) {
      tl.Transient(layer.bwd_transient);
      tl.Free(layer.saved);
      tl.Free(layer.autocast_weights);
    }
    for (const Param& p : layer.params) tl.Alloc(p.numel * w.param);
    if (!layer.grads_after_free) tl.Transient(layer.bwd_transient);
    if (grads_exist) {
      for (const Param& p : layer.params) tl.Free(p.numel * w.param);
    }
    if (!layer.grads_after_free) {
      tl.Free(layer.saved);
      tl.Free(layer.autocast_weights);
    }
  }
  tl.Free(plan.inputs);
}

// One optimizer step: the state, the micro-batches, step() and zero_grad().
// With CUDA graphs (`graphs`) the gradients exist from the step before (zeroed in place), so
// every micro-batch adds into them and they stay.
void ReplayTrainingStep(Timeline& tl, const MemoryRequest& r, const Widths& w, const Plan& plan,
                        int64_t optimizer_transient, bool graphs) {
  const int64_t state_copies = r.optimizer == OptimizerKind::kAdamW ? 2 : r.momentum > 0 ? 1 : 0;
  AllocParams(tl, plan, w.state, state_copies);
  if (graphs) AllocParams(tl, plan, w.param);
  // Micro-batches after the second repeat the second's timeline exactly (same live set, same
  // peaks), so two passes give the step's peaks for any accumulation.
  for (int64_t micro = 0; micro < std::min<int64_t>(r.grad_accum, 2); ++micro) {
    ReplayMicroBatch(tl, plan, w, graphs || micro > 0);
  }
  tl.Phase(MemoryPhase::kOptimizerStep);
  tl.Transient(optimizer_transient);
  if (!graphs) FreeParams(tl, plan, w.param);  // zero_grad(set_to_none): the gradients go
}

// What a caching allocator reserves beyond the allocated peak: the device's share of it, and at
// least what two patterns of a training run leave (measured on an H200, docs/memory.md
// #fragmentation): the word-embedding gradient and AdamW's two moments of it are blocks of the
// table's size, allocated at the end of the first backward and at the first step, which the
// freed activations' smaller blocks cannot hold (3 x the gradient); a checkpointed layer's
// recomputation allocates and frees its tensors once per layer between gradients that stay
// (0.9 x the backward transient).
int64_t Fragmentation(const MemoryRequest& r, const DeviceMemoryModel& device,
                      const MemoryEstimate& e) {
  int64_t bytes = static_cast<int64_t>(
      std::llround(device.fragmentation * static_cast<double>(e.allocated_peak)));
  if (!device.caching_allocator || !r.train) return bytes;
  bytes = std::max(bytes, 3 * e.embedding_gradient);
  if (Checkpointing(r)) {
    bytes = std::max(
        bytes, static_cast<int64_t>(std::llround(0.9 * static_cast<double>(e.backward_transient))));
  }
  return bytes;
}

// The phases' peaks (scaled by the device's correction) and the device's terms on top of the
// allocated peak.
void SetPeaks(const MemoryRequest& r, const Timeline& tl, const DeviceMemoryModel& device,
              bool graphs, MemoryEstimate& e) {
  const double c = device.correction;
  auto scaled = [c](int64_t v) {
    return static_cast<int64_t>(std::llround(static_cast<double>(v) * c));
  };
  e.forward_peak = scaled(tl.peak(MemoryPhase::kForward));
  e.backward_peak = scaled(tl.peak(MemoryPhase::kBackward));
  e.optimizer_step_peak = scaled(tl.peak(MemoryPhase::kOptimizerStep));
  e.eval_peak = scaled(tl.peak(MemoryPhase::kEval));
  e.allocated_peak = 0;
  for (MemoryPhase p : {MemoryPhase::kForward, MemoryPhase::kBackward, MemoryPhase::kOptimizerStep,
                        MemoryPhase::kEval}) {
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
  e.fragmentation = Fragmentation(r, device, e);
  e.context = device.context_bytes;
  if (graphs) {  // the pool's blocks: the training step's working set, a second time
    e.graph_pool = std::max<int64_t>(0, std::max(e.forward_peak, e.backward_peak) -
                                            scaled(e.weights + e.gradients + e.optimizer_state));
  }
  e.device_peak = 0;
  for (const MemoryTerm& term : DeviceTerms(e)) e.device_peak += term.bytes;
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
  // cuBLAS's and cuBLASLt's workspaces on the training stream, which LibTorch 2.x takes from
  // the caching allocator: 65 MiB measured on an H200 with LibTorch 2.11 (less on older cards).
  d.workspace_bytes = 65 * kMiB;
  d.fragmentation = 0.05;  // beside Fragmentation()'s terms for training
  d.cpu_kernels = false;
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
  r.cuda_graphs = hp.cuda_graphs == CudaGraphs::kOn;
  r.sdpa = hp.attention == Attention::kSdpa;
  r.fused_qkv = hp.fused_qkv;
  return r;
}

Result<MemoryEstimate> EstimateMemory(const MemoryRequest& request,
                                      const DeviceMemoryModel& device) {
  TUNE_RETURN_IF_ERROR(CheckRequest(request));
  // With SDPA on CUDA the trainer widens a padded batch (DeBERTa's: every batch, whose bias is
  // SDPA's mask) to the width the memory-efficient kernel takes its mask at (SdpaMaskWidth): the
  // widest batch is max_length widened so. (A copy only then: estimates run in search loops.)
  const bool widen = request.sdpa && device.caching_allocator &&
                     request.architecture == Architecture::kEncoder &&
                     SdpaMaskWidth(request.max_length, request.model.max_position_embeddings) !=
                         request.max_length;
  MemoryRequest widened;
  if (widen) {
    widened = request;
    widened.max_length = SdpaMaskWidth(request.max_length, request.model.max_position_embeddings);
  }
  const MemoryRequest& r = widen ? widened : request;
  Widths w = WidthsFor(r.precision);
  w.cpu_autocast = w.autocast && device.cpu_kernels;
  w.cuda_kernels = device.caching_allocator;
  Plan plan;
  TUNE_RETURN_IF_ERROR(BuildPlan(r, w, plan));
  MemoryEstimate e = StaticTerms(r, w, plan, device);
  Timeline tl(device.caching_allocator);
  tl.Phase(MemoryPhase::kForward);
  AllocParams(tl, plan, w.param);  // the weights
  const bool graphs = r.train && r.cuda_graphs && device.caching_allocator;
  if (r.train) ReplayTrainingStep(tl, r, w, plan, e.optimizer_transient, graphs);
  tl.Phase(MemoryPhase::kEval);
  tl.Alloc(plan.eval_inputs);
  // Under autocast the low-precision weight copies are cached for the whole evaluation forward.
  tl.Transient(plan.eval_transient + e.autocast_cache);
  tl.Free(plan.eval_inputs);
  SetPeaks(r, tl, device, graphs, e);
  return e;
}

std::vector<MemoryTerm> BreakdownTerms(const MemoryEstimate& e) {
  return {{"weights", "weights", e.weights},
          {"gradients", "gradients", e.gradients},
          {"optimizer_state", "optimizer state", e.optimizer_state},
          {"activations", "activations (saved)", e.activations},
          {"inputs", "inputs", e.inputs},
          {"autocast_cache", "autocast weight copies", e.autocast_cache},
          {"logits_loss", "logits + loss", e.logits_loss},
          {"backward_transient", "backward temporaries", e.backward_transient},
          {"embedding_gradient", "embedding gradient", e.embedding_gradient},
          {"optimizer_transient", "optimizer step temporaries", e.optimizer_transient}};
}

std::vector<MemoryTerm> PhaseTerms(const MemoryEstimate& e) {
  return {{"forward", "peak: forward", e.forward_peak},
          {"backward", "peak: backward", e.backward_peak},
          {"optimizer_step", "peak: optimizer step", e.optimizer_step_peak},
          {"eval", "peak: eval", e.eval_peak}};
}

std::vector<MemoryTerm> DeviceTerms(const MemoryEstimate& e) {
  std::vector<MemoryTerm> terms = {{"allocated_peak", "allocated peak", e.allocated_peak},
                                   {"rounding", "allocator rounding", e.rounding},
                                   {"fragmentation", "fragmentation", e.fragmentation},
                                   {"context", "context", e.context},
                                   {"workspace", "workspaces", e.workspace}};
  if (e.graph_pool > 0) terms.push_back({"graph_pool", "CUDA graphs' pool", e.graph_pool});
  return terms;
}

Json MemoryEstimateToJson(const MemoryEstimate& e) {
  Json breakdown = Json::object(), phases = Json::object();
  for (const MemoryTerm& t : BreakdownTerms(e)) breakdown[t.key] = t.bytes;
  breakdown["workspace"] = e.workspace;
  for (const MemoryTerm& t : PhaseTerms(e)) phases[t.key] = t.bytes;
  Json out{{"num_parameters", e.num_parameters},
           {"breakdown", breakdown},
           {"phases", phases},
           {"peak_phase", MemoryPhaseName(e.peak_phase)},
           {"device_peak", e.device_peak}};
  for (const MemoryTerm& t : DeviceTerms(e)) {
    if (std::string_view(t.key) != "workspace") out[t.key] = t.bytes;
  }
  return out;
}

}  // namespace tune

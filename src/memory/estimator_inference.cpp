// Inference memory: weight formats, the KV cache and a decoder forward traced op by op
// (docs/memory.md#inference-tune-plan). The trace follows Hugging Face's eager modules
// (LlamaDecoderLayer, GPT2Block) with Python's lifetimes: a temporary goes when its last
// reference does, a local when its function returns. src/torch/torch_decoder.cpp runs the same
// ops in the same order under the counting allocator.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "memory/inference.h"
#include "util/text.h"

namespace tune {
namespace {

// Live bytes over a forward and their peak.
class Trace {
 public:
  void Alloc(int64_t bytes) {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void Free(int64_t bytes) { live_ -= bytes; }
  // Allocated and freed inside one op.
  void During(int64_t bytes) { peak_ = std::max(peak_, live_ + bytes); }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }

 private:
  int64_t live_ = 0, peak_ = 0;
};

// Shapes of one forward: b sequences, t new tokens after `past` cached ones.
struct Step {
  int64_t b, t, past;
  int64_t s() const { return past + t; }
};

// Element widths: w the compute dtype, c the KV cache's.
struct Dtypes {
  int64_t w, c;
  bool eager;    // the attention materialises its scores
  bool dynamic;  // the cache grows by torch.cat
};

int64_t Width(WeightFormat f) {
  switch (f) {
    case WeightFormat::kFp32:
      return 4;
    case WeightFormat::kInt8:
      return 1;
    default:
      return 2;
  }
}

// LlamaRMSNorm: hidden_states.to(float32); variance = pow(2).mean(-1, keepdim); hidden_states *
// rsqrt(variance + eps); weight * hidden_states.to(input_dtype). Leaves its output allocated.
void RmsNorm(Trace& tr, int64_t bt, int64_t h, int64_t w) {
  const int64_t f32 = bt * h * 4, out = bt * h * w, stat = bt * 4;
  if (w != 4) tr.Alloc(f32);  // the fp32 copy
  tr.Alloc(f32);              // pow(2)
  tr.Alloc(stat);             // mean
  tr.Free(f32);
  tr.Alloc(stat);  // variance + eps
  tr.Alloc(stat);  // rsqrt
  tr.Alloc(f32);   // hidden_states * rsqrt
  tr.Free(2 * stat);
  if (w != 4) {
    tr.Free(f32);   // the fp32 copy, replaced
    tr.Alloc(out);  // .to(input_dtype)
  }
  tr.Alloc(out);  // weight * ...
  tr.Free(f32 + stat + (w != 4 ? out : 0));
}

// nn.LayerNorm: the output, and the mean and rstd native_layer_norm returns (freed at once).
void LayerNorm(Trace& tr, int64_t bt, int64_t h, int64_t w) {
  tr.Alloc(bt * h * w);
  tr.During(2 * bt * 4);
}

// apply_rotary_pos_emb for one tensor of `x` bytes: (x * cos) + (rotate_half(x) * sin), with
// rotate_half = cat(-x2, x1). Leaves the result allocated.
void Rotary(Trace& tr, int64_t x) {
  tr.Alloc(x);      // x * cos
  tr.Alloc(x / 2);  // -x2
  tr.Alloc(x);      // cat
  tr.Free(x / 2);
  tr.Alloc(x);  // rotate_half(x) * sin
  tr.Free(x);   // rotate_half(x)
  tr.Alloc(x);  // the sum
  tr.Free(2 * x);
}

// The scores and probabilities of eager attention; leaves the probabilities allocated (the
// layer holds them until it returns) and returns their bytes. fp32_softmax: Llama's
// softmax(dtype=float32).to(dtype); GPT-2's softmax stays in the compute dtype.
int64_t EagerScores(Trace& tr, const Step& st, int64_t heads, const Dtypes& d, bool fp32_softmax) {
  const int64_t elems = st.b * heads * st.t * st.s(), sc = elems * d.w;
  tr.Alloc(sc);  // matmul(q, k^T)
  tr.Alloc(sc);  // / sqrt(head_dim)
  tr.Free(sc);
  if (st.t > 1) {  // + the causal mask
    tr.Alloc(sc);
    tr.Free(sc);
  }
  int64_t probs = sc;
  if (fp32_softmax && d.w != 4) {
    tr.Alloc(elems * 4);  // softmax in fp32
    tr.Alloc(sc);         // .to(dtype)
    tr.Free(elems * 4);
  } else {
    tr.Alloc(fp32_softmax ? elems * 4 : sc);
    probs = fp32_softmax ? elems * 4 : sc;
  }
  tr.Free(sc);  // the scores, replaced
  return probs;
}

// The cache update of one layer: a dynamic cache concatenates the new K (then V) onto the old,
// which is freed after; a static one copies into place.
void CacheUpdate(Trace& tr, const Step& st, int64_t kv_heads, int64_t head_dim, const Dtypes& d) {
  if (d.dynamic && st.past > 0) tr.During(st.b * kv_heads * st.past * head_dim * d.c);
}

// One LlamaDecoderLayer (eager or SDPA attention), from its input x to its output; returns the
// peak above the live bytes it started with.
int64_t LlamaLayer(const DecoderShape& m, const Step& st, const Dtypes& d) {
  Trace tr;
  const int64_t bt = st.b * st.t, x = bt * m.hidden * d.w;
  const int64_t q = bt * m.heads * m.head_dim * d.w, kv = bt * m.kv_heads * m.head_dim * d.w,
                inter = bt * m.intermediate * d.w;
  RmsNorm(tr, bt, m.hidden, d.w);  // h, alive until the attention returns
  tr.Alloc(q);                     // q_proj
  tr.Alloc(kv);                    // k_proj
  tr.Alloc(kv);                    // v_proj
  Rotary(tr, q);
  Rotary(tr, kv);
  tr.Free(q + kv);  // the unrotated q and k, replaced
  CacheUpdate(tr, st, m.kv_heads, m.head_dim, d);
  int64_t repeated = 0;
  if (m.kv_heads != m.heads) {  // repeat_kv: K and V expanded to every query head
    repeated = 2 * st.b * m.heads * st.s() * m.head_dim * d.c;
    tr.Alloc(repeated);
  }
  int64_t probs = 0;
  if (d.eager) {
    probs = EagerScores(tr, st, m.heads, d, true);
    tr.Alloc(q);  // matmul(probs, v)
  } else {
    tr.Alloc(q);  // the fused kernel's output
  }
  tr.Alloc(q);  // transpose(1, 2).contiguous()
  tr.Free(q);
  tr.Alloc(x);                         // o_proj
  tr.Free(q + q + 2 * kv + repeated);  // the attention's locals
  tr.Free(x);                          // h, replaced by the attention's output
  tr.Alloc(x);                         // residual + attention output
  tr.Free(x);                          // the attention output
  tr.Free(x);                          // the layer input (residual), replaced
  RmsNorm(tr, bt, m.hidden, d.w);      // h2, alive through the MLP
  tr.Alloc(inter);                     // gate_proj
  tr.Alloc(inter);                     // act_fn
  tr.Free(inter);
  tr.Alloc(inter);  // up_proj
  tr.Alloc(inter);  // act * up
  tr.Free(2 * inter);
  tr.Alloc(x);  // down_proj
  tr.Free(inter);
  tr.Free(x);              // h2, replaced
  tr.Alloc(x);             // residual + MLP output
  tr.Free(2 * x + probs);  // the MLP output, the residual and the probabilities

  return tr.peak();
}

// NewGELUActivation ("gelu_new"): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// evaluated left to right. Leaves its output allocated.
void NewGelu(Trace& tr, int64_t n) {
  tr.Alloc(n);  // 0.5 * x
  tr.Alloc(n);  // pow(x, 3)
  tr.Alloc(n);  // 0.044715 * ...
  tr.Free(n);
  tr.Alloc(n);  // x + ...
  tr.Free(n);
  tr.Alloc(n);  // sqrt(2/pi) * ...
  tr.Free(n);
  tr.Alloc(n);  // tanh
  tr.Free(n);
  tr.Alloc(n);  // 1 + ...
  tr.Free(n);
  tr.Alloc(n);  // the product
  tr.Free(2 * n);
}

// One GPT2Block, likewise.
int64_t Gpt2Layer(const DecoderShape& m, const Step& st, const Dtypes& d) {
  Trace tr;
  const int64_t bt = st.b * st.t, x = bt * m.hidden * d.w;
  const int64_t q = bt * m.heads * m.head_dim * d.w, inter = bt * m.intermediate * d.w;
  LayerNorm(tr, bt, m.hidden, d.w);  // h
  tr.Alloc(3 * q);                   // c_attn: q, k and v are views of it
  CacheUpdate(tr, st, m.heads, m.head_dim, d);
  int64_t probs = 0;
  if (d.eager) {
    tr.During(q);  // matmul copies the strided q view
    probs = EagerScores(tr, st, m.heads, d, false);
    tr.Alloc(q);  // matmul(probs, v)
  } else {
    tr.Alloc(q);
  }
  tr.Alloc(q);  // reshape(...).contiguous() of the transposed output
  tr.Free(q);
  tr.Alloc(x);                       // c_proj
  tr.Free(q + 3 * q);                // the merged heads and c_attn's output, at return
  tr.Alloc(x);                       // attn_output + residual
  tr.Free(x);                        // h, replaced
  tr.Free(x);                        // the layer input (residual), replaced
  LayerNorm(tr, bt, m.hidden, d.w);  // h2
  tr.Alloc(inter);                   // c_fc
  NewGelu(tr, inter);
  tr.Free(inter);
  tr.Alloc(x);  // c_proj
  tr.Free(inter);
  tr.Alloc(x);             // residual + MLP output
  tr.Free(x);              // h2, replaced
  tr.Free(3 * x + probs);  // MLP output, attention output, residual, probabilities
  return tr.peak();
}

// The inputs of a forward and what the model makes once per forward (positions, rotary cos/sin,
// the causal mask), then the embeddings; returns the live bytes held through the layers (the
// hidden states included) and records the peak.
int64_t ForwardPrologue(Trace& tr, const DecoderShape& m, const Step& st, const Dtypes& d) {
  const int64_t bt = st.b * st.t, x = bt * m.hidden * d.w;
  tr.Alloc(bt * 8);    // input ids
  tr.Alloc(st.t * 8);  // positions
  if (m.family == DecoderFamily::kLlama) {
    const int64_t half = st.t * (m.head_dim / 2) * 4, full = st.t * m.head_dim * 4;
    tr.Alloc(st.t * 4);                     // positions as float
    tr.Alloc(half);                         // outer(positions, inv_freq)
    tr.Alloc(full);                         // cat(freqs, freqs)
    tr.Alloc(2 * st.t * m.head_dim * d.w);  // cos, sin
    tr.Free(st.t * 4 + half + full);
  }
  if (d.eager && st.t > 1) {
    const int64_t mask = st.t * st.s() * d.w;
    tr.Alloc(mask);  // full(-inf)
    tr.Alloc(mask);  // triu
    tr.Free(mask);
  }
  if (m.family == DecoderFamily::kGpt2) {
    tr.Alloc(x);                      // wte(ids)
    tr.Alloc(st.t * m.hidden * d.w);  // wpe(positions)
    tr.Alloc(x);                      // the sum
    tr.Free(x + st.t * m.hidden * d.w);
  } else {
    tr.Alloc(x);  // embed_tokens(ids)
  }
  return tr.live();
}

// The final norm and the logits: the last position's, then sampling (temperature, softmax,
// multinomial, which draws with an exponential tensor of the same size) or argmax; or (score)
// every position's, upcast to fp32, and log_softmax. Returns the bytes of the logits' peak above
// the final hidden states.
int64_t Logits(Trace& tr, const DecoderShape& m, const Step& st, const Dtypes& d,
               InferenceRole role, bool sample) {
  const int64_t bt = st.b * st.t, x = bt * m.hidden * d.w;
  if (m.family == DecoderFamily::kLlama) {
    RmsNorm(tr, bt, m.hidden, d.w);
  } else {
    LayerNorm(tr, bt, m.hidden, d.w);
  }
  tr.Free(x);  // the last layer's output, replaced
  Trace lt;
  if (role == InferenceRole::kScore) {
    const int64_t n = bt * m.vocab;
    lt.Alloc(n * d.w);              // lm_head over every position
    if (d.w != 4) lt.Alloc(n * 4);  // .float()
    lt.Alloc(n * 4);                // log_softmax
  } else {
    const int64_t n = st.b * m.vocab;
    lt.Alloc(n * d.w);              // lm_head of the last position
    if (d.w != 4) lt.Alloc(n * 4);  // .float()
    if (sample) {
      lt.Alloc(n * 4);  // / temperature
      lt.Alloc(n * 4);  // softmax
      lt.Free(n * 4);
      lt.During(n * 4 + st.b * 8);  // multinomial's exponential draw, the token ids
    } else {
      lt.During(st.b * 8);  // argmax
    }
  }
  tr.During(lt.peak());
  return lt.peak();
}

// The peak of one forward (prefill or one decode step) above the weights and the KV cache.
int64_t ForwardPeak(const DecoderShape& m, const Step& st, const Dtypes& d, InferenceRole role,
                    bool sample, int64_t* logits_bytes) {
  Trace tr;
  const int64_t held = ForwardPrologue(tr, m, st, d);
  const int64_t layer =
      m.family == DecoderFamily::kLlama ? LlamaLayer(m, st, d) : Gpt2Layer(m, st, d);
  tr.During(layer);
  Trace tail;
  tail.Alloc(held);
  const int64_t logits = Logits(tail, m, st, d, role, sample);
  if (logits_bytes) *logits_bytes = logits;
  return std::max(tr.peak(), tail.peak());
}

Status Invalid(const std::string& message) { return InvalidArgumentError(message); }

}  // namespace

const std::vector<std::string>& WeightFormatNames() {
  static const std::vector<std::string> kNames = {"fp32", "fp16", "bf16", "int8", "nf4", "fp4"};
  return kNames;
}

Result<WeightFormat> ParseWeightFormat(std::string_view name) {
  static const std::array<WeightFormat, 6> kFormats = {WeightFormat::kFp32, WeightFormat::kFp16,
                                                       WeightFormat::kBf16, WeightFormat::kInt8,
                                                       WeightFormat::kNf4,  WeightFormat::kFp4};
  for (size_t k = 0; k < kFormats.size(); ++k) {
    if (name == WeightFormatNames()[k]) return kFormats[k];
  }
  return Invalid(fmt::format("unknown weight format '{}'{}; valid: {}", name,
                             DidYouMean(name, WeightFormatNames()),
                             JoinNames(WeightFormatNames())));
}

const char* WeightFormatName(WeightFormat f) {
  return WeightFormatNames()[static_cast<size_t>(f)].c_str();
}

bool IsQuantized(WeightFormat f) {
  return f == WeightFormat::kInt8 || f == WeightFormat::kNf4 || f == WeightFormat::kFp4;
}

Result<InferenceRole> ParseInferenceRole(std::string_view name) {
  if (name == "generate") return InferenceRole::kGenerate;
  if (name == "score") return InferenceRole::kScore;
  if (name == "classify") return InferenceRole::kClassify;
  const std::vector<std::string> names = {"generate", "score", "classify"};
  return Invalid(fmt::format("unknown role '{}'{}; valid: {}", name, DidYouMean(name, names),
                             JoinNames(names)));
}

const char* InferenceRoleName(InferenceRole r) {
  switch (r) {
    case InferenceRole::kGenerate:
      return "generate";
    case InferenceRole::kScore:
      return "score";
    case InferenceRole::kClassify:
      return "classify";
  }
  return "?";
}

int64_t QuantizedLinearBytes(int64_t in, int64_t out, WeightFormat format, bool double_quant) {
  const int64_t n = in * out;
  switch (format) {
    case WeightFormat::kFp32:
      return 4 * n;
    case WeightFormat::kFp16:
    case WeightFormat::kBf16:
      return 2 * n;
    case WeightFormat::kInt8:
      return n + 4 * out;  // int8 weights (CB) + an fp32 absmax per output row (SCB)
    case WeightFormat::kNf4:
    case WeightFormat::kFp4: {
      const int64_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
      const int64_t packed = (n + 1) / 2;
      if (!double_quant) return packed + 4 * blocks;  // fp32 absmax per block
      // 8-bit absmaxes, and one fp32 scale per 256 of them.
      const int64_t groups = (blocks + kDoubleQuantBlock - 1) / kDoubleQuantBlock;
      return packed + blocks + 4 * groups;
    }
  }
  return 2 * n;
}

namespace {

// Adds one Linear [out, in] (with or without its bias) to `wb`.
void AddLinear(WeightBytes& wb, int64_t in, int64_t out, bool bias, WeightFormat f, bool dq) {
  const int64_t stored = QuantizedLinearBytes(in, out, f, dq);
  const int64_t data = f == WeightFormat::kInt8                             ? in * out
                       : f == WeightFormat::kNf4 || f == WeightFormat::kFp4 ? (in * out + 1) / 2
                                                                            : stored;
  wb.linear += data;
  wb.scales += stored - data;
  wb.num_parameters += in * out + (bias ? out : 0);
  // Biases stay in the compute dtype (fp16 for quantised models).
  if (bias) wb.other += out * (f == WeightFormat::kFp32 ? 4 : 2);
}

int64_t KeptWidth(WeightFormat f) { return f == WeightFormat::kFp32 ? 4 : 2; }

}  // namespace

WeightBytes DecoderWeightBytes(const DecoderShape& s, WeightFormat f, bool dq) {
  WeightBytes wb;
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim,
                i = s.intermediate, kept = KeptWidth(f);
  const bool gpt2 = s.family == DecoderFamily::kGpt2;
  for (int64_t l = 0; l < s.layers; ++l) {
    if (gpt2) {
      AddLinear(wb, h, 3 * q, true, f, dq);
      AddLinear(wb, q, h, true, f, dq);
      AddLinear(wb, h, i, true, f, dq);
      AddLinear(wb, i, h, true, f, dq);
    } else {
      AddLinear(wb, h, q, s.attention_bias, f, dq);
      AddLinear(wb, h, kv, s.attention_bias, f, dq);
      AddLinear(wb, h, kv, s.attention_bias, f, dq);
      AddLinear(wb, q, h, s.attention_bias, f, dq);
      AddLinear(wb, h, i, s.mlp_bias, f, dq);
      AddLinear(wb, h, i, s.mlp_bias, f, dq);
      AddLinear(wb, i, h, s.mlp_bias, f, dq);
    }
  }
  const int64_t norm = gpt2 ? 2 * h : h;  // LayerNorm weight and bias; RMSNorm weight
  const int64_t norms = (2 * s.layers + 1) * norm;
  wb.other += norms * kept;
  if (!gpt2) wb.other += s.head_dim / 2 * 4;  // the rotary inv_freq buffer (fp32, not a parameter)
  int64_t embeddings = s.vocab * h + (gpt2 ? s.max_positions * h : 0);
  if (!s.tie_word_embeddings) embeddings += s.vocab * h;  // the LM head, kept 16-bit
  wb.embeddings = embeddings * kept;
  wb.num_parameters += norms + embeddings;
  return wb;
}

WeightBytes EncoderWeightBytes(const ModelSpec& m, int64_t num_labels, WeightFormat f, bool dq) {
  WeightBytes wb;
  const int64_t h = m.hidden_size, i = m.intermediate_size, kept = KeptWidth(f);
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    for (int k = 0; k < 4; ++k) AddLinear(wb, h, h, true, f, dq);
    AddLinear(wb, h, i, true, f, dq);
    AddLinear(wb, i, h, true, f, dq);
  }
  // Everything else (embeddings, LayerNorms, the relative table, pooler and classifier) is
  // counted at the kept width: the pooler and classifier are small, and loaders skip the head.
  const int64_t pooler = m.position_buckets > 0 ? h * h + h : 0;  // DeBERTa's ContextPooler
  const int64_t rest =
      EncoderParameterCount(m) - wb.num_parameters + pooler + h * num_labels + num_labels;
  wb.embeddings = rest * kept;
  wb.num_parameters += rest;
  return wb;
}

int64_t KvCacheBytesPerToken(const DecoderShape& s, int64_t cache_bytes) {
  return 2 * s.layers * s.kv_heads * s.head_dim * cache_bytes;
}

namespace {

Status CheckLengths(const InferenceModel& im, const DecoderShape& s) {
  const std::string& n = im.label;
  if (im.role == InferenceRole::kClassify) {
    return Invalid(
        fmt::format("model '{}': role classify needs an encoder, but '{}' is a decoder "
                    "LM (roles: generate, score)",
                    n, im.model.name));
  }
  if (im.prompt_tokens <= 0) {
    return Invalid(
        fmt::format("model '{}': prompt_tokens must be > 0, got {}", n, im.prompt_tokens));
  }
  if (im.role == InferenceRole::kGenerate && im.max_new_tokens <= 0) {
    return Invalid(fmt::format("model '{}': role generate needs max_new_tokens > 0, got {}", n,
                               im.max_new_tokens));
  }
  const int64_t total =
      im.prompt_tokens + (im.role == InferenceRole::kGenerate ? im.max_new_tokens : 0);
  if (s.max_positions > 0 && total > s.max_positions) {
    return Invalid(fmt::format("model '{}': {} tokens exceed '{}''s {} positions", n, total,
                               im.model.name, s.max_positions));
  }
  if (im.batch_size <= 0) {
    return Invalid(fmt::format("model '{}': batch_size must be > 0", n));
  }
  return Status::Ok();
}

// The largest prefill matmul's weight dequantised to 16 bits (bitsandbytes dequantises a 4-bit
// weight whole for inputs of more than one token; LLM.int8() keeps int8 copies of the input and
// an int32 output): present on top of the prefill's activations for one matmul at a time.
int64_t DequantWorkspace(const DecoderShape& s, WeightFormat f, int64_t tokens) {
  const int64_t q = s.heads * s.head_dim;
  const int64_t in = std::max({s.hidden, s.intermediate, q}),
                out = std::max({s.hidden, s.intermediate, q, 3 * q});
  if (f == WeightFormat::kNf4 || f == WeightFormat::kFp4) {
    return std::max(s.hidden * s.intermediate, s.hidden * q) * 2;
  }
  if (f == WeightFormat::kInt8) return tokens * in + tokens * out * 4;
  return 0;
}

Result<InferenceEstimate> EstimateDecoder(const InferenceModel& im, const DeviceMemoryModel& dev) {
  auto shape = DecoderShapeOf(im.model);
  if (!shape.ok()) return shape.status();
  const DecoderShape& s = *shape;
  TUNE_RETURN_IF_ERROR(CheckLengths(im, s));
  InferenceEstimate e;
  e.weights = DecoderWeightBytes(s, im.format, im.double_quant);
  const int64_t w = im.format == WeightFormat::kFp32 ? 4 : 2;
  const int64_t c = Width(im.kv_cache_dtype);
  const Dtypes d{w, c, im.attention == AttentionKernel::kEager, !im.static_cache};
  const int64_t b = im.batch_size;
  const bool generate = im.role == InferenceRole::kGenerate;
  const int64_t new_tokens = generate ? im.max_new_tokens : 0;
  // generate() writes the last sampled token's K and V only at the next step: the cache holds
  // prompt + new - 1 tokens; a static cache is allocated at prompt + new.
  const int64_t cached = im.prompt_tokens + new_tokens - (generate && !im.static_cache ? 1 : 0);
  e.kv_cache = b * cached * KvCacheBytesPerToken(s, c);
  int64_t prefill_logits = 0, decode_logits = 0;
  e.prefill = ForwardPeak(s, Step{b, im.prompt_tokens, 0}, d, im.role, im.sample, &prefill_logits);
  const int64_t steps =
      im.decode_steps >= 0 ? std::min(im.decode_steps, new_tokens - 1) : new_tokens - 1;
  if (generate && steps > 0) {
    const Step last{b, 1, im.prompt_tokens + steps - 1};
    e.decode = ForwardPeak(s, last, d, im.role, im.sample, &decode_logits);
  }
  e.logits = std::max(prefill_logits, decode_logits);
  if (IsQuantized(im.format) && !dev.cpu_kernels) {
    e.dequant = DequantWorkspace(s, im.format, b * im.prompt_tokens);
  }
  e.per_request = e.kv_cache + std::max(e.prefill + e.dequant, e.decode);
  e.allocated_peak = e.weights.total() + e.per_request;
  return e;
}

Result<InferenceEstimate> EstimateEncoder(const InferenceModel& im, const DeviceMemoryModel& dev) {
  if (im.role != InferenceRole::kClassify) {
    return Invalid(fmt::format("model '{}': '{}' is an encoder; its role is classify, not {}",
                               im.label, im.model.name, InferenceRoleName(im.role)));
  }
  if (im.max_length <= 0) {
    return Invalid(fmt::format("model '{}': role classify needs max_length > 0, got {}", im.label,
                               im.max_length));
  }
  MemoryRequest r;
  r.architecture = Architecture::kEncoder;
  r.model = im.model;
  r.num_labels = im.num_labels;
  r.train = false;
  r.batch_size = im.batch_size;
  r.max_length = im.max_length;
  r.precision = im.format == WeightFormat::kFp32 ? Precision::kFp32 : Precision::kPureBf16;
  DeviceMemoryModel plain = DeviceMemoryModel::Cpu();
  plain.cpu_kernels = dev.cpu_kernels;
  TUNE_ASSIGN_OR_RETURN(MemoryEstimate me, EstimateMemory(r, plain));
  InferenceEstimate e;
  e.weights = EncoderWeightBytes(im.model, im.num_labels, im.format, im.double_quant);
  e.prefill = me.eval_peak - me.weights;
  e.per_request = e.prefill;
  e.allocated_peak = e.weights.total() + e.per_request;
  return e;
}

}  // namespace

Result<InferenceEstimate> EstimateInference(const InferenceModel& im,
                                            const DeviceMemoryModel& device) {
  if ((im.double_quant) && im.format != WeightFormat::kNf4 && im.format != WeightFormat::kFp4) {
    return Invalid(fmt::format("model '{}': double_quant applies to nf4 and fp4, not {}", im.label,
                               WeightFormatName(im.format)));
  }
  if (im.kv_cache_dtype != WeightFormat::kFp32 && im.kv_cache_dtype != WeightFormat::kFp16 &&
      im.kv_cache_dtype != WeightFormat::kBf16) {
    return Invalid(fmt::format("model '{}': kv_cache_dtype must be fp32, fp16 or bf16, not {}",
                               im.label, WeightFormatName(im.kv_cache_dtype)));
  }
  if (IsDecoderModelType(im.model.model_type)) return EstimateDecoder(im, device);
  return EstimateEncoder(im, device);
}

}  // namespace tune

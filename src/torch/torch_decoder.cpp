// Decoder inference under the counting allocator (torch_decoder.h). Every function keeps the
// lifetimes of its Hugging Face counterpart: a tensor that Python frees when a name is rebound is
// reset here at the same point, and locals go when the function returns.
#include "torch/torch_decoder.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "torch/torch_counting_allocator.h"

namespace tune {
namespace {

struct Linear {
  torch::Tensor weight, bias;  // weight [out, in]
  torch::Tensor operator()(const torch::Tensor& x) const { return torch::linear(x, weight, bias); }
};

Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  Linear l;
  l.weight = torch::randn({out, in}) * 0.02;
  if (bias) l.bias = torch::zeros({out});
  return l;
}

struct Layer {
  torch::Tensor ln1_w, ln1_b, ln2_w, ln2_b;  // RMSNorm: weights only
  Linear q, k, v, o;                         // GPT-2: q is c_attn (h -> 3h), o is c_proj
  Linear gate, up, down;                     // GPT-2: up is c_fc, down is c_proj
};

struct Model {
  DecoderShape s;
  torch::Tensor embed, positions, norm_w, norm_b, head, inv_freq;
  std::vector<Layer> layers;
  std::vector<torch::Tensor> cache_k, cache_v;  // [B, kv_heads, capacity, head_dim]
};

Model Build(const DecoderShape& s) {
  Model m;
  m.s = s;
  const bool gpt2 = s.family == DecoderFamily::kGpt2;
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  m.embed = torch::randn({s.vocab, h}) * 0.02;
  if (gpt2) m.positions = torch::randn({s.max_positions, h}) * 0.02;
  for (int64_t l = 0; l < s.layers; ++l) {
    Layer L;
    L.ln1_w = torch::ones({h});
    L.ln2_w = torch::ones({h});
    if (gpt2) {
      L.ln1_b = torch::zeros({h});
      L.ln2_b = torch::zeros({h});
      L.q = MakeLinear(h, 3 * q, true);
      L.o = MakeLinear(q, h, true);
      L.up = MakeLinear(h, s.intermediate, true);
      L.down = MakeLinear(s.intermediate, h, true);
    } else {
      L.q = MakeLinear(h, q, s.attention_bias);
      L.k = MakeLinear(h, kv, s.attention_bias);
      L.v = MakeLinear(h, kv, s.attention_bias);
      L.o = MakeLinear(q, h, s.attention_bias);
      L.gate = MakeLinear(h, s.intermediate, s.mlp_bias);
      L.up = MakeLinear(h, s.intermediate, s.mlp_bias);
      L.down = MakeLinear(s.intermediate, h, s.mlp_bias);
    }
    m.layers.push_back(std::move(L));
  }
  m.norm_w = torch::ones({h});
  if (gpt2) m.norm_b = torch::zeros({h});
  m.head = s.tie_word_embeddings ? m.embed : torch::randn({s.vocab, h}) * 0.02;
  if (!gpt2) {
    m.inv_freq = 1.0 / torch::pow(500000.0, torch::arange(0, s.head_dim, 2, torch::kFloat) /
                                                static_cast<double>(s.head_dim));
  }
  return m;
}

// LlamaRMSNorm in fp32.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight) {
  torch::Tensor variance = x.pow(2).mean(-1, true);
  torch::Tensor normed = x * torch::rsqrt(variance + 1e-5);
  return weight * normed;
}

torch::Tensor LayerNorm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::layer_norm(x, {x.size(-1)}, w, b, 1e-5);
}

torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin) {
  torch::Tensor a = x * cos;
  torch::Tensor b = RotateHalf(x) * sin;
  return a + b;
}

// What a forward makes once and every layer uses.
struct Context {
  int64_t past = 0, t = 0;
  torch::Tensor cos, sin, mask;
};

// Writes this step's K and V into the static cache and returns views of the filled prefix.
std::pair<torch::Tensor, torch::Tensor> UpdateCache(Model& m, size_t layer, const Context& c,
                                                    const torch::Tensor& k,
                                                    const torch::Tensor& v) {
  m.cache_k[layer].slice(2, c.past, c.past + c.t).copy_(k);
  m.cache_v[layer].slice(2, c.past, c.past + c.t).copy_(v);
  return {m.cache_k[layer].slice(2, 0, c.past + c.t), m.cache_v[layer].slice(2, 0, c.past + c.t)};
}

// repeat_kv: [B, kv, S, d] -> [B, kv * n_rep, S, d].
torch::Tensor RepeatKv(const torch::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto sizes = x.sizes();
  return x.unsqueeze(2)
      .expand({sizes[0], sizes[1], n_rep, sizes[2], sizes[3]})
      .reshape({sizes[0], sizes[1] * n_rep, sizes[2], sizes[3]});
}

// Eager attention from q, K, V to the [B, heads, T, d] output; the probabilities go to `probs`
// (the layer holds them until it returns, as HF's decoder layers do).
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                     const Context& c, bool fp32_softmax, torch::Tensor& probs) {
  torch::Tensor scores =
      torch::matmul(q, keys.transpose(2, 3)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (c.t > 1) scores = scores + c.mask;
  probs = fp32_softmax ? torch::softmax(scores, -1, torch::kFloat32) : torch::softmax(scores, -1);
  scores.reset();
  return torch::matmul(probs, values);
}

torch::Tensor LlamaAttention(Model& m, size_t i, const torch::Tensor& h, const Context& c,
                             torch::Tensor& probs) {
  const Layer& L = m.layers[i];
  const DecoderShape& s = m.s;
  const int64_t b = h.size(0), t = h.size(1);
  torch::Tensor q = L.q(h).view({b, t, s.heads, s.head_dim}).transpose(1, 2);
  torch::Tensor k = L.k(h).view({b, t, s.kv_heads, s.head_dim}).transpose(1, 2);
  torch::Tensor v = L.v(h).view({b, t, s.kv_heads, s.head_dim}).transpose(1, 2);
  {
    torch::Tensor q_embed = ApplyRotary(q, c.cos, c.sin);
    torch::Tensor k_embed = ApplyRotary(k, c.cos, c.sin);
    q = q_embed;
    k = k_embed;
  }
  auto [keys, values] = UpdateCache(m, i, c, k, v);
  keys = RepeatKv(keys, s.heads / s.kv_heads);
  values = RepeatKv(values, s.heads / s.kv_heads);
  torch::Tensor out = Attend(q, keys, values, c, true, probs);
  out = out.transpose(1, 2).contiguous();
  out = out.reshape({b, t, s.heads * s.head_dim});
  return L.o(out);
}

torch::Tensor LlamaLayer(Model& m, size_t i, torch::Tensor x, const Context& c) {
  const Layer& L = m.layers[i];
  torch::Tensor probs;
  torch::Tensor h = RmsNorm(x, L.ln1_w);
  torch::Tensor o = LlamaAttention(m, i, h, c, probs);
  h.reset();
  torch::Tensor y = x + o;
  o.reset();
  x.reset();
  torch::Tensor h2 = RmsNorm(y, L.ln2_w);
  torch::Tensor d;
  {
    torch::Tensor g = L.gate(h2);
    torch::Tensor a = torch::silu(g);
    g.reset();
    torch::Tensor u = L.up(h2);
    torch::Tensor p = a * u;
    a.reset();
    u.reset();
    d = L.down(p);
  }
  h2.reset();
  return y + d;
}

torch::Tensor Gpt2Attention(Model& m, size_t i, const torch::Tensor& h, const Context& c,
                            torch::Tensor& probs) {
  const Layer& L = m.layers[i];
  const DecoderShape& s = m.s;
  const int64_t b = h.size(0), t = h.size(1), width = s.heads * s.head_dim;
  torch::Tensor qkv = L.q(h);
  const std::vector<torch::Tensor> parts = qkv.split(width, 2);
  auto heads = [&](const torch::Tensor& x) {
    return x.view({b, t, s.heads, s.head_dim}).transpose(1, 2);
  };
  const torch::Tensor q = heads(parts[0]);
  auto [keys, values] = UpdateCache(m, i, c, heads(parts[1]), heads(parts[2]));
  torch::Tensor out = Attend(q, keys, values, c, false, probs);
  out = out.transpose(1, 2).reshape({b, t, width}).contiguous();
  return L.o(out);
}

// NewGELUActivation, evaluated as Python evaluates it.
torch::Tensor NewGelu(const torch::Tensor& x) {
  torch::Tensor half = 0.5 * x;
  torch::Tensor inner = torch::pow(x, 3.0);
  inner = 0.044715 * inner;
  inner = x + inner;
  inner = std::sqrt(2.0 / M_PI) * inner;
  inner = torch::tanh(inner);
  inner = 1.0 + inner;
  return half * inner;
}

torch::Tensor Gpt2Block(Model& m, size_t i, torch::Tensor x, const Context& c) {
  const Layer& L = m.layers[i];
  torch::Tensor probs;
  torch::Tensor h = LayerNorm(x, L.ln1_w, L.ln1_b);
  torch::Tensor attn = Gpt2Attention(m, i, h, c, probs);
  torch::Tensor y = attn + x;
  h.reset();
  x.reset();
  torch::Tensor h2 = LayerNorm(y, L.ln2_w, L.ln2_b);
  torch::Tensor ff;
  {
    torch::Tensor fc = L.up(h2);
    torch::Tensor act = NewGelu(fc);
    fc.reset();
    ff = L.down(act);
  }
  torch::Tensor out = y + ff;
  h2.reset();
  return out;
}

Context MakeContext(const Model& m, const torch::Tensor& positions, int64_t past, int64_t t) {
  Context c;
  c.past = past;
  c.t = t;
  if (m.s.family == DecoderFamily::kLlama) {
    torch::Tensor posf = positions.to(torch::kFloat);
    torch::Tensor freqs = torch::outer(posf, m.inv_freq);
    torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    c.cos = emb.cos();
    c.sin = emb.sin();
  }
  if (t > 1) {
    c.mask = torch::full({t, past + t}, -std::numeric_limits<float>::infinity()).triu(past + 1);
  }
  return c;
}

// One forward of `ids` [B, T] after `past` cached tokens; returns the next token ids [B, 1].
torch::Tensor Forward(Model& m, const torch::Tensor& ids, int64_t past, bool sample) {
  const int64_t t = ids.size(1);
  const bool gpt2 = m.s.family == DecoderFamily::kGpt2;
  torch::Tensor positions = torch::arange(past, past + t, torch::kLong);
  const Context c = MakeContext(m, positions, past, t);
  torch::Tensor x = gpt2 ? torch::embedding(m.embed, ids) + torch::embedding(m.positions, positions)
                         : torch::embedding(m.embed, ids);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    x = gpt2 ? Gpt2Block(m, i, std::move(x), c) : LlamaLayer(m, i, std::move(x), c);
  }
  x = gpt2 ? LayerNorm(x, m.norm_w, m.norm_b) : RmsNorm(x, m.norm_w);
  torch::Tensor logits = torch::linear(x.select(1, t - 1), m.head);
  if (!sample) return logits.argmax(-1, true);
  torch::Tensor probs = torch::softmax(logits / 0.7, -1);
  return torch::multinomial(probs, 1);
}

int64_t Live() { return GetCpuMemoryStats().live_bytes; }
int64_t Peak() { return GetCpuMemoryStats().peak_bytes; }

DecoderMeasurement Run(const DecoderShape& s, const DecoderRunSpec& spec) {
  DecoderMeasurement out;
  const int64_t level = Live();
  ResetCpuPeakMemory();
  Model m = Build(s);
  out.weights = Live() - level;
  const int64_t capacity = spec.prompt_tokens + spec.max_new_tokens;
  for (int64_t l = 0; l < s.layers; ++l) {
    m.cache_k.push_back(torch::zeros({spec.batch_size, s.kv_heads, capacity, s.head_dim}));
    m.cache_v.push_back(torch::zeros({spec.batch_size, s.kv_heads, capacity, s.head_dim}));
  }
  const int64_t held = Live();
  out.kv_cache = held - level - out.weights;
  ResetCpuPeakMemory();
  torch::Tensor next =
      Forward(m, torch::randint(0, s.vocab, {spec.batch_size, spec.prompt_tokens}, torch::kLong), 0,
              spec.sample);
  out.prefill_peak = Peak() - held;
  out.tokens = 1;
  for (int64_t step = 1; step < spec.max_new_tokens; ++step) {
    ResetCpuPeakMemory();
    next = Forward(m, next, spec.prompt_tokens + step - 1, spec.sample);
    out.decode_peak = std::max(out.decode_peak, Peak() - held);
    ++out.tokens;
  }
  out.peak = out.weights + out.kv_cache + std::max(out.prefill_peak, out.decode_peak);
  return out;
}

}  // namespace

Result<DecoderMeasurement> MeasureDecoderGeneration(const DecoderRunSpec& spec) {
  TUNE_ASSIGN_OR_RETURN(DecoderShape s, DecoderShapeOf(spec.model));
  if (spec.prompt_tokens <= 0 || spec.max_new_tokens <= 0 || spec.batch_size <= 0) {
    return InvalidArgumentError("prompt_tokens, max_new_tokens and batch_size must be > 0");
  }
  InstallCountingCpuAllocator();
  if (spec.threads > 0) at::set_num_threads(static_cast<int>(spec.threads));
  torch::manual_seed(spec.seed);
  torch::NoGradGuard no_grad;
  try {
    return Run(s, spec);
  } catch (const c10::Error& e) {
    return InternalError(fmt::format("decoder run failed: {}", e.what_without_backtrace()));
  }
}

}  // namespace tune

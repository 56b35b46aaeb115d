#include "torch/torch_models.h"

#include <cmath>
#include <optional>

#include "torch/torch_compat.h"
#include "torch/torch_fused_elementwise.h"

namespace tune::internal {
namespace {

constexpr double kInitStd = 0.02;  // BERT's initializer_range

torch::Tensor Activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGelu:
      return torch::gelu(x);
    case Activation::kRelu:
      return torch::relu(x);
    case Activation::kTanh:
      return torch::tanh(x);
  }
  return x;
}

// A holder of submodules registered under `name`, for Hugging Face's nesting
// ("encoder.layer.N", "pooler.dense").
class ContainerImpl : public torch::nn::Module {};

// Reentrant gradient checkpointing of one encoder layer, ported from torch/utils/checkpoint.py's
// CheckpointFunction (docs/memory.md#gradient-checkpointing): forward runs the layer without
// recording the graph and keeps only its inputs and the RNG state; backward restores that RNG state
// (so dropout draws the same masks), recomputes the layer with the graph, back-propagates through
// it (which accumulates the layer's parameter gradients) and returns the gradients of the inputs:
// the hidden states and, for DeBERTa, the shared relative embeddings.
class CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& mask, const torch::Tensor& rel,
                               const torch::Tensor& rel_pos, EncoderLayer* layer) {
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["rel_grad"] = rel.requires_grad();
    // Backward runs outside autocast: the recomputation must run under the forward's autocast.
    const bool autocast = AutocastEnabled(x.device().type());
    ctx->saved_data["autocast"] = autocast;
    ctx->saved_data["autocast_dtype"] =
        static_cast<int64_t>(autocast ? AutocastDtype(x.device().type()) : torch::kFloat);
    at::Generator gen = at::globalContext().defaultGenerator(x.device());
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      ctx->saved_data["rng_state"] = gen.get_state();
    }
    ctx->save_for_backward({x, mask, rel, rel_pos});
    torch::NoGradGuard no_grad;
    return layer->Run(x, mask, rel, rel_pos);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<EncoderLayer*>(ctx->saved_data["layer"].toInt());
    torch::Tensor x = saved[0].detach().requires_grad_(true);
    const bool rel_grad = ctx->saved_data["rel_grad"].toBool();
    torch::Tensor rel = saved[2].detach().requires_grad_(rel_grad);
    at::Generator gen = at::globalContext().defaultGenerator(x.device());
    torch::Tensor now;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      now = gen.get_state();
      gen.set_state(ctx->saved_data["rng_state"].toTensor());
    }
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      std::optional<AutocastGuard> autocast;
      if (ctx->saved_data["autocast"].toBool()) {
        autocast.emplace(x.device().type(),
                         static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      }
      y = layer->Run(x, saved[1], rel, saved[3]);
    }
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(now);
    }
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), torch::Tensor(), rel_grad ? rel.grad() : torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

// `a`, `b` and `c` (each [n, ...], one shape and dtype) as one [3n, ...] tensor: a view when they
// lie one after another in one storage (PackRows's layout), else a copy.
torch::Tensor Rows3(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
  const int64_t n = a.numel();
  if (a.is_contiguous() && b.is_contiguous() && c.is_contiguous() && a.is_alias_of(b) &&
      a.is_alias_of(c) && b.storage_offset() == a.storage_offset() + n &&
      c.storage_offset() == b.storage_offset() + n && a.sizes() == b.sizes() &&
      a.sizes() == c.sizes()) {
    std::vector<int64_t> sizes = a.sizes().vec();
    sizes[0] *= 3;
    return a.as_strided(sizes, a.strides(), a.storage_offset());
  }
  return torch::cat({a, b, c});
}

// Moves the data of `a`, `b` and `c` into one new storage, one after another, so that Rows3
// returns a view. The tensors stay the same parameters (set_data): an optimizer's state and a
// checkpoint's names are untouched.
void PackRows(torch::Tensor& a, torch::Tensor& b, torch::Tensor& c) {
  torch::NoGradGuard no_grad;
  const int64_t n = a.size(0);
  std::vector<int64_t> sizes = a.sizes().vec();
  sizes[0] *= 3;
  torch::Tensor packed = torch::empty(sizes, a.options());
  packed.narrow(0, 0, n).copy_(a);
  packed.narrow(0, n, n).copy_(b);
  packed.narrow(0, 2 * n, n).copy_(c);
  a.set_data(packed.narrow(0, 0, n));
  b.set_data(packed.narrow(0, n, n));
  c.set_data(packed.narrow(0, 2 * n, n));
}

// y = x [Wq; Wk; Wv]^T + [bq; bk; bv]: the three projections of one attention as one GEMM, and in
// backward one GEMM each for the input's and the packed weights' gradients (returned to the three
// parameters as row blocks of one buffer). Under autocast the input and the packed weights are
// cast once, as the three Linears would each cast them; the input's gradient comes back in the
// input's dtype and the parameters' in theirs.
class QkvProjection : public torch::autograd::Function<QkvProjection> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& wq, const torch::Tensor& wk,
                               const torch::Tensor& wv, const torch::Tensor& bq,
                               const torch::Tensor& bk, const torch::Tensor& bv) {
    torch::Tensor xc = x, w = Rows3(wq, wk, wv), b = Rows3(bq, bk, bv);
    const c10::DeviceType device = x.device().type();
    if (AutocastEnabled(device)) {
      const at::ScalarType dtype = AutocastDtype(device);
      xc = x.to(dtype);
      w = w.to(dtype);
      b = b.to(dtype);
    }
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(wq.scalar_type());
    ctx->save_for_backward({xc, w});
    return torch::linear(xc, w, b);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& xc = saved[0];
    const torch::Tensor& w = saved[1];
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const int64_t rows = w.size(0), n = rows / 3, in = w.size(1);
    const torch::Tensor gy = grad_outputs[0].to(w.scalar_type()).reshape({-1, rows});
    torch::Tensor gx, gw, gb;
    if (ctx->needs_input_grad(0)) gx = gy.mm(w).view(xc.sizes()).to(x_dtype);
    if (ctx->needs_input_grad(1)) gw = gy.t().mm(xc.reshape({-1, in})).to(w_dtype);
    if (ctx->needs_input_grad(4)) gb = gy.sum(0).to(w_dtype);
    auto part = [&](const torch::Tensor& g, int64_t k) {
      return g.defined() ? g.narrow(0, k * n, n) : torch::Tensor();
    };
    return {gx, part(gw, 0), part(gw, 1), part(gw, 2), part(gb, 0), part(gb, 1), part(gb, 2)};
  }
};

}  // namespace

bool DebertaSdpaAvailable() { return TUNE_TORCH_AT_LEAST(2, 1); }

bool SdpaAvailable() { return TUNE_TORCH_AT_LEAST(2, 0); }

EncoderConfig MakeEncoderConfig(const ModelSpec& model, const TrainHyperparams& hp,
                                int32_t pad_id) {
  EncoderConfig c;
  c.vocab_size = model.vocab_size;
  c.hidden_size = model.hidden_size;
  c.num_layers = model.num_hidden_layers;
  c.num_heads = model.num_attention_heads;
  c.intermediate_size = model.intermediate_size;
  c.max_positions = model.max_position_embeddings;
  c.type_vocab_size = model.type_vocab_size;
  c.roberta_positions = UsesRobertaPositions(model);
  c.pad_id = pad_id;
  c.hidden_dropout = hp.dropout;
  c.attention_dropout = hp.attention_dropout;
  c.layer_norm_eps = c.roberta_positions ? 1e-5 : 1e-12;
  c.gradient_checkpointing = hp.gradient_checkpointing;
  c.sdpa = hp.attention == Attention::kSdpa;
  c.fused_qkv = hp.fused_qkv;
  c.fused_elementwise = hp.fused_elementwise;
  if (UsesRelativePositions(model)) {
    c.deberta = true;
    c.position_buckets = model.position_buckets;
    c.max_relative_positions = model.max_position_embeddings;  // HF: -1 -> max_position_embeddings
    c.layer_norm_eps = 1e-7;
  }
  // A pretrained checkpoint's config.json states its own.
  if (model.extra.contains("layer_norm_eps") && model.extra["layer_norm_eps"].is_number()) {
    c.layer_norm_eps = model.extra["layer_norm_eps"].get<double>();
  }
  return c;
}

HeadConfig MakeHeadConfig(const ModelSpec& model, const TrainHyperparams& hp, int64_t num_labels) {
  HeadConfig h;
  h.num_labels = num_labels;
  for (int64_t i = 0; i < hp.classifier_layers; ++i) {
    h.hidden.push_back(hp.ClassifierWidth(i, model.hidden_size));
  }
  h.dropout = hp.classifier_dropout.value_or(hp.dropout);
  h.activation = hp.classifier_activation;
  return h;
}

void EmbeddingsBase::RegisterParts(const EncoderConfig& c, bool absolute_positions) {
  word_embeddings_ = register_module(
      "word_embeddings",
      torch::nn::Embedding(
          torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size).padding_idx(c.pad_id)));
  if (absolute_positions) {
    position_embeddings_ = register_module("position_embeddings",
                                           torch::nn::Embedding(c.max_positions, c.hidden_size));
  }
  if (c.type_vocab_size > 0) {
    token_type_embeddings_ = register_module(
        "token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  }
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  dropout_ = register_module("dropout", FastDropout(c.hidden_dropout));
}

BertEmbeddingsImpl::BertEmbeddingsImpl(const EncoderConfig& c)
    : roberta_positions_(c.roberta_positions) {
  RegisterParts(c, /*absolute_positions=*/true);
}

namespace {

// Adds the token type embeddings: of token_type_ids, or of type 0 for every token.
torch::Tensor AddTokenTypes(const torch::Tensor& x, torch::nn::Embedding& types,
                            const torch::Tensor& token_type_ids) {
  if (!types) return x;
  return token_type_ids.defined() ? x + types->forward(token_type_ids) : x + types->weight[0];
}

}  // namespace

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& attention_mask,
                                          const torch::Tensor& token_type_ids) {
  torch::Tensor positions;
  if (roberta_positions_ && attention_mask.defined()) {
    // Hugging Face's create_position_ids_from_input_ids with padding_idx 1: tokens count from 2,
    // padding sits on row 1.
    positions = torch::cumsum(attention_mask, 1) * attention_mask + 1;
  } else if (roberta_positions_) {  // no padding: 2, 3, ...
    positions = torch::arange(2, input_ids.size(1) + 2, input_ids.options()).unsqueeze(0);
  } else {
    positions = torch::arange(input_ids.size(1), input_ids.options()).unsqueeze(0);
  }
  torch::Tensor x = word_embeddings_(input_ids) + position_embeddings_(positions);
  return dropout_(layer_norm_(AddTokenTypes(x, token_type_embeddings_, token_type_ids)));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const EncoderConfig& c)
    : heads_(c.num_heads),
      head_dim_(c.hidden_size / c.num_heads),
      scale_(1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads))),
      sdpa_(c.sdpa),
      fused_qkv_(c.fused_qkv) {
  query_ = register_module("query", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key_ = register_module("key", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value_ = register_module("value", torch::nn::Linear(c.hidden_size, c.hidden_size));
  dropout_ = register_module("dropout", FastDropout(c.attention_dropout));
}

std::array<torch::Tensor, 3> BertSelfAttentionImpl::Project(const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1);
  if (!fused_qkv_) {
    auto split = [&](const torch::Tensor& y) {
      return y.view({b, t, heads_, head_dim_}).transpose(1, 2);  // [B, heads, T, d]
    };
    return {split(query_(x)), split(key_(x)), split(value_(x))};
  }
  // Packed once (and again after the parameters moved, as Module::to moves each on its own).
  if (Rows3(query_->weight, key_->weight, value_->weight).data_ptr() != query_->weight.data_ptr() ||
      Rows3(query_->bias, key_->bias, value_->bias).data_ptr() != query_->bias.data_ptr()) {
    PackRows(query_->weight, key_->weight, value_->weight);
    PackRows(query_->bias, key_->bias, value_->bias);
  }
  // [B, T, 3H] -> [3, B, heads, T, d]: one unbind, so backward assembles one gradient.
  const std::vector<torch::Tensor> qkv =
      QkvProjection::apply(x, query_->weight, key_->weight, value_->weight, query_->bias,
                           key_->bias, value_->bias)
          .view({b, t, 3, heads_, head_dim_})
          .permute({2, 0, 3, 1, 4})
          .unbind(0);
  return {qkv[0], qkv[1], qkv[2]};
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  auto [q, k, v] = Project(x);
#if TUNE_TORCH_AT_LEAST(2, 0)
  if (sdpa_) {  // the scale is SDPA's default, 1 / sqrt(head_dim)
    const c10::optional<at::Tensor> attend =
        mask.numel() > 0 ? c10::optional<at::Tensor>(mask) : c10::nullopt;
    return at::scaled_dot_product_attention(q, k, v, attend, is_training() ? dropout_->p() : 0.0,
                                            /*is_causal=*/false)
        .transpose(1, 2)
        .reshape({b, t, h});
  }
#endif
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)).mul_(scale_);
  if (mask.numel() > 0) scores.add_(mask);
  torch::Tensor probs = dropout_(torch::softmax(scores, -1));
  return torch::matmul(probs, v).transpose(1, 2).reshape({b, t, h});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in, int64_t out, const EncoderConfig& c)
    : fused_(c.fused_elementwise) {
  dense_ = register_module("dense", torch::nn::Linear(in, out));
  layer_norm_ = register_module(
      "LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out}).eps(c.layer_norm_eps)));
  dropout_ = register_module("dropout", FastDropout(c.hidden_dropout));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& x,
                                              const torch::Tensor& residual) {
  if (!fused_) return layer_norm_(dropout_(dense_(x)) + residual);
  return BiasDropoutAddLayerNorm(torch::linear(x, dense_->weight), dense_->bias, residual,
                                 layer_norm_->weight, layer_norm_->bias, dropout_->p(),
                                 layer_norm_->options.eps(), is_training());
}

BertAttentionImpl::BertAttentionImpl(const EncoderConfig& c) {
  self_ = register_module("self", BertSelfAttention(c));
  output_ = register_module("output", BertResidualOutput(c.hidden_size, c.hidden_size, c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return output_(self_(x, mask), x);
}

BertLinearImpl::BertLinearImpl(int64_t in, int64_t out, bool fused) : fused_(fused) {
  dense_ = register_module("dense", torch::nn::Linear(in, out));
}

torch::Tensor BertLinearImpl::forward(const torch::Tensor& x) {
  if (!fused_) return torch::gelu(dense_(x));
  return BiasGelu(torch::linear(x, dense_->weight), dense_->bias);
}

BertLayerImpl::BertLayerImpl(const EncoderConfig& c) {
  attention_ = register_module("attention", BertAttention(c));
  intermediate_ = register_module(
      "intermediate", BertLinear(c.hidden_size, c.intermediate_size, c.fused_elementwise));
  output_ = register_module("output", BertResidualOutput(c.intermediate_size, c.hidden_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor h = attention_(x, mask);
  return output_(intermediate_(h), h);
}

torch::Tensor DebertaRelativePositions(int64_t length, int64_t buckets, int64_t max_position,
                                       torch::Device device) {
  torch::Tensor ids = torch::arange(length, torch::TensorOptions(torch::kLong).device(device));
  torch::Tensor rel = ids.unsqueeze(1) - ids.unsqueeze(0);
  if (buckets <= 0 || max_position <= 0) return rel;
  // make_log_bucket_position, step by step in float32 as Hugging Face computes it.
  const int64_t mid = buckets / 2;
  torch::Tensor sign = torch::sign(rel);
  torch::Tensor abs_pos =
      torch::where((rel < mid) & (rel > -mid), torch::full_like(rel, mid - 1), torch::abs(rel));
  torch::Tensor log_base =
      torch::scalar_tensor(static_cast<double>(max_position - 1) / static_cast<double>(mid),
                           torch::TensorOptions(torch::kFloat).device(device))
          .log();
  torch::Tensor log_pos =
      torch::ceil(torch::log(abs_pos.to(torch::kFloat) / static_cast<double>(mid)) / log_base *
                  static_cast<double>(mid - 1)) +
      static_cast<double>(mid);
  torch::Tensor bucket = torch::where(abs_pos <= mid, rel.to(torch::kFloat), log_pos * sign);
  return bucket.to(torch::kLong);
}

DebertaEmbeddingsImpl::DebertaEmbeddingsImpl(const EncoderConfig& c) {
  RegisterParts(c, /*absolute_positions=*/false);
}

torch::Tensor DebertaEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                             const torch::Tensor& attention_mask,
                                             const torch::Tensor& token_type_ids) {
  torch::Tensor x =
      AddTokenTypes(word_embeddings_(input_ids), token_type_embeddings_, token_type_ids);
  x = layer_norm_(x);
  if (attention_mask.defined()) x = x * attention_mask.unsqueeze(2).to(x.scalar_type());
  return dropout_(x);
}

DisentangledSelfAttentionImpl::DisentangledSelfAttentionImpl(const EncoderConfig& c)
    : heads_(c.num_heads),
      head_dim_(c.hidden_size / c.num_heads),
      span_(c.position_buckets > 0 ? c.position_buckets : c.max_relative_positions),
      // 1 + c2p + p2c terms.
      scale_(1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads) * 3.0)),
      sdpa_(c.sdpa && DebertaSdpaAvailable()) {
  query_proj_ = register_module("query_proj", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key_proj_ = register_module("key_proj", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value_proj_ = register_module("value_proj", torch::nn::Linear(c.hidden_size, c.hidden_size));
  pos_dropout_ = register_module("pos_dropout", FastDropout(c.hidden_dropout));
  dropout_ = register_module("dropout", FastDropout(c.attention_dropout));
}

torch::Tensor DisentangledSelfAttentionImpl::forward(const torch::Tensor& x,
                                                     const torch::Tensor& mask,
                                                     const torch::Tensor& rel,
                                                     const torch::Tensor& rel_pos) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  auto split = [&](const torch::Tensor& y) {  // [N, L, H] -> [N, heads, L, d]
    return y.view({y.size(0), y.size(1), heads_, head_dim_}).transpose(1, 2);
  };
  torch::Tensor q = split(query_proj_(x)), k = split(key_proj_(x)), v = split(value_proj_(x));

  // share_att_key: the relative embeddings go through the content projections.
  torch::Tensor r = pos_dropout_(rel.slice(0, 0, 2 * span_)).unsqueeze(0);  // [1, 2S, H]
  torch::Tensor pos_key = split(key_proj_(r)).squeeze(0);                   // [heads, 2S, d]
  torch::Tensor pos_query = split(query_proj_(r)).squeeze(0);
  const std::vector<int64_t> shape = {b, heads_, t, t};
  // Content to position: row i (query) reads bucket(i - j) + S.
  torch::Tensor c2p_pos = torch::clamp(rel_pos + span_, 0, 2 * span_ - 1).expand(shape);
  torch::Tensor c2p = torch::gather(torch::matmul(q, pos_key.transpose(-1, -2)), -1, c2p_pos);
  // Position to content: row j (key) reads bucket(j - i) + S, then transposed to [query, key].
  torch::Tensor p2c_pos = torch::clamp(-rel_pos + span_, 0, 2 * span_ - 1).expand(shape);
  torch::Tensor p2c =
      torch::gather(torch::matmul(k, pos_query.transpose(-1, -2)), -1, p2c_pos).transpose(-1, -2);
#if TUNE_TORCH_AT_LEAST(2, 1)
  if (sdpa_) {  // the relative terms and the padding as SDPA's additive bias, in Q's dtype
    torch::Tensor bias = (c2p + p2c).mul_(scale_);
    if (mask.numel() > 0) bias = bias + mask;
    return at::scaled_dot_product_attention(q, k, v, bias.to(q.scalar_type()),
                                            is_training() ? dropout_->p() : 0.0,
                                            /*is_causal=*/false, scale_)
        .transpose(1, 2)
        .reshape({b, t, h});
  }
#endif
  torch::Tensor scores = (torch::matmul(q, k.transpose(-1, -2)) + c2p + p2c).mul_(scale_);
  if (mask.numel() > 0) scores.add_(mask);
  torch::Tensor probs = dropout_(torch::softmax(scores, -1));
  return torch::matmul(probs, v).transpose(1, 2).reshape({b, t, h});
}

DebertaAttentionImpl::DebertaAttentionImpl(const EncoderConfig& c) {
  self_ = register_module("self", DisentangledSelfAttention(c));
  output_ = register_module("output", BertResidualOutput(c.hidden_size, c.hidden_size, c));
}

torch::Tensor DebertaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                            const torch::Tensor& rel,
                                            const torch::Tensor& rel_pos) {
  return output_(self_(x, mask, rel, rel_pos), x);
}

DebertaLayerImpl::DebertaLayerImpl(const EncoderConfig& c) {
  attention_ = register_module("attention", DebertaAttention(c));
  intermediate_ = register_module(
      "intermediate", BertLinear(c.hidden_size, c.intermediate_size, c.fused_elementwise));
  output_ = register_module("output", BertResidualOutput(c.intermediate_size, c.hidden_size, c));
}

torch::Tensor DebertaLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                        const torch::Tensor& rel, const torch::Tensor& rel_pos) {
  torch::Tensor h = attention_(x, mask, rel, rel_pos);
  return output_(intermediate_(h), h);
}

ClassifierHeadImpl::ClassifierHeadImpl(int64_t in, const HeadConfig& c)
    : activation_(c.activation) {
  hidden_ = register_module("hidden", torch::nn::ModuleList());
  int64_t width = in;
  for (int64_t w : c.hidden) {
    hidden_->push_back(torch::nn::Linear(width, w));
    width = w;
  }
  out_ = register_module("out", torch::nn::Linear(width, c.num_labels));
  dropout_ = register_module("dropout", FastDropout(c.dropout));
}

torch::Tensor ClassifierHeadImpl::forward(const torch::Tensor& pooled) {
  torch::Tensor x = dropout_(pooled);
  for (const auto& layer : *hidden_) {
    x = dropout_(Activate(layer->as<torch::nn::Linear>()->forward(x), activation_));
  }
  return out_(x);
}

TransformerClassifierImpl::TransformerClassifierImpl(const EncoderConfig& encoder,
                                                     const HeadConfig& head)
    : config_(encoder) {
  std::shared_ptr<torch::nn::Module> embeddings;
  if (encoder.deberta) {
    deberta_embeddings_ = register_module("embeddings", DebertaEmbeddings(encoder));
    embeddings = deberta_embeddings_.ptr();
  } else {
    bert_embeddings_ = register_module("embeddings", BertEmbeddings(encoder));
    embeddings = bert_embeddings_.ptr();
  }
  auto enc = register_module("encoder", std::make_shared<ContainerImpl>());
  layers_ = enc->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < encoder.num_layers; ++i) {
    if (encoder.deberta) {
      DebertaLayer layer(encoder);
      layer_impls_.push_back(layer.get());
      layers_->push_back(layer);
    } else {
      BertLayer layer(encoder);
      layer_impls_.push_back(layer.get());
      layers_->push_back(layer);
    }
  }
  if (encoder.deberta) {
    const int64_t span =
        encoder.position_buckets > 0 ? encoder.position_buckets : encoder.max_relative_positions;
    rel_embeddings_ =
        enc->register_module("rel_embeddings", torch::nn::Embedding(2 * span, encoder.hidden_size));
    rel_norm_ = enc->register_module(
        "LayerNorm",
        torch::nn::LayerNorm(
            torch::nn::LayerNormOptions({encoder.hidden_size}).eps(encoder.layer_norm_eps)));
  }
  auto pooler = register_module("pooler", std::make_shared<ContainerImpl>());
  pooler_ =
      pooler->register_module("dense", torch::nn::Linear(encoder.hidden_size, encoder.hidden_size));
  classifier_ = register_module("classifier", ClassifierHead(encoder.hidden_size, head));

  // BERT's (and DeBERTa's) initialisation of the encoder and pooler: N(0, 0.02) weights, zero
  // biases, LayerNorm 1/0, zero padding row. The classifier head keeps LibTorch's default
  // (Kaiming-uniform) init, as the layers a user stacks on a pretrained encoder get in PyTorch;
  // with N(0, 0.02) a deep head would start with vanishing signals.
  torch::NoGradGuard no_grad;
  std::vector<std::shared_ptr<torch::nn::Module>> encoder_modules = embeddings->modules();
  for (const auto& m : enc->modules()) encoder_modules.push_back(m);
  for (const auto& m : pooler->modules()) encoder_modules.push_back(m);
  for (auto& m : encoder_modules) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, kInitStd);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* emb = m->as<torch::nn::Embedding>()) {
      emb->weight.normal_(0.0, kInitStd);
      if (emb->options.padding_idx()) emb->weight[*emb->options.padding_idx()].zero_();
    }
  }
}

torch::Tensor TransformerClassifierImpl::Encode(const torch::Tensor& input_ids,
                                                const torch::Tensor& attention_mask,
                                                const torch::Tensor& token_type_ids) {
  torch::Tensor x = config_.deberta ? deberta_embeddings_(input_ids, attention_mask, token_type_ids)
                                    : bert_embeddings_(input_ids, attention_mask, token_type_ids);
  // The mask, [B, 1, 1, T]: for SDPA true where a token is attended (a boolean mask is right
  // under autocast whatever the dtype of Q); for eager attention additive, 0 for tokens, -10000
  // for padding (BERT's constant, safe in reduced precision too). No padding: empty, not
  // undefined, for the checkpoint Function's inputs.
  torch::Tensor mask;
  if (!attention_mask.defined()) {
    mask = torch::empty({0}, x.options());
  } else if (config_.sdpa && !config_.deberta) {
    mask = attention_mask.to(torch::kBool).unsqueeze(1).unsqueeze(2);
  } else {
    mask = (1.0 - attention_mask.to(x.scalar_type())).mul_(-10000.0).unsqueeze(1).unsqueeze(2);
  }
  torch::Tensor rel, rel_pos;
  if (config_.deberta) {
    const int64_t t = input_ids.size(1);
    // Built once per longer length, on the device: no host work or copy per batch.
    if (!rel_pos_.defined() || rel_pos_.size(0) < t || rel_pos_.device() != input_ids.device()) {
      rel_pos_ = DebertaRelativePositions(t, config_.position_buckets,
                                          config_.max_relative_positions, input_ids.device());
    }
    rel_pos = rel_pos_.size(0) == t ? rel_pos_ : rel_pos_.slice(0, 0, t).slice(1, 0, t);
    rel = rel_norm_(rel_embeddings_->weight);  // norm_rel_ebd "layer_norm", shared by all layers
  } else {
    // BERT's layers ignore them; empty, not undefined, for the checkpoint Function's inputs.
    rel = torch::empty({0}, x.options());
    rel_pos = torch::empty({0}, input_ids.options());
  }
  const bool checkpoint =
      config_.gradient_checkpointing && is_training() && torch::GradMode::is_enabled();
  for (EncoderLayer* layer : layer_impls_) {
    x = checkpoint ? CheckpointedLayer::apply(x, mask, rel, rel_pos, layer)
                   : layer->Run(x, mask, rel, rel_pos);
  }
  return x;
}

torch::Tensor TransformerClassifierImpl::forward(const torch::Tensor& input_ids,
                                                 const torch::Tensor& attention_mask,
                                                 const torch::Tensor& token_type_ids) {
  torch::Tensor cls = Encode(input_ids, attention_mask, token_type_ids).select(1, 0);  // [CLS]
  // BERT's pooler is tanh(dense); DeBERTa's ContextPooler is gelu(dense) (pooler_dropout 0).
  torch::Tensor pooled = config_.deberta ? torch::gelu(pooler_(cls)) : torch::tanh(pooler_(cls));
  return classifier_(pooled);
}

MlpClassifierImpl::MlpClassifierImpl(int64_t num_features, const TrainHyperparams& hp,
                                     int64_t num_labels)
    : activation_(hp.classifier_activation) {
  hidden_ = register_module("hidden", torch::nn::ModuleList());
  int64_t width = num_features;
  for (int64_t i = 0; i < hp.mlp_layers; ++i) {
    hidden_->push_back(torch::nn::Linear(width, hp.mlp_hidden));
    width = hp.mlp_hidden;
  }
  out_ = register_module("out", torch::nn::Linear(width, num_labels));
  dropout_ = register_module("dropout", FastDropout(hp.dropout));
}

torch::Tensor MlpClassifierImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = x;
  for (const auto& layer : *hidden_) {
    h = dropout_(Activate(layer->as<torch::nn::Linear>()->forward(h), activation_));
  }
  return out_(h);
}

}  // namespace tune::internal

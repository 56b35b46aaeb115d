#include "torch/torch_models.h"

#include <cmath>

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
// CheckpointFunction (memory-reference §3.4): forward runs the layer without recording the graph
// and keeps only its inputs and the RNG state; backward restores that RNG state (so dropout draws
// the same masks), recomputes the layer with the graph, back-propagates through it (which
// accumulates the layer's parameter gradients) and returns the input's gradient.
class CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& mask, BertLayerImpl* layer) {
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    at::Generator gen = at::globalContext().defaultGenerator(x.device());
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      ctx->saved_data["rng_state"] = gen.get_state();
    }
    ctx->save_for_backward({x, mask});
    torch::NoGradGuard no_grad;
    return layer->forward(x, mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<BertLayerImpl*>(ctx->saved_data["layer"].toInt());
    torch::Tensor x = saved[0].detach().requires_grad_(true);
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
      y = layer->forward(x, saved[1]);
    }
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(now);
    }
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

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

BertEmbeddingsImpl::BertEmbeddingsImpl(const EncoderConfig& c)
    : roberta_positions_(c.roberta_positions) {
  word_embeddings_ = register_module(
      "word_embeddings",
      torch::nn::Embedding(
          torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size).padding_idx(c.pad_id)));
  position_embeddings_ =
      register_module("position_embeddings", torch::nn::Embedding(c.max_positions, c.hidden_size));
  if (c.type_vocab_size > 0) {
    token_type_embeddings_ = register_module(
        "token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  }
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  dropout_ = register_module("dropout", torch::nn::Dropout(c.hidden_dropout));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& attention_mask) {
  torch::Tensor positions;
  if (roberta_positions_) {
    // Hugging Face's create_position_ids_from_input_ids with padding_idx 1: tokens count from 2,
    // padding sits on row 1.
    positions = torch::cumsum(attention_mask, 1) * attention_mask + 1;
  } else {
    positions = torch::arange(input_ids.size(1), input_ids.options()).unsqueeze(0);
  }
  torch::Tensor x = word_embeddings_(input_ids) + position_embeddings_(positions);
  if (token_type_embeddings_) x = x + token_type_embeddings_->weight[0];  // every token is type 0
  return dropout_(layer_norm_(x));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const EncoderConfig& c)
    : heads_(c.num_heads),
      head_dim_(c.hidden_size / c.num_heads),
      scale_(1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads))) {
  query_ = register_module("query", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key_ = register_module("key", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value_ = register_module("value", torch::nn::Linear(c.hidden_size, c.hidden_size));
  dropout_ = register_module("dropout", torch::nn::Dropout(c.attention_dropout));
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  auto split = [&](const torch::Tensor& y) {
    return y.view({b, t, heads_, head_dim_}).transpose(1, 2);  // [B, heads, T, d]
  };
  torch::Tensor q = split(query_(x)), k = split(key_(x)), v = split(value_(x));
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)).mul_(scale_).add_(mask);
  torch::Tensor probs = dropout_(torch::softmax(scores, -1));
  return torch::matmul(probs, v).transpose(1, 2).reshape({b, t, h});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in, int64_t out, const EncoderConfig& c) {
  dense_ = register_module("dense", torch::nn::Linear(in, out));
  layer_norm_ = register_module(
      "LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out}).eps(c.layer_norm_eps)));
  dropout_ = register_module("dropout", torch::nn::Dropout(c.hidden_dropout));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& x,
                                              const torch::Tensor& residual) {
  return layer_norm_(dropout_(dense_(x)) + residual);
}

BertAttentionImpl::BertAttentionImpl(const EncoderConfig& c) {
  self_ = register_module("self", BertSelfAttention(c));
  output_ = register_module("output", BertResidualOutput(c.hidden_size, c.hidden_size, c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return output_(self_(x, mask), x);
}

BertLinearImpl::BertLinearImpl(int64_t in, int64_t out) {
  dense_ = register_module("dense", torch::nn::Linear(in, out));
}

torch::Tensor BertLinearImpl::forward(const torch::Tensor& x) { return torch::gelu(dense_(x)); }

BertLayerImpl::BertLayerImpl(const EncoderConfig& c) {
  attention_ = register_module("attention", BertAttention(c));
  intermediate_ = register_module("intermediate", BertLinear(c.hidden_size, c.intermediate_size));
  output_ = register_module("output", BertResidualOutput(c.intermediate_size, c.hidden_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor h = attention_(x, mask);
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
  dropout_ = register_module("dropout", torch::nn::Dropout(c.dropout));
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
    : checkpoint_(encoder.gradient_checkpointing) {
  embeddings_ = register_module("embeddings", BertEmbeddings(encoder));
  auto enc = register_module("encoder", std::make_shared<ContainerImpl>());
  layers_ = enc->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < encoder.num_layers; ++i) layers_->push_back(BertLayer(encoder));
  auto pooler = register_module("pooler", std::make_shared<ContainerImpl>());
  pooler_ =
      pooler->register_module("dense", torch::nn::Linear(encoder.hidden_size, encoder.hidden_size));
  classifier_ = register_module("classifier", ClassifierHead(encoder.hidden_size, head));

  // BERT's initialisation of the encoder and pooler: N(0, 0.02) weights, zero biases, LayerNorm
  // 1/0, zero padding row. The classifier head keeps LibTorch's default (Kaiming-uniform) init,
  // as the layers a user stacks on a pretrained encoder get in PyTorch; with N(0, 0.02) a deep
  // head would start with vanishing signals.
  torch::NoGradGuard no_grad;
  std::vector<std::shared_ptr<torch::nn::Module>> encoder_modules = embeddings_->modules();
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

torch::Tensor TransformerClassifierImpl::forward(const torch::Tensor& input_ids,
                                                 const torch::Tensor& attention_mask) {
  torch::Tensor x = embeddings_(input_ids, attention_mask);
  // Additive mask, [B, 1, 1, T]: 0 for tokens, -10000 for padding (BERT's constant, safe in
  // reduced precision too).
  torch::Tensor mask =
      (1.0 - attention_mask.to(x.scalar_type())).mul_(-10000.0).unsqueeze(1).unsqueeze(2);
  const bool checkpoint = checkpoint_ && is_training() && torch::GradMode::is_enabled();
  for (const auto& layer : *layers_) {
    BertLayerImpl* impl = layer->as<BertLayer>();
    x = checkpoint ? CheckpointedLayer::apply(x, mask, impl) : impl->forward(x, mask);
  }
  torch::Tensor pooled = torch::tanh(pooler_(x.select(1, 0)));  // [CLS]
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
  dropout_ = register_module("dropout", torch::nn::Dropout(hp.dropout));
}

torch::Tensor MlpClassifierImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = x;
  for (const auto& layer : *hidden_) {
    h = dropout_(Activate(layer->as<torch::nn::Linear>()->forward(h), activation_));
  }
  return out_(h);
}

}  // namespace tune::internal

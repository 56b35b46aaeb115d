// LibTorch modules of the trainer (private to tune_torch).
//
// TransformerClassifier is an encoder classifier: BERT/RoBERTa (absolute positions) or
// DeBERTa-v2/v3 (relative positions, disentangled attention). Submodule names follow Hugging Face's
// BertModel / DebertaV2Model without the "bert."/"roberta."/"deberta." prefix
// (embeddings.word_embeddings, encoder.layer.N.attention.self.query, ..., encoder.rel_embeddings,
// pooler.dense), so checkpoints map onto it by name (torch_pretrained.cpp).
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

#include "torch/torch_dropout.h"
#include "train/hyperparams.h"
#include "tune/model_catalog.h"

namespace tune::internal {

struct EncoderConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;
  bool roberta_positions = false;  // positions start at padding_idx + 1 = 2
  int64_t pad_id = 0;              // the word embedding's padding row
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double layer_norm_eps = 1e-12;        // BERT 1e-12, RoBERTa 1e-5, DeBERTa-v3 1e-7
  bool gradient_checkpointing = false;  // recompute each layer in backward (training only)
  // Self-attention through at::scaled_dot_product_attention (hyperparams.h's Attention::kSdpa;
  // REQUIRES: SdpaAvailable()). DeBERTa's layers pass their relative (c2p + p2c) terms and the
  // padding as SDPA's additive bias (with DebertaSdpaAvailable(); eager otherwise).
  bool sdpa = false;
  // BERT-family Q/K/V projections as one GEMM (hyperparams.h's fused_qkv).
  bool fused_qkv = false;
  // Every layer's bias + dropout + residual + LayerNorm and bias + GELU as one fused function
  // each (torch_fused_elementwise.h; hyperparams.h's fused_elementwise). REQUIRES:
  // FusedElementwiseRunsOn(the model's device).
  bool fused_elementwise = false;
  // DeBERTa-v2/v3 (Hugging Face DebertaV2 with relative_attention, pos_att_type "p2c|c2p",
  // share_att_key, norm_rel_ebd "layer_norm", position_biased_input false): no absolute position
  // embeddings; every layer adds content-to-position and position-to-content terms computed from
  // shared relative embeddings (2 * position_buckets rows).
  bool deberta = false;
  int64_t position_buckets = 256;        // log buckets of relative positions (HF position_buckets)
  int64_t max_relative_positions = 512;  // HF max_relative_positions (-1 there: max_positions)
};

struct HeadConfig {
  int64_t num_labels = 2;
  std::vector<int64_t> hidden;  // widths of the hidden layers (0-3)
  double dropout = 0.1;
  Activation activation = Activation::kGelu;
};

EncoderConfig MakeEncoderConfig(const ModelSpec& model, const TrainHyperparams& hp, int32_t pad_id);
// Whether this LibTorch has at::scaled_dot_product_attention (2.0 and newer).
bool SdpaAvailable();
// Whether DeBERTa's layers take SDPA too (its `scale` argument: 2.1 and newer); before, they
// stay eager.
bool DebertaSdpaAvailable();
HeadConfig MakeHeadConfig(const ModelSpec& model, const TrainHyperparams& hp, int64_t num_labels);

// An encoder layer of either family, in the form gradient checkpointing recomputes. `rel` (the
// normalised relative embeddings, [2 * buckets, H]) and `rel_pos` (bucketed relative positions,
// [T, T]) are DeBERTa's; empty for BERT.
class EncoderLayer {
 public:
  virtual ~EncoderLayer() = default;
  virtual torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& mask,
                            const torch::Tensor& rel, const torch::Tensor& rel_pos) = 0;
};

// Hugging Face's build_relative_position + make_log_bucket_position for a sequence of `length`:
// [length, length] int64, entry (i, j) the bucket of query i - key j. Within +-buckets/2 a distance
// is its own bucket; beyond, buckets grow logarithmically up to max_position. Computed on `device`
// (as Hugging Face computes it on the query's device).
torch::Tensor DebertaRelativePositions(int64_t length, int64_t buckets, int64_t max_position,
                                       torch::Device device = torch::kCPU);

// The parts BERT's and DeBERTa's embeddings share, under Hugging Face's names.
class EmbeddingsBase : public torch::nn::Module {
 protected:
  // Registers word_embeddings, position_embeddings (with absolute positions),
  // token_type_embeddings (when the model has token types), LayerNorm and dropout, in this order.
  void RegisterParts(const EncoderConfig& c, bool absolute_positions);

  torch::nn::Embedding word_embeddings_{nullptr}, position_embeddings_{nullptr},
      token_type_embeddings_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  FastDropout dropout_{nullptr};
};

class BertEmbeddingsImpl : public EmbeddingsBase {
 public:
  explicit BertEmbeddingsImpl(const EncoderConfig& c);
  // attention_mask: [B, T] int64, or undefined: no padding. token_type_ids: [B, T] int64
  // (sentence pairs), or undefined: every token is type 0.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& token_type_ids = {});

 private:
  bool roberta_positions_;
};
TORCH_MODULE(BertEmbeddings);

class BertSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit BertSelfAttentionImpl(const EncoderConfig& c);
  // x: [B, T, H]; mask: [B, 1, 1, T], additive (eager) or bool, true = attend (sdpa), or
  // empty: no padding. Returns the context, [B, T, H].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);

 private:
  // q, k, v: [B, heads, T, d] each, from three projections or one fused.
  std::array<torch::Tensor, 3> Project(const torch::Tensor& x);
  int64_t heads_, head_dim_;
  double scale_;
  bool sdpa_, fused_qkv_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  FastDropout dropout_{nullptr};
};
TORCH_MODULE(BertSelfAttention);

// dense -> dropout -> LayerNorm(. + residual): attention.output and output of a layer. Fused:
// the GEMM without its bias, then BiasDropoutAddLayerNorm.
class BertResidualOutputImpl : public torch::nn::Module {
 public:
  BertResidualOutputImpl(int64_t in, int64_t out, const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual);

 private:
  bool fused_;
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  FastDropout dropout_{nullptr};
};
TORCH_MODULE(BertResidualOutput);

class BertAttentionImpl : public torch::nn::Module {
 public:
  explicit BertAttentionImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);

 private:
  BertSelfAttention self_{nullptr};
  BertResidualOutput output_{nullptr};
};
TORCH_MODULE(BertAttention);

// "intermediate": dense then GELU (fused: the GEMM without its bias, then BiasGelu).
class BertLinearImpl : public torch::nn::Module {
 public:
  BertLinearImpl(int64_t in, int64_t out, bool fused);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  bool fused_;
  torch::nn::Linear dense_{nullptr};
};
TORCH_MODULE(BertLinear);

class BertLayerImpl : public torch::nn::Module, public EncoderLayer {
 public:
  explicit BertLayerImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor&,
                    const torch::Tensor&) override {
    return forward(x, mask);
  }

 private:
  BertAttention attention_{nullptr};
  BertLinear intermediate_{nullptr};
  BertResidualOutput output_{nullptr};
};
TORCH_MODULE(BertLayer);

// DeBERTa-v2's embeddings: word (+ token type when type_vocab_size > 0), LayerNorm, padding rows
// zeroed, dropout. No absolute positions (position_biased_input false).
// No absolute position embeddings (DeBERTa-v3's position_biased_input is false).
class DebertaEmbeddingsImpl : public EmbeddingsBase {
 public:
  explicit DebertaEmbeddingsImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& token_type_ids = {});
};
TORCH_MODULE(DebertaEmbeddings);

// DeBERTa's DisentangledSelfAttention with share_att_key and pos_att_type "p2c|c2p": scores =
// (q.k + c2p + p2c) / sqrt(3 d), where c2p = q_i . key_proj(rel)[bucket(i - j)] and
// p2c = k_j . query_proj(rel)[bucket(j - i)] (HF's gather/transpose form).
class DisentangledSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit DisentangledSelfAttentionImpl(const EncoderConfig& c);
  // x: [B, T, H]; mask: additive [B, 1, 1, T]; rel: [2S, H]; rel_pos: [T, T] int64.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& rel,
                        const torch::Tensor& rel_pos);

 private:
  int64_t heads_, head_dim_, span_;
  double scale_;
  bool sdpa_;
  torch::nn::Linear query_proj_{nullptr}, key_proj_{nullptr}, value_proj_{nullptr};
  FastDropout pos_dropout_{nullptr}, dropout_{nullptr};
};
TORCH_MODULE(DisentangledSelfAttention);

class DebertaAttentionImpl : public torch::nn::Module {
 public:
  explicit DebertaAttentionImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& rel,
                        const torch::Tensor& rel_pos);

 private:
  DisentangledSelfAttention self_{nullptr};
  BertResidualOutput output_{nullptr};
};
TORCH_MODULE(DebertaAttention);

class DebertaLayerImpl : public torch::nn::Module, public EncoderLayer {
 public:
  explicit DebertaLayerImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& rel,
                        const torch::Tensor& rel_pos);
  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& rel,
                    const torch::Tensor& rel_pos) override {
    return forward(x, mask, rel, rel_pos);
  }

 private:
  DebertaAttention attention_{nullptr};
  BertLinear intermediate_{nullptr};
  BertResidualOutput output_{nullptr};
};
TORCH_MODULE(DebertaLayer);

class ClassifierHeadImpl : public torch::nn::Module {
 public:
  ClassifierHeadImpl(int64_t in, const HeadConfig& c);
  torch::Tensor forward(const torch::Tensor& pooled);

 private:
  Activation activation_;
  torch::nn::ModuleList hidden_;
  torch::nn::Linear out_{nullptr};
  FastDropout dropout_{nullptr};
};
TORCH_MODULE(ClassifierHead);

class TransformerClassifierImpl : public torch::nn::Module {
 public:
  TransformerClassifierImpl(const EncoderConfig& encoder, const HeadConfig& head);
  // input_ids, attention_mask and (sentence pairs, models with token types) token_type_ids:
  // [B, T] int64; an undefined attention_mask: no padding (no mask reaches the attention, which
  // lets SDPA pick FlashAttention). Returns logits, [B, num_labels].
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& token_type_ids = {});
  // The last layer's hidden states, [B, T, H].
  torch::Tensor Encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& token_type_ids = {});
  // Whether the model adds token type embeddings (BERT: type_vocab_size 2).
  bool has_token_types() const { return config_.type_vocab_size > 1; }

 private:
  EncoderConfig config_;
  BertEmbeddings bert_embeddings_{nullptr};
  DebertaEmbeddings deberta_embeddings_{nullptr};
  torch::nn::ModuleList layers_;
  std::vector<EncoderLayer*> layer_impls_;
  torch::nn::Embedding rel_embeddings_{nullptr};  // DeBERTa: encoder.rel_embeddings
  torch::nn::LayerNorm rel_norm_{nullptr};        // DeBERTa: encoder.LayerNorm
  // DeBERTa: the relative positions of the longest batch so far, on its device; a shorter batch
  // reads its top-left corner (entry (i, j) depends on i - j only).
  torch::Tensor rel_pos_;
  torch::nn::Linear pooler_{nullptr};
  ClassifierHead classifier_{nullptr};
};
TORCH_MODULE(TransformerClassifier);

// The tabular classifier: mlp_layers x (dense, activation, dropout), then the output layer.
// LibTorch's default (Kaiming-uniform) initialisation.
class MlpClassifierImpl : public torch::nn::Module {
 public:
  MlpClassifierImpl(int64_t num_features, const TrainHyperparams& hp, int64_t num_labels);
  // x: [B, num_features] float. Returns logits, [B, num_labels].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::ModuleList hidden_;
  torch::nn::Linear out_{nullptr};
  FastDropout dropout_{nullptr};
};
TORCH_MODULE(MlpClassifier);

}  // namespace tune::internal

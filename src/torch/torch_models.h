// LibTorch modules of the trainer (private to tune_torch).
//
// TransformerClassifier is a BERT-style encoder classifier. Submodule names follow Hugging Face's
// BertModel without the "bert." prefix (embeddings.word_embeddings, encoder.layer.N.attention.
// self.query, ..., pooler.dense), so checkpoints can be mapped onto it later.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tune/model_catalog.h"
#include "tune/train/hyperparams.h"

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
  double layer_norm_eps = 1e-12;        // BERT 1e-12, RoBERTa 1e-5
  bool gradient_checkpointing = false;  // recompute each layer in backward (training only)
};

struct HeadConfig {
  int64_t num_labels = 2;
  std::vector<int64_t> hidden;  // widths of the hidden layers (0-3)
  double dropout = 0.1;
  Activation activation = Activation::kGelu;
};

EncoderConfig MakeEncoderConfig(const ModelSpec& model, const TrainHyperparams& hp, int32_t pad_id);
HeadConfig MakeHeadConfig(const ModelSpec& model, const TrainHyperparams& hp, int64_t num_labels);

class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit BertEmbeddingsImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);

 private:
  bool roberta_positions_;
  torch::nn::Embedding word_embeddings_{nullptr}, position_embeddings_{nullptr},
      token_type_embeddings_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(BertEmbeddings);

class BertSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit BertSelfAttentionImpl(const EncoderConfig& c);
  // x: [B, T, H]; mask: additive, [B, 1, 1, T]. Returns the context, [B, T, H].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);

 private:
  int64_t heads_, head_dim_;
  double scale_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(BertSelfAttention);

// dense -> dropout -> LayerNorm(. + residual): attention.output and output of a layer.
class BertResidualOutputImpl : public torch::nn::Module {
 public:
  BertResidualOutputImpl(int64_t in, int64_t out, const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual);

 private:
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
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

class BertLinearImpl : public torch::nn::Module {  // "intermediate": dense then GELU
 public:
  BertLinearImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear dense_{nullptr};
};
TORCH_MODULE(BertLinear);

class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const EncoderConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);

 private:
  BertAttention attention_{nullptr};
  BertLinear intermediate_{nullptr};
  BertResidualOutput output_{nullptr};
};
TORCH_MODULE(BertLayer);

class ClassifierHeadImpl : public torch::nn::Module {
 public:
  ClassifierHeadImpl(int64_t in, const HeadConfig& c);
  torch::Tensor forward(const torch::Tensor& pooled);

 private:
  Activation activation_;
  torch::nn::ModuleList hidden_;
  torch::nn::Linear out_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(ClassifierHead);

class TransformerClassifierImpl : public torch::nn::Module {
 public:
  TransformerClassifierImpl(const EncoderConfig& encoder, const HeadConfig& head);
  // input_ids, attention_mask: [B, T] int64. Returns logits, [B, num_labels].
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);

 private:
  bool checkpoint_;
  BertEmbeddings embeddings_{nullptr};
  torch::nn::ModuleList layers_;
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
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(MlpClassifier);

}  // namespace tune::internal

// Small encoder configurations for LibTorch tests (torch/torch_models.h): two layers of width
// 16, no dropout; a BERT and the DeBERTa-v2 of the same size (relative positions, 8 buckets).
#pragma once

#include "torch/torch_models.h"

namespace tune::testing {

inline internal::EncoderConfig TinyBertConfig() {
  internal::EncoderConfig c;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.intermediate_size = 24;
  c.max_positions = 20;
  c.type_vocab_size = 2;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  return c;
}

inline internal::EncoderConfig TinyDebertaConfig() {
  internal::EncoderConfig c = TinyBertConfig();
  c.type_vocab_size = 0;
  c.deberta = true;
  c.position_buckets = 8;
  c.max_relative_positions = 20;
  c.layer_norm_eps = 1e-7;
  return c;
}

}  // namespace tune::testing

// Decoder LM inference on CPU under the counting allocator [tune_torch, private; no LibTorch in
// this header]: builds a GPT-2 or Llama-style decoder with random weights, runs the prefill of a
// prompt and the decode steps of generate() with a static KV cache, and measures the peak
// allocated bytes -- the measurement `tune plan`'s inference estimate is checked against
// (bench/decoder_memory.cpp, docs/benchmarks.md).
//
// The ops and their order follow Hugging Face's eager LlamaDecoderLayer and GPT2Block (RMSNorm,
// rotary positions, SwiGLU MLP and repeat_kv for grouped-query attention; LayerNorm, fused
// c_attn, gelu_new), in fp32, with Python's lifetimes: each temporary goes when its last
// reference does (src/memory/estimator_inference.cpp traces the same sequence).
#pragma once

#include <cstdint>

#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

struct DecoderRunSpec {
  ModelSpec model;  // model_type gpt2, llama or mistral (DecoderShapeOf)
  int64_t batch_size = 1;
  int64_t prompt_tokens = 16;
  int64_t max_new_tokens = 8;  // the prefill samples the first; max_new_tokens - 1 decode steps
  bool sample = true;          // softmax + multinomial; false: argmax
  int64_t threads = 1;         // LibTorch intra-op threads
  uint64_t seed = 1;
};

struct DecoderMeasurement {
  int64_t weights = 0;       // bytes of the parameters and buffers
  int64_t kv_cache = 0;      // bytes of the static cache (prompt + max_new_tokens positions)
  int64_t prefill_peak = 0;  // the prefill's peak above weights + cache
  int64_t decode_peak = 0;   // the largest decode step's peak above weights + cache
  int64_t peak = 0;          // the whole run's peak above the level before the model was built
  int64_t tokens = 0;        // tokens generated
};

// Installs the counting CPU allocator if needed. InvalidArgument for a shape DecoderShapeOf
// rejects; Internal for a LibTorch error.
Result<DecoderMeasurement> MeasureDecoderGeneration(const DecoderRunSpec& spec);

}  // namespace tune

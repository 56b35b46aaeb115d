// The inference estimate (src/memory/estimator_inference.cpp) against the LibTorch decoder's
// measured peak under the counting allocator (src/torch/torch_decoder.cpp): weights and the KV
// cache exactly, prefill and decode within 3%. Small shapes: a few hundred milliseconds.
#include "torch/torch_decoder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "memory/inference.h"

namespace tune {
namespace {

ModelSpec Tiny(const std::string& type, int64_t kv_heads) {
  ModelSpec m;
  m.name = "tiny-" + type;
  m.model_type = type;
  m.num_hidden_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.intermediate_size = type == "gpt2" ? 256 : 172;
  m.vocab_size = 512;
  m.max_position_embeddings = 512;
  if (type == "llama") m.extra["num_key_value_heads"] = kv_heads;
  return m;
}

void ExpectEstimateMatches(const ModelSpec& model, int64_t prompt, int64_t new_tokens) {
  DecoderRunSpec spec;
  spec.model = model;
  spec.prompt_tokens = prompt;
  spec.max_new_tokens = new_tokens;
  auto measured = MeasureDecoderGeneration(spec);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  InferenceModel im;
  im.label = model.name;
  im.model = model;
  im.format = im.kv_cache_dtype = WeightFormat::kFp32;
  im.prompt_tokens = prompt;
  im.max_new_tokens = new_tokens;
  im.static_cache = true;
  auto e = EstimateInference(im, DeviceMemoryModel::Cpu());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->weights.total(), measured->weights) << model.name;
  EXPECT_EQ(e->kv_cache, measured->kv_cache) << model.name;
  auto near = [](int64_t estimate, int64_t measure) {
    return std::abs(static_cast<double>(estimate - measure)) <= 0.03 * static_cast<double>(measure);
  };
  EXPECT_TRUE(near(e->prefill, measured->prefill_peak))
      << model.name << " prefill: estimate " << e->prefill << ", measured "
      << measured->prefill_peak;
  EXPECT_TRUE(near(e->decode, measured->decode_peak))
      << model.name << " decode: estimate " << e->decode << ", measured " << measured->decode_peak;
  EXPECT_TRUE(near(e->allocated_peak, measured->peak)) << model.name;
  EXPECT_EQ(measured->tokens, new_tokens);
}

TEST(TorchDecoder, LlamaWithGroupedQueryAttentionMatchesTheEstimate) {
  ExpectEstimateMatches(Tiny("llama", 2), 64, 4);
}

TEST(TorchDecoder, Gpt2MatchesTheEstimate) { ExpectEstimateMatches(Tiny("gpt2", 4), 64, 4); }

}  // namespace
}  // namespace tune

// Issue 20: `tune plan`'s inference estimate against the peak measured on CPU. Runs a decoder
// (GPT-2 or Llama-style, random weights) through the prefill of a prompt and the decode steps of
// generate() with a static KV cache under the counting allocator (MeasureDecoderGeneration), and
// prints one JSON line with the measured and estimated bytes. bench/run_decoder_memory_bench.sh
// runs the grid and writes docs/benchmarks.md.
//
// Usage: tune_bench_decoder_memory --family llama --layers 4 --hidden 256 --heads 8 --kv-heads 2
//          --intermediate 688 --vocab 8192 --batch 1 --prompt 256 --new-tokens 16 [--greedy 1]
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "memory/inference.h"
#include "torch/torch_decoder.h"

namespace {

struct Args {
  std::string family = "llama";
  int64_t layers = 4, hidden = 256, heads = 8, kv_heads = 2, intermediate = 688, vocab = 8192;
  int64_t positions = 4096, batch = 1, prompt = 256, new_tokens = 16, greedy = 0, threads = 1;
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--family") {
      a.family = argv[i + 1];
      continue;
    }
    int64_t* dst = k == "--layers"         ? &a.layers
                   : k == "--hidden"       ? &a.hidden
                   : k == "--heads"        ? &a.heads
                   : k == "--kv-heads"     ? &a.kv_heads
                   : k == "--intermediate" ? &a.intermediate
                   : k == "--vocab"        ? &a.vocab
                   : k == "--positions"    ? &a.positions
                   : k == "--batch"        ? &a.batch
                   : k == "--prompt"       ? &a.prompt
                   : k == "--new-tokens"   ? &a.new_tokens
                   : k == "--greedy"       ? &a.greedy
                   : k == "--threads"      ? &a.threads
                                           : nullptr;
    if (dst == nullptr) {
      std::cerr << "unknown option " << k << "\n";
      return false;
    }
    *dst = std::atoll(argv[i + 1]);
  }
  return true;
}

tune::ModelSpec Model(const Args& a) {
  tune::ModelSpec m;
  m.name = fmt::format("{}-{}x{}", a.family, a.layers, a.hidden);
  m.model_type = a.family == "gpt2" ? "gpt2" : "llama";
  m.num_hidden_layers = a.layers;
  m.hidden_size = a.hidden;
  m.num_attention_heads = a.heads;
  m.intermediate_size = a.intermediate;
  m.vocab_size = a.vocab;
  m.max_position_embeddings = a.positions;
  if (m.model_type == "llama") m.extra["num_key_value_heads"] = a.kv_heads;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) return 2;
  tune::DecoderRunSpec spec;
  spec.model = Model(a);
  spec.batch_size = a.batch;
  spec.prompt_tokens = a.prompt;
  spec.max_new_tokens = a.new_tokens;
  spec.sample = a.greedy == 0;
  spec.threads = a.threads;
  auto measured = tune::MeasureDecoderGeneration(spec);
  if (!measured.ok()) {
    std::cerr << measured.status().ToString() << "\n";
    return 1;
  }
  tune::InferenceModel im;
  im.label = spec.model.name;
  im.model = spec.model;
  im.format = tune::WeightFormat::kFp32;
  im.kv_cache_dtype = tune::WeightFormat::kFp32;
  im.role = tune::InferenceRole::kGenerate;
  im.prompt_tokens = a.prompt;
  im.max_new_tokens = a.new_tokens;
  im.batch_size = a.batch;
  im.sample = spec.sample;
  im.static_cache = true;
  auto e = tune::EstimateInference(im, tune::DeviceMemoryModel::Cpu());
  if (!e.ok()) {
    std::cerr << e.status().ToString() << "\n";
    return 1;
  }
  const tune::DecoderMeasurement& m = *measured;
  const nlohmann::json out = {{"model", spec.model.name},
                              {"family", a.family},
                              {"layers", a.layers},
                              {"hidden", a.hidden},
                              {"heads", a.heads},
                              {"kv_heads", a.family == "gpt2" ? a.heads : a.kv_heads},
                              {"vocab", a.vocab},
                              {"batch", a.batch},
                              {"prompt", a.prompt},
                              {"new_tokens", a.new_tokens},
                              {"measured",
                               {{"weights", m.weights},
                                {"kv_cache", m.kv_cache},
                                {"prefill", m.prefill_peak},
                                {"decode", m.decode_peak},
                                {"peak", m.peak}}},
                              {"estimated",
                               {{"weights", e->weights.total()},
                                {"kv_cache", e->kv_cache},
                                {"prefill", e->prefill},
                                {"decode", e->decode},
                                {"peak", e->allocated_peak}}}};
  std::cout << out.dump() << "\n";
  return 0;
}

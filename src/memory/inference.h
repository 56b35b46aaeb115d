// Inference memory [tune_train]: what serving a set of models with N parallel requests needs on
// one device -- the weights in their storage format (fp32, fp16/bf16, LLM.int8, NF4/FP4), and
// per request the KV cache, the prefill activations, the decode workspace and the logits --
// and the largest N that fits (`tune plan`, docs/memory.md#inference-tune-plan).
//
// Decoders (GPT-2 and Llama-style) are traced op by op in the order of Hugging Face's eager
// modules (and of the LibTorch decoder that measures them, src/torch/torch_decoder.cpp);
// encoders (classifiers such as DeBERTa NLI) use the training estimator's evaluation path. No
// LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memory/estimator.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

// How weights are stored.
//   fp32, fp16, bf16: 4, 2, 2 bytes per parameter.
//   int8: bitsandbytes LLM.int8(): each Linear's weight as int8 plus one fp32 absmax scale per
//     output row (SCB); biases, norms, embeddings and the LM head stay 16-bit.
//   nf4, fp4: bitsandbytes 4-bit (QLoRA): two weights per byte plus one fp32 absmax per block of
//     64 weights; with double quantisation the absmaxes are 8-bit with one fp32 scale per 256
//     blocks. Embeddings, norms and the LM head stay 16-bit.
enum class WeightFormat { kFp32, kFp16, kBf16, kInt8, kNf4, kFp4 };
Result<WeightFormat> ParseWeightFormat(std::string_view name);
const char* WeightFormatName(WeightFormat f);
const std::vector<std::string>& WeightFormatNames();
bool IsQuantized(WeightFormat f);

inline constexpr int64_t kQuantBlock = 64;         // 4-bit absmax block (bitsandbytes default)
inline constexpr int64_t kDoubleQuantBlock = 256;  // absmaxes per second-level block

// Weight bytes of a model, split by what they are.
struct WeightBytes {
  int64_t num_parameters = 0;
  int64_t linear = 0;      // the transformer layers' Linear weights in the storage format
  int64_t scales = 0;      // quantisation constants (int8 row scales, 4-bit absmaxes)
  int64_t embeddings = 0;  // token (and position) embeddings and an untied LM head
  int64_t other = 0;       // norms and biases
  int64_t total() const { return linear + scales + embeddings + other; }
};
// The bytes of one Linear weight [out, in] in `format` (plus its scales).
int64_t QuantizedLinearBytes(int64_t in, int64_t out, WeightFormat format, bool double_quant);
WeightBytes DecoderWeightBytes(const DecoderShape& s, WeightFormat format, bool double_quant);
// Encoders (BERT, RoBERTa, DeBERTa-v2) with a classification head of `num_labels`.
WeightBytes EncoderWeightBytes(const ModelSpec& m, int64_t num_labels, WeightFormat format,
                               bool double_quant);

// 2 x layers x kv_heads x head_dim x bytes: the K and V of one token in every layer.
int64_t KvCacheBytesPerToken(const DecoderShape& s, int64_t cache_bytes);

// What one request does with a model.
//   generate: prefill the prompt, then decode max_new_tokens one at a time (logits of the last
//     position only, as generate() computes them), with a KV cache of prompt + new tokens.
//   score: one forward over prompt_tokens returning log-probabilities of every position (logits
//     [T, vocab] upcast to fp32, then log_softmax), as a scorer or reward model does.
//   classify: an encoder classifier over batch_size sequences of max_length (NLI, ...).
enum class InferenceRole { kGenerate, kScore, kClassify };
Result<InferenceRole> ParseInferenceRole(std::string_view name);
const char* InferenceRoleName(InferenceRole r);

// eager: the attention materialises the [heads, T, S] scores (and an fp32 softmax copy);
// sdpa: a fused kernel (FlashAttention, PyTorch SDPA) that does not.
enum class AttentionKernel { kEager, kSdpa };

struct InferenceModel {
  std::string label;  // the name tables show
  ModelSpec model;
  WeightFormat format = WeightFormat::kFp16;
  bool double_quant = false;  // 4-bit formats only
  InferenceRole role = InferenceRole::kGenerate;
  int64_t prompt_tokens = 0;                          // generate, score
  int64_t max_new_tokens = 0;                         // generate
  int64_t max_length = 0;                             // classify
  int64_t batch_size = 1;                             // sequences per request
  int64_t num_labels = 3;                             // classify
  WeightFormat kv_cache_dtype = WeightFormat::kFp16;  // fp32, fp16 or bf16 (fp32 for fp32 models)
  AttentionKernel attention = AttentionKernel::kEager;
  bool sample = true;  // sampling (softmax and multinomial) rather than greedy argmax
  // The cache is allocated at its full length before the prefill (vLLM, HF StaticCache, tune's
  // measurement) rather than grown by torch.cat per token (HF DynamicCache).
  bool static_cache = false;
  int64_t decode_steps = -1;  // decode steps traced (-1: max_new_tokens); for measurements
};

// One model's memory. Per-request terms are for one request (batch_size sequences).
struct InferenceEstimate {
  WeightBytes weights;
  int64_t kv_cache = 0;        // K and V of prompt + generated tokens, all layers
  int64_t prefill = 0;         // the prefill's largest live activations above the KV cache
  int64_t decode = 0;          // one decode step's largest live activations (the last step)
  int64_t logits = 0;          // logits and sampling (or log-softmax) buffers at their peak
  int64_t dequant = 0;         // quantised weights dequantised for one prefill matmul
  int64_t per_request = 0;     // kv_cache + max(prefill, decode) (each includes its logits)
  int64_t allocated_peak = 0;  // weights + per_request: one request on its own
};

// InvalidArgument for an impossible request: missing lengths, a decoder role on an encoder,
// lengths beyond the model's positions.
Result<InferenceEstimate> EstimateInference(const InferenceModel& m,
                                            const DeviceMemoryModel& device);

// A plan: models sharing one device, `requests` parallel requests each using every model.
struct InferencePlan {
  std::vector<InferenceModel> models;
  int64_t requests = 1;
  std::optional<int64_t> device_memory;  // bytes
  double margin = 0.05;
};

// Parses a plan document (docs/cli.md#tune-plan); models resolve through `catalog`, a path to a
// config.json (or its directory), or the Hugging Face cache. Errors name `file`, the key and the
// value; an unknown model says "did you mean".
Result<InferencePlan> ParseInferencePlan(const Json& doc, const std::string& file,
                                         const ModelCatalog& catalog);
// Resolves one model reference the way plan files do.
Result<ModelSpec> ResolveModel(const std::string& ref, const ModelCatalog& catalog);

// A Hugging Face config.json as a ModelSpec (gpt2, llama, mistral, bert, roberta, xlm-roberta,
// deberta-v2). `source` names the file in errors.
Result<ModelSpec> ModelSpecFromHfConfig(const Json& config, const std::string& name,
                                        const std::string& source);
// The config.json of a model in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub): models--ORG--NAME/snapshots/<refs/main>/config.json. NotFound
// naming the places looked in.
Result<std::string> FindHfCachedConfig(const std::string& repo_id);

struct PlanModelResult {
  InferenceEstimate estimate;
  int64_t total = 0;  // weights + requests x per_request
};
struct PlanResult {
  std::vector<PlanModelResult> models;
  int64_t requests = 0;
  int64_t weights = 0;        // all models
  int64_t per_request = 0;    // all models, one request
  int64_t context = 0;        // CUDA context (once per process)
  int64_t workspace = 0;      // cuBLAS workspace
  int64_t fragmentation = 0;  // share of the per-request memory, which comes and goes
  int64_t total = 0;
  int64_t usable = -1;  // device_memory x (1 - margin); -1 without a device size
  bool fits = true;
  int64_t max_requests = -1;  // the largest N that fits (0: not even one); -1 without a size
};
Result<PlanResult> EvaluatePlan(const InferencePlan& plan, const DeviceMemoryModel& device);

// One change that lowers the plan's memory (--suggest).
struct PlanSuggestion {
  std::string change;  // "quantise 'scorer' to int8", "9 parallel requests", ...
  int64_t saved = 0;   // bytes
  int64_t total = 0;   // the plan's total after the change
  bool fits = false;
  int64_t max_requests = 0;  // after the change
};
// Quantising each model (int8, nf4 with double quantisation), fused attention, the largest
// request count that fits, the longest generation that fits: those that make the plan fit first,
// then by memory saved.
Result<std::vector<PlanSuggestion>> SuggestPlanChanges(const InferencePlan& plan,
                                                       const DeviceMemoryModel& device);

}  // namespace tune

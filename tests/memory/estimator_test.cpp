// The memory estimator's terms against hand-computed values for a tiny encoder
// (B=2, T=4, H=8, 2 heads, I=16, 1 layer, V=100, 16 positions, 2 token types, 3 labels):
//   B*T*H = 64, B*T*I = 128, B*heads*T*T = 64, B*T = 8 elements.
#include "memory/estimator.h"

#include <gtest/gtest.h>

#include "memory/memory_model.h"

namespace tune {
namespace {

ModelSpec Tiny() {
  ModelSpec m;
  m.name = "tiny";
  m.model_type = "bert";
  m.num_hidden_layers = 1;
  m.hidden_size = 8;
  m.num_attention_heads = 2;
  m.intermediate_size = 16;
  m.vocab_size = 100;
  m.max_position_embeddings = 16;
  m.type_vocab_size = 2;
  return m;
}

MemoryRequest TinyRequest() {
  MemoryRequest r;
  r.model = Tiny();
  r.num_labels = 3;
  r.batch_size = 2;
  r.max_length = 4;
  return r;
}

MemoryEstimate Estimate(const MemoryRequest& r,
                        const DeviceMemoryModel& d = DeviceMemoryModel::Cpu()) {
  auto e = EstimateMemory(r, d);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? *e : MemoryEstimate{};
}

TEST(MemoryEstimator, ParametersAreTheCatalogEncoderPlusTheClassifier) {
  MemoryRequest r = TinyRequest();
  MemoryEstimate e = Estimate(r);
  // Embeddings 100*8 + 16*8 + 2*8 + LayerNorm 16; layer 4*(64+8) + 16 + (128+16) + (128+8) + 16;
  // pooler 64+8; classifier 8*3+3.
  const int64_t expected = (800 + 128 + 16 + 16) + (288 + 16 + 144 + 136 + 16) + 72 + 27;
  EXPECT_EQ(e.num_parameters, expected);
  EXPECT_EQ(e.num_parameters, EncoderParameterCount(r.model) + 27);
  r.head_hidden = {5};
  EXPECT_EQ(Estimate(r).num_parameters, expected - 27 + (8 * 5 + 5) + (5 * 3 + 3));
}

TEST(MemoryEstimator, PersistentStateFollowsPrecisionAndOptimizer) {
  MemoryRequest r = TinyRequest();
  const int64_t p = Estimate(r).num_parameters;
  MemoryEstimate e = Estimate(r);
  EXPECT_EQ(e.weights, 4 * p);
  EXPECT_EQ(e.gradients, 4 * p);
  EXPECT_EQ(e.optimizer_state, 8 * p);  // AdamW: m and v
  // The trainer's fused CPU AdamW steps in place; torch::optim::AdamW (CUDA) makes
  // denom = (exp_avg_sq.sqrt() / c).add_(eps) for the word embeddings: 2 x 100*8 floats.
  EXPECT_EQ(e.optimizer_transient, 0);
  EXPECT_EQ(Estimate(r, DeviceMemoryModel::Cuda()).optimizer_transient, 2 * 800 * 4);

  r.precision = Precision::kPureBf16;
  e = Estimate(r);
  EXPECT_EQ(e.weights, 2 * p);
  EXPECT_EQ(e.optimizer_state, 4 * p);

  r = TinyRequest();
  r.optimizer = OptimizerKind::kSgd;
  e = Estimate(r);
  EXPECT_EQ(e.optimizer_state, 4 * p);        // momentum buffers
  EXPECT_EQ(e.optimizer_transient, 800 * 4);  // grad.add(p, weight_decay) for the largest
  r.momentum = 0;
  r.weight_decay = 0;
  e = Estimate(r);
  EXPECT_EQ(e.optimizer_state, 0);
  EXPECT_EQ(e.optimizer_transient, 0);

  r = TinyRequest();
  r.train = false;
  e = Estimate(r);
  EXPECT_EQ(e.gradients, 0);
  EXPECT_EQ(e.optimizer_state, 0);
  EXPECT_EQ(e.allocated_peak, e.eval_peak);
}

// CUDA graphs keep the gradients from step to step (zeroed in place, not freed), so they are
// live through the forward pass, and the graphs' pool holds the step's working set once more;
// nothing changes on the CPU, where the trainer captures nothing.
TEST(MemoryEstimator, CudaGraphsKeepGradientsAndAddTheirPool) {
  MemoryRequest r = TinyRequest();
  r.batch_size = 16;
  r.max_length = 16;
  const DeviceMemoryModel cuda = DeviceMemoryModel::Cuda();
  const MemoryEstimate eager = Estimate(r, cuda);
  r.cuda_graphs = true;
  const MemoryEstimate graphs = Estimate(r, cuda);
  EXPECT_EQ(eager.graph_pool, 0);
  // The forward pass holds the gradients too (each rounded up to the allocator's 512 B blocks).
  EXPECT_GE(graphs.forward_peak, eager.forward_peak + eager.gradients);
  EXPECT_LT(graphs.forward_peak, eager.forward_peak + eager.gradients + 64 * 1024);
  EXPECT_GE(graphs.backward_peak, eager.backward_peak);
  EXPECT_GT(graphs.graph_pool, graphs.activations);
  EXPECT_LT(graphs.graph_pool, std::max(graphs.forward_peak, graphs.backward_peak));
  EXPECT_GT(graphs.device_peak, eager.device_peak + graphs.graph_pool / 2);
  const auto terms = DeviceTerms(graphs);
  EXPECT_EQ(std::string(terms.back().key), "graph_pool");
  EXPECT_EQ(DeviceTerms(eager).size() + 1, terms.size());
  const MemoryEstimate cpu = Estimate(r);
  r.cuda_graphs = false;
  EXPECT_EQ(cpu.device_peak, Estimate(r).device_peak);
  EXPECT_EQ(cpu.graph_pool, 0);
}

TEST(MemoryEstimator, SavedActivationsCountEachSavedTensor) {
  MemoryRequest r = TinyRequest();
  // Layer (elements): q, k, v, context 4*64; softmax out, dropout noise, dropped probs 3*64;
  // attention-output noise 64, LayerNorm input 64, stats 2*8, output 64; GELU in/out 2*128;
  // output noise 64, LayerNorm input 64, stats 16, output 64 = 1120.
  // Embeddings: LayerNorm input 64, stats 16, noise 64, output 64 = 208.
  // Head: tanh output 16, noise 16, dropped 16 = 48.
  EXPECT_EQ(Estimate(r).activations, (1120 + 208 + 48) * 4);

  r.dropout = r.attention_dropout = r.classifier_dropout = 0;
  // No noise tensors and the softmax output is the matmul's input: 1120 - 2*64 - 2*64 = 864;
  // embeddings 144; head 32.
  EXPECT_EQ(Estimate(r).activations, (864 + 144 + 32) * 4);

  r = TinyRequest();
  r.gradient_checkpointing = true;
  // A checkpointed layer keeps only its input (64).
  EXPECT_EQ(Estimate(r).activations, (64 + 208 + 48) * 4);
}

// A layer's backward holds two [B, T, H] temporaries, or the output projection's [B, T, I]
// gradient less the output block's freed LayerNorm input and noise (1.5 [B, T, H] in fp32),
// whichever is larger: with I = 8H (BTI = 512 elements) the latter, 512*4 - 96*4 bytes in fp32
// and 512*2 - 96*4 under bf16 autocast; with Tiny()'s I = 2H the former (2*64*4).
TEST(MemoryEstimator, BackwardHoldsTheFeedForwardGradientWhenItIsWider) {
  MemoryRequest r = TinyRequest();
  EXPECT_EQ(Estimate(r).backward_transient, 2 * 64 * 4);
  r.model.intermediate_size = 64;
  EXPECT_EQ(Estimate(r).backward_transient, 512 * 4 - 96 * 4);
  r.precision = Precision::kBf16;
  EXPECT_EQ(Estimate(r).backward_transient, 512 * 2 - 96 * 4);
}

// SDPA (attention "sdpa") saves per layer what the kernel LibTorch picks saves. Tiny elements:
// B*T*H = 64, B*heads*T*T = 64, B*T = 8, B*heads*T = 16.
TEST(MemoryEstimator, SdpaSavesWhatItsKernelSaves) {
  MemoryRequest r = TinyRequest();
  const int64_t eager = Estimate(r).activations;
  r.sdpa = true;
  // On the CPU with attention dropout: the math path, in fp32 -- q and k^T scaled and copied,
  // softmax, noise and dropped probabilities, v copied, the context: what eager attention saves.
  EXPECT_EQ(Estimate(r).activations, eager);
  // Without attention dropout the CPU's flash kernel: q, k, v, the mask, its output and
  // log-sum-exp, the output being the context (3*64 + 8 + 64 + 16 = 280), where eager saves the
  // q and k copies, softmax output, v copy and context (4*64 + 64 = 320).
  r.attention_dropout = 0;
  MemoryRequest e = r;
  e.sdpa = false;
  EXPECT_EQ(Estimate(r).activations - Estimate(e).activations, (280 - 320) * 4);
  // Under bf16 autocast the math path still computes in fp32: its saved scores, noise and
  // dropped probabilities are fp32 (eager's are bf16).
  r = TinyRequest();
  r.precision = Precision::kBf16;
  e = r;
  r.sdpa = true;
  EXPECT_GT(Estimate(r).activations, Estimate(e).activations);
}

// fused_qkv: one GEMM for q, k and v casts the layer input once under autocast (saved once, 64
// bf16 elements) where three Linears save three casts; in fp32 nothing is cast.
TEST(MemoryEstimator, FusedQkvSavesOneCastOfTheInput) {
  for (bool sdpa : {false, true}) {
    MemoryRequest r = TinyRequest();
    r.sdpa = sdpa;
    MemoryRequest fused = r;
    fused.fused_qkv = true;
    EXPECT_EQ(Estimate(fused).activations, Estimate(r).activations);
    r.precision = fused.precision = Precision::kBf16;
    EXPECT_EQ(Estimate(r).activations - Estimate(fused).activations, 2 * 64 * 2);
  }
}

// With a fused kernel nothing of [B, heads, T, T] is kept: the saved activations grow linearly
// in T, where eager attention's grow with T^2.
TEST(MemoryEstimator, SdpaFusedKernelsSaveNoScores) {
  MemoryRequest r;
  r.model = Tiny();
  r.model.max_position_embeddings = 1024;
  r.precision = Precision::kBf16;
  r.batch_size = 4;
  for (bool sdpa : {false, true}) {
    r.sdpa = sdpa;
    r.max_length = 256;
    const double short_ = static_cast<double>(Estimate(r, DeviceMemoryModel::Cuda()).activations);
    r.max_length = 512;
    const double long_ = static_cast<double>(Estimate(r, DeviceMemoryModel::Cuda()).activations);
    if (sdpa) {
      EXPECT_NEAR(long_ / short_, 2.0, 0.02);
    } else {
      EXPECT_GT(long_ / short_, 3.0);
    }
  }
}

// On CUDA a padded batch is widened to a multiple of 16 tokens for the memory-efficient kernel's
// mask (SdpaMaskWidth), so max_length 120 is estimated as 128 -- within the position table.
TEST(MemoryEstimator, SdpaOnCudaEstimatesTheWidenedBatch) {
  MemoryRequest r;
  r.model = Tiny();
  r.model.max_position_embeddings = 128;
  r.sdpa = true;
  r.precision = Precision::kBf16;
  r.max_length = 120;
  const MemoryEstimate widened = Estimate(r, DeviceMemoryModel::Cuda());
  r.max_length = 128;
  EXPECT_EQ(widened.allocated_peak, Estimate(r, DeviceMemoryModel::Cuda()).allocated_peak);
  r.max_length = 120;  // the CPU's kernels take any width
  MemoryRequest full = r;
  full.max_length = 128;
  EXPECT_LT(Estimate(r).allocated_peak, Estimate(full).allocated_peak);
  r.model.max_position_embeddings = 120;  // no room to widen
  EXPECT_LT(Estimate(r, DeviceMemoryModel::Cuda()).allocated_peak, widened.allocated_peak);
}

// Tiny() as a DeBERTa-v3 (no absolute positions or token types; 4 position buckets, so the
// relative table has R = 8 rows: RH = 64, B*R*H = 128, B*heads*T*R = 128 elements).
ModelSpec TinyDeberta() {
  ModelSpec m = Tiny();
  m.name = "tiny-deberta";
  m.model_type = "deberta-v2";
  m.type_vocab_size = 0;
  m.position_buckets = 4;
  return m;
}

TEST(MemoryEstimator, DebertaScoresEveryQueryAgainstAllRelativeRows) {
  MemoryRequest r = TinyRequest();
  r.model = TinyDeberta();
  MemoryEstimate e = Estimate(r);
  // Word embeddings 800 + LayerNorm 16; relative table 8*8 + LayerNorm 16; the layer 600 (as
  // BERT's); pooler 72; classifier 27.
  EXPECT_EQ(e.num_parameters, 816 + 80 + 600 + 72 + 27);
  // Ids and mask (int64) 2*8*8, float mask 8*4, labels 2*8, relative positions [T, T] int64.
  EXPECT_EQ(e.inputs, 128 + 32 + 16 + 16 * 8);
  // Layer, elements: BERT's 1120; q and k copied again for c2p/p2c 2*64; pos_key and pos_query
  // repeated per example 2*128; the c2p/p2c scores against all 8 rows, saved by gather, 2*128;
  // the relative table's dropout noise and output 2*64. Plus two int64 [4, 4] gather indices.
  // Embeddings: LayerNorm input 64, statistics 16, float mask 8, noise 64, output 64.
  // Relative table: normalised 64, statistics 16. Head 48.
  EXPECT_EQ(e.activations, (1120 + 768 + 216 + 80 + 48) * 4 + 2 * 16 * 8);

  // The scores are computed against all 2 x buckets rows, however short the sequence: 4 more
  // buckets add 8 rows to pos_key/pos_query (2*2*8*8), to both score tensors (2*2*2*4*8), to the
  // relative table's noise and output (2*8*8) and to the normalised table (8*8 + 2*8).
  r.model.position_buckets = 8;
  EXPECT_EQ(Estimate(r).activations, e.activations + (256 + 256 + 128 + 64 + 16) * 4);

  // Without dropout: no noise tensors; the relative table goes to the projections unchanged.
  r.model.position_buckets = 4;
  r.dropout = r.attention_dropout = r.classifier_dropout = 0;
  // Layer: BERT's 864 + 128 + 256 + 256; embeddings 144 + 8; table 80; head 32.
  EXPECT_EQ(Estimate(r).activations, (864 + 640 + 152 + 80 + 32) * 4 + 2 * 16 * 8);
}

// DeBERTa under SDPA: its bias needs a gradient, which the CPU's flash kernel does not give, so
// on the CPU training takes the math path with or without attention dropout (whose noise and
// dropped probabilities are then all that differs: 2 x 64 fp32 elements); on CUDA the
// memory-efficient kernel keeps the bias but no probabilities, and every batch is widened.
TEST(MemoryEstimator, DebertaSdpaFollowsItsBias) {
  MemoryRequest r = TinyRequest();
  r.model = TinyDeberta();
  r.sdpa = true;
  MemoryRequest no_dropout = r;
  no_dropout.attention_dropout = 0;
  EXPECT_EQ(Estimate(r).activations - Estimate(no_dropout).activations, 2 * 64 * 4);
  MemoryRequest bert = TinyRequest();
  bert.sdpa = true;
  MemoryRequest bert_no_dropout = bert;
  bert_no_dropout.attention_dropout = 0;  // BERT's flash kernel saves less than that again
  EXPECT_GT(Estimate(bert).activations - Estimate(bert_no_dropout).activations, 2 * 64 * 4);

  r.model.max_position_embeddings = 1024;
  r.precision = Precision::kBf16;
  r.batch_size = 4;
  r.max_length = 512;
  MemoryRequest eager = r;
  eager.sdpa = false;
  EXPECT_LT(Estimate(r, DeviceMemoryModel::Cuda()).activations,
            Estimate(eager, DeviceMemoryModel::Cuda()).activations);
  MemoryRequest odd = r;
  odd.max_length = 500;  // widened to 512 on CUDA
  EXPECT_EQ(Estimate(odd, DeviceMemoryModel::Cuda()).allocated_peak,
            Estimate(r, DeviceMemoryModel::Cuda()).allocated_peak);
}

TEST(MemoryEstimator, Bf16AutocastSavesCastsAndKeepsResidualsInFp32) {
  MemoryRequest r = TinyRequest();
  r.precision = Precision::kBf16;
  MemoryEstimate e = Estimate(r);
  // Weights, gradients and optimizer state stay fp32.
  EXPECT_EQ(e.weights, 4 * e.num_parameters);
  EXPECT_EQ(e.optimizer_state, 8 * e.num_parameters);
  // Layer, bytes: the fp32 input cast once per q/k/v projection 3*64*2; q and k copies 2*64*2;
  // softmax output, noise, dropped probabilities 3*64*2; v copy and context 2*64*2;
  // attention-output noise 64*2, residual sum (fp32) 64*4, LayerNorm statistics 2*8*4; the
  // LayerNorm output cast for the feed-forward 64*2 (the fp32 output itself is not saved);
  // GELU input and output 2*128*2; output noise 64*2, residual sum 64*4, statistics 2*8*4.
  // The layer's fp32 output is not saved either (the next op saves its bf16 cast).
  const int64_t layer = 384 + 256 + 384 + 256 + (128 + 256 + 64) + 128 + 512 + (128 + 256 + 64);
  EXPECT_EQ(layer, 2816);
  // Embeddings (fp32): LayerNorm input 64*4, statistics 64, noise 64*4; head 48*4.
  EXPECT_EQ(e.activations, layer + (256 + 64 + 256) + 192);
  // bf16 copies of every Linear weight: q, k, v, output 4*64, feed-forward 2*128, pooler 64,
  // classifier 24.
  EXPECT_EQ(e.autocast_cache, (256 + 256 + 64 + 24) * 2);

  // DeBERTa adds, in bf16: the second q/k copies 2*64*2, pos_key/pos_query per example 2*128*2,
  // the c2p/p2c scores 2*128*2, the int64 indices 2*16*8, the relative table's fp32 dropout noise
  // 64*4 and its bf16 cast for each projection 2*64*2. Embeddings add the float mask 8*4; the
  // normalised relative table is fp32 (64*4 + 2*8*4).
  r.model = TinyDeberta();
  EXPECT_EQ(Estimate(r).activations,
            layer + (256 + 512 + 512 + 256 + 256 + 256) + (256 + 64 + 256 + 32) + 320 + 192);
}

TEST(MemoryEstimator, CpuBf16LinearsHoldAnFp32TemporaryOfTwiceTheirOutput) {
  // With a wide feed-forward (I = 64, B*T*I = 512 elements) its first Linear sets the forward
  // peak on LibTorch's CPU kernels. Live above the layer's start when it runs: the fp32 input
  // 256, the tensors saved so far 1856 (q/k/v casts 384, q/k copies 256, softmax chain 384, v copy
  // and context 256, noise 128, residual sum and statistics 320, the cast of h 128), h itself 256
  // and its bf16 output 1024: 3392, plus the fp32 temporary of 512*8 bytes: 7488. Without it the
  // peak is the layer's end: its saved 4352, the fp32 input, h and output 3*256, the dropped
  // output 128: 5248.
  MemoryRequest r = TinyRequest();
  r.precision = Precision::kBf16;
  r.model.intermediate_size = 64;
  DeviceMemoryModel cpu = DeviceMemoryModel::Cpu(), plain = DeviceMemoryModel::Cpu();
  plain.cpu_kernels = false;
  const MemoryEstimate with = Estimate(r, cpu), without = Estimate(r, plain);
  EXPECT_EQ(with.activations, without.activations);
  EXPECT_EQ(with.forward_peak - without.forward_peak, 7488 - 5248);
  // fp32 is unaffected.
  r.precision = Precision::kFp32;
  EXPECT_EQ(Estimate(r, cpu).forward_peak, Estimate(r, plain).forward_peak);
  EXPECT_FALSE(DeviceMemoryModel::Cuda().cpu_kernels);
}

TEST(MemoryEstimator, PeakPhaseMovesToTheOptimizerStepWhenParametersDominate) {
  MemoryRequest r = TinyRequest();
  r.model.vocab_size = 200000;
  // torch::optim::AdamW (CUDA): weights, gradients, m and v, and its two temporaries of the
  // embedding table.
  MemoryEstimate e = Estimate(r, DeviceMemoryModel::Cuda());
  EXPECT_EQ(e.peak_phase, MemoryPhase::kOptimizerStep);
  EXPECT_EQ(e.optimizer_step_peak, 16 * e.num_parameters + 2 * 200000 * 8 * 4);
  EXPECT_EQ(e.allocated_peak, e.optimizer_step_peak);
  // The fused CPU step: weights, gradients, m and v only, no more than the end of backward.
  e = Estimate(r);
  EXPECT_EQ(e.optimizer_step_peak, 16 * e.num_parameters);
  EXPECT_NE(e.peak_phase, MemoryPhase::kOptimizerStep);
  EXPECT_GE(e.backward_peak, e.optimizer_step_peak);

  r = TinyRequest();
  r.batch_size = 64;
  r.max_length = 16;
  e = Estimate(r);
  EXPECT_EQ(e.peak_phase, MemoryPhase::kBackward);
  EXPECT_GT(e.backward_peak, e.optimizer_step_peak);
  EXPECT_GE(e.backward_peak, e.weights + e.optimizer_state + e.activations);
}

TEST(MemoryEstimator, AccumulationAndCheckpointingMoveThePeakTheRightWay) {
  MemoryRequest r = TinyRequest();
  r.model.num_hidden_layers = 4;  // (with one layer, recomputing it saves nothing)
  r.batch_size = 32;
  r.max_length = 16;
  const MemoryEstimate base = Estimate(r);
  r.grad_accum = 4;
  // Later micro-batches run with the first one's gradients alive.
  EXPECT_GT(Estimate(r).backward_peak, base.backward_peak);
  r.grad_accum = 1;
  r.gradient_checkpointing = true;
  EXPECT_LT(Estimate(r).allocated_peak, base.allocated_peak);
  r.gradient_checkpointing = false;
  r.batch_size = 64;
  EXPECT_GT(Estimate(r).allocated_peak, base.allocated_peak);
}

// On CUDA dropout saves a bool mask (1 byte per element, where the CPU saves noise in the
// input's dtype) and autocast runs softmax in fp32. Anchored on peaks measured on an H200 with
// LibTorch 2.11 (`tune estimate --device cuda --measure`, max_memory_allocated over two AdamW
// steps and an evaluation; docs/gpu.md): the estimate (allocated peak plus workspaces) within 2%.
TEST(MemoryEstimator, CudaKernelsMatchPeaksMeasuredOnAnH200) {
  struct Case {
    const char* model;
    int64_t b, t;
    Precision precision;
    bool checkpointing;
    int64_t measured;
  };
  const Case cases[] = {
      {"bert-base-uncased", 32, 512, Precision::kBf16, false, 17007235584},
      {"bert-base-uncased", 8, 512, Precision::kFp32, false, 6679428608},
      {"microsoft/deberta-v3-base", 24, 384, Precision::kBf16, false, 13520491008},
      {"roberta-large", 24, 256, Precision::kBf16, true, 6165719040},
      {"xlm-roberta-base", 40, 160, Precision::kFp32, false, 8755757568},
  };
  const ModelCatalog catalog = ModelCatalog::Builtin().value();
  for (const Case& c : cases) {
    auto model = catalog.Find(c.model);
    ASSERT_TRUE(model.ok()) << c.model;
    TrainHyperparams hp;
    hp.batch_size = c.b;
    hp.max_length = c.t;
    hp.precision = c.precision;
    hp.gradient_checkpointing = c.checkpointing;
    const MemoryEstimate e = Estimate(MemoryRequestFor(**model, hp, 2), DeviceMemoryModel::Cuda());
    const double error = static_cast<double>(e.allocated_peak + e.workspace - c.measured) /
                         static_cast<double>(c.measured);
    EXPECT_LT(std::abs(error), 0.02) << c.model << " " << c.b << "x" << c.t << ": " << error;
  }
}

TEST(MemoryEstimator, CudaAddsRoundingContextWorkspaceAndFragmentation) {
  MemoryRequest r = TinyRequest();
  const DeviceMemoryModel cuda = DeviceMemoryModel::Cuda();
  MemoryEstimate e = Estimate(r, cuda);
  DeviceMemoryModel plain = DeviceMemoryModel::Cpu();  // LibTorch's kernels without the CPU ones'
  plain.cpu_kernels = false;
  // Without dropout, in fp32, CUDA's kernels save what the CPU's do.
  MemoryRequest no_dropout = r;
  no_dropout.dropout = no_dropout.attention_dropout = no_dropout.classifier_dropout = 0;
  EXPECT_EQ(Estimate(no_dropout, cuda).allocated_peak, Estimate(no_dropout, plain).allocated_peak);
  // Every tensor here is far below 512 B or a little above: rounding is large relative to them.
  EXPECT_GT(e.rounding, 0);
  EXPECT_EQ(e.context, 512 * 1024 * 1024);
  EXPECT_EQ(e.workspace, 65 * 1024 * 1024);
  // In training at least the word-embedding gradient and AdamW's two moments of it (100 x 8 x 4
  // bytes each), above 5% of this tiny peak.
  EXPECT_EQ(e.fragmentation,
            std::max<int64_t>(3 * 100 * 8 * 4,
                              std::llround(0.05 * static_cast<double>(e.allocated_peak))));
  MemoryRequest eval = r;
  eval.train = false;
  const MemoryEstimate ev = Estimate(eval, cuda);
  EXPECT_EQ(ev.fragmentation, std::llround(0.05 * static_cast<double>(ev.allocated_peak)));
  EXPECT_EQ(e.device_peak,
            e.allocated_peak + e.rounding + e.fragmentation + e.context + e.workspace);
  // A 3 MiB request takes a 2 MiB-rounded share of a 20 MiB segment: 4 MiB.
  MemoryRequest mlp;
  mlp.architecture = Architecture::kMlp;
  mlp.num_features = 3 * 1024 * 1024 / 4;
  mlp.mlp_hidden = {};
  mlp.num_labels = 1;
  mlp.batch_size = 1;
  mlp.train = false;
  DeviceMemoryModel bare = cuda;
  bare.context_bytes = bare.workspace_bytes = 0;
  bare.fragmentation = 0;
  MemoryEstimate m = Estimate(mlp, bare);
  EXPECT_GE(m.allocated_peak + m.rounding, 4 * 1024 * 1024);
}

TEST(MemoryEstimator, MlpLayersHandComputed) {
  MemoryRequest r;
  r.architecture = Architecture::kMlp;
  r.num_features = 10;
  r.mlp_hidden = {20, 20};
  r.num_labels = 2;
  r.batch_size = 4;
  MemoryEstimate e = Estimate(r);
  EXPECT_EQ(e.num_parameters, (10 * 20 + 20) + (20 * 20 + 20) + (20 * 2 + 2));
  // Input 4*10; per hidden layer activation input, noise, dropped output: 3*4*20.
  EXPECT_EQ(e.activations, (40 + 2 * 240) * 4);
}

TEST(MemoryEstimator, DecoderCountsTheVocabularyLogits) {
  MemoryRequest r;
  r.architecture = Architecture::kDecoder;
  r.model.name = "gpt";
  r.model.num_hidden_layers = 2;
  r.model.hidden_size = 64;
  r.model.num_attention_heads = 4;
  r.model.vocab_size = 50257;
  r.model.max_position_embeddings = 1024;
  r.batch_size = 2;
  r.max_length = 128;
  MemoryEstimate e = Estimate(r);
  // wte + wpe + per layer (2 LN + qkv + proj + fc + fc_proj) + final LN; lm head tied.
  const int64_t h = 64;
  EXPECT_EQ(e.num_parameters, 50257 * h + 1024 * h +
                                  2 * (4 * h + (h * 3 * h + 3 * h) + (h * h + h) +
                                       (h * 4 * h + 4 * h) + (4 * h * h + h)) +
                                  2 * h);
  EXPECT_EQ(e.logits_loss, 3 * 2 * 128 * 50257 * 4);
}

TEST(MemoryEstimator, RejectsImpossibleRequests) {
  MemoryRequest r = TinyRequest();
  r.batch_size = 0;
  EXPECT_EQ(EstimateMemory(r, DeviceMemoryModel::Cpu()).status().code(),
            StatusCode::kInvalidArgument);
  r = TinyRequest();
  r.max_length = 17;
  auto s = EstimateMemory(r, DeviceMemoryModel::Cpu()).status();
  EXPECT_NE(s.message().find("max_length 17 exceeds model 'tiny''s 16 positions"),
            std::string::npos)
      << s.message();
  r = TinyRequest();
  r.model.num_attention_heads = 3;
  EXPECT_NE(EstimateMemory(r, DeviceMemoryModel::Cpu()).status().message().find("not a multiple"),
            std::string::npos);
}

TEST(MemoryEstimator, MaxBatchSizeIsTheLargestThatFits) {
  MemoryRequest r = TinyRequest();
  r.max_length = 16;
  const DeviceMemoryModel cpu = DeviceMemoryModel::Cpu();
  r.batch_size = 37;
  const int64_t budget = Estimate(r, cpu).device_peak;
  const FormulaMemoryModel formula(cpu);
  auto best = MaxBatchSize(formula, r, budget);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 37);
  auto none = MaxBatchSize(formula, r, 1000);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  auto capped = MaxBatchSize(formula, r, int64_t{1} << 40, 64);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(*capped, 64);
}

TEST(MemoryEstimator, ParsesAndFormatsSizes) {
  EXPECT_EQ(*ParseBytes("24GiB"), int64_t{24} << 30);
  EXPECT_EQ(*ParseBytes("24 GiB"), int64_t{24} << 30);
  EXPECT_EQ(*ParseBytes("1.5GB"), 1500000000);
  EXPECT_EQ(*ParseBytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("2g"), int64_t{2} << 30);
  EXPECT_EQ(*ParseBytes("1000000"), 1000000);
  auto bad = ParseBytes("24XB");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown unit 'XB'"), std::string::npos);
  EXPECT_FALSE(ParseBytes("GiB").ok());
  EXPECT_FALSE(ParseBytes("0").ok());
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(int64_t{312} << 20), "312.0 MiB");
  auto p = ParsePrecision("bf61");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("valid: fp32, bf16, fp16, pure_bf16"), std::string::npos);
  EXPECT_EQ(*ParsePrecision("pure_bf16"), Precision::kPureBf16);
}

TEST(MemoryEstimator, RequestForATrialUsesItsHyperparameters) {
  TrainHyperparams hp;
  hp.batch_size = 12;
  hp.max_length = 64;
  hp.grad_accum = 3;
  hp.classifier_layers = 2;
  hp.classifier_hidden = 32;
  hp.gradient_checkpointing = true;
  hp.optimizer = OptimizerKind::kSgd;
  EXPECT_FALSE(MemoryRequestFor(Tiny(), hp, 7).sdpa);  // attention "auto" is eager today
  hp.attention = Attention::kSdpa;
  MemoryRequest r = MemoryRequestFor(Tiny(), hp, 7);
  EXPECT_TRUE(r.sdpa);
  EXPECT_EQ(r.batch_size, 12);
  EXPECT_EQ(r.max_length, 64);
  EXPECT_EQ(r.grad_accum, 3);
  EXPECT_EQ(r.head_hidden, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(r.num_labels, 7);
  EXPECT_TRUE(r.gradient_checkpointing);
  EXPECT_EQ(r.optimizer, OptimizerKind::kSgd);
}

}  // namespace
}  // namespace tune

// The LibTorch modules themselves (src/torch/torch_models.h): DeBERTa's relative positions and
// disentangled attention, the Hugging Face parameter names, checkpointing through the shared
// relative embeddings. This file includes LibTorch and the private header, like the sources it
// tests (src/torch/torch_*.cpp); the rest of the torch tests use the public trainer API only.
#include "torch/torch_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "torch/torch_compat.h"

namespace tune::internal {
namespace {

EncoderConfig TinyDebertaConfig() {
  EncoderConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.intermediate_size = 32;
  c.max_positions = 32;
  c.type_vocab_size = 0;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.layer_norm_eps = 1e-7;
  c.deberta = true;
  c.position_buckets = 8;
  c.max_relative_positions = 32;
  return c;
}

// Hand values of make_log_bucket_position with 8 buckets (mid 4) and max_position 32:
// |d| < 4 is itself; beyond, ceil(log(|d| / 4) / log(31 / 4) * 3) + 4, with d's sign.
TEST(DebertaRelativePositions, IdentityNearLogBucketsFar) {
  torch::Tensor r = DebertaRelativePositions(20, 8, 32);
  ASSERT_EQ(r.sizes(), (std::vector<int64_t>{20, 20}));
  ASSERT_EQ(r.scalar_type(), torch::kLong);
  auto at = [&](int64_t i, int64_t j) { return r[i][j].item<int64_t>(); };
  EXPECT_EQ(at(0, 0), 0);
  EXPECT_EQ(at(3, 0), 3);  // query 3, key 0: d = 3
  EXPECT_EQ(at(0, 3), -3);
  EXPECT_EQ(at(4, 0), 4);   // |d| = mid stays itself
  EXPECT_EQ(at(5, 0), 5);   // log(1.25) / log(7.75) * 3 = 0.33 -> 1 + 4
  EXPECT_EQ(at(0, 8), -6);  // log(2) ... = 1.02 -> 2 + 4
  EXPECT_EQ(at(10, 0), 6);  // log(2.5) ... = 1.34 -> 2 + 4
  EXPECT_EQ(at(16, 0), 7);  // log(4) ... = 2.03 -> 3 + 4
  EXPECT_EQ(at(19, 2), 7);  // d = 17
  // Without buckets: the plain distance.
  EXPECT_EQ(DebertaRelativePositions(20, 0, 32)[16][0].item<int64_t>(), 16);
}

// The model builds the table once for the longest batch so far and gives a shorter batch its
// top-left corner: exact, since entry (i, j) depends on i - j only.
TEST(DebertaRelativePositions, AShorterTableIsTheCornerOfALongerOne) {
  const torch::Tensor longest = DebertaRelativePositions(300, 256, 512);
  for (int64_t t : {1, 7, 130, 299}) {
    EXPECT_TRUE(
        torch::equal(DebertaRelativePositions(t, 256, 512), longest.slice(0, 0, t).slice(1, 0, t)))
        << "length " << t;
  }
}

// Without absolute positions, only the c2p/p2c terms see where tokens are. Reordering the tokens
// therefore changes what a token attends to; with every distance in one bucket (the same
// position term everywhere) the attention is permutation-equivariant again.
TEST(DisentangledSelfAttention, OutputDependsOnRelativePositions) {
  torch::manual_seed(0);
  EncoderConfig c = TinyDebertaConfig();
  DisentangledSelfAttention attention(c);
  const int64_t t = 6;
  torch::Tensor x = torch::randn({1, t, c.hidden_size});
  torch::Tensor rel = torch::randn({2 * c.position_buckets, c.hidden_size});
  torch::Tensor mask = torch::zeros({1, 1, 1, t});
  // Swap tokens 0 and 4.
  torch::Tensor perm = torch::tensor({4, 1, 2, 3, 0, 5}, torch::kLong);
  torch::Tensor x_perm = x.index_select(1, perm);

  torch::NoGradGuard no_grad;
  torch::Tensor rel_pos = DebertaRelativePositions(t, c.position_buckets, c.max_relative_positions);
  torch::Tensor out = attention(x, mask, rel, rel_pos);
  torch::Tensor out_perm = attention(x_perm, mask, rel, rel_pos).index_select(1, perm);
  EXPECT_GT((out - out_perm).abs().max().item<double>(), 1e-3);

  torch::Tensor same_bucket = torch::zeros({t, t}, torch::kLong);
  out = attention(x, mask, rel, same_bucket);
  out_perm = attention(x_perm, mask, rel, same_bucket).index_select(1, perm);
  EXPECT_LT((out - out_perm).abs().max().item<double>(), 1e-5);

  // And the relative embeddings matter: other embeddings, other output.
  torch::Tensor other = attention(x, mask, torch::randn_like(rel), rel_pos);
  EXPECT_GT((attention(x, mask, rel, rel_pos) - other).abs().max().item<double>(), 1e-3);
}

TEST(TransformerClassifier, DebertaParametersHaveHuggingFaceNames) {
  HeadConfig head;
  head.num_labels = 3;
  TransformerClassifier model(TinyDebertaConfig(), head);
  std::set<std::string> names;
  int64_t count = 0;
  for (const auto& p : model->named_parameters()) {
    names.insert(p.key());
    count += p.value().numel();
  }
  for (const char* expected :
       {"embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
        "encoder.rel_embeddings.weight", "encoder.LayerNorm.bias",
        "encoder.layer.0.attention.self.query_proj.weight",
        "encoder.layer.1.attention.self.key_proj.bias",
        "encoder.layer.1.attention.self.value_proj.weight",
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.output.LayerNorm.weight",
        "encoder.layer.0.intermediate.dense.weight", "encoder.layer.1.output.dense.bias",
        "encoder.layer.1.output.LayerNorm.weight", "pooler.dense.weight"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
  EXPECT_FALSE(names.count("embeddings.position_embeddings.weight"));
  EXPECT_EQ(model->named_parameters()["encoder.rel_embeddings.weight"].sizes(),
            (std::vector<int64_t>{16, 16}));
  // 50x16 + LN; 2 layers; 16 rel rows + LN; pooler; head.
  const int64_t h = 16, i = 32;
  const int64_t layer = 4 * (h * h + h) + 4 * h + (h * i + i) + (i * h + h);
  EXPECT_EQ(count, 50 * h + 2 * h + 2 * layer + 16 * h + 2 * h + (h * h + h) + (h * 3 + 3));
}

// Checkpointing recomputes DeBERTa's layers in backward; the shared relative embeddings, an input
// of every checkpointed layer, must still get their gradient.
// docs/memory.md#the-autocast-guard: inside the guard a Linear computes in bf16; the weight's
// gradient stays fp32; nested guards keep autocast on until the outermost exits; the previous state
// (enabled, dtype, cache flag) comes back. (CPU autocast in 1.13 accepts only bf16 as its dtype, so
// the cache flag is the marker that shows the restore.)
TEST(AutocastGuard, Bf16InsideFp32GradsAndTheStateRestored) {
  torch::manual_seed(0);
  torch::nn::Linear linear(8, 4);
  torch::Tensor x = torch::randn({3, 8});
  ASSERT_FALSE(AutocastEnabled(c10::DeviceType::CPU));
  at::autocast::set_autocast_cache_enabled(false);  // a marker to see it restored
  torch::Tensor y;
  {
    AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
    EXPECT_TRUE(AutocastEnabled(c10::DeviceType::CPU));
    EXPECT_EQ(AutocastDtype(c10::DeviceType::CPU), torch::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
    y = linear(x);
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
    { AutocastGuard inner(c10::DeviceType::CPU, torch::kBFloat16); }
    EXPECT_TRUE(AutocastEnabled(c10::DeviceType::CPU));
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(AutocastEnabled(c10::DeviceType::CPU));
  EXPECT_EQ(AutocastDtype(c10::DeviceType::CPU), torch::kBFloat16);
  EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
  at::autocast::set_autocast_cache_enabled(true);
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat);
  y.to(torch::kFloat).sum().backward();  // outside autocast
  ASSERT_TRUE(linear->weight.grad().defined());
  EXPECT_EQ(linear->weight.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(linear->weight.scalar_type(), torch::kFloat);
}

TEST(TransformerClassifier, DebertaCheckpointingGivesTheSameGradients) {
  auto grads = [](bool checkpoint) {
    torch::manual_seed(3);
    EncoderConfig c = TinyDebertaConfig();
    c.gradient_checkpointing = checkpoint;
    c.hidden_dropout = 0.1;  // the recomputation must draw the same masks
    HeadConfig head;
    TransformerClassifier model(c, head);
    model->train(true);
    torch::Tensor ids = torch::randint(1, 50, {3, 10}, torch::kLong);
    torch::Tensor mask = torch::ones({3, 10}, torch::kLong);
    mask[2].slice(0, 6).zero_();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(model(ids, mask), torch::tensor({0, 1, 1}));
    loss.backward();
    auto params = model->named_parameters();
    return std::make_pair(
        params["encoder.rel_embeddings.weight"].grad().clone(),
        params["encoder.layer.0.attention.self.query_proj.weight"].grad().clone());
  };
  auto [rel_plain, q_plain] = grads(false);
  auto [rel_ckpt, q_ckpt] = grads(true);
  ASSERT_TRUE(rel_ckpt.defined());
  EXPECT_GT(rel_plain.abs().max().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(rel_plain, rel_ckpt, 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(q_plain, q_ckpt, 1e-5, 1e-7));
}

// The relative positions are cached for the longest batch so far: a short batch after a long one
// gets the same logits as in a model that never saw the long one.
TEST(TransformerClassifier, DebertaGivesTheSameLogitsAfterALongerBatch) {
  torch::manual_seed(4);
  TransformerClassifier seen_long(TinyDebertaConfig(), HeadConfig{});
  TransformerClassifier fresh(TinyDebertaConfig(), HeadConfig{});
  torch::NoGradGuard no_grad;
  for (const auto& item : seen_long->named_parameters()) {
    fresh->named_parameters()[item.key()].copy_(item.value());
  }
  seen_long->eval();
  fresh->eval();
  torch::Tensor long_ids = torch::randint(1, 50, {2, 30}, torch::kLong);
  torch::Tensor ids = torch::randint(1, 50, {2, 9}, torch::kLong);
  torch::Tensor mask = torch::ones({2, 9}, torch::kLong);
  mask[1].slice(0, 5).zero_();
  seen_long(long_ids, torch::ones({2, 30}, torch::kLong));
  EXPECT_TRUE(torch::equal(seen_long(ids, mask), fresh(ids, mask)));
}

// Under bf16 autocast the checkpointed layers are recomputed in backward under the same autocast
// (backward itself runs outside it), so the gradients equal the plain run's.
TEST(TransformerClassifier, CheckpointingUnderBf16AutocastGivesTheSameGradients) {
  auto grads = [](bool checkpoint) {
    torch::manual_seed(5);
    EncoderConfig c = TinyDebertaConfig();
    c.gradient_checkpointing = checkpoint;
    TransformerClassifier model(c, HeadConfig{});
    model->train(true);
    torch::Tensor ids = torch::randint(1, 50, {2, 9}, torch::kLong);
    torch::Tensor mask = torch::ones({2, 9}, torch::kLong);
    torch::Tensor logits;
    {
      AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
      logits = model(ids, mask);
    }
    EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
    torch::nn::functional::cross_entropy(logits.to(torch::kFloat), torch::tensor({0, 1}))
        .backward();
    return model->named_parameters()["encoder.layer.0.intermediate.dense.weight"].grad().clone();
  };
  torch::Tensor plain = grads(false), checkpointed = grads(true);
  EXPECT_EQ(plain.scalar_type(), torch::kFloat);
  EXPECT_GT(plain.abs().max().item<double>(), 0.0);
  // The same up to float rounding: LibTorch 2.6's bf16 CPU kernels differ in the last bits
  // between the pass and its recomputation (2.4e-7 on Debian 13; 0 with 1.13). A recomputation
  // outside autocast would differ by bf16's resolution, about 1e-3 here.
  EXPECT_TRUE(torch::allclose(plain, checkpointed, 1e-5, 1e-6))
      << (plain - checkpointed).abs().max().item<double>();
}

// Sentence pairs on BERT: token type ids select the token type embedding per token. Types of 0
// everywhere give the logits of no types at all (what single texts run); a pair's types of 1
// change them (HF BertEmbeddings: token_type_embeddings(token_type_ids)). A model without token
// types (has_token_types false: RoBERTa's single type, DeBERTa-v3's none) says so.
TEST(TransformerClassifier, TokenTypesReachBertsEmbeddings) {
  torch::manual_seed(2);
  EncoderConfig c = TinyDebertaConfig();
  c.deberta = false;
  c.type_vocab_size = 2;
  TransformerClassifier model(c, HeadConfig{});
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::randint(5, 50, {2, 7}, torch::kLong);
  torch::Tensor mask = torch::ones({2, 7}, torch::kLong);
  torch::Tensor types = torch::zeros({2, 7}, torch::kLong);
  EXPECT_TRUE(model->has_token_types());
  EXPECT_TRUE(torch::allclose(model(ids, mask), model(ids, mask, types)));
  types.narrow(1, 4, 3).fill_(1);
  EXPECT_FALSE(torch::allclose(model(ids, mask), model(ids, mask, types), 1e-4, 1e-5));
  EXPECT_FALSE(TransformerClassifier(TinyDebertaConfig(), HeadConfig{})->has_token_types());
}

EncoderConfig TinyBertConfig(bool sdpa, bool roberta = false) {
  EncoderConfig c = TinyDebertaConfig();
  c.deberta = false;
  c.type_vocab_size = roberta ? 1 : 2;
  c.roberta_positions = roberta;
  c.pad_id = roberta ? 1 : 0;
  c.sdpa = sdpa;
  return c;
}

// A batch of 3 with padding in two rows, and a loss over both classes.
struct Batch {
  torch::Tensor ids = torch::randint(5, 50, {3, 11}, torch::kLong);
  torch::Tensor mask = torch::ones({3, 11}, torch::kLong);
  Batch() {
    mask[1].slice(0, 7).zero_();
    mask[2].slice(0, 3).zero_();
  }
};

// The logits and every parameter's gradient of one forward and backward pass, in training mode.
std::pair<torch::Tensor, std::map<std::string, torch::Tensor>> Step(
    TransformerClassifier& model, const torch::Tensor& ids, const torch::Tensor& mask,
    std::optional<torch::ScalarType> autocast = std::nullopt) {
  model->zero_grad();
  torch::Tensor logits;
  {
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(c10::DeviceType::CPU, *autocast);
    logits = model(ids, mask);
  }
  torch::nn::functional::cross_entropy(logits.to(torch::kFloat), torch::tensor({0, 1, 1}))
      .backward();
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : model->named_parameters()) {
    if (p.value().grad().defined()) grads[p.key()] = p.value().grad().clone();
  }
  return {logits.detach().to(torch::kFloat), grads};
}

double MaxRelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item<double>();
}

// Every gradient of `other` equals `reference`'s within 10 x `tolerance`, relative to the larger
// of its own largest element and 1e-3 of the model's largest gradient: the key bias's gradient is
// 0 in exact arithmetic (softmax ignores what adds the same to every key), rounding noise here.
void ExpectSameGradients(const std::map<std::string, torch::Tensor>& reference,
                         const std::map<std::string, torch::Tensor>& other, double tolerance,
                         const std::string& where) {
  ASSERT_EQ(reference.size(), other.size());
  double largest = 0;
  for (const auto& [name, g] : reference) largest = std::max(largest, g.abs().max().item<double>());
  ASSERT_GT(largest, 0.0);
  for (const auto& [name, g] : reference) {
    const double difference = (other.at(name) - g).abs().max().item<double>();
    EXPECT_LT(difference / std::max(g.abs().max().item<double>(), 1e-3 * largest), tolerance * 10)
        << name << ", " << where;
  }
}

// Gives `to` the parameters of `from` (by name) and puts both in training mode (the tests'
// models have no dropout: training mode without randomness).
void CopyParametersAndTrain(TransformerClassifier& from, TransformerClassifier& to) {
  {
    torch::NoGradGuard no_grad;
    auto source = from->named_parameters();
    for (auto& p : to->named_parameters()) p.value().copy_(source[p.key()]);
  }
  from->train(true);
  to->train(true);
}

using Gradients = std::map<std::string, torch::Tensor>;

// One step of `reference` and of `other` on `ids` (with `mask`, or none): their logits and every
// gradient equal within `tolerance`. Returns both models' gradients.
std::pair<Gradients, Gradients> ExpectSameStep(TransformerClassifier& reference,
                                               TransformerClassifier& other,
                                               const torch::Tensor& ids, const torch::Tensor& mask,
                                               std::optional<torch::ScalarType> autocast,
                                               double tolerance, const std::string& where) {
  auto [logits_r, grads_r] = Step(reference, ids, mask, autocast);
  auto [logits_o, grads_o] = Step(other, ids, mask, autocast);
  EXPECT_LT(MaxRelativeDifference(logits_o, logits_r), tolerance) << where;
  ExpectSameGradients(grads_r, grads_o, tolerance, where);
  return {grads_r, grads_o};
}

// SDPA (LibTorch 2.x) against the eager attention, the same weights: logits and every gradient
// equal within each dtype's tolerance, with and without padding, BERT and RoBERTa positions.
TEST(Sdpa, OutputsAndGradientsEqualTheEagerPath) {
  if (!SdpaAvailable()) GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no SDPA (2.0+)";
  for (bool roberta : {false, true}) {
    for (auto autocast : {std::optional<torch::ScalarType>(), std::optional(torch::kBFloat16)}) {
      SCOPED_TRACE(std::string(roberta ? "roberta" : "bert") + (autocast ? " bf16" : " fp32"));
      torch::manual_seed(11);
      HeadConfig head;
      head.dropout = 0.0;  // training mode without randomness anywhere
      TransformerClassifier eager(TinyBertConfig(false, roberta), head);
      TransformerClassifier sdpa(TinyBertConfig(true, roberta), head);
      CopyParametersAndTrain(eager, sdpa);
      Batch batch;
      // bf16's 8 bits of mantissa: the two paths round at different places.
      const double tolerance = autocast ? 3e-2 : 1e-5;
      for (bool padded : {true, false}) {
        ExpectSameStep(eager, sdpa, batch.ids, padded ? batch.mask : torch::Tensor(), autocast,
                       tolerance, padded ? "padded" : "unpadded");
      }
    }
  }
}

// DeBERTa under SDPA (LibTorch >= 2.1: the c2p and p2c terms and the padding as SDPA's additive
// bias) against its eager disentangled attention, the same weights: logits and every gradient
// (the relative embeddings' included), fp32 and bf16 autocast, padded or not.
TEST(Sdpa, DebertaOutputsAndGradientsEqualTheEagerPath) {
  if (!DebertaSdpaAvailable()) GTEST_SKIP() << "DeBERTa's SDPA path needs LibTorch 2.1+";
  for (auto autocast : {std::optional<torch::ScalarType>(), std::optional(torch::kBFloat16)}) {
    SCOPED_TRACE(autocast ? "bf16" : "fp32");
    torch::manual_seed(16);
    HeadConfig head;
    head.dropout = 0.0;
    EncoderConfig c = TinyDebertaConfig();
    TransformerClassifier eager(c, head);
    c.sdpa = true;
    TransformerClassifier sdpa(c, head);
    CopyParametersAndTrain(eager, sdpa);
    Batch batch;
    const double tolerance = autocast ? 3e-2 : 1e-5;
    for (bool padded : {true, false}) {
      const Gradients grads_s =
          ExpectSameStep(eager, sdpa, batch.ids, padded ? batch.mask : torch::Tensor(), autocast,
                         tolerance, padded ? "padded" : "unpadded")
              .second;
      EXPECT_GT(grads_s.at("encoder.rel_embeddings.weight").abs().max().item<double>(), 0);
    }
  }
}

// The fused Q/K/V projection (one GEMM over the packed weights, one custom backward) against the
// three Linears, the same weights: logits and every gradient equal, fp32 and bf16 autocast,
// padded or not, eager attention and (LibTorch 2.x) SDPA. The parameters keep their Hugging Face
// names and become row blocks of one storage.
TEST(FusedQkv, OutputsAndGradientsEqualThreeProjections) {
  for (bool sdpa : {false, true}) {
    if (sdpa && !SdpaAvailable()) continue;
    for (auto autocast : {std::optional<torch::ScalarType>(), std::optional(torch::kBFloat16)}) {
      SCOPED_TRACE(std::string(sdpa ? "sdpa" : "eager") + (autocast ? " bf16" : " fp32"));
      torch::manual_seed(12);
      HeadConfig head;
      head.dropout = 0.0;
      EncoderConfig c = TinyBertConfig(sdpa);
      TransformerClassifier three(c, head);
      c.fused_qkv = true;
      TransformerClassifier fused(c, head);
      ASSERT_EQ(three->named_parameters().size(), fused->named_parameters().size());
      CopyParametersAndTrain(three, fused);
      Batch batch;
      // bf16: the fused GEMM rounds its sums in other places than three GEMMs.
      const double tolerance = autocast ? 3e-2 : 1e-5;
      for (bool padded : {true, false}) {
        const auto [grads_3, grads_f] =
            ExpectSameStep(three, fused, batch.ids, padded ? batch.mask : torch::Tensor(), autocast,
                           tolerance, padded ? "padded" : "unpadded");
        for (const auto& [name, g] : grads_3) {
          EXPECT_EQ(grads_f.at(name).scalar_type(), g.scalar_type()) << name;
        }
      }
      auto params = fused->named_parameters();
      const torch::Tensor& q = params["encoder.layer.1.attention.self.query.weight"];
      const torch::Tensor& v = params["encoder.layer.1.attention.self.value.weight"];
      EXPECT_TRUE(q.is_alias_of(v));
      EXPECT_EQ(v.storage_offset(), q.storage_offset() + 2 * q.numel());
    }
  }
}

// Gradient checkpointing recomputes the fused projection in backward (its custom function inside
// the checkpoint's): every gradient equals the run without checkpointing.
TEST(FusedQkv, CheckpointingGivesTheSameGradients) {
  auto grads = [](bool checkpoint) {
    torch::manual_seed(13);
    EncoderConfig c = TinyBertConfig(false);
    c.fused_qkv = true;
    c.gradient_checkpointing = checkpoint;
    c.hidden_dropout = 0.1;  // the recomputation must draw the same masks
    HeadConfig head;
    TransformerClassifier model(c, head);
    model->train(true);
    Batch batch;
    return Step(model, batch.ids, batch.mask).second;
  };
  const auto plain = grads(false), checkpointed = grads(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  EXPECT_GT(plain.at("encoder.layer.0.attention.self.query.weight").abs().max().item<double>(), 0);
  for (const auto& [name, g] : plain) {
    EXPECT_TRUE(torch::allclose(g, checkpointed.at(name), 1e-5, 1e-7)) << name;
  }
}

// The fused elementwise functions in every layer (bias + dropout + residual + LayerNorm after
// both output projections, bias + GELU in the feed-forward block) against the unfused modules,
// the same weights: logits and every gradient, BERT and DeBERTa, fp32 and bf16 autocast. On the
// CPU the fused functions run tune's loops, the arithmetic of its CUDA kernels.
TEST(FusedElementwise, OutputsAndGradientsEqualTheUnfusedLayers) {
  for (bool deberta : {false, true}) {
    for (auto autocast : {std::optional<torch::ScalarType>(), std::optional(torch::kBFloat16)}) {
      SCOPED_TRACE(std::string(deberta ? "deberta" : "bert") + (autocast ? " bf16" : " fp32"));
      torch::manual_seed(14);
      HeadConfig head;
      head.dropout = 0.0;
      EncoderConfig c = deberta ? TinyDebertaConfig() : TinyBertConfig(false);
      TransformerClassifier plain(c, head);
      c.fused_elementwise = true;
      TransformerClassifier fused(c, head);
      ASSERT_EQ(plain->named_parameters().size(), fused->named_parameters().size());
      CopyParametersAndTrain(plain, fused);
      Batch batch;
      // bf16: the fused functions add the bias in fp32, the unfused GEMM in bf16.
      const double tolerance = autocast ? 3e-2 : 1e-5;
      const Gradients grads_f =
          ExpectSameStep(plain, fused, batch.ids, batch.mask, autocast, tolerance, "fused").second;
      EXPECT_GT(grads_f.at("encoder.layer.0.intermediate.dense.bias").abs().max().item<double>(),
                0);
    }
  }
}

// With dropout, the fused layers' masks come from the seeded generator: gradient checkpointing's
// recomputation draws the same ones, so every gradient equals the run without checkpointing.
TEST(FusedElementwise, CheckpointingGivesTheSameGradients) {
  auto grads = [](bool checkpoint) {
    torch::manual_seed(15);
    EncoderConfig c = TinyBertConfig(false);
    c.fused_elementwise = true;
    c.gradient_checkpointing = checkpoint;
    c.hidden_dropout = 0.1;
    TransformerClassifier model(c, HeadConfig{});
    model->train(true);
    Batch batch;
    return Step(model, batch.ids, batch.mask).second;
  };
  const auto plain = grads(false), checkpointed = grads(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (const auto& [name, g] : plain) {
    EXPECT_TRUE(torch::allclose(g, checkpointed.at(name), 1e-5, 1e-7)) << name;
  }
}

// A batch without padding may come without a mask: the logits equal those of an all-ones mask,
// for both attention paths and RoBERTa's positions.
TEST(Sdpa, NoMaskIsAnUnpaddedBatch) {
  for (bool sdpa : {false, true}) {
    if (sdpa && !SdpaAvailable()) continue;
    for (bool roberta : {false, true}) {
      torch::manual_seed(4);
      TransformerClassifier model(TinyBertConfig(sdpa, roberta), HeadConfig{});
      model->eval();
      torch::NoGradGuard no_grad;
      torch::Tensor ids = torch::randint(5, 50, {2, 9}, torch::kLong);
      EXPECT_TRUE(torch::allclose(model(ids, torch::ones({2, 9}, torch::kLong)),
                                  model(ids, torch::Tensor()), 1e-5, 1e-6))
          << "sdpa " << sdpa << ", roberta " << roberta;
    }
  }
}

// SDPA's own dropout draws from the default generator, which gradient checkpointing restores
// before recomputing a layer: the checkpointed run's gradients equal the plain run's, and
// dropout does change them (the masks are drawn).
TEST(Sdpa, DropoutInsideTheKernelReplaysUnderCheckpointing) {
  if (!SdpaAvailable()) GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no SDPA (2.0+)";
  auto grads = [](bool checkpoint, double attention_dropout) {
    torch::manual_seed(9);
    EncoderConfig c = TinyBertConfig(true);
    c.gradient_checkpointing = checkpoint;
    c.attention_dropout = attention_dropout;
    c.hidden_dropout = attention_dropout;
    TransformerClassifier model(c, HeadConfig{});
    model->train(true);
    Batch batch;
    return Step(model, batch.ids, batch.mask)
        .second.at("encoder.layer.0.attention.self.query.weight");
  };
  const torch::Tensor plain = grads(false, 0.3), checkpointed = grads(true, 0.3);
  EXPECT_GT(plain.abs().max().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(plain, checkpointed, 1e-5, 1e-7))
      << (plain - checkpointed).abs().max().item<double>();
  EXPECT_FALSE(torch::allclose(plain, grads(false, 0.0), 1e-3, 1e-5));
}

}  // namespace
}  // namespace tune::internal

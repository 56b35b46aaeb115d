#include "memory/inference.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tune {
namespace {

const ModelCatalog& Catalog() {
  static const ModelCatalog c = ModelCatalog::Builtin().value();
  return c;
}

DecoderShape Shape(const std::string& name) {
  return DecoderShapeOf(**Catalog().Find(name)).value();
}

// Hugging Face's published parameter counts (model cards, model.num_parameters()) agree with the
// config formula for every decoder in the catalog.
TEST(InferenceModels, CatalogCountsMatchTheDecoderFormula) {
  const std::map<std::string, int64_t> published = {{"gpt2", 124'439'808},
                                                    {"meta-llama/Meta-Llama-3-8B", 8'030'261'248},
                                                    {"meta-llama/Meta-Llama-3-70B", 70'553'706'496},
                                                    {"meta-llama/Llama-3.2-1B", 1'235'814'400},
                                                    {"meta-llama/Llama-3.2-3B", 3'212'749'824},
                                                    {"mistralai/Mistral-7B-v0.1", 7'241'732'096}};
  for (const auto& [name, count] : published) {
    const ModelSpec* m = *Catalog().Find(name);
    EXPECT_EQ(DecoderParameterCount(*m), count) << name;
    EXPECT_EQ(m->num_parameters, count) << name;
    EXPECT_EQ(DecoderWeightBytes(Shape(name), WeightFormat::kFp32, false).num_parameters, count)
        << name;
  }
}

TEST(InferenceModels, KvCacheBytesPerToken) {
  EXPECT_EQ(KvCacheBytesPerToken(Shape("meta-llama/Meta-Llama-3-8B"), 2), 128 * 1024);
  EXPECT_EQ(KvCacheBytesPerToken(Shape("meta-llama/Meta-Llama-3-70B"), 2), 320 * 1024);
  EXPECT_EQ(KvCacheBytesPerToken(Shape("mistralai/Mistral-7B-v0.1"), 2), 128 * 1024);
  EXPECT_EQ(KvCacheBytesPerToken(Shape("gpt2"), 4), 2 * 12 * 768 * 4);
}

// Weight bytes per format against published sizes: the bf16 checkpoints (2 bytes x the model
// card's parameter count: 16.06 GB, 141.1 GB, 14.48 GB), and the 4-bit weights of the 70B model
// (QLoRA's 4.127 bits per quantised parameter with double quantisation, plus 16-bit embeddings
// and LM head: 39.5 GB).
TEST(InferenceModels, WeightSizesMatchPublishedFigures) {
  auto within = [](double got, double want) { return std::abs(got / want - 1) <= 0.05; };
  EXPECT_TRUE(within(
      DecoderWeightBytes(Shape("meta-llama/Meta-Llama-3-8B"), WeightFormat::kFp16, false).total(),
      16.06e9));
  EXPECT_TRUE(within(
      DecoderWeightBytes(Shape("meta-llama/Meta-Llama-3-70B"), WeightFormat::kBf16, false).total(),
      141.1e9));
  EXPECT_TRUE(within(
      DecoderWeightBytes(Shape("mistralai/Mistral-7B-v0.1"), WeightFormat::kFp16, false).total(),
      14.48e9));
  const WeightBytes nf4 =
      DecoderWeightBytes(Shape("meta-llama/Meta-Llama-3-70B"), WeightFormat::kNf4, true);
  const double quantised = static_cast<double>(nf4.linear + nf4.scales);
  const double linear_params = 70'553'706'496.0 - 2 * 128256.0 * 8192 - 161 * 8192.0;
  EXPECT_NEAR(quantised * 8 / linear_params, 4.127, 0.001);
  EXPECT_TRUE(within(nf4.total(), 39.5e9)) << nf4.total();
}

// transformers' own bitsandbytes tests pin the ratio of bloom-1b7's fp16 memory footprint to its
// 4-bit (fp4) and LLM.int8 footprints: 2.109659552692574 and 1.540025. get_memory_footprint()
// counts parameters only (the packed weights, not the absmax/SCB scales). bloom-1b7 has GPT-2's
// layers (fused qkv, biases, LayerNorms, 4h MLP) and tied embeddings; its embedding LayerNorm
// (2 x 2048 parameters) stands in for GPT-2's position table here (2 positions).
TEST(InferenceModels, QuantisedFootprintsMatchTransformersTests) {
  DecoderShape bloom;
  bloom.family = DecoderFamily::kGpt2;
  bloom.layers = 24;
  bloom.hidden = 2048;
  bloom.heads = bloom.kv_heads = 16;
  bloom.head_dim = 128;
  bloom.intermediate = 8192;
  bloom.vocab = 250880;
  bloom.max_positions = 2;
  bloom.tie_word_embeddings = bloom.attention_bias = bloom.mlp_bias = true;
  EXPECT_EQ(DecoderParameterCount(bloom), 1'722'408'960);
  auto footprint = [&](WeightFormat f) {
    const WeightBytes w = DecoderWeightBytes(bloom, f, false);
    return static_cast<double>(w.total() - w.scales);
  };
  const double fp16 = footprint(WeightFormat::kFp16);
  EXPECT_NEAR(fp16 / footprint(WeightFormat::kFp4), 2.109659552692574, 1e-6);
  EXPECT_NEAR(fp16 / footprint(WeightFormat::kInt8), 1.540025, 1e-5);
}

TEST(InferenceModels, QuantisationConstants) {
  // 4-bit: 0.5 B + 4 B per 64 weights; with double quantisation 1 B per 64 + 4 B per 64 x 256.
  EXPECT_EQ(QuantizedLinearBytes(64, 256, WeightFormat::kNf4, false), 64 * 256 / 2 + 4 * 256);
  EXPECT_EQ(QuantizedLinearBytes(64, 256, WeightFormat::kNf4, true), 64 * 256 / 2 + 256 + 4);
  // LLM.int8: one byte per weight and an fp32 scale per output row.
  EXPECT_EQ(QuantizedLinearBytes(64, 256, WeightFormat::kInt8, false), 64 * 256 + 4 * 256);
}

InferencePlan UserReportPlan(WeightFormat scorer) {
  InferencePlan plan;
  InferenceModel proposer;
  proposer.label = "proposer";
  proposer.model = **Catalog().Find("meta-llama/Meta-Llama-3-70B");
  proposer.format = WeightFormat::kNf4;
  proposer.double_quant = true;
  proposer.prompt_tokens = 1024;
  proposer.max_new_tokens = 512;
  InferenceModel target = proposer;
  target.label = "scorer";
  target.model = **Catalog().Find("meta-llama/Meta-Llama-3-8B");
  target.format = scorer;
  target.double_quant = false;
  target.role = InferenceRole::kScore;
  target.prompt_tokens = 1536;
  InferenceModel nli;
  nli.label = "nli";
  nli.model = **Catalog().Find("microsoft/deberta-v3-large");
  nli.role = InferenceRole::kClassify;
  nli.max_length = 512;
  nli.batch_size = 2;
  plan.models = {proposer, target, nli};
  plan.requests = 10;
  plan.device_memory = int64_t{80} << 30;
  return plan;
}

TEST(InferencePlan, UserReportDoesNotFitAtTenAndInt8RaisesTheCount) {
  auto fp16 = EvaluatePlan(UserReportPlan(WeightFormat::kFp16), DeviceMemoryModel::Cuda());
  ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
  EXPECT_FALSE(fp16->fits);
  EXPECT_GE(fp16->max_requests, 1);
  EXPECT_LT(fp16->max_requests, 10);
  auto int8 = EvaluatePlan(UserReportPlan(WeightFormat::kInt8), DeviceMemoryModel::Cuda());
  ASSERT_TRUE(int8.ok());
  EXPECT_GT(int8->max_requests, fp16->max_requests);
  // The largest count fits and one more does not.
  InferencePlan plan = UserReportPlan(WeightFormat::kFp16);
  plan.requests = fp16->max_requests;
  EXPECT_TRUE(EvaluatePlan(plan, DeviceMemoryModel::Cuda())->fits);
  plan.requests += 1;
  EXPECT_FALSE(EvaluatePlan(plan, DeviceMemoryModel::Cuda())->fits);
}

TEST(InferencePlan, SuggestionsThatFitComeFirst) {
  auto s = SuggestPlanChanges(UserReportPlan(WeightFormat::kFp16), DeviceMemoryModel::Cuda());
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(s->empty());
  EXPECT_TRUE(s->front().fits);
  bool requests = false;
  for (size_t k = 1; k < s->size(); ++k) {
    if ((*s)[k - 1].fits == (*s)[k].fits) {
      EXPECT_GE((*s)[k - 1].saved, (*s)[k].saved);
    }
    requests = requests || (*s)[k].change.find("parallel requests") != std::string::npos;
  }
  EXPECT_TRUE(requests || s->front().change.find("parallel requests") != std::string::npos);
}

// The prefill of a long prompt is dominated by the attention scores; SDPA does without them.
TEST(InferenceEstimate, EagerScoresAndSdpa) {
  InferenceModel m;
  m.label = "m";
  m.model = **Catalog().Find("meta-llama/Meta-Llama-3-8B");
  m.prompt_tokens = 4096;
  m.max_new_tokens = 16;
  auto eager = EstimateInference(m, DeviceMemoryModel::Cuda());
  m.attention = AttentionKernel::kSdpa;
  auto sdpa = EstimateInference(m, DeviceMemoryModel::Cuda());
  ASSERT_TRUE(eager.ok() && sdpa.ok());
  const int64_t scores = int64_t{32} * 4096 * 4096;             // heads x T x T elements
  EXPECT_GE(eager->prefill - sdpa->prefill, scores * (2 + 4));  // fp16 scores + fp32 softmax
  EXPECT_EQ(eager->kv_cache, (4096 + 16 - 1) * 128 * 1024);
}

Json PlanDoc() {
  return Json::parse(R"({
    "requests": 4, "device_memory": "80GiB",
    "models": [
      {"name": "gen", "model": "meta-llama/Meta-Llama-3-8B", "format": "nf4", "double_quant": true,
       "prompt_tokens": 512, "max_new_tokens": 128},
      {"name": "nli", "model": "microsoft/deberta-v3-large", "max_length": 256}
    ]})");
}

TEST(InferencePlanFile, ParsesAndNamesBadKeys) {
  auto plan = ParseInferencePlan(PlanDoc(), "plan.json", Catalog());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->models.size(), 2u);
  EXPECT_EQ(plan->models[1].role, InferenceRole::kClassify);
  EXPECT_EQ(*plan->device_memory, int64_t{80} << 30);

  auto error = [](Json doc) {
    auto p = ParseInferencePlan(doc, "plan.json", Catalog());
    return p.ok() ? std::string("ok") : p.status().message();
  };
  Json bad = PlanDoc();
  bad["models"][0]["format"] = "nf5";
  EXPECT_NE(error(bad).find(
                "plan.json: /models/0/format: unknown weight format 'nf5' (did you mean 'nf4'?)"),
            std::string::npos)
      << error(bad);
  bad = PlanDoc();
  bad["models"][0].erase("max_new_tokens");
  EXPECT_NE(error(bad).find("plan.json: /models/0: missing required key 'max_new_tokens'"),
            std::string::npos)
      << error(bad);
  bad = PlanDoc();
  bad["models"][0]["model"] = "meta-llama/Meta-Llama-3-8b";
  EXPECT_NE(error(bad).find("did you mean 'meta-llama/Meta-Llama-3-8B'?"), std::string::npos)
      << error(bad);
  bad = PlanDoc();
  bad["models"][1]["role"] = "generate";
  EXPECT_NE(error(bad).find("/models/1/role"), std::string::npos) << error(bad);
  bad = PlanDoc();
  bad["requests"] = 0;
  EXPECT_NE(error(bad).find("/requests"), std::string::npos);
}

TEST(InferencePlanFile, KvHeadsMustDivideHeads) {
  Json config = {{"model_type", "llama"},    {"num_hidden_layers", 2},
                 {"hidden_size", 64},        {"num_attention_heads", 8},
                 {"num_key_value_heads", 3}, {"intermediate_size", 128},
                 {"vocab_size", 100},        {"max_position_embeddings", 64}};
  auto m = ModelSpecFromHfConfig(config, "odd", "odd/config.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("odd/config.json"), std::string::npos);
  EXPECT_NE(
      m.status().message().find("num_key_value_heads 3 does not divide num_attention_heads 8"),
      std::string::npos)
      << m.status().message();
}

// A model name resolves through the Hugging Face cache layout: refs/main names the snapshot.
TEST(InferencePlanFile, ReadsConfigFromTheHfCache) {
  namespace fs = std::filesystem;
  const fs::path hub = fs::temp_directory_path() / fmt::format("tune-hf-{}", ::getpid());
  const fs::path repo = hub / "models--acme--tiny-llama";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "abc123");
  std::ofstream(repo / "refs" / "main") << "abc123";
  std::ofstream(repo / "snapshots" / "abc123" / "config.json") << R"({
      "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
      "max_position_embeddings": 256, "tie_word_embeddings": true})";
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  auto m = ResolveModel("acme/tiny-llama", Catalog());
  ::unsetenv("HF_HUB_CACHE");
  fs::remove_all(hub);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->model_type, "llama");
  EXPECT_EQ(DecoderShapeOf(*m)->kv_heads, 2);
  EXPECT_EQ(m->num_parameters, DecoderParameterCount(*m));
  auto missing = ResolveModel("acme/nothing", Catalog());
  EXPECT_FALSE(missing.ok());
}

TEST(InferencePlanFile, Gpt2ConfigKeys) {
  Json config = {{"model_type", "gpt2"}, {"n_layer", 12},      {"n_embd", 768},
                 {"n_head", 12},         {"n_inner", nullptr}, {"vocab_size", 50257},
                 {"n_positions", 1024}};
  auto m = ModelSpecFromHfConfig(config, "gpt2", "gpt2/config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_parameters, 124'439'808);
}

}  // namespace
}  // namespace tune

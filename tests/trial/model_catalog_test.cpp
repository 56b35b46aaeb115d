#include "tune/model_catalog.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

TEST(ModelCatalog, BuiltinHasTheUserReportModels) {
  auto c = ModelCatalog::Builtin();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::map<std::string, bool> heavy = {{"bert-base-uncased", false},
                                             {"bert-large-uncased", true},
                                             {"roberta-base", false},
                                             {"roberta-large", true},
                                             {"microsoft/deberta-v3-base", false},
                                             {"microsoft/deberta-v3-large", true},
                                             {"xlm-roberta-base", true}};
  for (const auto& [name, h] : heavy) {
    auto m = c->Find(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ((*m)->heavy, h) << name;
  }
}

// The stated parameter counts (Hugging Face's) agree with the architecture formula.
TEST(ModelCatalog, StatedCountsMatchTheEncoderFormula) {
  auto c = *ModelCatalog::Builtin();
  for (const auto& name : c.names()) {
    const ModelSpec* m = *c.Find(name);
    if (IsDecoderModelType(m->model_type)) continue;  // tests/memory/inference_test.cpp
    EXPECT_EQ(m->num_parameters, EncoderParameterCount(*m)) << name;
  }
  EXPECT_EQ((*c.Find("bert-base-uncased"))->num_parameters, 109482240);
}

TEST(ModelCatalog, UserModelsDeriveCountAndHeaviness) {
  auto c = *ModelCatalog::Builtin();
  Json add = {{"my-encoder",
               {{"model_type", "bert"},
                {"num_hidden_layers", 30},
                {"hidden_size", 1024},
                {"num_attention_heads", 16},
                {"intermediate_size", 4096},
                {"vocab_size", 30522},
                {"max_position_embeddings", 512},
                {"type_vocab_size", 2},
                {"team", "nlp"}}},
              {"bert-base-uncased", {{"heavy", true}}}};
  ASSERT_TRUE(c.Merge(add, "cfg.json", "/models").ok());
  const ModelSpec* m = *c.Find("my-encoder");
  EXPECT_GT(m->num_parameters, 200'000'000);
  EXPECT_TRUE(m->heavy);
  EXPECT_EQ(m->Attributes()["team"], "nlp");
  EXPECT_TRUE((*c.Find("bert-base-uncased"))->heavy);  // stated beats derived
  EXPECT_EQ((*c.Find("bert-base-uncased"))->num_parameters, 109482240);
}

TEST(ModelCatalog, ErrorsNameTheModelAndKey) {
  auto c = *ModelCatalog::Builtin();
  auto missing = c.Find("bert-base");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("did you mean 'bert-base-uncased'"), std::string::npos);
  Status bad = c.Merge({{"x", {{"num_hidden_layers", "many"}}}}, "cfg.json", "/models");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("cfg.json: /models/x/num_hidden_layers"), std::string::npos)
      << bad.message();
  Status incomplete = c.Merge({{"y", {{"hidden_size", 64}}}}, "cfg.json", "/models");
  EXPECT_FALSE(incomplete.ok());
}

TEST(ModelCatalog, TorchScriptEntriesNeedOnlyTheirFile) {
  ModelCatalog c = *ModelCatalog::Builtin();
  ASSERT_TRUE(c.Merge({{"mine",
                        {{"torchscript", "models/m.pt"},
                         {"vocab", "models/vocab.txt"},
                         {"family", "custom"}}}},
                      "/studies/cfg.json", "/models")
                  .ok());
  const ModelSpec& m = **c.Find("mine");
  EXPECT_TRUE(IsTorchScriptModel(m));
  EXPECT_EQ(m.model_type, "torchscript");
  EXPECT_EQ(m.torchscript, "/studies/models/m.pt");  // relative to the file of the entry
  EXPECT_EQ(m.extra["vocab"], "/studies/models/vocab.txt");
  EXPECT_EQ(m.extra["family"], "custom");
  EXPECT_EQ(m.num_parameters, 0);
  Status both = c.Merge({{"x", {{"torchscript", "m.pt"}, {"vocab", "v.txt"}, {"tokenizer", "d"}}}},
                        "/studies/cfg.json", "/models");
  EXPECT_NE(both.message().find("not both"), std::string::npos) << both.message();
  EXPECT_TRUE(LooksLikeTorchScriptFile("models/m.pt"));
  EXPECT_TRUE(LooksLikeTorchScriptFile("m.torchscript"));
  EXPECT_FALSE(LooksLikeTorchScriptFile("bert-base-uncased"));
}

}  // namespace
}  // namespace tune

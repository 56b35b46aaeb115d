#include "tune/search_space.h"

#include <gtest/gtest.h>

#include <fstream>

#include "config/config.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune {
namespace {

Json DemoDoc() {
  std::ifstream in(std::string(TUNE_SOURCE_DIR) + "/configs/demo.json");
  return Json::parse(in);
}

// The user reports' heavy/base space: every sampled trial obeys its branch.
TEST(ConditionalSpace, HeavyAndBaseModelsGetTheirOwnRanges) {
  Json doc = DemoDoc();
  auto space = ParseSearchSpace(doc["search_space"], doc["conditional"], *ModelCatalog::Builtin(),
                                "demo.json");
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study =
      Study::CreateOrLoad(storage, "s", {StudyDirection::kMinimize},
                          std::make_unique<RandomSampler>(), std::make_unique<NopPruner>(), 3)
          .value();
  int heavy = 0, base = 0;
  for (int i = 0; i < 300; ++i) {
    auto trial = study->Ask().value();
    auto params = space->Sample(*trial);
    ASSERT_TRUE(params.ok()) << params.status().ToString();
    const std::string model = (*params)["model"];
    const bool is_heavy = model.find("large") != std::string::npos || model == "xlm-roberta-base";
    const int bs = (*params)["batch_size"], ga = (*params)["grad_accum"],
              len = (*params)["max_length"];
    EXPECT_EQ(len % 32, 0);
    EXPECT_GE(len, 128);
    EXPECT_GE((*params)["lr"].get<double>(), 1e-6);
    EXPECT_LE((*params)["classifier_layers"].get<int>(), 3);
    if (is_heavy) {
      ++heavy;
      EXPECT_TRUE(bs == 8 || bs == 12 || bs == 16) << bs;
      EXPECT_LE(ga, 4);
      EXPECT_LE(len, 384);
    } else {
      ++base;
      EXPECT_LE(bs, 64);
      EXPECT_LE(len, 512);
    }
    EXPECT_EQ(params->size(), 9u);
    ASSERT_TRUE(study->Tell(*trial, TrialState::kComplete, {0.0}).ok());
  }
  EXPECT_GT(heavy, 50);
  EXPECT_GT(base, 50);
  // Base trials reach values outside the heavy range.
  auto trials = *study->Trials();
  bool big_batch = false;
  for (const auto& t : trials) big_batch |= t.param("batch_size").get<int>() > 16;
  EXPECT_TRUE(big_batch);
}

TEST(ConditionalSpace, ConditionsOnSampledValuesAndOperators) {
  Json space = Json::parse(R"({
    "optimizer": ["adamw", "sgd"],
    "head_layers": {"type": "int", "low": 0, "high": 3}
  })");
  Json conditional = Json::parse(R"([
    {"when": {"optimizer": "sgd"}, "search_space": {"momentum": {"type": "float", "low": 0.0, "high": 0.99}}},
    {"when": {"head_layers": {">=": 1}}, "search_space": {"head_dim": [128, 256]},
     "conditional": [
       {"when": {"head_layers": {"in": [2, 3]}, "head_dim": 256}, "search_space": {"head_dropout": {"type": "float", "low": 0, "high": 0.5}}}
     ]}
  ])");
  auto s = ParseSearchSpace(space, conditional, *ModelCatalog::Builtin(), "t.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->Holds(s->root().children[0].when, {{"optimizer", "sgd"}}));
  EXPECT_FALSE(s->Holds(s->root().children[0].when, {{"optimizer", "adamw"}}));
  EXPECT_FALSE(s->Holds(s->root().children[1].when, {{"head_layers", 0}}));
  EXPECT_TRUE(s->Holds(s->root().children[1].when, {{"head_layers", 2}}));
  const auto& nested = s->root().children[1].children[0].when;
  EXPECT_TRUE(s->Holds(nested, {{"head_layers", 3}, {"head_dim", 256}}));
  EXPECT_FALSE(s->Holds(nested, {{"head_layers", 1}, {"head_dim", 256}}));
  EXPECT_EQ(s->ActiveParams({{"optimizer", "adamw"}, {"head_layers", 0}}).size(), 2u);
  EXPECT_EQ(s->ParamNames(), (std::vector<std::string>{"head_layers", "optimizer", "momentum",
                                                       "head_dim", "head_dropout"}));
}

}  // namespace
}  // namespace tune

#include "tune/objectives/functions.h"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

namespace tune {
namespace {

double Eval(const std::string& name, const Json& params, int64_t dims = 2) {
  FunctionOptions o;
  o.name = name;
  o.dims = dims;
  auto v = EvaluateFunction(o, *ModelCatalog::Builtin(), params);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.value_or(NAN);
}

TEST(Functions, KnownMinima) {
  EXPECT_DOUBLE_EQ(Eval("sphere", {{"x0", 0.0}, {"x1", 0.0}}), 0.0);
  EXPECT_DOUBLE_EQ(Eval("sphere", {{"x0", 1.0}, {"x1", 2.0}}), 5.0);
  EXPECT_DOUBLE_EQ(Eval("rosenbrock", {{"x0", 1.0}, {"x1", 1.0}, {"x2", 1.0}}, 3), 0.0);
  EXPECT_NEAR(Eval("branin", {{"x1", -std::numbers::pi}, {"x2", 12.275}}), 0.397887, 1e-5);
  EXPECT_NEAR(Eval("branin", {{"x1", 9.42478}, {"x2", 2.475}}), 0.397887, 1e-5);
  EXPECT_NEAR(Eval("hartmann6", {{"x0", 0.20169}, {"x1", 0.150011}, {"x2", 0.476874},
                                 {"x3", 0.275332}, {"x4", 0.311652}, {"x5", 0.6573}}),
              -3.32237, 1e-4);
}

TEST(Functions, MixedPrefersLargeModelsAtTheirLearningRate) {
  Json good = {{"model", "microsoft/deberta-v3-large"}, {"batch_size", 16}, {"grad_accum", 2},
               {"max_length", 384}, {"lr", 1e-5}, {"weight_decay", 0.01}};
  Json base = good;
  base["model"] = "bert-base-uncased";
  base["lr"] = 3e-5;
  Json bad_lr = good;
  bad_lr["lr"] = 1e-3;
  Json short_len = good;
  short_len["max_length"] = 128;
  EXPECT_LT(Eval("mixed", good), Eval("mixed", base));
  EXPECT_LT(Eval("mixed", good), Eval("mixed", bad_lr));
  EXPECT_LT(Eval("mixed", good), Eval("mixed", short_len));
  EXPECT_NEAR(Eval("mixed", good), 0.11, 0.02);
}

TEST(Functions, MixedOomRegion) {
  FunctionOptions o;
  o.name = "mixed";
  o.oom_threshold = 8192;
  auto catalog = *ModelCatalog::Builtin();
  Json small = {{"model", "bert-base-uncased"}, {"batch_size", 16}, {"max_length", 512}};
  Json big = {{"model", "bert-large-uncased"}, {"batch_size", 16}, {"max_length", 512}};
  EXPECT_TRUE(EvaluateFunction(o, catalog, small).ok());
  auto r = EvaluateFunction(o, catalog, big);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_DOUBLE_EQ(MixedMemoryProxy(catalog, big), 16 * 512 * (24.0 * 1024) / (12 * 768));
}

TEST(Functions, DefaultSpacesCoverTheParameters) {
  for (const auto& name : FunctionNames()) {
    FunctionOptions o;
    o.name = name;
    EXPECT_FALSE(FunctionDefaultSpace(o).empty()) << name;
  }
  FunctionOptions o;
  o.name = "mixed";
  EXPECT_EQ(FunctionDefaultSpace(o).size(), 6u);  // the benchmark space of the user reports
  o.name = "nope";
  EXPECT_FALSE(EvaluateFunction(o, *ModelCatalog::Builtin(), Json::object()).ok());
}

}  // namespace
}  // namespace tune

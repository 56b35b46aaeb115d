#include "tune/objectives/functions.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

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
  EXPECT_NEAR(Eval("hartmann6", {{"x0", 0.20169},
                                 {"x1", 0.150011},
                                 {"x2", 0.476874},
                                 {"x3", 0.275332},
                                 {"x4", 0.311652},
                                 {"x5", 0.6573}}),
              -3.32237, 1e-4);
}

TEST(Functions, MixedPrefersLargeModelsAtTheirLearningRate) {
  Json good = {{"model", "microsoft/deberta-v3-large"},
               {"batch_size", 16},
               {"grad_accum", 2},
               {"max_length", 384},
               {"lr", 1e-5},
               {"weight_decay", 0.01}};
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

namespace tune {
namespace {

Json Xs(const std::vector<double>& x) {
  Json p = Json::object();
  for (size_t i = 0; i < x.size(); ++i) p[fmt::format("x{}", i)] = x[i];
  return p;
}

TEST(Functions, MultiObjectiveProblemsOnTheirFronts) {
  const ModelCatalog catalog = *ModelCatalog::Builtin();
  FunctionOptions o;
  for (const char* name : {"zdt1", "zdt2", "zdt3"}) {
    o.name = name;
    EXPECT_EQ(FunctionObjectives(name), 2);
    EXPECT_EQ(FunctionDefaultSpace(o).size(), 10u);
    std::vector<double> x(10, 0.0);
    x[0] = 0.25;  // on the front: g = 1
    auto v = EvaluateFunctionValues(o, catalog, Xs(x));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    const double f2 = std::string(name) == "zdt1" ? 1 - std::sqrt(0.25)
                      : std::string(name) == "zdt2"
                          ? 1 - 0.0625
                          : 1 - 0.5 - 0.25 * std::sin(2.5 * std::numbers::pi);
    EXPECT_NEAR((*v)[0], 0.25, 1e-15) << name;
    EXPECT_NEAR((*v)[1], f2, 1e-12) << name;
    x[5] = 1.0;  // off the front: g = 2
    EXPECT_GT((*EvaluateFunctionValues(o, catalog, Xs(x)))[1], f2 + 0.5) << name;
  }
  o.name = "dtlz2";
  std::vector<double> x(12, 0.5);
  x[0] = 0.3;
  x[1] = 0.8;
  auto d = *EvaluateFunctionValues(o, catalog, Xs(x));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NEAR(d[0] * d[0] + d[1] * d[1] + d[2] * d[2], 1.0, 1e-12);  // the unit sphere
  o.name = "wfg4";
  std::vector<double> z(10);
  for (int i = 0; i < 10; ++i) z[i] = 0.35 * 2 * (i + 1);  // every s_multi at its minimum 0
  auto w = *EvaluateFunctionValues(o, catalog, Xs(z));
  // Position 0 (all position variables at 0.35 -> t = 0 after s_multi): f = (0, 4).
  EXPECT_NEAR(w[0], 0.0, 1e-12);
  EXPECT_NEAR(w[1], 4.0, 1e-12);
  // A multi-objective function has no single value.
  EXPECT_FALSE(EvaluateFunction(o, catalog, Xs(z)).ok());
}

TEST(Functions, MixedMemoryReturnsErrorAndMemory) {
  const ModelCatalog catalog = *ModelCatalog::Builtin();
  FunctionOptions o;
  o.name = "mixed_memory";
  o.oom_threshold = 20000;
  Json p = {{"model", "bert-base-uncased"},
            {"batch_size", 16},
            {"grad_accum", 2},
            {"max_length", 256},
            {"lr", 3e-5},
            {"weight_decay", 0.01}};
  auto v = EvaluateFunctionValues(o, catalog, p);
  ASSERT_TRUE(v.ok());
  EXPECT_NEAR((*v)[1], 16 * 256, 1e-9);
  FunctionOptions mixed = o;
  mixed.name = "mixed";
  EXPECT_EQ((*v)[0], *EvaluateFunction(mixed, catalog, p));
  p["batch_size"] = 64;
  p["max_length"] = 512;
  EXPECT_EQ(EvaluateFunctionValues(o, catalog, p).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tune

#include "tune/distributions.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "testing/temp_dir.h"
#include "util/py_json.h"

namespace tune {
namespace {

TEST(Distributions, InternalAndExternalRepresentation) {
  CategoricalDistribution c = *MakeCategoricalDistribution({"bert", 8, 1.5, true, nullptr});
  EXPECT_EQ(*ToInternal(c, "bert"), 0.0);
  EXPECT_EQ(*ToInternal(c, 8), 1.0);
  EXPECT_EQ(*ToInternal(c, true), 3.0);
  EXPECT_EQ(*ToInternal(c, nullptr), 4.0);
  EXPECT_EQ(ToExternal(c, 2.0), Json(1.5));
  EXPECT_FALSE(ToInternal(c, "roberta").ok());

  IntDistribution i = *MakeIntDistribution(128, 512, false, 32);
  EXPECT_EQ(*ToInternal(i, 288), 288.0);
  EXPECT_TRUE(ToExternal(i, 288.0).is_number_integer());
  EXPECT_FALSE(ToInternal(i, 2.5).ok());
  EXPECT_FALSE(ToInternal(i, "x").ok());

  FloatDistribution f = *MakeFloatDistribution(1e-6, 1e-3, true);
  EXPECT_EQ(*ToInternal(f, 1e-4), 1e-4);  // not its log
  EXPECT_FALSE(ToInternal(f, std::nan("")).ok());
}

TEST(Distributions, StepNormalisesHighLikeOptuna) {
  EXPECT_EQ(MakeIntDistribution(128, 500, false, 32)->high, 480);
  EXPECT_EQ(MakeFloatDistribution(0.0, 1.0, false, 0.3)->high, 0.9);
  EXPECT_EQ(MakeFloatDistribution(0.0, 1.0, false, 0.25)->high, 1.0);
  EXPECT_TRUE(StepDividesRange(0.0, 0.3, 0.1));
  EXPECT_FALSE(StepDividesRange(0.0, 1.0, 0.3));
}

TEST(Distributions, ValidationErrors) {
  EXPECT_FALSE(MakeFloatDistribution(2, 1).ok());
  EXPECT_FALSE(MakeFloatDistribution(0, 1, true).ok());
  EXPECT_FALSE(MakeFloatDistribution(1, 2, true, 0.5).ok());
  EXPECT_FALSE(MakeFloatDistribution(0, 1, false, -1.0).ok());
  EXPECT_FALSE(MakeIntDistribution(0, 10, true).ok());
  EXPECT_FALSE(MakeIntDistribution(1, 10, true, 2).ok());
  EXPECT_FALSE(MakeIntDistribution(1, 10, false, 0).ok());
  EXPECT_FALSE(MakeCategoricalDistribution({}).ok());
  EXPECT_FALSE(MakeCategoricalDistribution({Json::array({1, 2})}).ok());
}

TEST(Distributions, ContainsAndSingle) {
  auto i = *MakeIntDistribution(128, 512, false, 32);
  EXPECT_TRUE(Contains(i, 160));
  EXPECT_FALSE(Contains(i, 161));
  EXPECT_FALSE(Contains(i, 544));
  auto f = *MakeFloatDistribution(0, 1, false, 0.25);
  EXPECT_TRUE(Contains(f, 0.75));
  EXPECT_FALSE(Contains(f, 0.7));
  EXPECT_TRUE(IsSingle(*MakeIntDistribution(3, 3)));
  EXPECT_TRUE(IsSingle(*MakeIntDistribution(0, 1, false, 2)));  // high normalised to 0
  EXPECT_TRUE(IsSingle(*MakeCategoricalDistribution({"only"})));
  EXPECT_FALSE(IsSingle(*MakeFloatDistribution(0, 1)));
}

TEST(Distributions, JsonIsOptunasText) {
  // The exact strings of docs/cli.md, distribution_json and param_value.
  EXPECT_EQ(
      DistributionToJson(*MakeFloatDistribution(1e-6, 1e-3, true)),
      R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-06, "high": 0.001, "log": true}})");
  EXPECT_EQ(
      DistributionToJson(*MakeFloatDistribution(0.0, 0.1)),
      R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.1, "log": false}})");
  EXPECT_EQ(
      DistributionToJson(*MakeFloatDistribution(0, 1, false, 0.25)),
      R"({"name": "FloatDistribution", "attributes": {"step": 0.25, "low": 0.0, "high": 1.0, "log": false}})");
  EXPECT_EQ(
      DistributionToJson(*MakeIntDistribution(128, 512, false, 32)),
      R"({"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 128, "high": 512}})");
  EXPECT_EQ(
      DistributionToJson(*MakeIntDistribution(1, 1024, true)),
      R"({"name": "IntDistribution", "attributes": {"log": true, "step": 1, "low": 1, "high": 1024}})");
  EXPECT_EQ(
      DistributionToJson(*MakeCategoricalDistribution({"bert-base", "roberta-base"})),
      R"({"name": "CategoricalDistribution", "attributes": {"choices": ["bert-base", "roberta-base"]}})");
  EXPECT_EQ(
      DistributionToJson(*MakeCategoricalDistribution({nullptr, true, 1.5, "x"})),
      R"({"name": "CategoricalDistribution", "attributes": {"choices": [null, true, 1.5, "x"]}})");
}

TEST(Distributions, JsonRoundTripAndLegacyNames) {
  std::vector<Distribution> ds = {
      *MakeFloatDistribution(1e-6, 1e-3, true), *MakeFloatDistribution(-2.5, 7.25, false, 0.25),
      *MakeIntDistribution(128, 512, false, 32), *MakeIntDistribution(1, 1024, true),
      *MakeCategoricalDistribution({8, 12, "x", nullptr, false, 0.5})};
  for (const auto& d : ds) {
    auto back = DistributionFromJson(DistributionToJson(d));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, d) << DistributionToJson(d);
  }
  auto u = DistributionFromJson(
      R"({"name": "LogUniformDistribution", "attributes": {"low": 1e-5, "high": 1.0}})");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(*u, Distribution(*MakeFloatDistribution(1e-5, 1.0, true)));
  auto q = DistributionFromJson(
      R"({"name": "DiscreteUniformDistribution", "attributes": {"low": 0, "high": 1, "q": 0.5}})");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, Distribution(*MakeFloatDistribution(0, 1, false, 0.5)));
  auto iu = DistributionFromJson(
      R"({"name": "IntUniformDistribution", "attributes": {"low": 1, "high": 9, "step": 2}})");
  ASSERT_TRUE(iu.ok());
  EXPECT_EQ(*iu, Distribution(*MakeIntDistribution(1, 9, false, 2)));
  EXPECT_FALSE(DistributionFromJson(R"({"name": "Nope", "attributes": {}})").ok());
  EXPECT_FALSE(DistributionFromJson("not json").ok());
}

TEST(Distributions, CompatibilityFollowsOptuna) {
  auto a = *MakeIntDistribution(1, 10);
  auto b = *MakeIntDistribution(1, 20);
  EXPECT_TRUE(CheckCompatibility(a, b).ok());  // bounds may change
  EXPECT_FALSE(CheckCompatibility(a, *MakeIntDistribution(1, 10, true)).ok());
  EXPECT_FALSE(CheckCompatibility(a, *MakeFloatDistribution(1, 10)).ok());
  EXPECT_FALSE(CheckCompatibility(*MakeCategoricalDistribution({8, 16}),
                                  *MakeCategoricalDistribution({8, 32}))
                   .ok());
}

TEST(Distributions, PyFloatReprMatchesPython) {
  EXPECT_EQ(PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(PyFloatRepr(1e-6), "1e-06");
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
}

// Debian's Optuna produces the same distribution_json text for random distributions.
TEST(Distributions, ByteIdenticalToDebianOptuna) {
  if (std::system("/usr/bin/python3 -c 'import optuna' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-optuna is not installed (scripts/install-deps.sh installs it)";
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1000, 1000);
  testing::TempDir dir;
  std::string script = "import json, optuna.distributions as d\n";
  std::vector<std::string> ours;
  for (int k = 0; k < 40; ++k) {
    double lo = u(rng), hi = lo + std::abs(u(rng));
    double step = std::round(std::abs(u(rng))) / 64 + 0.5;
    int64_t ilo = static_cast<int64_t>(lo), ihi = static_cast<int64_t>(hi) + 5;
    int64_t istep = 1 + k % 7;
    Distribution dists[] = {
        *MakeFloatDistribution(lo, hi),
        *MakeFloatDistribution(std::abs(lo) + 1e-9, std::abs(lo) + std::abs(hi) + 1, true),
        *MakeFloatDistribution(lo, lo + 10 * step, false, step),
        *MakeIntDistribution(ilo, ihi, false, istep)};
    script += fmt::format("print(d.distribution_to_json(d.FloatDistribution({}, {})))\n",
                          PyFloatRepr(lo), PyFloatRepr(hi));
    script +=
        fmt::format("print(d.distribution_to_json(d.FloatDistribution({}, {}, log=True)))\n",
                    PyFloatRepr(std::abs(lo) + 1e-9), PyFloatRepr(std::abs(lo) + std::abs(hi) + 1));
    script += fmt::format("print(d.distribution_to_json(d.FloatDistribution({}, {}, step={})))\n",
                          PyFloatRepr(lo), PyFloatRepr(lo + 10 * step), PyFloatRepr(step));
    script += fmt::format("print(d.distribution_to_json(d.IntDistribution({}, {}, step={})))\n",
                          ilo, ihi, istep);
    for (const auto& x : dists) ours.push_back(DistributionToJson(x));
  }
  script +=
      "print(d.distribution_to_json(d.CategoricalDistribution(['b\\u00e9rt', 8, 2.5, None, "
      "True])))\n";
  ours.push_back(
      DistributionToJson(*MakeCategoricalDistribution({"b\u00e9rt", 8, 2.5, nullptr, true})));
  std::ofstream(dir.path() / "gen.py") << script;
  std::string cmd = "/usr/bin/python3 -W ignore " + (dir.path() / "gen.py").string();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0);
  std::vector<std::string> theirs;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    theirs.push_back(out.substr(pos, nl - pos));
    pos = nl + 1;
  }
  ASSERT_EQ(theirs.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(ours[i], theirs[i]) << "line " << i;
}

}  // namespace
}  // namespace tune

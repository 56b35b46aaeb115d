// TPE sampler: gamma and weights, the ranking/split rules on hand-built histories (Optuna's
// _get_observation_pairs / _split_trials), determinism, constant liar, multivariate spaces and
// groups, and behaviour on whole studies (convergence, avoiding an OOM region).
#include "tune/samplers/tpe.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "config/config.h"
#include "samplers/tpe_model.h"
#include "tune/optimize.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

FloatDistribution X() { return *MakeFloatDistribution(0.0, 1.0); }

struct T {
  TrialState state;
  std::optional<double> value;
  std::map<int64_t, double> reports = {};
  bool has_x = true;
  Json system_attrs = Json::object();
};

TrialHistory History(const std::vector<T>& spec,
                     StudyDirection direction = StudyDirection::kMinimize) {
  TrialHistory h;
  h.study_name = "s";
  h.directions = {direction};
  for (size_t i = 0; i < spec.size(); ++i) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = static_cast<int64_t>(i);
    t->trial_id = t->number + 1;
    t->state = spec[i].state;
    if (spec[i].value) t->values = {*spec[i].value};
    t->intermediate_values = spec[i].reports;
    t->system_attrs = spec[i].system_attrs;
    if (spec[i].has_x) {
      t->params["x"] = 0.01 * static_cast<double>(i);
      t->distributions["x"] = X();
    }
    h.trials.push_back(t);
  }
  return h;
}

FrozenTrial Current(int64_t number) {
  FrozenTrial t;
  t.number = number;
  return t;
}

TEST(Tpe, GammaAndWeightsAsOptuna) {
  TpeOptions o;
  EXPECT_EQ(TpeGamma(o, 1), 1);
  EXPECT_EQ(TpeGamma(o, 10), 1);
  EXPECT_EQ(TpeGamma(o, 11), 2);
  EXPECT_EQ(TpeGamma(o, 249), 25);
  EXPECT_EQ(TpeGamma(o, 5000), 25);
  o.gamma_hyperopt = true;
  EXPECT_EQ(TpeGamma(o, 100), 3);  // ceil(0.25 * 10) = 3
  EXPECT_EQ(TpeGamma(o, 20000), 25);
  o.gamma_sqrt_beta = 0.75;
  EXPECT_EQ(TpeGamma(o, 100), 8);  // ceil(0.75 * 10)

  TpeOptions w;
  EXPECT_TRUE(TpeWeights(w, 0).empty());
  EXPECT_EQ(TpeWeights(w, 24), std::vector<double>(24, 1.0));
  auto w30 = TpeWeights(w, 30);  // linspace(1/30, 1, 5) then 25 ones
  ASSERT_EQ(w30.size(), 30u);
  EXPECT_NEAR(w30[0], 1.0 / 30, 1e-15);
  EXPECT_NEAR(w30[1], 1.0 / 30 + (1 - 1.0 / 30) / 4, 1e-15);
  EXPECT_NEAR(w30[4], 1.0, 1e-15);
  EXPECT_EQ(w30[29], 1.0);
  w.weights = WeightRule::kUniform;
  EXPECT_EQ(TpeWeights(w, 30), std::vector<double>(30, 1.0));
  w.weights = WeightRule::kExpectedImprovement;  // above: uniform; below: see the next test
  EXPECT_EQ(TpeWeights(w, 30), std::vector<double>(30, 1.0));
}

// WeightRule::kExpectedImprovement (Watanabe 2023): a below trial weighs max(1e-12, t - value),
// t the value of the best trial above, and the below estimator's prior weighs their mean.
TEST(Tpe, ExpectedImprovementWeightsTheBelowSet) {
  const std::vector<double> values = {5, 1, 4, 2, 9, 3, 7, 8, 6, 0.5};
  std::vector<T> spec;
  for (double v : values) spec.push_back({TrialState::kComplete, v});
  TpeOptions o;
  o.gamma_ratio = 0.3;  // gamma(10) = 3: trials 1 (1), 3 (2), 9 (0.5); t = 3 (trial 5)
  o.weights = WeightRule::kExpectedImprovement;
  TpeSampler tpe(o);
  TpeModel m = tpe.Model(History(spec), Current(10), {{"x", X()}});
  ASSERT_EQ(m.split.below, (std::vector<int64_t>{1, 3, 9}));
  const double prior = (2.0 + 1.0 + 2.5) / 3, total = 5.5 + prior;
  ASSERT_EQ(m.below.weights().size(), 4u);
  EXPECT_NEAR(m.below.weights()[0], 2.0 / total, 1e-12);
  EXPECT_NEAR(m.below.weights()[1], 1.0 / total, 1e-12);
  EXPECT_NEAR(m.below.weights()[2], 2.5 / total, 1e-12);
  EXPECT_NEAR(m.below.weights()[3], prior / total, 1e-12);
  EXPECT_NEAR(m.above.weights()[0], 1.0 / 8, 1e-12);  // 7 uniform observations + the prior

  // Without a finite value at the threshold (the best trial above is PRUNED): uniform.
  std::vector<T> pruned = {{TrialState::kComplete, 1.0},
                           {TrialState::kPruned, std::nullopt},
                           {TrialState::kPruned, std::nullopt},
                           {TrialState::kPruned, std::nullopt}};
  o.gamma_ratio = 0.25;
  TpeModel u = TpeSampler(o).Model(History(pruned), Current(4), {{"x", X()}});
  EXPECT_NEAR(u.below.weights()[0], 0.5, 1e-12);
}

TEST(Tpe, SplitRanksCompleteThenDeeperPrunedThenUnreportedPruned) {
  // gamma = ceil(0.6 * 5) = 3 of the 5 COMPLETE/PRUNED trials are "below".
  TpeOptions o;
  o.gamma_ratio = 0.6;
  o.constant_liar = false;
  TpeSampler tpe(o);
  auto h = History({
      {TrialState::kComplete, 2.0},                      // 0: complete -> first
      {TrialState::kPruned, 0.5, {{0, 1.0}, {1, 0.5}}},  // 1: pruned at step 1, 0.5
      {TrialState::kPruned, 0.1, {{0, 0.1}}},            // 2: pruned at step 0 (shallower)
      {TrialState::kPruned, std::nullopt},               // 3: pruned without reports (OOM)
      {TrialState::kPruned, std::nullopt, {{0, 0.2}, {1, kNaN}}},  // 4: step 1, NaN -> +inf
      {TrialState::kFail, std::nullopt},                           // 5: ignored
      {TrialState::kWaiting, std::nullopt},                        // 6: ignored
      {TrialState::kRunning, std::nullopt},  // 7: ignored without constant liar
  });
  TpeSplit s = tpe.Split(h, Current(8), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{2, 3}));
}

TEST(Tpe, SplitFollowsTheDirectionAndDropsTrialsLackingTheParameter) {
  TpeOptions o;
  o.gamma_ratio = 0.5;  // ceil(0.5 * 4) = 2
  TpeSampler tpe(o);
  auto h = History({{TrialState::kComplete, 1.0},
                    {TrialState::kComplete, 4.0, {}, /*has_x=*/false},
                    {TrialState::kComplete, 3.0},
                    {TrialState::kComplete, 2.0}},
                   StudyDirection::kMaximize);
  // Best two by value (maximize): 1 (4.0, lacks x -> dropped after the split) and 2 (3.0).
  TpeSplit s = tpe.Split(h, Current(4), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{0, 3}));
}

TEST(Tpe, ConstantLiarPutsOtherRunningTrialsAbove) {
  TpeOptions o;
  o.constant_liar = true;
  TpeSampler tpe(o);
  auto h = History({{TrialState::kRunning, std::nullopt},
                    {TrialState::kComplete, 1.0},
                    {TrialState::kRunning, std::nullopt},
                    {TrialState::kComplete, 5.0},
                    {TrialState::kRunning, std::nullopt, {}, /*has_x=*/false}});
  // gamma(2) = 1: trial 1 below; above chronologically: 0 (running), 2 (running), 3; 4 lacks x;
  // the asking trial itself (2 here) is left out.
  TpeSplit s = tpe.Split(h, Current(2), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{1}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{0, 3}));
  s = tpe.Split(h, Current(9), "x", X());
  EXPECT_EQ(s.above, (std::vector<int64_t>{0, 2, 3}));
}

TEST(Tpe, ConstraintsRankFeasibleFirstThenLeastViolating) {
  TpeOptions o;
  o.constraints = true;
  o.gamma_ratio = 0.5;  // gamma(4) = 2
  TpeSampler tpe(o);
  auto c = [](std::vector<double> v) { return Json{{"constraints", v}}; };
  auto h = History({{TrialState::kComplete, 0.1, {}, true, c({1.0, 2.0})},   // violation 3
                    {TrialState::kComplete, 9.0, {}, true, c({-1.0})},       // feasible
                    {TrialState::kComplete, 0.2, {}, true, c({0.5, -3.0})},  // violation 0.5
                    {TrialState::kComplete, 0.3, {}, true, c({4.0})}});      // violation 4
  // One feasible trial (1); the second "below" slot goes to the least violating (2).
  TpeSplit s = tpe.Split(h, Current(4), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{0, 3}));
}

TEST(Tpe, NaNConstraintEntriesCountAsSatisfied) {
  // Optuna sums the entries > 0 (NaN > 0 is false), so [NaN, 2] violates by 2 and [NaN] is
  // feasible; the codec turns Optuna's stored NaN into a NaN number. Found by the differential
  // test against Optuna 4.9 (tests/differential/tpe_diff.py): the NaN used to make the whole sum
  // NaN, and the trial feasible.
  TpeOptions o;
  o.constraints = true;
  o.gamma_ratio = 0.5;  // gamma(4) = 2
  TpeSampler tpe(o);
  auto c = [](std::vector<double> v) { return Json{{"constraints", v}}; };
  auto h = History({{TrialState::kComplete, 0.1, {}, true, c({kNaN, 2.0})},  // violation 2
                    {TrialState::kComplete, 9.0, {}, true, c({kNaN})},       // feasible
                    {TrialState::kComplete, 5.0, {}, true, c({-1.0})},       // feasible
                    {TrialState::kComplete, 0.3, {}, true, c({1.0})}});      // violation 1
  TpeSplit s = tpe.Split(h, Current(4), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{0, 3}));
}

TEST(Tpe, FilteredHistoriesOnlyUseTheirOwnTrials) {
  // A Hyperband bracket hands the sampler a subset; the index must not leak other trials.
  TpeOptions o;
  o.gamma_ratio = 0.5;
  TpeSampler tpe(o);
  auto full = History({{TrialState::kComplete, 1.0},
                       {TrialState::kComplete, 2.0},
                       {TrialState::kComplete, 3.0},
                       {TrialState::kComplete, 4.0}});
  TpeSplit all = tpe.Split(full, Current(4), "x", X());
  EXPECT_EQ(all.below, (std::vector<int64_t>{0, 1}));
  TrialHistory part = full;
  part.trials = {full.trials[1], full.trials[3]};
  TpeSplit s = tpe.Split(part, Current(4), "x", X());
  EXPECT_EQ(s.below, (std::vector<int64_t>{1}));
  EXPECT_EQ(s.above, (std::vector<int64_t>{3}));
}

// ---------------------------------------------------------------------------------------------
// Whole studies.

std::unique_ptr<Study> NewStudy(std::unique_ptr<Sampler> sampler, uint64_t seed,
                                std::shared_ptr<Storage> storage = NewInMemoryStorage()) {
  return std::move(Study::CreateOrLoad(storage, "s", {StudyDirection::kMinimize},
                                       std::move(sampler), std::make_unique<NopPruner>(), seed))
      .value();
}

// Runs n trials of a 2-D sphere; returns the params of every trial and the best value.
std::pair<std::vector<std::pair<double, double>>, double> RunSphere(std::unique_ptr<Sampler> s,
                                                                    uint64_t seed, int n) {
  auto study = NewStudy(std::move(s), seed);
  std::vector<std::pair<double, double>> xs;
  double best = INFINITY;
  for (int i = 0; i < n; ++i) {
    auto trial = std::move(study->Ask()).value();
    double x = *trial->SuggestFloat("x", -5, 5);
    double y = *trial->SuggestFloat("y", -5, 5);
    xs.emplace_back(x, y);
    double v = x * x + y * y;
    best = std::min(best, v);
    EXPECT_TRUE(study->Tell(*trial, TrialState::kComplete, {v}).ok());
  }
  return {xs, best};
}

// Optuna 5.0's constant liar with joint sampling: a trial shares its joint sample as soon as
// it is drawn ("tpe:relative_params:<i>", JSON of the external values in chunks of 2045
// characters), and a RUNNING trial's shared sample counts as its values until it suggests them.
TEST(Tpe, SharesItsJointSampleAndReadsOthersAsOptuna50Does) {
  // Sharing: a study's trial after the startup trials.
  auto study = NewStudy(std::make_unique<TpeSampler>(), 5);
  for (int i = 0; i < 12; ++i) {
    auto trial = std::move(study->Ask()).value();
    const double x = *trial->SuggestFloat("x", -5, 5);
    const Json c = *trial->SuggestCategorical("c", {"a", "b"});
    ASSERT_TRUE(study->Tell(*trial, TrialState::kComplete, {x * x + (c == "a" ? 0 : 1)}).ok());
  }
  const std::vector<FrozenTrial> trials = *study->Trials();
  const FrozenTrial& last = trials.back();
  ASSERT_TRUE(last.system_attrs.contains("tpe:relative_params:0")) << last.system_attrs.dump();
  const Json shared = Json::parse(last.system_attrs.at("tpe:relative_params:0").get<std::string>());
  EXPECT_EQ(shared.at("x"), Json(ToExternal(last.distributions.at("x"), last.params.at("x"))));
  EXPECT_EQ(shared.at("c"), Json(ToExternal(last.distributions.at("c"), last.params.at("c"))));
  EXPECT_FALSE(trials[3].system_attrs.contains("tpe:relative_params:0"));  // a startup trial

  // Long samples are cut into chunks that join up again.
  const std::string long_choice(3000, 'q');
  const SearchSpace space = {{"c", *MakeCategoricalDistribution({Json(long_choice), Json("b")})}};
  const SamplerRecords records = TpeSampler().AfterSampleRelative(space, {{"c", 0.0}});
  ASSERT_EQ(records.trial_system_attrs.size(), 2u);
  EXPECT_EQ(records.trial_system_attrs.at("tpe:relative_params:0").get<std::string>().size(),
            2045u);
  EXPECT_EQ(Json::parse(records.trial_system_attrs.at("tpe:relative_params:0").get<std::string>() +
                        records.trial_system_attrs.at("tpe:relative_params:1").get<std::string>()),
            Json({{"c", long_choice}}));
  TpeOptions no_liar;
  no_liar.constant_liar = false;
  EXPECT_TRUE(
      TpeSampler(no_liar).AfterSampleRelative(space, {{"c", 0.0}}).trial_system_attrs.empty());

  // Reading: trial 5 runs without params yet, but shared x = 0.5.
  std::vector<T> spec;
  for (int i = 0; i < 5; ++i) spec.push_back({TrialState::kComplete, 1.0 * i});
  spec.push_back({TrialState::kRunning,
                  std::nullopt,
                  {},
                  false,
                  Json{{"tpe:relative_params:0", R"({"x": 0.5})"}}});
  const TrialHistory h = History(spec);
  TpeModel joint = TpeSampler().Model(h, Current(6), {{"x", X()}});
  EXPECT_EQ(joint.split.above.back(), 5) << "the shared sample is an above observation";
  TpeOptions independent;
  independent.multivariate = false;  // Optuna reads shared samples only when multivariate
  TpeModel apart = TpeSampler(independent).Model(h, Current(6), {{"x", X()}});
  EXPECT_NE(apart.split.above.back(), 5);
}

TEST(Tpe, SameSeedSameProposalsOtherSeedOthers) {
  auto a = RunSphere(std::make_unique<TpeSampler>(), 7, 40);
  auto b = RunSphere(std::make_unique<TpeSampler>(), 7, 40);
  auto c = RunSphere(std::make_unique<TpeSampler>(), 8, 40);
  EXPECT_EQ(a.first, b.first);
  EXPECT_NE(a.first, c.first);
  TpeOptions mv;
  mv.multivariate = true;
  EXPECT_EQ(RunSphere(std::make_unique<TpeSampler>(mv), 3, 30).first,
            RunSphere(std::make_unique<TpeSampler>(mv), 3, 30).first);
}

TEST(Tpe, BeatsRandomSearchOnASphere) {
  double tpe = 0, random = 0, multivariate = 0;
  TpeOptions mv;
  mv.multivariate = true;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    tpe += std::log10(RunSphere(std::make_unique<TpeSampler>(), seed, 80).second);
    multivariate += std::log10(RunSphere(std::make_unique<TpeSampler>(mv), seed, 80).second);
    random += std::log10(RunSphere(std::make_unique<RandomSampler>(), seed, 80).second);
  }
  // Geometric means over 5 seeds: TPE at least 10x closer to the optimum than random.
  EXPECT_LT(tpe / 5, random / 5 - 1.0) << tpe / 5 << " vs " << random / 5;
  EXPECT_LT(multivariate / 5, random / 5 - 1.0) << multivariate / 5 << " vs " << random / 5;
}

TEST(Tpe, ConstantLiarSpreadsConcurrentAsks) {
  auto spread = [](bool liar) {
    TpeOptions o;
    o.constant_liar = liar;
    auto study = NewStudy(std::make_unique<TpeSampler>(o), 11);
    for (int i = 0; i < 20; ++i) {
      auto t = std::move(study->Ask()).value();
      double x = *t->SuggestFloat("x", -5, 5);
      EXPECT_TRUE(study->Tell(*t, TrialState::kComplete, {(x - 1) * (x - 1)}).ok());
    }
    // Eight workers ask before anyone tells.
    std::vector<std::unique_ptr<Trial>> pending;
    std::vector<double> xs;
    for (int i = 0; i < 8; ++i) {
      pending.push_back(std::move(study->Ask()).value());
      xs.push_back(*pending.back()->SuggestFloat("x", -5, 5));
    }
    double sum = 0;
    int pairs = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      for (size_t j = i + 1; j < xs.size(); ++j, ++pairs) sum += std::fabs(xs[i] - xs[j]);
    }
    return sum / pairs;
  };
  double without = spread(false), with = spread(true);
  std::printf("mean pairwise distance of 8 pending asks: %.3f without liar, %.3f with\n", without,
              with);
  EXPECT_GT(with, 1.5 * without) << "liar " << with << " vs " << without;
}

TEST(Tpe, RelativeSpaceIsTheIntersectionAndGroupsSplitConditionalParams) {
  TpeOptions o;
  o.multivariate = true;
  TpeSampler tpe(o);
  auto h = History({{TrialState::kComplete, 1.0}, {TrialState::kComplete, 2.0}});
  // Add a conditional pair (y, z) to trial 1 only.
  auto t1 = std::make_shared<FrozenTrial>(*h.trials[1]);
  t1->params["y"] = 3;
  t1->distributions["y"] = *MakeIntDistribution(0, 5);
  t1->params["z"] = 0;
  t1->distributions["z"] = *MakeCategoricalDistribution({"a", "b"});
  t1->params["k"] = 1;
  t1->distributions["k"] = *MakeIntDistribution(1, 1);  // single: never sampled
  h.trials[1] = t1;
  SearchSpace space = tpe.InferRelativeSearchSpace(h);
  ASSERT_EQ(space.size(), 1u);
  EXPECT_TRUE(space.count("x"));

  TpeOptions g = o;
  g.group = true;
  TpeSampler grouped(g);
  EXPECT_EQ(grouped.Groups(h), (std::vector<std::vector<std::string>>{{"x"}, {"y", "z"}}));
  EXPECT_EQ(grouped.InferRelativeSearchSpace(h).size(), 3u);
}

TEST(Tpe, GroupedMultivariateSamplesAConditionalSpace) {
  TpeOptions o;
  o.multivariate = true;
  o.group = true;
  auto study = NewStudy(std::make_unique<TpeSampler>(o), 4);
  double best = INFINITY;
  for (int i = 0; i < 60; ++i) {
    auto t = std::move(study->Ask()).value();
    Json kind = *t->SuggestCategorical("kind", {"a", "b"});
    double v;
    if (kind == "a") {
      double a = *t->SuggestFloat("a", -3, 3);
      v = a * a + 1.0;
    } else {
      double b = *t->SuggestFloat("b", -3, 3);
      int64_t n = *t->SuggestInt("n", 1, 8);
      v = (b - 1) * (b - 1) + 0.1 * static_cast<double>(n);
    }
    best = std::min(best, v);
    ASSERT_TRUE(study->Tell(*t, TrialState::kComplete, {v}).ok());
  }
  EXPECT_LT(best, 0.3);  // found the b-branch optimum region (0.1 at b=1, n=1)
}

// Issue 3 acceptance: OOM-pruned trials (PRUNED, no reports) push TPE away from their region.
// The mixed function with oom_threshold 12288 "runs out of memory" on ~40% of the space, and
// its optimum lies close to the boundary. Measured over seeds 1-16 (deterministic).
TEST(Tpe, AvoidsTheOomRegionOfTheMixedFunction) {
  auto oom_share = [](const std::string& sampler, uint64_t seed) {
    auto c = ParseStudyConfig(Json::parse(R"({"objective": {"type": "function", "name": "mixed",
                                             "oom_threshold": 12288}, "sampler": )" +
                                          sampler + "}"),
                              "t.json", ".");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    auto objective = std::move(MakeObjective(*c)).value();
    auto study = NewStudy(std::move(MakeSampler(c->sampler)).value(), seed);
    OptimizeOptions oo;
    oo.n_trials = 200;
    EXPECT_TRUE(Optimize(*study, c->space, *objective, oo).ok());
    int oom = 0;
    std::vector<FrozenTrial> trials = *study->Trials();
    for (const auto& t : trials) {
      if (t.number >= 100 && t.user_attrs.value("oom", false)) ++oom;
    }
    return oom / 100.0;
  };
  const int seeds = 16;
  double random = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    random += oom_share(R"({"name": "random"})", seed) / seeds;
  }
  EXPECT_GT(random, 0.3);
  // Optuna 4.9's rules (independent sampling) and 5.0's (joint sampling, the default).
  for (const std::string preset : {"optuna-4.9", "optuna-5.0"}) {
    double faithful = 0, tpe = 0;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      faithful +=
          oom_share(R"({"name": "tpe", "oom_feasibility": false, "preset": ")" + preset + R"("})",
                    seed) /
          seeds;
      tpe += oom_share(R"({"name": "tpe", "preset": ")" + preset + R"("})", seed) / seeds;
    }
    std::printf(
        "OOM share in trials 100-199, mean of %d seeds: random %.3f, TPE as Optuna (%s) %.3f, "
        "TPE with oom_feasibility %.3f\n",
        seeds, random, preset.c_str(), faithful, tpe);
    // Ranking OOM trials last (Optuna's rule) already pushes TPE away ...
    EXPECT_LT(faithful, random / 2) << preset;
    // ... and the feasibility term (the default) lowers it further: under 4.9's independent
    // sampling below the goal of 5% (measured 4.3%; as Optuna 12.6%); under 5.0's joint
    // sampling, where one candidate must fit in every dimension at once, less (measured 6.8%;
    // as Optuna 7.3%; docs/tpe.md#oom-feasibility).
    if (preset == "optuna-4.9") {
      EXPECT_LT(tpe, 0.05);
      EXPECT_LT(tpe, 0.5 * faithful);
    } else {
      EXPECT_LT(tpe, 0.08);
      EXPECT_LT(tpe, faithful);
    }
  }
}

TEST(Tpe, ConfigOptionsAreCheckedStrictly) {
  auto parse = [](const std::string& sampler) {
    return ParseStudyConfig(
        Json::parse(R"({"objective": {"type": "function", "name": "sphere"}, "sampler": )" +
                    sampler + "}"),
        "c.json", ".");
  };
  auto ok = parse(R"({"name": "tpe", "n_startup_trials": 5, "multivariate": true,
                      "group": true, "constant_liar": true, "gamma": "hyperopt",
                      "multivariate_bandwidth": "scott", "prior_weight": 2})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto s = std::move(MakeSampler(ok->sampler)).value();
  const auto& tpe = dynamic_cast<const TpeSampler&>(*s);
  EXPECT_EQ(tpe.options().n_startup_trials, 5);
  EXPECT_TRUE(tpe.options().group);
  EXPECT_TRUE(tpe.options().gamma_hyperopt);
  EXPECT_EQ(tpe.options().multivariate_bandwidth, MultivariateBandwidth::kScott);

  auto unknown = parse(R"({"name": "tpe", "n_startup": 5})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("/sampler/n_startup"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("did you mean 'n_startup_trials'"), std::string::npos)
      << unknown.status().message();
  auto negative = parse(R"({"name": "tpe", "n_startup_trials": -1})");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("must be >= 0"), std::string::npos);
  auto group = parse(R"({"name": "tpe", "group": true, "multivariate": false})");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("requires \"multivariate\": true or \"auto\""),
            std::string::npos)
      << group.status().message();
  auto group_auto = parse(R"({"name": "tpe", "group": true})");  // Optuna 5.0: joint
  ASSERT_TRUE(group_auto.ok()) << group_auto.status().ToString();
  auto bad_multivariate = parse(R"({"name": "tpe", "multivariate": "yes"})");
  ASSERT_FALSE(bad_multivariate.ok());
  EXPECT_NE(bad_multivariate.status().message().find(
                "/sampler/multivariate: expected true, false or \"auto\""),
            std::string::npos)
      << bad_multivariate.status().message();
  auto gamma = parse(R"({"name": "tpe", "gamma": 2})");
  ASSERT_FALSE(gamma.ok());
  EXPECT_NE(gamma.status().message().find("/sampler/gamma"), std::string::npos);
  auto random_opts = parse(R"({"name": "random", "multivariate": true})");
  ASSERT_FALSE(random_opts.ok());
  EXPECT_NE(random_opts.status().message().find("unknown key 'multivariate'"), std::string::npos)
      << random_opts.status().message();
}

// "preset" (docs/tpe.md#presets): "optuna-5.0", the default, is TpeOptions' defaults (Optuna
// 5.0's TPESampler()); "optuna-4.9" is 4.9's (Scott's multivariate bandwidth, no constant liar,
// constraints only when asked, hypervolume weights and a capped gamma for several objectives);
// "optuna", the old name, is 4.9's; the explicit keys override the preset; the withdrawn "tuned"
// says why it is gone; a bad name is an error in the usual style.
TEST(Tpe, PresetsAndTheirOverrides) {
  auto parse = [](const std::string& sampler) {
    return ParseStudyConfig(
        Json::parse(R"({"objective": {"type": "function", "name": "sphere"}, "sampler": )" +
                    sampler + "}"),
        "c.json", ".");
  };
  auto options = [](const StudyConfig& c) {
    auto s = std::move(MakeSampler(c.sampler)).value();
    return dynamic_cast<const TpeSampler&>(*s).options();
  };
  const TpeOptions defaults, v50 = TpePresetOptions(TpePreset::kOptuna50),
                             v49 = TpePresetOptions(TpePreset::kOptuna49);
  EXPECT_EQ(v50.preset, defaults.preset);
  EXPECT_EQ(v50.multivariate, defaults.multivariate);
  EXPECT_FALSE(v50.multivariate.has_value());  // auto
  EXPECT_TRUE(v50.Multivariate(1));
  EXPECT_FALSE(v50.Multivariate(2));
  EXPECT_TRUE(v50.constant_liar);
  EXPECT_TRUE(v50.constraints);
  EXPECT_FALSE(v50.constraints_missing_infeasible);
  EXPECT_EQ(v50.multivariate_bandwidth, MultivariateBandwidth::kPerDimension);
  EXPECT_FALSE(v50.hypervolume_weights);
  EXPECT_EQ(TpeGamma(v50, 400), 25);
  EXPECT_EQ(TpeGamma(v50, 400, /*multi_objective=*/true), 40);  // no cap for several
  EXPECT_EQ(v49.multivariate, std::optional<bool>(false));
  EXPECT_FALSE(v49.Multivariate(1));
  EXPECT_FALSE(v49.constant_liar);
  EXPECT_FALSE(v49.constraints);
  EXPECT_TRUE(v49.constraints_missing_infeasible);
  EXPECT_EQ(v49.multivariate_bandwidth, MultivariateBandwidth::kScott);
  EXPECT_TRUE(v49.hypervolume_weights);
  EXPECT_EQ(TpeGamma(v49, 400, /*multi_objective=*/true), 25);
  for (const TpeOptions& o : {v50, v49}) {  // what both share
    EXPECT_EQ(o.gamma_ratio, 0.1);
    EXPECT_EQ(o.weights, WeightRule::kOptuna);
    EXPECT_EQ(o.bandwidth, BandwidthRule::kOptuna);
    EXPECT_EQ(o.min_bandwidth_factor, 0.01);
    EXPECT_EQ(o.prior_weight, 1.0);
  }

  auto plain = parse(R"({"name": "tpe"})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(options(*plain).preset, TpePreset::kOptuna50);
  EXPECT_EQ(options(*plain).multivariate_bandwidth, MultivariateBandwidth::kPerDimension);
  EXPECT_TRUE(options(*plain).constant_liar);
  for (const char* name : {"optuna-4.9", "optuna"}) {
    auto old = parse(fmt::format(R"({{"name": "tpe", "preset": "{}"}})", name));
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    EXPECT_EQ(options(*old).preset, TpePreset::kOptuna49) << name;
    EXPECT_EQ(options(*old).multivariate_bandwidth, MultivariateBandwidth::kScott) << name;
    EXPECT_FALSE(options(*old).constant_liar) << name;
  }
  auto t = parse(R"({"name": "tpe", "preset": "tuned"})");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("c.json: /sampler/preset: the 'tuned' preset was withdrawn"),
            std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("\"min_bandwidth_factor\": 0.025"), std::string::npos);

  auto over = parse(R"({"name": "tpe", "preset": "optuna-4.9", "multivariate": true,
                        "constant_liar": true, "multivariate_bandwidth": "per_dimension",
                        "constraints": true, "gamma": 0.2})");
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  const TpeOptions o = options(*over);
  EXPECT_EQ(o.preset, TpePreset::kOptuna49);
  EXPECT_EQ(o.multivariate, std::optional<bool>(true));
  EXPECT_TRUE(o.constant_liar);
  EXPECT_TRUE(o.constraints);
  EXPECT_TRUE(o.constraints_missing_infeasible);  // the preset's rule for a missing one
  EXPECT_EQ(o.multivariate_bandwidth, MultivariateBandwidth::kPerDimension);
  EXPECT_EQ(o.gamma_ratio, 0.2);
  auto named_gamma = parse(R"({"name": "tpe", "gamma": 0.2})");  // capped for several too
  EXPECT_EQ(TpeGamma(options(*named_gamma), 400, true), 25);
  auto default_gamma = parse(R"({"name": "tpe", "gamma": "default"})");
  EXPECT_EQ(TpeGamma(options(*default_gamma), 400, true), 40);

  auto bad = parse(R"({"name": "tpe", "preset": "optuna-5"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "c.json: /sampler/preset: unknown preset 'optuna-5' (did you mean 'optuna-5.0'?); "
            "valid: optuna-5.0, optuna-4.9");
  auto scott = parse(R"({"name": "tpe", "multivariate": true,
                         "multivariate_bandwidth": "scott"})");
  ASSERT_TRUE(scott.ok()) << scott.status().ToString();
  EXPECT_EQ(options(*scott).multivariate_bandwidth, MultivariateBandwidth::kScott);
}

TEST(Tpe, WatanabeOptionsParseAndAreChecked) {
  auto parse = [](const std::string& sampler) {
    return ParseStudyConfig(
        Json::parse(R"({"objective": {"type": "function", "name": "sphere"}, "sampler": )" +
                    sampler + "}"),
        "c.json", ".");
  };
  auto ok = parse(R"({"name": "tpe", "bandwidth": "hyperopt", "weights": "expected_improvement",
                      "gamma": {"sqrt": 0.75}, "min_bandwidth_factor": 0.03,
                      "magic_clip_exponent": 2, "categorical_prior_weight": 0.2})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto s = std::move(MakeSampler(ok->sampler)).value();
  const TpeOptions& o = dynamic_cast<const TpeSampler&>(*s).options();
  EXPECT_EQ(o.bandwidth, BandwidthRule::kHyperopt);
  EXPECT_EQ(o.weights, WeightRule::kExpectedImprovement);
  EXPECT_TRUE(o.gamma_hyperopt);
  EXPECT_EQ(o.gamma_sqrt_beta, 0.75);
  EXPECT_EQ(o.min_bandwidth_factor, 0.03);
  EXPECT_EQ(o.magic_clip_exponent, 2.0);
  EXPECT_EQ(o.categorical_prior_weight, 0.2);
  auto scott = parse(R"({"name": "tpe", "bandwidth": "scott"})");
  ASSERT_TRUE(scott.ok());

  const std::vector<std::pair<std::string, std::string>> errors = {
      {R"("bandwidth": "hyperpot")",
       "/sampler/bandwidth: unknown bandwidth rule 'hyperpot' (did you mean 'hyperopt'?); "
       "valid: optuna, hyperopt, scott"},
      {R"("weights": "ei")", "/sampler/weights: unknown weights 'ei'"},
      {R"("gamma": {"sqrt": 0})", "/sampler/gamma: expected"},
      {R"("min_bandwidth_factor": 0)", "/sampler/min_bandwidth_factor: must be in (0, 1]"},
      {R"("magic_clip_exponent": -1)", "/sampler/magic_clip_exponent: must be > 0"},
      {R"("categorical_prior_weight": 1.5)", "/sampler/categorical_prior_weight: must be null"},
      {R"("categorical_prior_weight": "x")",
       "/sampler/categorical_prior_weight: expected a number"},
  };
  for (const auto& [key, message] : errors) {
    auto r = parse(R"({"name": "tpe", )" + key + "}");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find("c.json: " + message), std::string::npos)
        << r.status().message();
  }
}

// Every option of the presets and of Watanabe's study samples valid values on a space with every
// kind of distribution, in both modes.
TEST(Tpe, EveryOptionSamplesTheMixedSpace) {
  const std::vector<std::string> samplers = {
      R"({"min_bandwidth_factor": 0.025, "prior_weight": 1.5})",
      R"({"multivariate_bandwidth": "scott"})",
      R"({"preset": "optuna-4.9"})",
      R"({"bandwidth": "hyperopt"})",
      R"({"bandwidth": "scott"})",
      R"({"weights": "expected_improvement"})",
      R"({"categorical_prior_weight": 0.3})",
      R"({"magic_clip_exponent": 2, "min_bandwidth_factor": 0.001})"};
  for (const std::string& extra : samplers) {
    for (bool mv : {false, true}) {
      Json sampler = Json::parse(extra);
      sampler["name"] = "tpe";
      sampler["multivariate"] = mv;
      auto c = ParseStudyConfig(
          Json{{"objective", {{"type", "function"}, {"name", "mixed"}, {"oom_threshold", 16000}}},
               {"sampler", sampler}},
          "t.json", ".");
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      auto objective = std::move(MakeObjective(*c)).value();
      auto study = NewStudy(std::move(MakeSampler(c->sampler)).value(), 3);
      OptimizeOptions oo;
      oo.n_trials = 40;
      ASSERT_TRUE(Optimize(*study, c->space, *objective, oo).ok()) << extra;
      const std::vector<FrozenTrial> trials = study->Trials().value();
      for (const FrozenTrial& t : trials) {
        EXPECT_TRUE(t.state == TrialState::kComplete || t.state == TrialState::kPruned)
            << extra << " trial " << t.number;
      }
      EXPECT_LT((*study->BestTrial()).values[0], 0.3) << extra;
    }
  }
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// ---------------------------------------------------------------------------------------------
// Several objectives (multi-objective TPE).

// Two-objective COMPLETE trials with x = 0.01 * number.
TrialHistory TwoObjectiveHistory(const std::vector<std::vector<double>>& values) {
  TrialHistory h;
  h.study_name = "mo";
  h.directions = {StudyDirection::kMinimize, StudyDirection::kMaximize};
  for (size_t i = 0; i < values.size(); ++i) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = static_cast<int64_t>(i);
    t->trial_id = t->number + 1;
    t->state = TrialState::kComplete;
    t->values = values[i];
    t->params["x"] = 0.01 * static_cast<double>(i);
    t->distributions["x"] = X();
    h.trials.push_back(t);
  }
  return h;
}

TEST(Tpe, SeveralObjectivesSplitByNonDominationAndWeighByHypervolume) {
  // 20 trials, gamma(20) = 2. Losses (the second objective is maximised, so negated): trials
  // 3 (1, -4), 7 (2, -8) and 19 (0.5, 10) form the Pareto front, every other trial (5, 0) is
  // dominated. The front has 3 trials for 2 places: HSSP with the front's reference point
  // (2.2, 11) takes 3 (box 18), then 7 (adds 0.8; 19 would add 0.5). Trial 19 has the best
  // first objective: a ranking by that objective alone would have put it below.
  std::vector<std::vector<double>> v(20, {5.0, 0.0});
  v[3] = {1.0, 4.0};
  v[7] = {2.0, 8.0};
  v[19] = {0.5, -10.0};
  TrialHistory h = TwoObjectiveHistory(v);
  TpeSampler tpe(TpePresetOptions(TpePreset::kOptuna49));
  TpeModel m = tpe.Model(h, Current(20), {{"x", X()}});
  EXPECT_EQ(m.split.below, (std::vector<int64_t>{3, 7}));
  // Optuna 5.0 (the default): the same split, uniform weights.
  TpeModel m50 = TpeSampler().Model(h, Current(20), {{"x", X()}});
  EXPECT_EQ(m50.split.below, (std::vector<int64_t>{3, 7}));
  ASSERT_EQ(m50.below.weights().size(), 3u);
  EXPECT_NEAR(m50.below.weights()[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(m50.below.weights()[1], 1.0 / 3, 1e-12);
  // The below weights: hypervolume contributions within the below set over the largest, with
  // reference max(1.1 w, 0.9 w) of its worst losses (2, -4), i.e. (2.2, -3.6): trial 3 adds
  // 1.2 * 0.4 - 0.2 * 0.4 = 0.4, trial 7 adds 0.2 * 4.4 - 0.08 = 0.8. The prior (weight 1) is
  // appended before the estimator normalises.
  const std::vector<double>& w = m.below.weights();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(w[0] / w[1], 0.5, 1e-12);
  EXPECT_NEAR(w[1] / w[2], 1.0, 1e-12);
}

// Runs n trials of the zdt1 function; returns the hypervolume of the front w.r.t. (1.1, 11).
double RunZdt1(std::unique_ptr<Sampler> sampler, uint64_t seed, int n) {
  auto c = ParseStudyConfig(Json::parse(R"({"directions": ["minimize", "minimize"],
      "objective": {"type": "function", "name": "zdt1"}})"),
                            "t.json", ".");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto objective = std::move(MakeObjective(*c)).value();
  auto study =
      std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", c->directions, std::move(sampler),
                                    std::make_unique<NopPruner>(), seed))
          .value();
  OptimizeOptions oo;
  oo.n_trials = n;
  EXPECT_TRUE(Optimize(*study, c->space, *objective, oo).ok());
  // The front's hypervolume by a 2-d sweep (points sorted by the first value).
  std::vector<std::pair<double, double>> points;
  const std::vector<FrozenTrial> trials = *study->Trials();
  for (const FrozenTrial& t : trials) {
    EXPECT_EQ(t.state, TrialState::kComplete);
    if (t.values[0] <= 1.1 && t.values[1] <= 11.0) points.emplace_back(t.values[0], t.values[1]);
  }
  std::sort(points.begin(), points.end());
  double hv = 0.0, y = 11.0;
  for (const auto& [f1, f2] : points) {
    if (f2 >= y) continue;
    hv += (1.1 - f1) * (y - f2);
    y = f2;
  }
  return hv;
}

TEST(Tpe, SeveralObjectivesBeatRandomSearchOnZdt1) {
  double tpe = 0, random = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    tpe += RunZdt1(std::make_unique<TpeSampler>(), seed, 150) / 3;
    random += RunZdt1(std::make_unique<RandomSampler>(), seed, 150) / 3;
  }
  std::printf("zdt1, 150 trials, mean hypervolume of 3 seeds: MOTPE %.3f, random %.3f\n", tpe,
              random);
  // The ideal front's hypervolume is 11 * 1.1 - 1/3 - ... ~ 11.77; random search stays well below.
  EXPECT_GT(tpe, random + 0.5);
}

}  // namespace
}  // namespace tune

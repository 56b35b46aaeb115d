#include "tune/samplers/nsgaii.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "samplers/registry.h"
#include "tune/pruners/pruner.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune {
namespace {

std::unique_ptr<Study> NewStudy(NsgaIIOptions options, std::vector<StudyDirection> directions,
                                uint64_t seed = 1,
                                std::shared_ptr<Storage> storage = NewInMemoryStorage()) {
  return std::move(Study::CreateOrLoad(storage, "s", std::move(directions),
                                       std::make_unique<NsgaIISampler>(options),
                                       std::make_unique<NopPruner>(), seed))
      .value();
}

int GenerationOf(const FrozenTrial& t) {
  return t.system_attrs.at(kNsgaIIGenerationKey).get<int>();
}

Json StudyAttrs(Study& study) { return study.storage().GetStudy(study.study_id())->system_attrs; }

// Asks a trial, suggests x and y in [0, 1], tells `value(x, y)`.
FrozenTrial RunOne(Study& study, const std::function<std::vector<double>(double, double)>& value) {
  auto trial = std::move(study.Ask()).value();
  double x = *trial->SuggestFloat("x", 0, 1);
  double y = *trial->SuggestFloat("y", 0, 1);
  return std::move(study.Tell(*trial, TrialState::kComplete, value(x, y))).value();
}

std::vector<double> TwoObjectives(double x, double y) { return {x, (1 - x) * (1 + y)}; }

TEST(NsgaII, GenerationsHoldPopulationSizeCompleteTrials) {
  NsgaIIOptions o;
  o.population_size = 4;
  auto study = NewStudy(o, {StudyDirection::kMinimize, StudyDirection::kMinimize});
  for (int i = 0; i < 22; ++i) {
    FrozenTrial t = RunOne(*study, TwoObjectives);
    EXPECT_EQ(GenerationOf(t), i / 4) << "trial " << i;
  }
  // A failed trial does not count towards its generation.
  auto failed = std::move(study->Ask()).value();
  ASSERT_TRUE(failed->SuggestFloat("x", 0, 1).ok());
  ASSERT_TRUE(study->Tell(*failed, TrialState::kFail).ok());
  EXPECT_EQ(GenerationOf(*failed->Snapshot()), 5);
  EXPECT_EQ(GenerationOf(RunOne(*study, TwoObjectives)), 5);
  EXPECT_EQ(GenerationOf(RunOne(*study, TwoObjectives)), 5);
  EXPECT_EQ(GenerationOf(RunOne(*study, TwoObjectives)), 6);
  Json attrs = StudyAttrs(*study);
  for (int g = 1; g <= 6; ++g) {
    ASSERT_TRUE(attrs.contains(kNsgaIIParentKeyPrefix + std::to_string(g))) << g;
    EXPECT_EQ(attrs.at(kNsgaIIParentKeyPrefix + std::to_string(g)).size(), 4u) << g;
  }
  EXPECT_FALSE(attrs.contains(kNsgaIIParentKeyPrefix + std::string("7")));
}

TEST(NsgaII, ParentsAreTheEliteOfThePreviousGenerationAndItsParents) {
  NsgaIIOptions o;
  o.population_size = 3;
  auto study = NewStudy(o, {StudyDirection::kMinimize});
  std::vector<double> values = {5, 1, 3, 0, 10, 2, 7};
  std::vector<FrozenTrial> trials;
  for (double v : values) {
    trials.push_back(RunOne(*study, [v](double, double) { return std::vector<double>{v}; }));
  }
  Json attrs = StudyAttrs(*study);
  auto ids = [&](int g) {
    std::set<int64_t> s;
    for (const Json& id : attrs.at(kNsgaIIParentKeyPrefix + std::to_string(g))) {
      s.insert(id.get<int64_t>());
    }
    return s;
  };
  auto id = [&](int number) { return trials[static_cast<size_t>(number)].trial_id; };
  // Generation 1's parents: all of generation 0 (trials 0-2).
  EXPECT_EQ(ids(1), (std::set<int64_t>{id(0), id(1), id(2)}));
  // Generation 2's: the best three of generation 1 (trials 3-5) and its parents: 0, 1, 2.
  EXPECT_EQ(ids(2), (std::set<int64_t>{id(3), id(1), id(5)}));
}

TEST(NsgaII, ChildrenAreCopiesOrCrossoversOfParents) {
  for (double crossover_prob : {0.0, 1.0}) {
    NsgaIIOptions o;
    o.population_size = 4;
    o.mutation_prob = 0.0;
    o.crossover_prob = crossover_prob;
    auto study = NewStudy(o, {StudyDirection::kMinimize, StudyDirection::kMinimize}, 3);
    std::vector<FrozenTrial> trials;
    for (int i = 0; i < 40; ++i) trials.push_back(RunOne(*study, TwoObjectives));
    Json attrs = StudyAttrs(*study);
    int copies = 0;
    for (const FrozenTrial& t : trials) {
      int g = GenerationOf(t);
      if (g == 0) continue;
      std::vector<const FrozenTrial*> parents;
      for (const Json& pid : attrs.at(kNsgaIIParentKeyPrefix + std::to_string(g))) {
        for (const FrozenTrial& p : trials) {
          if (p.trial_id == pid.get<int64_t>()) parents.push_back(&p);
        }
      }
      ASSERT_EQ(parents.size(), 4u);
      bool copy = false;
      for (const FrozenTrial* p : parents) copy = copy || p->params == t.params;
      copies += copy;
      for (const auto& [name, v] : t.params) {  // uniform crossover: each value from a parent
        bool from_parent = false;
        for (const FrozenTrial* p : parents) from_parent = from_parent || p->params.at(name) == v;
        EXPECT_TRUE(from_parent) << "trial " << t.number << " " << name;
      }
    }
    if (crossover_prob == 0.0) {
      EXPECT_EQ(copies, 36);
    }
  }
}

// SampleRelative on a fixed history: the share of parameters left to independent sampling.
double MutatedShare(std::optional<double> mutation_prob, int n_params) {
  NsgaIIOptions o;
  o.population_size = 2;
  o.mutation_prob = mutation_prob;
  NsgaIISampler sampler(o);
  TrialHistory h;
  h.directions = {StudyDirection::kMinimize};
  SearchSpace space;
  for (int k = 0; k < n_params; ++k) space["p" + std::to_string(k)] = *MakeFloatDistribution(0, 1);
  for (int i = 0; i < 3; ++i) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = i;
    t->trial_id = i;
    t->state = i < 2 ? TrialState::kComplete : TrialState::kRunning;
    t->values = {static_cast<double>(i)};
    for (const auto& [name, d] : space) {
      t->params[name] = 0.1 * (i + 1);
      t->distributions[name] = d;
    }
    t->system_attrs[kNsgaIIGenerationKey] = 0;
    h.trials.push_back(t);
  }
  FrozenTrial asked = *h.trials.back();
  asked.system_attrs = Json::object();
  EXPECT_TRUE(sampler.BeforeSample(h, asked, ReadFrom(Json::object())).ok());
  Rng rng(5);
  int kept = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    kept += static_cast<int>(sampler.SampleRelative(h, asked, space, rng).size());
  }
  return 1.0 - static_cast<double>(kept) / (n * n_params);
}

TEST(NsgaII, MutationProbability) {
  EXPECT_NEAR(MutatedShare(std::nullopt, 4), 0.25, 0.02);  // 1 / number of params
  EXPECT_NEAR(MutatedShare(std::nullopt, 1), 1.0, 1e-12);  // 1 / max(1, 1)
  EXPECT_NEAR(MutatedShare(0.6, 5), 0.6, 0.02);
  EXPECT_EQ(MutatedShare(0.0, 3), 0.0);
}

std::shared_ptr<const FrozenTrial> Scored(int64_t number, std::vector<double> values,
                                          std::optional<std::vector<double>> constraints) {
  auto t = std::make_shared<FrozenTrial>();
  t->number = number;
  t->trial_id = number;
  t->state = TrialState::kComplete;
  t->values = std::move(values);
  if (constraints) t->system_attrs["constraints"] = *constraints;
  return t;
}

std::vector<int64_t> Numbers(const TrialPtrs& trials) {
  std::vector<int64_t> out;
  for (const auto& t : trials) out.push_back(t->number);
  return out;
}

TEST(NsgaII, ConstraintsMakeInfeasibleTrialsLose) {
  TrialPtrs population = {
      Scored(0, {0.0}, std::vector<double>{1.0}), Scored(1, {1.0}, std::vector<double>{0.5}),
      Scored(2, {5.0}, std::vector<double>{0.0}), Scored(3, {9.0}, std::vector<double>{-1.0}),
      Scored(4, {-1.0}, std::nullopt)};
  auto constrained = SelectElitePopulation(population, {StudyDirection::kMinimize}, 3, true);
  ASSERT_TRUE(constrained.ok());
  // Feasible first (2 before 3 by value), then the least violating; no constraints: last.
  EXPECT_EQ(Numbers(*constrained), (std::vector<int64_t>{2, 3, 1}));
  auto free = SelectElitePopulation(population, {StudyDirection::kMinimize}, 3, false);
  EXPECT_EQ(Numbers(*free), (std::vector<int64_t>{4, 0, 1}));
  population.push_back(Scored(5, {0.0}, std::vector<double>{NAN}));
  EXPECT_FALSE(SelectElitePopulation(population, {StudyDirection::kMinimize}, 3, true).ok());
}

// Optuna 5.0's rule ("constraints" unset): constrained whenever a trial has constraints, named
// ("constraints:<name>") or the old list; a trial without them is feasible; without any trial
// having them, plain domination.
TEST(NsgaII, Optuna50ConstraintsCountATrialWithoutThemAsFeasible) {
  auto named = [](int64_t number, double value, std::optional<double> c) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = number;
    t->trial_id = number;
    t->state = TrialState::kComplete;
    t->values = {value};
    if (c) t->system_attrs["constraints:memory"] = *c;
    return std::shared_ptr<const FrozenTrial>(t);
  };
  TrialPtrs population = {named(0, 0.0, 1.0), named(1, 1.0, 0.5), named(2, 5.0, 0.0),
                          named(3, 9.0, -1.0), named(4, -1.0, std::nullopt)};
  auto elite = SelectElitePopulation(population, {StudyDirection::kMinimize}, 3, std::nullopt);
  ASSERT_TRUE(elite.ok()) << elite.status().ToString();
  // Feasible (4 without constraints, 2, 3) by value, the infeasible ones after.
  EXPECT_EQ(Numbers(*elite), (std::vector<int64_t>{4, 2, 3}));
  // 4.9's rule (true): a trial without constraints loses.
  auto v49 = SelectElitePopulation(population, {StudyDirection::kMinimize}, 3, true);
  ASSERT_TRUE(v49.ok());
  EXPECT_EQ(Numbers(*v49), (std::vector<int64_t>{2, 3, 1}));
  // No trial has constraints: plain domination.
  TrialPtrs free = {named(0, 3.0, std::nullopt), named(1, 1.0, std::nullopt),
                    named(2, 2.0, std::nullopt)};
  EXPECT_EQ(Numbers(*SelectElitePopulation(free, {StudyDirection::kMinimize}, 2, std::nullopt)),
            (std::vector<int64_t>{1, 2}));
}

TEST(NsgaII, CrowdingDistanceKeepsTheEndsOfTheLastFront) {
  TrialPtrs front;
  for (int i = 0; i < 5; ++i) front.push_back(Scored(i, {i * 1.0, 4.0 - i}, std::nullopt));
  auto elite = SelectElitePopulation(front, {StudyDirection::kMinimize, StudyDirection::kMinimize},
                                     2, false);
  ASSERT_TRUE(elite.ok());
  std::vector<int64_t> got = Numbers(*elite);
  EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()), (std::set<int64_t>{0, 4}));
}

TEST(NsgaII, EveryCrossoverKeepsParamsInTheirDistributions) {
  for (auto kind : {NsgaIICrossover::kUniform, NsgaIICrossover::kBlxAlpha, NsgaIICrossover::kSbx,
                    NsgaIICrossover::kVsbx, NsgaIICrossover::kSpx, NsgaIICrossover::kUndx}) {
    NsgaIIOptions o;
    o.population_size = 6;
    o.crossover = kind;
    auto study = NewStudy(o, {StudyDirection::kMinimize, StudyDirection::kMaximize}, 9);
    auto lr = *MakeFloatDistribution(1e-5, 1e-1, true);
    auto drop = *MakeFloatDistribution(0.0, 0.5, false, 0.1);
    auto width = *MakeIntDistribution(16, 1024, true);
    auto batch = *MakeIntDistribution(8, 64, false, 8);
    auto opt = *MakeCategoricalDistribution({"adam", "sgd", 3});
    for (int i = 0; i < 60; ++i) {
      auto trial = std::move(study->Ask()).value();
      double v = 0;
      for (const auto& [name, d] : std::vector<std::pair<std::string, Distribution>>{
               {"lr", lr}, {"drop", drop}, {"width", width}, {"batch", batch}, {"opt", opt}}) {
        ASSERT_TRUE(trial->Suggest(name, d).ok());
      }
      FrozenTrial t = *trial->Snapshot();
      for (const auto& [name, x] : t.params) {
        EXPECT_TRUE(Contains(t.distributions.at(name), x))
            << CrossoverName(kind) << " " << name << " " << x;
        v += x;
      }
      ASSERT_TRUE(study->Tell(*trial, TrialState::kComplete, {v, std::sin(v)}).ok());
    }
    EXPECT_EQ(GenerationOf(study->Trials()->back()), 9) << CrossoverName(kind);
  }
}

TEST(NsgaII, SameSeedSameProposals) {
  auto run = [](uint64_t seed) {
    NsgaIIOptions o;
    o.population_size = 5;
    o.crossover = NsgaIICrossover::kSbx;
    auto study = NewStudy(o, {StudyDirection::kMinimize}, seed);
    std::vector<std::map<std::string, double>> params;
    for (int i = 0; i < 30; ++i) {
      params.push_back(RunOne(*study, [](double x, double y) {
                         return std::vector<double>{(x - 0.3) * (x - 0.3) + y};
                       }).params);
    }
    return params;
  };
  EXPECT_EQ(run(4), run(4));
  EXPECT_NE(run(4), run(5));
}

TEST(NsgaII, AnEnqueuedTrialWithEveryParamFixedGetsNoGeneration) {
  // As Optuna: the generation is recorded when the sampler is first asked for a value.
  auto study = NewStudy({}, {StudyDirection::kMinimize});
  ASSERT_TRUE(study->EnqueueTrial(Json{{"x", 0.5}, {"y", 0.5}}).ok());
  FrozenTrial fixed = RunOne(*study, [](double x, double) { return std::vector<double>{x}; });
  EXPECT_FALSE(fixed.system_attrs.contains(kNsgaIIGenerationKey));
  EXPECT_EQ(fixed.params.at("x"), 0.5);
  ASSERT_TRUE(study->EnqueueTrial(Json{{"x", 0.5}}).ok());
  FrozenTrial half = RunOne(*study, [](double x, double) { return std::vector<double>{x}; });
  EXPECT_EQ(GenerationOf(half), 0);
}

Result<std::unique_ptr<Sampler>> Make(const std::string& options) {
  SamplerConfig c;
  c.name = "nsgaii";
  c.options = Json::parse(options);
  c.source = "c.json";
  return MakeSampler(c);
}

TEST(NsgaII, ConfigOptionsAreCheckedStrictly) {
  auto ok = Make(R"({"population_size": 8, "mutation_prob": 0.1, "crossover_prob": 0.7,
                     "swapping_prob": 0.4, "constraints": true,
                     "crossover": {"name": "sbx", "eta": 15, "use_child_gene_prob": 0.9}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const auto& o = dynamic_cast<const NsgaIISampler&>(**ok).options();
  EXPECT_EQ(o.population_size, 8);
  EXPECT_EQ(o.mutation_prob, 0.1);
  EXPECT_EQ(o.crossover, NsgaIICrossover::kSbx);
  EXPECT_EQ(o.eta, 15.0);
  EXPECT_EQ(o.use_child_gene_prob, 0.9);
  EXPECT_EQ(o.uniform_crossover_prob, 0.5);
  EXPECT_EQ(o.constraints, std::optional<bool>(true));
  auto defaults = Make("{}");
  ASSERT_TRUE(defaults.ok());
  const auto& d = dynamic_cast<const NsgaIISampler&>(**defaults).options();
  EXPECT_EQ(d.population_size, 50);
  EXPECT_FALSE(d.mutation_prob.has_value());
  EXPECT_EQ(d.crossover, NsgaIICrossover::kUniform);
  EXPECT_EQ(d.crossover_prob, 0.9);
  EXPECT_EQ(d.swapping_prob, 0.5);
  auto undx = Make(R"({"crossover": "undx"})");
  ASSERT_TRUE(undx.ok());
  EXPECT_EQ(dynamic_cast<const NsgaIISampler&>(**undx).options().crossover, NsgaIICrossover::kUndx);

  auto expect_error = [](const std::string& options, const std::string& part) {
    auto r = Make(options);
    ASSERT_FALSE(r.ok()) << options;
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  };
  expect_error(R"({"populaton_size": 8})", "did you mean 'population_size'");
  expect_error(R"({"population_size": 1})", "/sampler/population_size");
  expect_error(R"({"population_size": 2, "crossover": "spx"})", "must be at least 3");
  expect_error(R"({"mutation_prob": 1.5})", "/sampler/mutation_prob: must be in [0, 1]");
  expect_error(R"({"crossover": "sbxx"})", "did you mean 'sbx'");
  expect_error(R"({"crossover": {"name": "blxalpha", "eta": 2}})", "/sampler/crossover/eta");
  expect_error(R"({"crossover": {"name": "sbx", "use_child_gene_prob": 0}})", "(0, 1]");
}

}  // namespace
}  // namespace tune

// Boundary probes of a command study's measured models (config/boundary_probes.h): the models
// a study probes and with which parameters, and what a study that already has some of the
// probes (or the fit) still needs.
#include "config/boundary_probes.h"

#include <gtest/gtest.h>

#include "tune/pruners/pruner.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune {

static void PrintTo(const ProbeShape& s, std::ostream* os) {  // gtest messages
  *os << "(B=" << s.batch_size << ",T=" << s.max_length << ")";
}

namespace {

using Shapes = std::vector<ProbeShape>;

// A command study of a model outside the catalog; `memory` (a null removes a key) and the
// document's other keys are merged over the defaults.
StudyConfig Config(const Json& memory = Json::object(), const Json& extra = Json::object()) {
  Json m = {{"device_memory", "24GiB"},
            {"model", "my-lm"},
            {"batch_size", "{batch_size}"},
            {"max_length", "{max_length}"}};
  m.update(memory);
  for (const auto& [key, value] : memory.items()) {
    if (value.is_null()) m.erase(key);
  }
  Json doc = {{"search_space",
               {{"batch_size", {1, 2, 4, 8}},
                {"max_length", {{"type", "int"}, {"low", 64}, {"high", 1024}, {"step", 64}}},
                {"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-3}, {"log", true}}}}},
              {"objective", {{"type", "command"}, {"argv", {"true"}}, {"memory", m}}}};
  doc.update(extra);
  auto c = ParseStudyConfig(doc, "study.json", ".");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : StudyConfig{};
}

const Shapes kShapes = {{1, 1024}, {1, 256}, {2, 1024}, {1, 64}};

TEST(BoundaryProbes, AMeasuredModelIsProbedAtItsSpacesBoundary) {
  const std::vector<ProbeTarget> targets = BoundaryProbeTargets(Config());
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].model, "my-lm");
  EXPECT_FALSE(targets[0].model_param);
  EXPECT_EQ(targets[0].batch_size_param, "batch_size");
  EXPECT_EQ(targets[0].shapes, kShapes);
  const auto plan = PlanBoundaryProbes(targets, {}, Json::object());
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].params.front(), (Json{{"batch_size", 1}, {"max_length", 1024}}));
  EXPECT_EQ(plan[0].params.size(), 4u);
}

TEST(BoundaryProbes, TheParamsTheTemplatesNameAreFixed) {
  // Other parameter names, and a field given by its alias.
  const std::vector<ProbeTarget> targets = BoundaryProbeTargets(Config(
      {{"batch_size", nullptr}, {"per_device_train_batch_size", "{bs}"}, {"max_length", "{len}"}},
      {{"search_space", {{"bs", {4, 8}}, {"len", {128, 512}}}}}));
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].shapes, (Shapes{{4, 512}, {4, 128}, {8, 512}, {8, 128}}));
  EXPECT_EQ(PlanBoundaryProbes(targets, {}, Json::object())[0].params[0],
            (Json{{"bs", 4}, {"len", 512}}));
}

TEST(BoundaryProbes, EachMeasuredChoiceOfTheModelParameterIsProbedWithItsOwnDistributions) {
  const Json extra = {
      {"search_space",
       {{"model", {"bert-base-uncased", "small-lm", "big-lm"}}, {"max_length", {128, 256, 512}}}},
      {"conditional",
       {{{"when", {{"model", "big-lm"}}}, {"search_space", {{"batch_size", {1, 2}}}}},
        {{"when", {{"model", {{"!=", "big-lm"}}}}},
         {"search_space", {{"batch_size", {8, 16, 32}}}}}}}};
  const std::vector<ProbeTarget> targets =
      BoundaryProbeTargets(Config({{"model", "{model}"}}, extra));
  ASSERT_EQ(targets.size(), 2u);  // bert-base-uncased is in the catalog
  EXPECT_EQ(targets[0].model, "small-lm");
  EXPECT_EQ(targets[0].model_param, "model");
  EXPECT_EQ(targets[0].shapes, (Shapes{{8, 512}, {8, 256}, {16, 512}, {8, 128}}));
  EXPECT_EQ(targets[1].model, "big-lm");
  EXPECT_EQ(targets[1].shapes, (Shapes{{1, 512}, {1, 256}, {2, 512}, {1, 128}}));
  const auto plan = PlanBoundaryProbes(targets, {}, Json::object());
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].params[0], (Json{{"model", "big-lm"}, {"batch_size", 1}, {"max_length", 512}}));
}

TEST(BoundaryProbes, NoProbesWhenOffWhenTheUserEnqueuedTheShapesOrWithoutShapeParameters) {
  EXPECT_TRUE(BoundaryProbeTargets(Config({{"boundary_probes", false}})).empty());
  EXPECT_TRUE(BoundaryProbeTargets(Config({{"model", "bert-base-uncased"}})).empty());
  EXPECT_TRUE(BoundaryProbeTargets(Config({{"max_length", 512}})).empty());
  EXPECT_TRUE(BoundaryProbeTargets(Config({{"batch_size", "{batch_size}0"}})).empty());
  EXPECT_TRUE(
      BoundaryProbeTargets(
          Config(Json::object(), {{"enqueue_trials", {{{"batch_size", 1}, {"max_length", 64}}}}}))
          .empty());
  // Enqueued trials that leave the shape to the sampler are not the user's probes.
  EXPECT_EQ(
      BoundaryProbeTargets(Config(Json::object(), {{"enqueue_trials", {{{"lr", 1e-4}}}}})).size(),
      1u);
}

TEST(BoundaryProbes, ShapesTheStudyHasAndAStoredFitAreNotEnqueuedAgain) {
  const std::vector<ProbeTarget> targets = BoundaryProbeTargets(Config());
  FrozenTrial waiting;  // enqueued by hand: only its fixed params
  waiting.state = TrialState::kWaiting;
  waiting.system_attrs["fixed_params"] = {{"batch_size", 1}, {"max_length", 256}};
  FrozenTrial done;
  done.state = TrialState::kFail;
  done.distributions["batch_size"] = MakeCategoricalDistribution({1, 2, 4, 8}).value();
  done.params["batch_size"] = 1;  // the index of choice 2
  done.distributions["max_length"] = MakeIntDistribution(64, 1024, false, 64).value();
  done.params["max_length"] = 1024;
  const auto plan = PlanBoundaryProbes(targets, {waiting, done}, Json::object());
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].shapes, (Shapes{{1, 1024}, {1, 64}}));
  EXPECT_TRUE(PlanBoundaryProbes(targets, {}, {{"memory_fit:my-lm/bf16", Json::object()}}).empty());
  for (const char* other : {"memory_fit:my-lm-2/fp32", "memory_fit:my-lm/x/fp32"}) {
    EXPECT_EQ(PlanBoundaryProbes(targets, {}, {{other, Json::object()}}).size(), 1u) << other;
  }
}

TEST(BoundaryProbes, AResumedStudyGetsNoSecondSet) {
  const StudyConfig c = Config();
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto open = [&] {
    return Study::CreateOrLoad(storage, "s", {StudyDirection::kMinimize},
                               std::make_unique<RandomSampler>(), std::make_unique<NopPruner>(), 1)
        .value();
  };
  ASSERT_TRUE(EnqueueBoundaryProbes(c, *open()).ok());
  auto study = open();
  ASSERT_TRUE(EnqueueBoundaryProbes(c, *study).ok());
  const std::vector<FrozenTrial> trials = study->Trials().value();
  ASSERT_EQ(trials.size(), 4u);
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].state, TrialState::kWaiting);
    EXPECT_EQ(trials[i].system_attrs["fixed_params"]["batch_size"], kShapes[i].batch_size);
    EXPECT_EQ(trials[i].system_attrs["fixed_params"]["max_length"], kShapes[i].max_length);
  }
}

}  // namespace
}  // namespace tune

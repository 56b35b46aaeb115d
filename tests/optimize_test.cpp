#include "tune/optimize.h"

#include <gtest/gtest.h>

#include "tune/config.h"
#include "tune/interrupt.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune {
namespace {
int64_t r_stop_at = 0;

StudyConfig Config(const std::string& text) {
  auto c = ParseStudyConfig(Json::parse(text), "t.json", ".");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::unique_ptr<Study> NewStudy(std::shared_ptr<Storage> storage) {
  return std::move(Study::CreateOrLoad(storage, "s", {StudyDirection::kMinimize},
                                       std::make_unique<RandomSampler>(),
                                       std::make_unique<NopPruner>(), 5))
      .value();
}

TEST(Optimize, RunsToTheTargetAndResumes) {
  StudyConfig c = Config(R"({"objective": {"type": "function", "name": "branin"}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto objective = MakeObjective(c).value();
  int callbacks = 0;
  OptimizeOptions o;
  o.n_trials = 25;
  o.on_trial_finished = [&](const FrozenTrial&, const TrialOutcome&) { ++callbacks; };
  {
    auto study = NewStudy(storage);
    auto r = Optimize(*study, c.space, *objective, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->trials_run, 25);
    EXPECT_EQ(callbacks, 25);
  }
  // A second run with a higher target continues the same study.
  auto study = NewStudy(storage);
  o.n_trials = 40;
  auto r = Optimize(*study, c.space, *objective, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->trials_run, 15);
  EXPECT_EQ(r->finished_total, 40);
  auto trials = *study->Trials();
  ASSERT_EQ(trials.size(), 40u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, TrialState::kComplete);
    EXPECT_GE(t.value(), 0.397);
  }
}

TEST(Optimize, OomRegionIsPrunedWithConfig) {
  StudyConfig c = Config(R"({"objective": {"type": "function", "name": "mixed", "oom_threshold": 6000}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage);
  auto objective = MakeObjective(c).value();
  OptimizeOptions o;
  o.n_trials = 60;
  ASSERT_TRUE(Optimize(*study, c.space, *objective, o).ok());
  int pruned = 0;
  auto all = *study->Trials();
  for (const auto& t : all) {
    double proxy = MixedMemoryProxy(c.space.catalog(), t.ExternalParams());
    if (proxy > 6000) {
      ++pruned;
      EXPECT_EQ(t.state, TrialState::kPruned);
      EXPECT_EQ(t.user_attrs["oom"], true);
      EXPECT_EQ(t.user_attrs["oom_config"]["batch_size"], t.param("batch_size"));
    } else {
      EXPECT_EQ(t.state, TrialState::kComplete);
    }
  }
  EXPECT_GT(pruned, 0);
}

TEST(Optimize, TimeoutAndInterrupt) {
  StudyConfig c = Config(R"({"objective": {"type": "function", "name": "sphere"}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage);
  auto objective = MakeObjective(c).value();
  OptimizeOptions o;
  o.timeout_seconds = 0.05;
  auto r = Optimize(*study, c.space, *objective, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_GT(r->trials_run, 0);

  OptimizeOptions stop;
  stop.n_trials = 1000000;
  stop.on_trial_finished = [](const FrozenTrial& t, const TrialOutcome&) {
    if (t.number >= r_stop_at) RequestInterrupt();
  };
  r_stop_at = r->finished_total + 3;
  auto r2 = Optimize(*study, c.space, *objective, stop);
  ResetInterrupt();
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->interrupted);
  EXPECT_EQ(r2->trials_run, 4);
  EXPECT_EQ(*storage->CountTrials(study->study_id(), {TrialState::kRunning}), 0);
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

TEST(Optimize, WrongNumberOfValuesFailsTheTrialAndStops) {
  StudyConfig c = Config(R"({"directions": ["minimize", "maximize"],
                             "objective": {"type": "function", "name": "sphere"}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = Study::CreateOrLoad(storage, "mo", c.directions, std::make_unique<RandomSampler>(),
                                   std::make_unique<NopPruner>(), 1)
                   .value();
  auto objective = MakeObjective(c).value();
  OptimizeOptions o;
  o.n_trials = 5;
  auto r = Optimize(*study, c.space, *objective, o);
  ASSERT_FALSE(r.ok());
  auto trials = *study->Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kFail);  // not left RUNNING
  EXPECT_NE(trials[0].user_attrs["fail_reason"].get<std::string>().find("objective"),
            std::string::npos);
}

}  // namespace
}  // namespace tune

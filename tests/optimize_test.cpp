#include "tune/optimize.h"

#include <atomic>
#include <chrono>
#include <thread>

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

namespace tune {
namespace {

// A worker died in the middle of trial 0 (it heartbeated once, at the start): the next run
// fails it as stale, runs it again first with its params, and still reaches its target.
TEST(OptimizeHeartbeat, DeadWorkersTrialIsFailedAndRetriedFirst) {
  StudyConfig c = Config(R"({"objective": {"type": "function", "name": "branin"}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage);
  StartTrialOptions start;
  start.heartbeat = true;
  std::unique_ptr<Trial> dead = study->Ask(start).value();
  ASSERT_TRUE(c.space.Sample(*dead).ok());
  const FrozenTrial before = *dead->Snapshot();
  ASSERT_EQ(before.params.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  auto objective = MakeObjective(c).value();
  OptimizeOptions o;
  o.n_trials = 3;
  o.heartbeat_interval = 0.05;
  o.grace_period = 0.2;
  o.retry_failed = 1;
  std::vector<FailedStaleTrial> reported;
  o.on_stale_trial = [&](const FailedStaleTrial& s) { reported.push_back(s); };
  auto r = Optimize(*study, c.space, *objective, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stale_failed, 1);
  EXPECT_EQ(r->stale_retried, 1);
  EXPECT_EQ(r->trials_run, 3);
  EXPECT_EQ(r->finished_total, 4);  // the FAIL does not take the place of a trial
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].failed.number, 0);
  ASSERT_TRUE(reported[0].retry.has_value());
  auto trials = *study->Trials();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].state, TrialState::kFail);
  EXPECT_EQ(trials[1].state, TrialState::kComplete);
  EXPECT_EQ(trials[1].params, before.params);
  EXPECT_EQ(trials[1].system_attrs["failed_trial"], 0);
  EXPECT_EQ(trials[1].system_attrs["retry_history"], Json::array({0}));
  EXPECT_EQ(trials[2].state, TrialState::kComplete);
  EXPECT_EQ(trials[3].state, TrialState::kComplete);
}

// Threads sharing a study stop at exactly the target: a worker starts a trial only while the
// started ones do not already make it up, and waits for the others' last trials.
TEST(OptimizeHeartbeat, WorkersStopAtExactlyTheTarget) {
  StudyConfig c = Config(R"({"objective": {"type": "function", "name": "sphere", "n_steps": 2}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto objective = MakeObjective(c).value();
  std::vector<std::thread> workers;
  std::atomic<int> errors{0}, run{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      auto study = NewStudy(storage);
      auto obj = MakeObjective(c).value();
      OptimizeOptions o;
      o.n_trials = 50;
      o.heartbeat_interval = 0.05;
      auto r = Optimize(*study, c.space, *obj, o);
      if (!r.ok() || r->finished_total != 50) ++errors;
      if (r.ok()) run += static_cast<int>(r->trials_run);
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(run.load(), 50);
  auto study = NewStudy(storage);
  EXPECT_EQ(*storage->CountTrials(study->study_id()), 50);
  EXPECT_EQ(*storage->CountTrials(study->study_id(), {TrialState::kComplete}), 50);
}

// The heartbeat thread keeps a long trial alive: checks by another worker with a grace period
// of 1 s never fail a trial that runs for 1.5 s and heartbeats every 50 ms.
TEST(OptimizeHeartbeat, HeartbeatsKeepALongTrialAlive) {
  StudyConfig c = Config(R"({"search_space": {"x": {"type": "float", "low": 0, "high": 1}},
      "objective": {"type": "command",
                    "argv": ["/bin/sh", "-c", "sleep 1.5; echo '{{\"value\": 1}}'"]}})");
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage);
  auto objective = MakeObjective(c).value();
  OptimizeOptions o;
  o.n_trials = 1;
  o.heartbeat_interval = 0.05;
  o.grace_period = 1.0;
  Result<OptimizeResult> r = InternalError("not run");
  std::thread worker([&] { r = Optimize(*study, c.space, *objective, o); });
  auto checker = NewStudy(storage);
  int checks = 0;
  while (*storage->CountTrials(checker->study_id(), {TrialState::kComplete}) == 0 && checks < 1000) {
    auto failed = checker->FailStaleTrials(1.0, 0);
    ASSERT_TRUE(failed.ok());
    EXPECT_TRUE(failed->empty()) << "a live trial was failed as stale";
    ++checks;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  worker.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->trials_run, 1);
  EXPECT_EQ(r->trials_lost, 0);
  auto trials = *study->Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kComplete);
  EXPECT_GE(*trials[0].duration_seconds(), 1.5);
  EXPECT_GT(checks, 10);
}

}  // namespace
}  // namespace tune

#include "tune/study.h"

#include <gtest/gtest.h>

#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune {
namespace {

std::unique_ptr<Study> NewStudy(std::shared_ptr<Storage> storage, const std::string& name,
                                StudyDirection dir = StudyDirection::kMinimize,
                                std::optional<uint64_t> seed = 1) {
  auto s = Study::CreateOrLoad(std::move(storage), name, {dir}, std::make_unique<RandomSampler>(),
                               std::make_unique<NopPruner>(), seed);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(Study, AskSuggestTellAndBestTrial) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage, "s", StudyDirection::kMaximize);
  for (int i = 0; i < 5; ++i) {
    auto trial = study->Ask().value();
    EXPECT_EQ(trial->number(), i);
    double x = *trial->SuggestFloat("x", -1, 1);
    EXPECT_GE(x, -1);
    EXPECT_LE(x, 1);
    // Suggesting again returns the stored value.
    EXPECT_EQ(*trial->SuggestFloat("x", -1, 1), x);
    ASSERT_TRUE(study->Tell(*trial, TrialState::kComplete, {x}).ok());
  }
  auto trials = *study->Trials();
  double best = -2;
  for (const auto& t : trials) best = std::max(best, t.value());
  EXPECT_EQ(study->BestTrial()->value(), best);
}

TEST(Study, TellRules) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage, "s");
  auto t = study->Ask().value();
  EXPECT_FALSE(study->Tell(*t, TrialState::kComplete, {}).ok());      // value missing
  EXPECT_FALSE(study->Tell(*t, TrialState::kRunning, {1.0}).ok());    // not a final state
  auto nan = study->Tell(*t, TrialState::kComplete, {std::nan("")});  // NaN -> FAIL
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ(nan->state, TrialState::kFail);
  EXPECT_FALSE(study->Tell(*t, TrialState::kComplete, {1.0}).ok());  // already finished

  auto p = study->Ask().value();
  ASSERT_TRUE(p->Report(0.9, 0).ok());
  ASSERT_TRUE(p->Report(0.7, 1).ok());
  ASSERT_TRUE(p->Report(0.1, 1).ok());  // repeated step: ignored, as Optuna
  auto pruned = *study->Tell(*p, TrialState::kPruned);
  EXPECT_EQ(pruned.values, std::vector<double>{0.7});  // last intermediate value
  EXPECT_EQ(pruned.intermediate_values.size(), 2u);
  EXPECT_EQ(study->BestTrial().status().code(), StatusCode::kNotFound);
}

TEST(Study, EnqueuedParamsAreUsedFirst) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage, "s");
  ASSERT_TRUE(study->EnqueueTrial({{"bs", 48}, {"lr", 0.5}}).ok());
  auto t = study->Ask().value();
  EXPECT_EQ(t->number(), 0);
  EXPECT_EQ(*t->SuggestCategorical("bs", {8, 16, 48}), Json(48));
  EXPECT_EQ(*t->SuggestFloat("lr", 0, 1), 0.5);
  double other = *t->SuggestFloat("wd", 0, 1);  // not enqueued: sampled
  EXPECT_GE(other, 0);
  // An enqueued categorical value that is not a choice is an error naming the parameter.
  ASSERT_TRUE(study->EnqueueTrial({{"bs", 7}}).ok());
  auto bad = study->Ask().value();
  auto r = bad->SuggestCategorical("bs", {8, 16});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("enqueued parameter 'bs'"), std::string::npos);
}

TEST(Study, SameSeedSameParams) {
  auto run = [](uint64_t seed) {
    std::shared_ptr<Storage> storage = NewInMemoryStorage();
    auto study = NewStudy(storage, "s", StudyDirection::kMinimize, seed);
    std::vector<Json> out;
    for (int i = 0; i < 20; ++i) {
      auto t = study->Ask().value();
      (void)t->SuggestFloat("lr", 1e-6, 1e-3, true);
      (void)t->SuggestInt("len", 128, 512, false, 32);
      (void)t->SuggestCategorical("model", {"a", "b", "c"});
      out.push_back(t->params());
      (void)study->Tell(*t, TrialState::kComplete, {0.0});
    }
    return out;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(Study, LoadChecksDirection) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  (void)NewStudy(storage, "s", StudyDirection::kMinimize);
  auto again =
      Study::CreateOrLoad(storage, "s", {StudyDirection::kMaximize},
                          std::make_unique<RandomSampler>(), std::make_unique<NopPruner>());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("MINIMIZE"), std::string::npos);
  auto missing =
      Study::Load(storage, "t", std::make_unique<RandomSampler>(), std::make_unique<NopPruner>());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(Study, IncompatibleResuggestIsAnError) {
  std::shared_ptr<Storage> storage = NewInMemoryStorage();
  auto study = NewStudy(storage, "s");
  auto t = study->Ask().value();
  ASSERT_TRUE(t->SuggestInt("n", 1, 5).ok());
  EXPECT_FALSE(t->SuggestFloat("n", 1, 5).ok());
}

}  // namespace
}  // namespace tune

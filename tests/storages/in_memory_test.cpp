// The storage contract, on the in-memory backend. (The persistent backends will run the same
// suite.)
#include "tune/storages/in_memory.h"

#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace tune {
namespace {

class StorageContract : public ::testing::Test {
 protected:
  std::unique_ptr<Storage> storage_ = NewInMemoryStorage();
};

TEST_F(StorageContract, StudiesAreUniqueByName) {
  auto id = storage_->CreateStudy("s", {StudyDirection::kMinimize});
  ASSERT_TRUE(id.ok());
  auto dup = storage_->CreateStudy("s", {StudyDirection::kMaximize});
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*storage_->GetStudyId("s"), *id);
  auto missing = storage_->GetStudyId("ss");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("did you mean 's'"), std::string::npos);
  ASSERT_TRUE(storage_->DeleteStudy(*id).ok());
  EXPECT_FALSE(storage_->GetStudyId("s").ok());
}

TEST_F(StorageContract, NumbersAreContiguousUnderConcurrency) {
  int64_t sid = *storage_->CreateStudy("s", {StudyDirection::kMinimize});
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto t = storage_->CreateTrial(sid);
        ASSERT_TRUE(t.ok());
        ASSERT_TRUE(storage_->SetTrialStateValues(t->trial_id, TrialState::kComplete, {1.0}).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto trials = *storage_->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), 400u);
  for (size_t i = 0; i < trials.size(); ++i) EXPECT_EQ(trials[i].number, static_cast<int64_t>(i));
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kComplete}), 400);
}

TEST_F(StorageContract, FinishedTrialsAreImmutable) {
  int64_t sid = *storage_->CreateStudy("s", {StudyDirection::kMinimize});
  FrozenTrial t = *storage_->CreateTrial(sid);
  EXPECT_EQ(t.state, TrialState::kRunning);
  EXPECT_TRUE(t.datetime_start.has_value());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "x", 1.5, *MakeFloatDistribution(0, 2)).ok());
  ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, 0, 0.5).ok());
  ASSERT_TRUE(*storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {2.0}));
  Status s = storage_->SetTrialParam(t.trial_id, "y", 1.0, *MakeFloatDistribution(0, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("Trial#0 has already finished"), std::string::npos);
  EXPECT_FALSE(storage_->SetTrialUserAttr(t.trial_id, "k", 1).ok());
  EXPECT_FALSE(storage_->SetTrialStateValues(t.trial_id, TrialState::kFail, {}).ok());
  FrozenTrial back = *storage_->GetTrial(t.trial_id);
  EXPECT_EQ(back.state, TrialState::kComplete);
  EXPECT_EQ(back.values, std::vector<double>{2.0});
  EXPECT_EQ(back.params.at("x"), 1.5);
  EXPECT_TRUE(back.datetime_complete.has_value());
}

TEST_F(StorageContract, WaitingTrialsAreClaimedOnce) {
  int64_t sid = *storage_->CreateStudy("s", {StudyDirection::kMinimize});
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  templ.system_attrs["fixed_params"] = {{"x", 1}};
  FrozenTrial w = *storage_->CreateTrial(sid, &templ);
  EXPECT_FALSE(w.datetime_start.has_value());
  std::atomic<int> claimed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto c = storage_->ClaimWaitingTrial(sid);
      if (c.ok() && c->has_value()) ++claimed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(claimed.load(), 1);
  FrozenTrial back = *storage_->GetTrial(w.trial_id);
  EXPECT_EQ(back.state, TrialState::kRunning);
  EXPECT_TRUE(back.datetime_start.has_value());
  // A RUNNING trial cannot be "claimed" again through the state API either.
  EXPECT_FALSE(*storage_->SetTrialStateValues(w.trial_id, TrialState::kRunning, {}));
}

TEST_F(StorageContract, StudyInfoAndAttributes) {
  int64_t sid = *storage_->CreateStudy("s", {StudyDirection::kMaximize});
  ASSERT_TRUE(storage_->SetStudyUserAttr(sid, "owner", "me").ok());
  ASSERT_TRUE(storage_->SetStudySystemAttr(sid, "k", 1).ok());
  (void)storage_->CreateTrial(sid);
  StudyInfo info = *storage_->GetStudy(sid);
  EXPECT_EQ(info.name, "s");
  EXPECT_EQ(info.directions, std::vector<StudyDirection>{StudyDirection::kMaximize});
  EXPECT_EQ(info.user_attrs["owner"], "me");
  EXPECT_EQ(info.n_trials, 1);
  EXPECT_TRUE(info.datetime_start.has_value());
  EXPECT_EQ(storage_->GetAllStudies()->size(), 1u);
}

}  // namespace
}  // namespace tune

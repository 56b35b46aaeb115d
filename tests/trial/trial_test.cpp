#include "tune/trial.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

TEST(Trial, StateNamesAreOptunas) {
  EXPECT_STREQ(TrialStateName(TrialState::kRunning), "RUNNING");
  EXPECT_STREQ(TrialStateName(TrialState::kWaiting), "WAITING");
  EXPECT_EQ(static_cast<int>(TrialState::kFail), 3);
  EXPECT_EQ(*ParseTrialState("pruned"), TrialState::kPruned);
  EXPECT_FALSE(ParseTrialState("DONE").ok());
  EXPECT_EQ(*ParseStudyDirection("Maximize"), StudyDirection::kMaximize);
  EXPECT_FALSE(ParseStudyDirection("up").ok());
}

TEST(Trial, ExternalParamsAndLastStep) {
  FrozenTrial t;
  t.params["bs"] = 1.0;
  t.distributions["bs"] = *MakeCategoricalDistribution({8, 16});
  t.params["len"] = 160.0;
  t.distributions["len"] = *MakeIntDistribution(128, 512, false, 32);
  EXPECT_EQ(t.param("bs"), Json(16));
  EXPECT_EQ(t.ExternalParams(), (Json{{"bs", 16}, {"len", 160}}));
  EXPECT_FALSE(t.last_step().has_value());
  t.intermediate_values = {{0, 1.0}, {4, 0.5}};
  EXPECT_EQ(t.last_step(), 4);
}

TEST(Trial, DatetimeRoundTripsInOptunasFormat) {
  TimePoint now = Clock::now();
  std::string text = FormatDatetime(now);
  ASSERT_EQ(text.size(), 26u);  // YYYY-MM-DD HH:MM:SS.ffffff
  EXPECT_EQ(text[10], ' ');
  auto back = ParseDatetime(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(*back - now).count(), 0);
  EXPECT_TRUE(ParseDatetime("2026-11-21 19:32:48").ok());  // no fraction
  EXPECT_FALSE(ParseDatetime("yesterday").ok());
}

}  // namespace
}  // namespace tune

#include "study/progress_text.h"

#include <gtest/gtest.h>

#include "config/config.h"
#include "study/study_summary.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

FrozenTrial Finished(TrialState state, bool oom = false) {
  FrozenTrial t;
  t.state = state;
  if (oom) t.user_attrs[attrs::kOom] = true;
  return t;
}

TEST(ProgressText, CountsEachOutcomeOnce) {
  ProgressCounts c;
  c.Add(Finished(TrialState::kComplete));
  c.Add(Finished(TrialState::kComplete));
  c.Add(Finished(TrialState::kPruned));
  c.Add(Finished(TrialState::kPruned, /*oom=*/true));
  c.Add(Finished(TrialState::kFail));
  EXPECT_EQ(c.finished, 5);
  EXPECT_EQ(c.complete, 2);
  EXPECT_EQ(c.pruned, 1);  // the OOM trial is not counted as pruned
  EXPECT_EQ(c.oom, 1);
  EXPECT_EQ(c.failed, 1);
  c.best_value = 0.0123;
  c.best_number = 7;
  EXPECT_EQ(ProgressText(c, {10, std::nullopt}, 62.0),
            "5/10 finished | 2 COMPLETE, 1 pruned, 1 OOM, 1 FAIL | best 0.0123 (trial 7) | "
            "elapsed 0:01:02 | ETA ?");
}

// The status line's OOM count is the summary's oom and predicted categories together, whichever
// attribute says so.
TEST(ProgressText, OomIsWhatTheSummaryCallsOomOrPredicted) {
  FrozenTrial by_reason = Finished(TrialState::kPruned);
  by_reason.user_attrs[attrs::kReason] = "oom";
  FrozenTrial predicted = Finished(TrialState::kPruned, /*oom=*/true);
  predicted.user_attrs[attrs::kReason] = "predicted";
  const FrozenTrial by_pruner = Finished(TrialState::kPruned);
  ProgressCounts c;
  for (const FrozenTrial& t : {by_reason, predicted, by_pruner}) c.Add(t);
  EXPECT_EQ(c.oom, 2);
  EXPECT_EQ(c.pruned, 1);
  const StudySummary s =
      SummarizeTrials({by_reason, predicted, by_pruner}, {StudyDirection::kMinimize});
  EXPECT_EQ(s.categories.at(TrialCategory::kOom).trials +
                s.categories.at(TrialCategory::kPredicted).trials,
            c.oom);
  EXPECT_EQ(s.categories.at(TrialCategory::kPruned).trials, c.pruned);
}

TEST(ProgressText, EtaFromTrialsLeft) {
  ProgressCounts c;
  c.finished = 12;  // 2 from an earlier run
  c.run = 10;
  // 10 trials in 100 s: 10 s each, 48 left.
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(c, {60, std::nullopt}, 100.0), 480.0);
  EXPECT_EQ(ProgressText(c, {60, std::nullopt}, 100.0).substr(0, 16), "12/60 finished |");
  EXPECT_NE(ProgressText(c, {60, std::nullopt}, 100.0).find("ETA 0:08:00"), std::string::npos);
  // A re-enqueued stale trial raises the target by one.
  c.retried = 1;
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(c, {60, std::nullopt}, 100.0), 490.0);
  EXPECT_EQ(ProgressText(c, {60, std::nullopt}, 100.0).substr(0, 6), "12/61 ");
}

TEST(ProgressText, EtaHonoursTheTimeout) {
  ProgressCounts c;
  c.finished = c.run = 10;
  // 50 trials left at 10 s each: 500 s; a timeout of 700 s leaves 600 s, so the trials end first.
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(c, {60, 700.0}, 100.0), 500.0);
  // With a timeout of 300 s, 200 s are left: the timeout ends the run first.
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(c, {60, 300.0}, 100.0), 200.0);
  // Timeout only (no n_trials): the time left, even before a trial finished.
  ProgressCounts none;
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(none, {std::nullopt, 300.0}, 100.0), 200.0);
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(none, {std::nullopt, 300.0}, 400.0), 0.0);
  EXPECT_NE(ProgressText(none, {std::nullopt, 3600.0}, 0.0).find("0/- finished"),
            std::string::npos);
  EXPECT_NE(ProgressText(none, {std::nullopt, 3600.0}, 0.0).find("ETA 1:00:00"), std::string::npos);
  // Neither: no estimate.
  EXPECT_FALSE(EstimateEtaSeconds(c, {std::nullopt, std::nullopt}, 100.0).has_value());
  // The target is reached already (a resumed study): nothing left.
  EXPECT_DOUBLE_EQ(*EstimateEtaSeconds(c, {10, std::nullopt}, 0.0), 0.0);
}

// On a simulated card the ledger shows the running trials' summed busy share as the card sees it.
TEST(ProgressText, ShowsTheBusyShareOfASimulatedCard) {
  const int64_t gib = int64_t{1} << 30;
  JobsState s{2, 0, 17 * gib, 22 * gib};
  s.busy = 0.934;
  EXPECT_EQ(JobsStateText(s), "2 running, 17.00 GiB of 22.00 GiB reserved, busy 0.93");
  s.utilization = 0.874;
  EXPECT_EQ(JobsStateText(s),
            "2 running, 17.00 GiB of 22.00 GiB reserved, busy 0.93, GPU 87% utilized");
}

TEST(ProgressText, ShowsTheMemoryLedgerWithSeveralJobs) {
  ProgressCounts c;
  const int64_t gib = int64_t{1} << 30;
  c.jobs = JobsState{3, 1, static_cast<int64_t>(17.2 * gib), static_cast<int64_t>(22.8 * gib)};
  const std::string text = ProgressText(c, {20, std::nullopt}, 5.0);
  EXPECT_NE(text.find("| best - | 3 running, 17.20 GiB of 22.80 GiB reserved, 1 waiting | "),
            std::string::npos)
      << text;
  // One job: what runs, no ledger.
  c.jobs = JobsState{1, 0, 0, std::nullopt};
  EXPECT_NE(ProgressText(c, {20, std::nullopt}, 5.0).find("| 1 running | elapsed"),
            std::string::npos);
}

TEST(ProgressText, ClockText) {
  EXPECT_EQ(ClockText(0), "0:00:00");
  EXPECT_EQ(ClockText(59.6), "0:01:00");
  EXPECT_EQ(ClockText(3 * 86400 + 3723), "73:02:03");
}

TEST(ProgressMode, ParsesNamesAndTheConfigKey) {
  EXPECT_EQ(*ParseProgressMode("auto"), ProgressMode::kAuto);
  EXPECT_EQ(*ParseProgressMode("bar"), ProgressMode::kBar);
  EXPECT_EQ(*ParseProgressMode("lines"), ProgressMode::kLines);
  EXPECT_EQ(*ParseProgressMode("off"), ProgressMode::kOff);
  auto bad = ParseProgressMode("lnes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("did you mean 'lines'"), std::string::npos)
      << bad.status().message();

  const char* doc = R"({"objective": {"type": "function", "name": "branin"},
                        "progress": "lines", "progress_interval": 30})";
  auto c = ParseStudyConfig(Json::parse(doc), "t.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->progress, ProgressMode::kLines);
  EXPECT_DOUBLE_EQ(c->progress_interval, 30.0);
  auto wrong = ParseStudyConfig(
      Json::parse(R"({"objective": {"type": "function", "name": "branin"}, "progress": "br"})"),
      "t.json", ".");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("progress"), std::string::npos);
  auto zero = ParseStudyConfig(Json::parse(R"({"objective": {"type": "function", "name":
                                               "branin"}, "progress_interval": 0})"),
                               "t.json", ".");
  EXPECT_FALSE(zero.ok());
}

}  // namespace
}  // namespace tune

#include "tune/optimize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "config/config.h"
#include "study/jobs_queue.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "util/interrupt.h"

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
  StudyConfig c =
      Config(R"({"objective": {"type": "function", "name": "mixed", "oom_threshold": 6000}})");
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

// A fixed-PAR worker re-enqueues a configuration that ran out of memory (retry_oom = 4): five
// attempts of the same params, then it stops; the retries do not count toward n_trials. The same
// with several trials at once (--jobs 2).
TEST(Optimize, OutOfMemoryRetriesEndAtFiveAttempts) {
  StudyConfig c =
      Config(R"({"objective": {"type": "function", "name": "mixed", "oom_threshold": 1}})");
  for (int64_t jobs : {1, 2}) {
    auto study = NewStudy(NewInMemoryStorage());
    auto objective = MakeObjective(c).value();
    OptimizeOptions o;
    o.n_trials = 2;
    o.retry_oom = 4;
    o.jobs = jobs;
    auto r = Optimize(*study, c.space, *objective, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto all = *study->Trials();
    ASSERT_EQ(all.size(), 10u) << "2 configurations x 5 attempts, jobs " << jobs;
    std::map<int64_t, int64_t> attempts;  // by original trial
    for (const auto& t : all) {
      EXPECT_EQ(t.state, TrialState::kPruned);
      EXPECT_EQ(t.user_attrs["reason"], "oom");
      const bool retry = t.system_attrs.contains("retry_history");
      const int64_t original = retry ? t.system_attrs["retry_history"][0].get<int64_t>() : t.number;
      ++attempts[original];
      if (retry) {
        EXPECT_EQ(t.params, all[original].params) << "the same configuration";
        EXPECT_LE(t.system_attrs["retry_history"].size(), 4u);
      }
    }
    ASSERT_EQ(attempts.size(), 2u);
    for (const auto& [original, n] : attempts) EXPECT_EQ(n, 5) << "trial " << original;
  }
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
  // A function's number of values is checked with the config; a program's only when it runs.
  StudyConfig c = Config(R"({"directions": ["minimize", "maximize"],
      "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
      "objective": {"type": "command", "argv": ["/bin/sh", "-c", "echo '{{\"value\": 1}}'"]}})");
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
  while (*storage->CountTrials(checker->study_id(), {TrialState::kComplete}) == 0 &&
         checks < 1000) {
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

// The order in which trials waiting for memory start with --jobs (jobs_queue.h). Sizes in GiB.
using internal::WaitingTrial;

constexpr int64_t kGiB = int64_t{1} << 30;

// A card whose budget now is `budget` bytes (none: not tracked), running `running` trials that
// reserve `reserved` bytes, at most `limit` at once.
Card Ledger(int64_t running, int64_t reserved, std::optional<int64_t> budget, int64_t limit) {
  Card card;
  card.running = running;
  card.reserved = reserved;
  card.budget = budget;
  card.limit = limit;
  return card;
}

// One card of 22 GiB.
Card OneCard(int64_t running, int64_t reserved_gib, int64_t limit = 8) {
  return Ledger(running, reserved_gib * kGiB, 22 * kGiB, limit);
}

WaitingTrial Needs(int64_t gib, int64_t passed = 0) { return {gib * kGiB, false, passed}; }

TEST(JobsQueue, AHeadThatDoesNotFitLetsALaterSmallerTrialStart) {
  // 14 of 22 GiB reserved: the 12 GiB head and the 10 GiB second do not fit, the 6 GiB third does.
  std::vector<WaitingTrial> queue = {Needs(12), Needs(10), Needs(6)};
  ASSERT_EQ(internal::NextToStart(queue, OneCard(1, 14), 8), std::optional<size_t>(2));
  internal::MarkStarted(queue, 2);
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue[0].reservation, 12 * kGiB);
  EXPECT_EQ(queue[0].passed, 1);  // both trials it overtook count one pass
  EXPECT_EQ(queue[1].passed, 1);
  // Once the head fits, it goes first even though a later one fits too.
  queue.push_back(Needs(2));
  EXPECT_EQ(internal::NextToStart(queue, OneCard(1, 8), 8), std::optional<size_t>(0));
}

TEST(JobsQueue, AfterTheAgingLimitNothingOvertakesTheHead) {
  std::vector<WaitingTrial> queue = {Needs(12, /*passed=*/3), Needs(6)};
  EXPECT_EQ(internal::NextToStart(queue, OneCard(1, 14), 3), std::nullopt);
  EXPECT_FALSE(internal::ShouldAskAnother(queue, OneCard(1, 14), 3));  // strict FIFO: no look-ahead
  EXPECT_EQ(internal::NextToStart(queue, OneCard(1, 14), 4), std::optional<size_t>(1));
  EXPECT_EQ(internal::NextToStart(queue, OneCard(0, 0), 3), std::optional<size_t>(0));
}

TEST(JobsQueue, ExclusiveTrialsAndTheJobLimit) {
  // A trial of unknown memory starts only on an idle device, and never as a backfill.
  const WaitingTrial unknown{0, true, 0};
  EXPECT_TRUE(internal::FitsNow(OneCard(0, 0), unknown));
  EXPECT_FALSE(internal::FitsNow(OneCard(1, 1), unknown));
  EXPECT_EQ(internal::NextToStart({Needs(20), unknown}, OneCard(1, 14), 8), std::nullopt);
  // At the limit nothing starts, however small; an idle device takes any planned trial.
  EXPECT_EQ(internal::NextToStart({Needs(1)}, OneCard(2, 2, /*limit=*/2), 8), std::nullopt);
  // An idle device takes a trial planned above it (admission off) while its budget is what the
  // trial was planned against, not once another process took some of it.
  WaitingTrial above = Needs(30);
  above.planned_against = 22 * kGiB;
  EXPECT_TRUE(internal::FitsNow(OneCard(0, 0), above));
  EXPECT_FALSE(internal::FitsNow(Ledger(0, 0, 20 * kGiB, 8), above));
  // Without a memory guard (no budget) only the limit counts.
  EXPECT_TRUE(internal::FitsNow(Ledger(3, 0, std::nullopt, 4), Needs(100)));
}

TEST(JobsQueue, MoreTrialsAreAskedOnlyWhenNothingWaitingCanStart) {
  EXPECT_TRUE(internal::ShouldAskAnother({}, OneCard(1, 14), 8));
  EXPECT_TRUE(internal::ShouldAskAnother({Needs(12)}, OneCard(1, 14), 8));  // to backfill with
  EXPECT_FALSE(internal::ShouldAskAnother({Needs(12), Needs(6)}, OneCard(1, 14), 8));  // 6 starts
  // Running and waiting trials together stay within the limit.
  EXPECT_FALSE(internal::ShouldAskAnother({Needs(12), Needs(12)}, OneCard(2, 20, 4), 8));
  EXPECT_TRUE(internal::ShouldAskAnother({Needs(12)}, OneCard(2, 20, 4), 8));
}

// A 12 GiB trial waits on a 22 GiB card full of 2 GiB trials that end one per time unit, while
// a new 2 GiB trial arrives every unit (each runs 11 units): whenever one ends, 20 GiB stay
// reserved, so without a bound on overtaking the 12 GiB trial would wait for ever. Returns the
// time it started (-1: not within 200 units) and how many trials started before it.
std::pair<int, int> RunStream(int64_t max_passes) {
  std::vector<int> small_ends;  // the running 2 GiB trials
  for (int t = 1; t <= 11; ++t) small_ends.push_back(t);
  std::vector<WaitingTrial> queue = {Needs(12)};
  int overtook = 0;
  for (int t = 0; t < 200; ++t) {
    small_ends.erase(
        std::remove_if(small_ends.begin(), small_ends.end(), [t](int end) { return end <= t; }),
        small_ends.end());
    queue.push_back(Needs(2));
    const auto n = static_cast<int64_t>(small_ends.size());
    const Card ledger = Ledger(n, 2 * n * kGiB, 22 * kGiB, 16);
    std::optional<size_t> next = internal::NextToStart(queue, ledger, max_passes);
    if (!next) continue;
    if (queue[*next].reservation == 12 * kGiB) return {t, overtook};
    ++overtook;
    small_ends.push_back(t + 11);
    internal::MarkStarted(queue, *next);
  }
  return {-1, overtook};
}

TEST(JobsQueue, TheHeadStartsEventuallyBehindAStreamOfSmallTrials) {
  const auto [never, passed] = RunStream(/*max_passes=*/1000000);
  EXPECT_EQ(never, -1) << "the stream should starve an unbounded backfill";
  EXPECT_GT(passed, 100);
  const auto [started, overtook] = RunStream(/*max_passes=*/4);
  EXPECT_EQ(overtook, 4);  // then nothing more starts before it:
  EXPECT_EQ(started, 10);  // six of the 2 GiB trials end (t = 5..10): now it fits
}

// Several cards (jobs_queue.h): cards of 10, 6 and 4 GiB, the first the largest.
struct Machine {
  std::vector<Card> cards;
  internal::JobLimits limits;  // 8 per card, `total` over them
};
Machine Cards(std::vector<std::pair<int64_t, int64_t>> running_reserved, int64_t total = 24) {
  const std::vector<int64_t> sizes = {10, 6, 4};
  Machine machine{{}, {8, total, 8}};
  for (size_t c = 0; c < running_reserved.size(); ++c) {
    Card card =
        Ledger(running_reserved[c].first, running_reserved[c].second * kGiB, sizes[c] * kGiB, 8);
    card.largest = c == 0;
    machine.cards.push_back(card);
  }
  return machine;
}
std::optional<size_t> CardFor(const Machine& machine, const WaitingTrial& trial) {
  return CardFor(machine.cards, machine.limits.total, trial);
}

TEST(JobsQueue, OnIdleCardsATrialTakesTheSmallestCardItFits) {
  const auto idle = Cards({{0, 0}, {0, 0}, {0, 0}});
  EXPECT_EQ(CardFor(idle, Needs(3)), std::optional<size_t>(2));  // 4 GiB: 1 left
  EXPECT_EQ(CardFor(idle, Needs(5)), std::optional<size_t>(1));  // 6 GiB
  EXPECT_EQ(CardFor(idle, Needs(8)), std::optional<size_t>(0));  // only the largest
  // A trial above every card's budget fits none (unless planned above them: see below); nor
  // does a trial that fits only a card that runs another.
  EXPECT_EQ(CardFor(idle, Needs(12)), std::nullopt);
  EXPECT_EQ(CardFor(Cards({{1, 3}, {0, 0}, {0, 0}}), Needs(8)), std::nullopt);
  // A trial of unknown memory runs alone on the largest card, which it was planned against.
  const WaitingTrial unknown{0, true, 0};
  EXPECT_EQ(CardFor(idle, unknown), std::optional<size_t>(0));
  EXPECT_EQ(CardFor(Cards({{1, 1}, {0, 0}, {0, 0}}), unknown), std::nullopt);
}

TEST(JobsQueue, ATrialGoesToTheLeastBusyCardThenTheBestFit) {
  // Card 2 runs one trial, cards 0 and 1 none: a 2 GiB trial goes to the idle 6 GiB card, not
  // beside the running trial and not onto the largest card.
  EXPECT_EQ(CardFor(Cards({{0, 0}, {0, 0}, {1, 1}}), Needs(2)), std::optional<size_t>(1));
  // Every card runs one: the tightest fit (card 2: 4 - 1 - 2 = 1 GiB left).
  EXPECT_EQ(CardFor(Cards({{1, 1}, {1, 1}, {1, 1}}), Needs(2)), std::optional<size_t>(2));
  // ... unless it does not fit there.
  EXPECT_EQ(CardFor(Cards({{1, 1}, {1, 1}, {1, 3}}), Needs(2)), std::optional<size_t>(1));
  // The job limit is over all the cards.
  EXPECT_EQ(CardFor(Cards({{1, 1}, {1, 1}, {0, 0}}, /*total=*/2), Needs(1)), std::nullopt);
}

// Another process fills a card: its budget now (less the others) drops below a
// trial's reservation. That card is never chosen while its budget is short, idle or not, even
// when it was the largest when the run began.
TEST(JobsQueue, ACardAnotherProcessFillsIsNeverChosenWhileItsBudgetIsShort) {
  auto ledger = Cards({{0, 0}, {0, 0}, {0, 0}});
  ledger.cards[0].budget = 1 * kGiB;  // 9 of its 10 GiB now held by another process
  EXPECT_FALSE(internal::FitsNow(ledger.cards[0], Needs(5)));
  EXPECT_EQ(CardFor(ledger, Needs(5)), std::optional<size_t>(1));  // 6 GiB, not 0
  EXPECT_EQ(CardFor(ledger, Needs(8)), std::nullopt);              // fits no card now: it waits
  // Running or idle, a card with no room left takes nothing.
  ledger.cards[0].budget = 0;
  EXPECT_EQ(CardFor(ledger, Needs(1)), std::optional<size_t>(2));
  EXPECT_EQ(internal::NextToStart({Needs(3)}, Ledger(0, 0, 2 * kGiB, 8), 8), std::nullopt);
}

TEST(JobsQueue, TheLargestCardIsTheOneWithTheLargestBudgetNow) {
  auto ledger = Cards({{0, 0}, {0, 0}, {0, 0}});
  MarkLargest(ledger.cards);
  EXPECT_TRUE(ledger.cards[0].largest);
  EXPECT_FALSE(ledger.cards[1].largest);
  ledger.cards[0].budget = 1 * kGiB;  // another process fills it: the 6 GiB card is largest now
  MarkLargest(ledger.cards);
  EXPECT_FALSE(ledger.cards[0].largest);
  EXPECT_TRUE(ledger.cards[1].largest);
  EXPECT_EQ(CardFor(ledger, WaitingTrial{0, true, 0}), std::optional<size_t>(1));
  for (auto& card : ledger.cards) card.budget.reset();  // none known: every card
  MarkLargest(ledger.cards);
  EXPECT_TRUE(ledger.cards[0].largest && ledger.cards[1].largest && ledger.cards[2].largest);
}

TEST(JobsQueue, ATrialPlannedAboveEveryCardTakesTheIdleLargestWhileItsBudgetIsNotShort) {
  // Admission off: a 12 GiB plan, made when the largest card's budget was 10 GiB.
  WaitingTrial large = Needs(12);
  large.planned_against = 10 * kGiB;
  EXPECT_EQ(CardFor(Cards({{0, 0}, {0, 0}, {0, 0}}), large), std::optional<size_t>(0));
  EXPECT_EQ(CardFor(Cards({{1, 1}, {0, 0}, {0, 0}}), large), std::nullopt);  // not idle
  auto filled = Cards({{0, 0}, {0, 0}, {0, 0}});
  filled.cards[0].budget = 9 * kGiB;  // another process took 1 GiB since: it waits
  EXPECT_EQ(CardFor(filled, large), std::nullopt);
}

TEST(JobsQueue, ShrinkToStartTakesTheCardWithTheMostRoomThatMayTakeATrial) {
  // Rooms left: 10 - 7 = 3, 6 - 1 = 5, 4 - 0 = 4 GiB.
  auto ledger = Cards({{1, 7}, {1, 1}, {0, 0}});
  auto to = internal::CardToShrinkFor(ledger.cards);
  ASSERT_TRUE(to);
  EXPECT_EQ(to->card, 1u);
  EXPECT_EQ(to->room, 5 * kGiB);
  ledger.cards[1].compute_full = true;  // running and full: skipped
  EXPECT_EQ(internal::CardToShrinkFor(ledger.cards)->card, 2u);
  ledger.cards[2].limit = 0;  // at its limit: skipped
  EXPECT_EQ(internal::CardToShrinkFor(ledger.cards)->card, 0u);
  ledger.cards[0].budget = 7 * kGiB;  // no room anywhere
  EXPECT_FALSE(internal::CardToShrinkFor(ledger.cards));
}

TEST(JobsQueue, MaxPassesIsTheMostTrialsOneCardRunsAtOnce) {
  const auto auto4 = internal::JobLimitsFor(kJobsAuto, 8, 4);
  EXPECT_EQ(auto4.per_card, 8);
  EXPECT_EQ(auto4.total, 32);
  EXPECT_EQ(auto4.max_passes, 8);  // not 32: four cards do not make a trial wait four times longer
  const auto fixed = internal::JobLimitsFor(6, 8, 4);
  EXPECT_EQ(fixed.per_card, 6);
  EXPECT_EQ(fixed.total, 6);
  EXPECT_EQ(fixed.max_passes, 6);
  EXPECT_EQ(internal::JobLimitsFor(kJobsAuto, 8, 1).max_passes, 8);  // one card: as before
}

TEST(JobsQueue, BackfillingLooksAtEveryCard) {
  // The 9 GiB head fits no card now (the largest holds 2 GiB); the 5 GiB second fits card 1.
  std::vector<WaitingTrial> queue = {Needs(9), Needs(5)};
  const auto ledger = Cards({{1, 2}, {0, 0}, {1, 1}});
  const auto placed = internal::NextPlacement(queue, ledger.cards, ledger.limits);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->index, 1u);
  EXPECT_EQ(placed->card, 1u);
  EXPECT_FALSE(
      internal::ShouldAskAnother(queue, ledger.cards, ledger.limits));  // something can start
  EXPECT_TRUE(
      internal::ShouldAskAnother({Needs(9)}, ledger.cards, ledger.limits));  // to backfill with
}

}  // namespace
}  // namespace tune

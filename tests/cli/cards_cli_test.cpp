// --jobs over several cards (issue 45): simulated cards of different sizes, each trial placed on
// one (system attribute "card"), none over its card, no run-time out-of-memory error, the status
// line per card; CUDA cards named by --devices narrow each trial's CUDA_VISIBLE_DEVICES.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "testing/card_holder.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/trial.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;

constexpr double kA = 150e6, kB = 2000, kC = 24;  // measured_memory_program.py's true peak
const std::vector<int64_t> kCards = {900'000'000, 600'000'000, 420'000'000};

class CardsCli : public ::testing::Test {
 protected:
  // The simulated cards live in /dev/shm until removed.
  void TearDown() override {
    for (size_t k = 0; k < kCards.size(); ++k) {
      std::filesystem::remove(
          fmt::format("/dev/shm/tune-card-cards-{}-{}", dir_.path().filename().string(), k));
    }
  }

  std::string Storage() const { return "sqlite:///" + (dir_.path() / "s.db").string(); }

  // A study of measured_memory_program.py (a model outside the catalog: four probes first, then
  // its fit) on three simulated cards of different sizes.
  std::string Config(int64_t n_trials) const {
    const std::string program = std::string(TUNE_TEST_DATA_DIR) + "/measured_memory_program.py";
    Json probes = Json::array();
    for (auto [b, t] : std::vector<std::pair<int, int>>{{1, 256}, {1, 128}, {2, 256}, {1, 32}}) {
      probes.push_back({{"batch_size", b}, {"max_length", t}});
    }
    Json doc = {
        {"direction", "maximize"},
        {"n_trials", n_trials},
        {"sampler", {{"name", "random"}, {"seed", 5}}},
        {"search_space", {{"batch_size", {1, 2, 4, 8, 16}}, {"max_length", {32, 64, 128, 256}}}},
        {"enqueue_trials", probes},
        {"objective",
         {{"type", "command"},
          {"argv", {"/usr/bin/python3", program}},
          {"env",
           {{"MEASURED_A", fmt::format("{}", kA)},
            {"MEASURED_B", fmt::format("{}", kB)},
            {"MEASURED_C", fmt::format("{}", kC)},
            {"MEASURED_SECONDS", "0.4"}}},
          {"memory",
           {{"device_memory", kCards},
            {"model", "my-script"},
            {"batch_size", "{batch_size}"},
            {"max_length", "{max_length}"},
            {"simulate", "cards-" + dir_.path().filename().string()}}}}}};
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  Json Trials() const {
    ProcessRun r = Tune({"trials", "--study", "c", "--storage", Storage(), "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out);
  }

  testing::TempDir dir_;
};

// The most the trials of one card reserved at once (their schedule's start and end).
int64_t MostReservedAtOnce(const std::vector<const Json*>& trials) {
  std::vector<std::pair<TimePoint, int64_t>> events;  // (when, +/- reservation)
  for (const Json* t : trials) {
    const Json& s = (*t)["user_attrs"]["schedule"];
    events.emplace_back(*ParseDatetime(s["started"].get<std::string>()),
                        s["reservation"].get<int64_t>());
    events.emplace_back(*ParseDatetime(s["ended"].get<std::string>()),
                        -s["reservation"].get<int64_t>());
  }
  std::sort(events.begin(), events.end());  // at one instant, ends (negative) come first
  int64_t now = 0, most = 0;
  for (const auto& [when, delta] : events) {
    now += delta;
    most = std::max(most, now);
  }
  return most;
}

TEST_F(CardsCli, JobsAutoPlacesTrialsOnThreeCardsOfDifferentSizes) {
  ProcessRun run = Tune({"--study", "c", "--config", Config(30), "--storage", Storage(), "--jobs",
                         "auto", "--progress", "lines"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("over 3 cards"), std::string::npos) << run.err;
  // The status line names each card: "N running: card 0 2 running, 180.00 MiB of 816.00 MiB
  // reserved; card 1 ...".
  EXPECT_NE(run.err.find(": card 0 "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("; card 2 "), std::string::npos) << run.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 30u);
  std::map<std::string, std::vector<const Json*>> by_card;
  int64_t ran_beside = 0;
  for (const Json& t : trials) {
    EXPECT_NE(t["user_attrs"].value("reason", ""), "oom") << "run-time OOM: " << t.dump();
    if (t["state"] != "COMPLETE") {
      EXPECT_EQ(t["user_attrs"].value("reason", ""), "predicted") << t.dump();
      continue;
    }
    ASSERT_TRUE(t["system_attrs"].contains("card")) << t.dump();
    const std::string card = t["system_attrs"]["card"];
    EXPECT_EQ(t["user_attrs"]["schedule"]["card"], card);
    by_card[card].push_back(&t);
    const int64_t b = t["params"]["batch_size"], len = t["params"]["max_length"];
    EXPECT_LE(kA + kB * b * len + kC * b * len * len, 1.02 * kCards.at(card.back() - '0'));
  }
  ASSERT_EQ(by_card.size(), 3u) << "trials on every card";
  for (const auto& [card, ran] : by_card) {
    const int64_t size = kCards.at(static_cast<size_t>(card.back() - '0'));
    const int64_t most = MostReservedAtOnce(ran);
    EXPECT_LE(most, size) << card << ": reservations above the card";
    if (ran.size() > 1 && most > (*ran[0])["user_attrs"]["schedule"]["reservation"]) ++ran_beside;
  }
  EXPECT_GT(ran_beside, 0) << "no card ever ran two trials at once";
  // The probes and the trials before the fit (memory unknown) ran on the largest card.
  for (const Json& t : trials) {
    if (t["number"].get<int64_t>() < 4) EXPECT_EQ(t["system_attrs"]["card"], "card 0");
  }
}

// Another process on one card shrinks that card's budget only: the trials placed on it reserve
// within what it leaves, the other cards keep theirs, and nothing runs out of memory.
TEST_F(CardsCli, AnotherProcessOnOneCardShrinksThatCardsBudgetOnly) {
  const std::string config = Config(16);
  const std::string card0 = "cards-" + dir_.path().filename().string() + "-0";
  const int64_t held = 400'000'000;
  const pid_t holder = testing::HoldOnSimulatedCard(card0, kCards[0], held);
  ASSERT_GT(holder, 0) << "could not charge " << card0;
  ProcessRun run =
      Tune({"--study", "c", "--config", config, "--storage", Storage(), "--jobs", "auto"});
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("other processes hold"), std::string::npos) << run.err;
  const Json trials = Trials();
  std::map<std::string, std::vector<const Json*>> by_card;
  for (const Json& t : trials) {
    EXPECT_NE(t["user_attrs"].value("reason", ""), "oom") << "run-time OOM: " << t.dump();
    if (t["state"] == "COMPLETE") by_card[t["system_attrs"]["card"]].push_back(&t);
  }
  ASSERT_TRUE(by_card.count("card 0")) << run.err;
  // Card 0 (900 MB) had at most 900 - 400 MB, less the margins, for its trials.
  EXPECT_LE(MostReservedAtOnce(by_card["card 0"]), kCards[0] - held);
  EXPECT_EQ(by_card.size(), 3u);
}

TEST_F(CardsCli, BadCardListsAreRefusedWithTheirReason) {
  // A list of sizes on a CPU device model without simulated cards.
  Json doc = Json::parse(Slurp(Config(4)));
  doc["objective"]["memory"].erase("simulate");
  doc["objective"]["memory"]["device"] = "cpu";
  std::ofstream(dir_.path() / "bad.json") << doc.dump();
  ProcessRun r = Tune({"--study", "b", "--config", (dir_.path() / "bad.json").string(), "--storage",
                       Storage(), "--jobs", "2"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("device_memory lists several cards"), std::string::npos) << r.err;
  // --devices for an objective without cards.
  const std::string function = (dir_.path() / "function.json").string();
  std::ofstream(function) << R"({"search_space": {"x": {"type": "float", "low": -1, "high": 1}},
                                 "objective": {"type": "function", "name": "sphere"}})";
  ProcessRun f = Tune({"--study", "f", "--config", function, "--storage", Storage(), "--devices",
                       "0,1", "--n-trials", "1"});
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_NE(f.err.find("--devices applies to"), std::string::npos) << f.err;
  ProcessRun twice =
      Tune({"--study", "t", "--config", Config(4), "--storage", Storage(), "--devices", "0,0"});
  EXPECT_EQ(twice.code, 2) << twice.err;
  EXPECT_NE(twice.err.find("card 0 is named twice"), std::string::npos) << twice.err;
}

TEST_F(CardsCli, DevicesNarrowEachTrialToItsCard) {
  // Two CUDA cards of this process's numbering, 0 and 2, which CUDA_VISIBLE_DEVICES maps to the
  // machine's 3 and 7: each trial's program sees one of them (no GPU is needed: the command's
  // estimates use the CUDA device model and device_memory).
  Json trials = Json::array();
  for (int i = 0; i < 6; ++i) {
    trials.push_back({{"model", "bert-base-uncased"}, {"batch_size", 8}, {"max_length", 128}});
  }
  Json doc = {
      {"direction", "maximize"},
      {"search_space",
       {{"model", {{"type", "model"}, {"choices", {"bert-base-uncased"}}}},
        {"batch_size", {8}},
        {"max_length", {128}}}},
      {"enqueue_trials", trials},
      {"objective",
       {{"type", "command"},
        {"argv", {"/usr/bin/python3", std::string(TUNE_TEST_DATA_DIR) + "/memory_objective.py"}},
        {"env", {{"MEMORY_OBJECTIVE_SECONDS", "0.5"}}},
        {"work_dir", (dir_.path() / "trials").string()},
        {"devices", {0, 2}},
        {"memory",
         {{"device_memory", "24GiB"},
          {"model", "{model}"},
          {"batch_size", "{batch_size}"},
          {"max_length", "{max_length}"},
          {"precision", "bf16"}}}}}};
  const std::string config = (dir_.path() / "cuda.json").string();
  std::ofstream(config) << doc.dump(2);
  setenv("CUDA_VISIBLE_DEVICES", "3,5,7", 1);
  ProcessRun r = Tune({"--study", "d", "--config", config, "--storage", Storage(), "--jobs", "2",
                       "--n-trials", "6"});
  unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::string, std::string> seen;  // card -> what its trials saw
  ProcessRun list = Tune({"trials", "--study", "d", "--storage", Storage(), "--format", "json"});
  ASSERT_EQ(list.code, 0) << list.err;
  for (const Json& t : Json::parse(list.out)) {
    ASSERT_EQ(t["state"], "COMPLETE") << t.dump();
    const Json ran = Json::parse(Slurp(
        dir_.path() / "trials" / fmt::format("trial_{}", t["number"].get<int64_t>()) / "ran.json"));
    const std::string card = t["system_attrs"]["card"];
    const std::string visible = ran["cuda_visible_devices"];
    EXPECT_TRUE(!seen.count(card) || seen[card] == visible) << card << " " << visible;
    seen[card] = visible;
  }
  // Two at once on two cards: each card runs its own (the least busy card first).
  EXPECT_EQ(seen, (std::map<std::string, std::string>{{"cuda:0", "3"}, {"cuda:2", "7"}}));
}

}  // namespace
}  // namespace tune

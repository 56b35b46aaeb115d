// The 'train' objective through the `tune` binary: a tiny study on a small synthetic text set.
// Without LibTorch the same config must fail with a clear message instead.
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "testing/card_holder.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Tune;

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream train(dir_.path() / "train.csv"), val(dir_.path() / "val.csv");
    train << "sentence,topic\n";
    val << "sentence,topic\n";
    const char* words[2][3] = {{"rain", "cloud", "storm"}, {"goal", "match", "team"}};
    for (int i = 0; i < 96; ++i) {
      const int label = i % 2;
      std::string text = std::string("the ") + words[label][i % 3] + " and a " +
                         words[label][(i / 3) % 3] + " today";
      (i < 64 ? train : val) << "\"" << text << "\"," << (label ? "sports" : "weather") << "\n";
    }
  }
  // The study config: the objective's keys and `objective_extra`, and at the top level (direction,
  // pruner, ...) `study_extra`.
  std::string WriteConfig(const Json& objective_extra, const Json& study_extra = Json::object()) {
    Json objective = {{"type", "train"},
                      {"data",
                       {{"train", "train.csv"},
                        {"validation", "val.csv"},
                        {"text_column", "sentence"},
                        {"label_column", "topic"}}},
                      {"model", "tiny-bert"},
                      {"init", "scratch"},
                      {"epochs", 2},
                      {"batch_size", 16},
                      {"max_length", 16},
                      {"threads", 1}};
    for (const auto& [k, v] : objective_extra.items()) objective[k] = v;
    Json doc = {
        {"direction", "maximize"},
        {"n_trials", 2},
        {"sampler", {{"name", "random"}, {"seed", 1}}},
        {"search_space",
         {{"learning_rate", {{"type", "float"}, {"low", 1e-3}, {"high", 5e-3}, {"log", true}}}}},
        {"objective", objective}};
    for (const auto& [k, v] : study_extra.items()) doc[k] = v;
    std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }
  // One trial at `batch` x `accum` (max_length 128, and `extra`) alone under --jobs: its
  // reservation (user attribute "schedule") is its prediction before anything was measured.
  Json ReservedTrial(int batch, int accum, const Json& extra = Json::object()) {
    const std::string storage =
        "sqlite:///" + (dir_.path() / fmt::format("r{}x{}.db", batch, accum)).string();
    Json objective = {{"batch_size", batch},
                      {"grad_accum", accum},
                      {"max_length", 128},
                      {"epochs", 1},
                      {"memory", {{"device_memory", "4GiB"}, {"levers", {"grad_accum"}}}}};
    for (const auto& [k, v] : extra.items()) objective[k] = v;
    const std::string config = WriteConfig(objective);
    ProcessRun r = Tune({"--study", "t", "--config", config, "--storage", storage, "--n-trials",
                         "1", "--jobs", "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(
               Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"}).out)
        .at(0);
  }
  int64_t Reservation(int batch, int accum) {
    return ReservedTrial(batch, accum)["user_attrs"]["schedule"]["reservation"].get<int64_t>();
  }
  testing::TempDir dir_;
};

TEST_F(TrainCli, RunsAStudyAndPrintsTheBestTrial) {
  ProcessRun r = Tune({"--study", "t", "--config", WriteConfig({}), "--storage", "memory",
                       "--format", "json", "--log-level", "debug"});  // per-epoch lines are debug
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  Json best = Json::parse(r.out);
  EXPECT_EQ(best["state"], "COMPLETE");
  EXPECT_TRUE(best["params"].contains("learning_rate"));
  EXPECT_NE(r.err.find("Train data: 64 training examples"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Trial 1 epoch 2/2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("objective train (macro_f1, libtorch"), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("this tune was built without LibTorch"), std::string::npos) << r.err;
#endif
}

// The LibTorch trainer is a library the binary loads only for 'train' studies; a wrong one is a
// clear error before the study starts, never a crash.
TEST_F(TrainCli, MissingOrForeignTrainerLibraryIsAClearError) {
  const std::string config = WriteConfig({});
  struct Case {
    std::string library, expected;
  };
#ifdef TUNE_WITH_TORCH
  const std::string missing = "libtune_torch.so is missing";
#else
  const std::string missing = "this tune was built without LibTorch";
#endif
  const Case cases[] = {
      {(dir_.path() / "nowhere" / "libtune_torch.so").string(), missing},
      {(dir_.path() / "train.csv").string(), "cannot load the LibTorch trainer"},
      {"/lib/x86_64-linux-gnu/libm.so.6", "is not the LibTorch trainer of this tune build"}};
  for (const Case& c : cases) {
    if (!std::filesystem::exists(c.library) && c.expected != missing) {
      continue;  // no libm at the Debian path on this machine
    }
    setenv("TUNE_TORCH_LIBRARY", c.library.c_str(), 1);
    ProcessRun r = Tune({"--study", "t", "--config", config, "--storage", "memory"});
    unsetenv("TUNE_TORCH_LIBRARY");
    EXPECT_EQ(r.code, 1) << c.library << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.library << ": " << r.err;
    EXPECT_EQ(r.err.find("Trial 0"), std::string::npos) << r.err;
  }
  // Commands that do not train never load it, and --version says why it is unavailable.
  setenv("TUNE_TORCH_LIBRARY", "/nonexistent/libtune_torch.so", 1);
  ProcessRun r = Tune({"estimate", "--model", "tiny-bert", "--batch-size", "4"});
  ProcessRun version = Tune({"--version"});
  unsetenv("TUNE_TORCH_LIBRARY");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(version.code, 0) << version.err;
  EXPECT_NE(version.out.find("LibTorch: not available"), std::string::npos) << version.out;
}

// --version: tune's version, then LibTorch's and whether CUDA is compiled in and usable.
TEST_F(TrainCli, VersionNamesLibTorchAndCuda) {
  ProcessRun r = Tune({"--version"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("tune 0.1.0\n", 0), 0u) << r.out;
#ifdef TUNE_WITH_TORCH
  const size_t at = r.out.find("LibTorch ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(r.out[at + 9]))) << r.out;  // "1.13.0"
  // A CPU-only LibTorch, a CUDA one that finds no device, or one with a device.
  EXPECT_TRUE(r.out.find("CUDA not compiled in") != std::string::npos ||
              r.out.find("CUDA compiled in, not usable here") != std::string::npos ||
              r.out.find("CUDA compiled in and usable (") != std::string::npos)
      << r.out;
#else
  EXPECT_NE(r.out.find("LibTorch: not available"), std::string::npos) << r.out;
#endif
}

#ifdef TUNE_WITH_TORCH
// Ctrl-C during a training trial, through the real binary and the real LibTorch plugin (which
// reads the interrupt flag the binary's signal handler sets): tune stops within 5 s, mid-epoch,
// the trial is FAIL with reason "interrupted" and its memory released; the resumed study's next
// trial starts from an empty allocator and completes.
TEST_F(TrainCli, CtrlCStopsATrainingTrialMidEpoch) {
  {
    std::ofstream train(dir_.path() / "train.csv", std::ios::app);
    for (int i = 0; i < 3000; ++i) {
      train << "\"the " << (i % 2 ? "goal match" : "rain cloud") << " number " << i << "\","
            << (i % 2 ? "sports" : "weather") << "\n";
    }
  }
  const std::string config = WriteConfig({{"epochs", 200}, {"batch_size", 4}});
  const std::string storage = "sqlite:///" + (dir_.path() / "c.db").string();
  const std::string log = (dir_.path() / "run.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(TUNE_BINARY, TUNE_BINARY, "--study", "t", "--config", config.c_str(), "--storage",
          storage.c_str(), "--log-level", "debug", nullptr);
    _exit(127);
  }
  // Wait until the first epoch is over, so that the signal lands inside a later epoch.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (testing::Slurp(log).find("Trial 0 epoch 1/200") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(testing::Slurp(log).find("Trial 0 epoch 1/200"), std::string::npos)
      << testing::Slurp(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = testing::Slurp(log);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_LT(seconds, 5.0) << err;
  EXPECT_EQ(err.find("Trial 0 epoch 200/200"), std::string::npos) << err;

  ProcessRun trials = Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"});
  ASSERT_EQ(trials.code, 0) << trials.err;
  Json stopped = Json::parse(trials.out).at(0);
  EXPECT_EQ(stopped["state"], "FAIL");
  EXPECT_EQ(stopped["user_attrs"]["reason"], "interrupted");
  const Json& memory = stopped["user_attrs"]["memory"];
  EXPECT_GT(memory["peak"].get<int64_t>(), 0);  // it was training
  EXPECT_EQ(memory["after"], memory["before"]);

  // Resume with one short trial: it starts from an empty allocator and completes.
  const std::string again = WriteConfig({{"epochs", 1}, {"batch_size", 16}});
  ProcessRun resumed =
      Tune({"--study", "t", "--config", again, "--storage", storage, "--n-trials", "2"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  trials = Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"});
  Json next = Json::parse(trials.out).at(1);
  EXPECT_EQ(next["state"], "COMPLETE");
  EXPECT_EQ(next["user_attrs"]["memory"]["before"], 0);
  EXPECT_EQ(next["user_attrs"]["memory"]["after"], 0);
}
#endif

#ifdef TUNE_WITH_TORCH
// --jobs 2 on a simulated shared card: every trial runs in its own `tune run-trial` process and
// finishes with exactly the value the same params and seed give in one process.
TEST_F(TrainCli, TwoJobsOnASimulatedCardGiveTheSequentialValues) {
  const std::string card = "train-cli-" + std::to_string(getpid());
  const std::string config =
      WriteConfig({{"memory", {{"device_memory", "2GiB"}, {"simulate", card}}}});
  const std::string seq = "sqlite:///" + (dir_.path() / "seq.db").string();
  const std::string par = "sqlite:///" + (dir_.path() / "par.db").string();
  ProcessRun a = Tune({"--study", "t", "--config", config, "--storage", seq, "--n-trials", "4"});
  ASSERT_EQ(a.code, 0) << a.err;
  ProcessRun b = Tune({"--study", "t", "--config", config, "--storage", par, "--n-trials", "4",
                       "--jobs", "2", "--log-level", "debug"});
  std::filesystem::remove("/dev/shm/tune-card-" + card);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.err.find("Jobs: 2, each trial in its own process"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("Trial 1 epoch 2/2"), std::string::npos) << b.err;  // the child's log
  const Json one =
      Json::parse(Tune({"trials", "--study", "t", "--storage", seq, "--format", "json"}).out);
  const Json two =
      Json::parse(Tune({"trials", "--study", "t", "--storage", par, "--format", "json"}).out);
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(two.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(two[i]["state"], "COMPLETE") << two[i].dump();
    EXPECT_EQ(two[i]["params"], one[i]["params"]);
    EXPECT_EQ(two[i]["value"], one[i]["value"]) << "trial " << i;
    EXPECT_EQ(two[i]["intermediate_values"], one[i]["intermediate_values"]);
    EXPECT_GT(two[i]["user_attrs"]["schedule"]["reservation"].get<int64_t>(), 0);
    EXPECT_GT(two[i]["user_attrs"]["memory"]["peak"].get<int64_t>(), 0);
  }
}
#endif

#ifdef TUNE_WITH_TORCH
// --jobs over two simulated cards of different sizes: each `tune run-trial` child charges the
// card it was placed on (--card), the trials spread over both, and each gives the value it gives
// in one process.
TEST_F(TrainCli, JobsOverTwoSimulatedCardsUseBoth) {
  const std::string card = "train-cards-" + std::to_string(getpid());
  const std::string config =
      WriteConfig({{"memory", {{"device_memory", {"2GiB", "1GiB"}}, {"simulate", card}}}});
  const std::string seq = "sqlite:///" + (dir_.path() / "seq.db").string();
  const std::string par = "sqlite:///" + (dir_.path() / "par.db").string();
  ProcessRun a = Tune({"--study", "t", "--config", config, "--storage", seq, "--n-trials", "4"});
  ASSERT_EQ(a.code, 0) << a.err;
  ProcessRun b = Tune(
      {"--study", "t", "--config", config, "--storage", par, "--n-trials", "4", "--jobs", "2"});
  for (const char* k : {"-0", "-1", ""}) std::filesystem::remove("/dev/shm/tune-card-" + card + k);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.err.find("over 2 cards"), std::string::npos) << b.err;
  const Json one =
      Json::parse(Tune({"trials", "--study", "t", "--storage", seq, "--format", "json"}).out);
  const Json two =
      Json::parse(Tune({"trials", "--study", "t", "--storage", par, "--format", "json"}).out);
  ASSERT_EQ(two.size(), 4u);
  std::set<std::string> cards;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(two[i]["state"], "COMPLETE") << two[i].dump();
    EXPECT_EQ(two[i]["value"], one[i]["value"]) << "trial " << i;
    cards.insert(two[i]["system_attrs"]["card"].get<std::string>());
    EXPECT_GT(two[i]["user_attrs"]["memory"]["peak"].get<int64_t>(), 0);
  }
  // Both idle at first: trial 0 on the smaller card it fits, trial 1 on the other.
  EXPECT_EQ(cards, (std::set<std::string>{"card 0", "card 1"}));
  EXPECT_EQ(two[0]["system_attrs"]["card"], "card 1");
}
#endif

#ifdef TUNE_WITH_TORCH
// memory.shrink_to_start for train trials: on a card that holds one trial at batch 64 and one
// at 32 beside it, but not two at 64, the second trial starts at once at batch 32 x grad_accum
// 2 in its own process instead of waiting for the first.
TEST_F(TrainCli, ASecondJobStartsAtASmallerMicroBatchBesideTheFirst) {
  // What one trial at batch 64, and one at 32 x grad_accum 2, reserve (the same correction:
  // nothing measured yet).
  const int64_t r64 = Reservation(64, 1), r32 = Reservation(32, 2);
  ASSERT_LT(r32, r64);
  // Two at 64 do not fit; one at 64 and one at 32 x 2 do.
  const auto device_memory =
      static_cast<int64_t>(static_cast<double>(r64 + (r64 + r32) / 2) / 0.95) + 1;
  const std::string card = "train-shrink-" + std::to_string(getpid());
  const std::string config = WriteConfig(
      {{"batch_size", 64},
       {"max_length", 128},
       {"epochs", 2},
       {"memory",
        {{"device_memory", device_memory}, {"levers", {"grad_accum"}}, {"simulate", card}}}});
  const std::string storage = "sqlite:///" + (dir_.path() / "shrink.db").string();
  ProcessRun r = Tune(
      {"--study", "t", "--config", config, "--storage", storage, "--n-trials", "2", "--jobs", "2"});
  std::filesystem::remove("/dev/shm/tune-card-" + card);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Trial 1 shrunk to start beside 1 running"), std::string::npos) << r.err;
  const Json trials =
      Json::parse(Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"}).out);
  ASSERT_EQ(trials.size(), 2u);
  for (const Json& t : trials) EXPECT_EQ(t["state"], "COMPLETE") << t.dump();
  const Json& memory = trials[1]["user_attrs"]["memory"];
  EXPECT_EQ(memory["batch_size"], 32) << memory.dump();
  EXPECT_EQ(memory["grad_accum"], 2) << memory.dump();
  EXPECT_EQ(trials[0]["user_attrs"]["memory"]["batch_size"], 64);
  EXPECT_LT(trials[1]["user_attrs"]["schedule"]["started"].get<std::string>(),
            trials[0]["user_attrs"]["schedule"]["ended"].get<std::string>());
}
#endif

#ifdef TUNE_WITH_TORCH
// A desktop on the card: another process holds part of the simulated card for the whole study.
// The budget shrinks to what it leaves (with room for it to grow), admission halves the
// micro-batch of the first trial, which would have run out of memory at batch 64, no trial runs
// out of memory, and calibration learns exactly what the same study learns on an empty card of
// that budget.
TEST_F(TrainCli, AnotherProcessOnTheCardShrinksTheBudgetAndNoTrialRunsOutOfMemory) {
  // Padded to max_length, so that the batch decides the memory.
  const Json padded = {{"padding", "max_length"}};
  const Json t64 = ReservedTrial(64, 1, padded);
  const int64_t r64 = t64["user_attrs"]["schedule"]["reservation"].get<int64_t>();
  const int64_t r32 = ReservedTrial(32, 2, padded)["user_attrs"]["schedule"]["reservation"];
  const int64_t peak64 = t64["user_attrs"]["memory"]["peak"].get<int64_t>();
  ASSERT_LT(r32, r64);
  // The card holds a trial at 64 with 10 % to spare; the others leave room for 32 x 2 only.
  const auto device_memory = static_cast<int64_t>(static_cast<double>(r64) * 1.1 / 0.95);
  const auto budget = static_cast<int64_t>(static_cast<double>(r64 + r32) / 2 / 0.95);
  // device_memory - B - max(B / 8, device_memory / 64) = budget.
  int64_t ballast = (device_memory - budget) * 8 / 9;
  if (ballast / 8 < device_memory / 64) ballast = device_memory - budget - device_memory / 64;
  // At 64, as admitted against device_memory alone, the first trial would run out of memory.
  ASSERT_LT(device_memory - ballast, peak64);
  const std::string card = "train-others-" + std::to_string(getpid());
  auto config = [&](int64_t memory, bool simulate) {
    Json m = {{"device_memory", memory}, {"levers", {"grad_accum"}}};
    if (simulate) m["simulate"] = card;
    return WriteConfig({{"batch_size", 64},
                        {"max_length", 128},
                        {"padding", "max_length"},
                        {"epochs", 1},
                        {"memory", m}});
  };
  const pid_t other = testing::HoldOnSimulatedCard(card, device_memory, ballast);
  ASSERT_GT(other, 0);
  const std::string shared = "sqlite:///" + (dir_.path() / "shared.db").string();
  ProcessRun r = Tune({"--study", "t", "--config", config(device_memory, true), "--storage", shared,
                       "--n-trials", "2"});
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
  std::filesystem::remove("/dev/shm/tune-card-" + card);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Device memory budget"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("other processes hold"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pid " + std::to_string(other)), std::string::npos) << r.err;
  const Json trials =
      Json::parse(Tune({"trials", "--study", "t", "--storage", shared, "--format", "json"}).out);
  ASSERT_EQ(trials.size(), 2u);
  const Json& first = trials[0]["user_attrs"]["memory"];
  const int64_t used_budget = first["device_memory"].get<int64_t>();
  EXPECT_LE(used_budget, budget + device_memory / 1000) << first.dump();
  EXPECT_GE(used_budget, budget - device_memory / 1000) << first.dump();
  for (const Json& t : trials) {
    const Json& memory = t["user_attrs"]["memory"];
    EXPECT_EQ(t["state"], "COMPLETE") << t.dump();
    EXPECT_FALSE(memory["oom"].get<bool>()) << memory.dump();
    EXPECT_EQ(memory["others"], ballast) << memory.dump();
    EXPECT_EQ(memory["device_memory"], used_budget) << memory.dump();
  }
  // The first trial, before anything was measured, did not fit at 64 beside the other process.
  EXPECT_EQ(first["batch_size"], 32) << first.dump();
  EXPECT_EQ(first["grad_accum"], 2) << first.dump();

  // The same study on an empty card of the budget the others left: the same decisions and the
  // same corrections, so calibration learnt nothing from the other process.
  const std::string empty = "sqlite:///" + (dir_.path() / "empty.db").string();
  ASSERT_EQ(Tune({"--study", "t", "--config", config(used_budget, false), "--storage", empty,
                  "--n-trials", "2"})
                .code,
            0);
  const Json alone =
      Json::parse(Tune({"trials", "--study", "t", "--storage", empty, "--format", "json"}).out);
  ASSERT_EQ(alone.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& a = alone[i]["user_attrs"]["memory"];
    const Json& b = trials[i]["user_attrs"]["memory"];
    EXPECT_EQ(a["batch_size"], b["batch_size"]);
    EXPECT_EQ(a["predicted"], b["predicted"]) << "trial " << i;
    EXPECT_DOUBLE_EQ(a["correction"].get<double>(), b["correction"].get<double>()) << "trial " << i;
    EXPECT_FALSE(a.contains("others"));
  }
}
#endif

#ifdef TUNE_WITH_TORCH
// The trainer's defaults a study keeps, through the binary and its SQLite file: the first run
// records what precision "auto" chose here (fp32 on the CPU); once the record says bf16 (what a
// card with bf16 would have chosen), later --jobs trials train at bf16 in their own processes.
TEST_F(TrainCli, JobsTrialsTrainAtTheStudysRecordedPrecision) {
  const std::string db = (dir_.path() / "d.db").string();
  const std::string config = WriteConfig({{"memory", {{"device_memory", "2GiB"}}}});
  auto query = [&](const std::string& sql) {
    sqlite3* h = nullptr;
    std::string out;
    EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_exec(
        h, sql.c_str(),
        [](void* o, int, char** values, char**) {
          *static_cast<std::string*>(o) = values[0] != nullptr ? values[0] : "";
          return 0;
        },
        &out, nullptr);
    sqlite3_close(h);
    return out;
  };
  const std::string select =
      "SELECT value_json FROM study_system_attributes WHERE key = 'trainer_defaults'";
  ProcessRun first =
      Tune({"--study", "t", "--config", config, "--storage", "sqlite:///" + db, "--n-trials", "1"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(Json::parse(query(select)),
            (Json{{"precision", "fp32"}, {"tf32", true}, {"attention", "eager"}}));
  query(
      "UPDATE study_system_attributes SET value_json = "
      "'{\"precision\": \"bf16\", \"tf32\": true, \"attention\": \"eager\"}' "
      "WHERE key = 'trainer_defaults'");
  // --n-trials counts the study's finished trials: two more.
  ProcessRun resumed = Tune({"--study", "t", "--config", config, "--storage", "sqlite:///" + db,
                             "--n-trials", "3", "--jobs", "2"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("Trainer defaults kept from study 't's first run: precision bf16 "
                             "(auto), TF32 on, attention eager; this tune here would choose fp32"),
            std::string::npos)
      << resumed.err;
  const Json trials = Json::parse(
      Tune({"trials", "--study", "t", "--storage", "sqlite:///" + db, "--format", "json"}).out);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0]["user_attrs"]["memory"]["family"], "bert");
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(trials[i]["state"], "COMPLETE") << trials[i].dump();
    EXPECT_EQ(trials[i]["user_attrs"]["memory"]["family"], "bert/bf16") << trials[i].dump();
  }
}
#endif

#ifdef TUNE_WITH_TORCH
// cuda:99 exists on no machine: unusable with a CPU-only LibTorch, without a GPU, and with one.
TEST_F(TrainCli, UnusableDeviceStopsBeforeTheStudy) {
  ProcessRun r = Tune(
      {"--study", "t", "--config", WriteConfig({{"device", "cuda:99"}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("device 'cuda:99'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Trial 0"), std::string::npos) << r.err;
}
#endif

TEST_F(TrainCli, BadDataExits2NamingTheLine) {
  std::ofstream(dir_.path() / "val.csv", std::ios::app) << "\"a text\",snow\n";
  ProcessRun r = Tune({"--study", "t", "--config", WriteConfig({}), "--storage", "memory"});
#ifdef TUNE_WITH_TORCH
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("val.csv:34: unknown label 'snow'"), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
}

// Sentence pairs end to end: a criterion and a post whose label says whether the post meets the
// criterion; the study trains on the joined pair (evaluated every 2 optimizer steps), --save-best
// records the columns and the truncation, `tune predict` reads the pairs back with them; bad pairs
// and keys exit 2.
TEST_F(TrainCli, PairStudySavesAModelThatPredictsPairs) {
  const char* words[2][3] = {{"rain", "cloud", "storm"}, {"goal", "match", "team"}};
  const char* criteria[2] = {"about the weather", "about sports"};
  for (const char* name : {"pairs.jsonl", "pairs-val.jsonl"}) {
    std::ofstream out(dir_.path() / name);
    for (int i = 0; i < (name[5] == '.' ? 64 : 16); ++i) {
      const int topic = i % 2, criterion = (i / 2) % 2;
      const std::string post = std::string("the ") + words[topic][i % 3] + " and a " +
                               words[topic][(i / 3) % 3] + " today";
      out << Json{{"criterion", criteria[criterion]},
                  {"post", post},
                  {"label", topic == criterion ? "met" : "not met"}}
                 .dump()
          << "\n";
    }
  }
  const std::string best = (dir_.path() / "best").string();
  const Json data = {{"train", "pairs.jsonl"},
                     {"validation", "pairs-val.jsonl"},
                     {"text_column", "criterion"},
                     {"text_pair_column", "post"},
                     {"truncation", "only_second"}};
  const std::string storage = "sqlite:///" + (dir_.path() / "pairs.db").string();
  ProcessRun r = Tune({"--study", "p", "--config",
                       WriteConfig({{"data", data},
                                    {"eval_strategy", "steps"},
                                    {"eval_steps", 2},
                                    {"memory", {{"device_memory", "1GiB"}}}}),
                       "--storage", storage, "--n-trials", "1", "--save-best", best});
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  // The guard's estimate of the pair's batches against the counting allocator's peak: the same
  // bar as single texts (EstimateCli.MeasureAgreesWithTheEstimateOnCpu).
  const Json memory =
      Json::parse(Tune({"trials", "--study", "p", "--storage", storage, "--format", "json"})
                      .out)[0]["user_attrs"]["memory"];
  const double error = (memory["estimate"].get<double>() - memory["peak"].get<double>()) /
                       memory["peak"].get<double>();
  EXPECT_LT(std::abs(error), 0.05) << memory.dump();
  EXPECT_NE(r.err.find("Train data: 64 training pairs (joined as [CLS] a [SEP] b [SEP], "
                       "truncation only_second)"),
            std::string::npos)
      << r.err;
  const Json config = Json::parse(std::ifstream(best + "/config.json"));
  EXPECT_EQ(config["problem_type"], "single_label_classification");
  EXPECT_EQ(config["tune"]["inputs"], (Json{{"text_column", "criterion"},
                                            {"label_column", "label"},
                                            {"text_pair_column", "post"},
                                            {"truncation", "only_second"},
                                            {"positive_label", "not met"}}));  // the second
  ProcessRun p = Tune({"predict", "--model", best, "--data",
                       (dir_.path() / "pairs-val.jsonl").string(), "--format", "jsonl"});
  ASSERT_EQ(p.code, 0) << p.err;
  std::istringstream lines(p.out);
  std::ifstream rows(dir_.path() / "pairs-val.jsonl");
  std::string line, row;
  int n = 0;
  while (std::getline(lines, line) && std::getline(rows, row)) {
    const Json got = Json::parse(line), want = Json::parse(row);
    EXPECT_EQ(got["text"], want["criterion"]);
    EXPECT_EQ(got["text_pair"], want["post"]);
    EXPECT_TRUE(got["label"] == "met" || got["label"] == "not met") << line;
    ++n;
  }
  EXPECT_EQ(n, 16);
  // A pair without its second text, in training and in prediction.
  std::ofstream(dir_.path() / "pairs-val.jsonl", std::ios::app)
      << Json{{"criterion", "about sports"}, {"post", ""}, {"label", "met"}}.dump() << "\n";
  r = Tune({"--study", "p2", "--config", WriteConfig({{"data", data}}), "--storage", "memory",
            "--n-trials", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("pairs-val.jsonl:17: 'post' is empty: each example of a pair "
                       "('criterion', 'post') needs both texts"),
            std::string::npos)
      << r.err;
  p = Tune({"predict", "--model", best, "--data", (dir_.path() / "pairs-val.jsonl").string()});
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("pairs-val.jsonl:17: 'post' is empty"), std::string::npos) << p.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
  // Truncation names a strategy, and applies to pairs only.
  Json bad = data;
  bad["truncation"] = "longest";
  r = Tune({"--study", "p3", "--config", WriteConfig({{"data", bad}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown truncation 'longest' (did you mean 'longest_first'?)"),
            std::string::npos)
      << r.err;
  bad.erase("text_pair_column");
  bad["truncation"] = "only_first";
  r = Tune({"--study", "p4", "--config", WriteConfig({{"data", bad}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("applies to sentence pairs: set \"text_pair_column\""), std::string::npos)
      << r.err;
}

// The positive class's F1 on the two-label set: the log names the positive label, every metric
// of each epoch is recorded; positive_label picks the other; a study scored with macro_f1 under
// the old meaning of "f1" does not switch metric midway; "f1" needs two labels.
TEST_F(TrainCli, F1IsThePositiveClassesAndEveryMetricIsRecorded) {
  const std::string storage = "sqlite:///" + (dir_.path() / "f1.db").string();
  ProcessRun r = Tune({"--study", "f", "--config", WriteConfig({{"metric", "f1"}}), "--storage",
                       storage, "--n-trials", "1"});
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Metric f1: the F1 of label 'weather' (the positive class; set "
                       "\"positive_label\" to choose the other)"),
            std::string::npos)
      << r.err;
  const Json trial =
      Json::parse(Tune({"trials", "--study", "f", "--storage", storage, "--format", "json"}).out)
          .at(0);
  const Json& epoch = trial["user_attrs"]["train"]["history"].back();
  for (const char* key : {"accuracy", "balanced_accuracy", "macro_f1", "micro_f1", "weighted_f1",
                          "mcc", "auroc", "f1", "class_f1"}) {
    EXPECT_TRUE(epoch.contains(key)) << key << ": " << epoch.dump();
  }
  EXPECT_GE(epoch["balanced_accuracy"].get<double>(), 0.0);
  EXPECT_LE(epoch["balanced_accuracy"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(epoch["f1"].get<double>(), epoch["class_f1"][1].get<double>());
  double best_f1 = 0;  // the trial's value: its best epoch's
  for (const Json& e : trial["user_attrs"]["train"]["history"])
    best_f1 = std::max(best_f1, e["f1"].get<double>());
  EXPECT_DOUBLE_EQ(trial["value"].get<double>(), best_f1);
  r = Tune({"--study", "f2", "--config",
            WriteConfig({{"metric", "f1"}, {"positive_label", "sports"}}), "--storage", storage,
            "--n-trials", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Metric f1: the F1 of label 'sports' (the positive class)"),
            std::string::npos)
      << r.err;
  // A study scored with macro_f1, then resumed with "f1".
  ASSERT_EQ(
      Tune({"--study", "m", "--config", WriteConfig({}), "--storage", storage, "--n-trials", "1"})
          .code,
      0);
  r = Tune({"--study", "m", "--config", WriteConfig({{"metric", "f1"}}), "--storage", storage,
            "--n-trials", "2"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("metric 'f1' is now the F1 of the positive class, but study 'm' was "
                       "scored with macro_f1"),
            std::string::npos)
      << r.err;
  r = Tune({"--study", "f3", "--config",
            WriteConfig({{"metric", "f1"}, {"positive_label", "sport"}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("positive_label 'sport' is not a label (did you mean 'sports'?)"),
            std::string::npos)
      << r.err;
  std::ofstream(dir_.path() / "train.csv", std::ios::app) << "\"the snow\",snow\n";
  r = Tune({"--study", "f4", "--config", WriteConfig({{"metric", "f1"}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("metric 'f1' is the F1 of the positive class, for two labels; the data "
                       "has 3 (snow, sports, weather)"),
            std::string::npos)
      << r.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
}

// eval_strategy "steps": 64 examples in batches of 16 are 4 optimizer steps per epoch; with
// eval_steps 3 over 2 epochs the trial reports at steps 3 and 6 and at the end (8), the steps the
// pruner sees; the summary counts the evaluations and their time.
TEST_F(TrainCli, EvalStepsReportsEachEvaluationAtItsOptimizerStep) {
  const std::string storage = "sqlite:///" + (dir_.path() / "steps.db").string();
  ProcessRun r = Tune({"--study", "s", "--config",
                       WriteConfig({{"eval_strategy", "steps"}, {"eval_steps", 3}}), "--storage",
                       storage, "--n-trials", "1"});
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  const Json trial =
      Json::parse(Tune({"trials", "--study", "s", "--storage", storage, "--format", "json"}).out)
          .at(0);
  std::vector<std::string> steps;
  for (const auto& [step, value] : trial["intermediate_values"].items()) steps.push_back(step);
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, (std::vector<std::string>{"3", "6", "8"})) << trial.dump();
  const Json& summary = trial["user_attrs"]["train"];
  EXPECT_EQ(summary["evaluations"], 3);
  EXPECT_TRUE(summary.contains("best_step")) << summary.dump();
  EXPECT_GT(summary["eval_seconds"].get<double>(), 0.0);
  r = Tune({"--study", "s2", "--config", WriteConfig({{"eval_strategy", "step"}}), "--storage",
            "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("(did you mean 'steps'?)"), std::string::npos) << r.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
}

// The last line of `text` (tune predict's metrics on stderr).
std::string LastLine(const std::string& text) {
  const std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.rfind('\n') + 1);
}

// Texts with any number of topics (weather, sports, food), none included, at `n` rows of `path`:
// the words of each topic the row has; `tags` lists them. Every fourth row has none.
void WriteTaggedTexts(const std::filesystem::path& path, int n, int offset) {
  const char* words[3][3] = {
      {"rain", "cloud", "storm"}, {"goal", "match", "team"}, {"bread", "soup", "cake"}};
  const char* topics[3] = {"weather", "sports", "food"};
  std::ofstream out(path);
  for (int i = offset; i < offset + n; ++i) {
    Json tags = Json::array();
    std::string text = "today";
    for (int t = 0; t < 3; ++t) {
      if (i % 4 == 3 || ((i >> t) & 1) == 0) continue;
      tags.push_back(topics[t]);
      text += std::string(" a ") + words[t][i % 3] + " and " + words[t][(i / 3) % 3];
    }
    out << Json{{"text", text}, {"tags", tags}}.dump() << "\n";
  }
}

// A multi-label study end to end: binary cross-entropy with balanced positive weights,
// evaluations every 2 optimizer steps that a median pruner hears, the best model saved with its
// problem type and threshold, `tune predict` writing each text's labels; bad rows exit 2 naming
// file and line.
TEST_F(TrainCli, MultiLabelStudyPrunesOnEvalStepsSavesAndPredicts) {
  WriteTaggedTexts(dir_.path() / "tags.jsonl", 96, 0);
  WriteTaggedTexts(dir_.path() / "tags-val.jsonl", 32, 96);
  const Json data = {{"train", "tags.jsonl"},
                     {"validation", "tags-val.jsonl"},
                     {"label_column", "tags"},
                     {"problem_type", "multi_label_classification"},
                     {"class_weights", "balanced"}};
  const std::string best = (dir_.path() / "best").string();
  const std::string storage = "sqlite:///" + (dir_.path() / "tags.db").string();
  const std::string config = WriteConfig(
      {{"data", data},
       {"metric", "micro_f1"},
       {"epochs", 4},
       {"eval_strategy", "steps"},
       {"eval_steps", 2},
       {"memory", {{"device_memory", "1GiB"}}}},
      {{"pruner", {{"name", "median"}, {"n_startup_trials", 1}, {"n_warmup_steps", 2}}},
       {"search_space",
        {{"learning_rate", {{"type", "float"}, {"low", 1e-4}, {"high", 1e-2}, {"log", true}}}}}});
  ProcessRun r = Tune({"--study", "m", "--config", config, "--storage", storage, "--n-trials", "4",
                       "--save-best", best});
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  // Weather and sports are on 24 of the 96 training texts, food on 36: negatives / positives.
  EXPECT_NE(r.err.find("(positive weights: food 1.67, sports 3, weather 3)"), std::string::npos)
      << r.err;
  const Json trials =
      Json::parse(Tune({"trials", "--study", "m", "--storage", storage, "--format", "json"}).out);
  ASSERT_EQ(trials.size(), 4u);
  const Json memory = trials[0]["user_attrs"]["memory"];
  const double error = (memory["estimate"].get<double>() - memory["peak"].get<double>()) /
                       memory["peak"].get<double>();
  EXPECT_LT(std::abs(error), 0.05) << memory.dump();
  for (const Json& t : trials) {
    std::vector<int> steps;  // reported every 2 optimizer steps (6 per epoch)
    for (const auto& [step, value] : t["intermediate_values"].items())
      steps.push_back(std::stoi(step));
    std::sort(steps.begin(), steps.end());
    ASSERT_FALSE(steps.empty()) << t.dump();
    EXPECT_EQ(steps[0], 2) << t.dump();
    for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i] - steps[i - 1], 2) << t.dump();
    if (t["state"] == "COMPLETE") {
      EXPECT_EQ(steps.back(), 24) << t.dump();
      const Json& last = t["user_attrs"]["train"]["history"].back();
      for (const char* key : {"accuracy", "macro_f1", "micro_f1", "weighted_f1", "class_f1"}) {
        EXPECT_TRUE(last.contains(key)) << key << ": " << last.dump();
      }
      EXPECT_FALSE(last.contains("mcc")) << last.dump();  // single-label only
    }
  }
  const Json saved = Json::parse(std::ifstream(best + "/config.json"));
  EXPECT_EQ(saved["problem_type"], "multi_label_classification");
  EXPECT_EQ(saved["id2label"], (Json{{"0", "food"}, {"1", "sports"}, {"2", "weather"}}));
  EXPECT_EQ(saved["tune"]["inputs"]["label_column"], "tags");
  EXPECT_DOUBLE_EQ(saved["tune"]["hyperparams"]["threshold"].get<double>(), 0.5);
  ProcessRun p = Tune({"predict", "--model", best, "--data",
                       (dir_.path() / "tags-val.jsonl").string(), "--format", "jsonl"});
  ASSERT_EQ(p.code, 0) << p.err;
  std::istringstream lines(p.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const Json got = Json::parse(line);
    ASSERT_TRUE(got["labels"].is_array()) << line;
    for (const auto& [label, probability] : got["probabilities"].items()) {
      const bool listed =
          std::find(got["labels"].begin(), got["labels"].end(), label) != got["labels"].end();
      EXPECT_EQ(listed, probability.get<double>() >= 0.5) << line;
    }
    ++n;
  }
  EXPECT_EQ(n, 32);
  // The metrics on the labelled file are the best trial's last evaluation's (same data, same
  // model: the best evaluation's weights).
  const Json metrics = Json::parse(LastLine(p.err));
  EXPECT_EQ(metrics["metric"], "micro_f1");
  EXPECT_NEAR(
      metrics["value"].get<double>(),
      Json::parse(Tune({"best-trial", "--study", "m", "--storage", storage, "--format", "json"})
                      .out)["value"]
          .get<double>(),
      1e-6)
      << p.err;
  EXPECT_GT(metrics["micro_f1"].get<double>(), 0.0) << p.err;
  // A label outside the data's in a list, a list that is not one.
  std::ofstream(dir_.path() / "tags-val.jsonl", std::ios::app)
      << Json{{"text", "a storm"}, {"tags", {"wether"}}}.dump() << "\n";
  r = Tune({"--study", "m2", "--config", config, "--storage", "memory", "--n-trials", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("tags-val.jsonl:33: unknown label 'wether' (did you mean 'weather'?)"),
            std::string::npos)
      << r.err;
  p = Tune({"predict", "--model", best, "--data", (dir_.path() / "tags-val.jsonl").string()});
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("tags-val.jsonl:33: unknown label 'wether'"), std::string::npos) << p.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
  // Metrics and keys that do not apply to multi-label.
  r = Tune({"--study", "m3", "--config", WriteConfig({{"data", data}, {"metric", "mcc"}}),
            "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("metric 'mcc' does not apply to problem_type 'multi_label_classification'; "
                       "valid: macro_f1, micro_f1, weighted_f1, accuracy, auroc, loss"),
            std::string::npos)
      << r.err;
  Json bad = data;
  bad["problem_type"] = "multilabel";
  r = Tune({"--study", "m4", "--config", WriteConfig({{"data", bad}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("/objective/data/problem_type: unknown problem_type 'multilabel' (did you "
                       "mean 'multi_label'?)"),
            std::string::npos)
      << r.err;
}

// A regression study end to end: texts scored by how many "good" words they have, one output
// trained with the squared error, the study minimizing mse (the default metric) with evaluations
// every 6 optimizer steps that a median pruner hears, pearson and spearman recorded, `tune predict`
// writing a score per text; a target that is not a number exits 2 naming file and line.
TEST_F(TrainCli, RegressionStudyMinimizesMseSavesAndPredicts) {
  const char* good[3] = {"great", "fine", "lovely"};
  for (const char* name : {"scores.csv", "scores-val.csv"}) {
    std::ofstream out(dir_.path() / name);
    out << "review,stars\n";
    for (int i = 0; i < (name[6] == '.' ? 96 : 32); ++i) {
      const int stars = i % 4;
      std::string text = "the film was";
      for (int k = 0; k < stars; ++k) text += std::string(" ") + good[(i + k) % 3];
      for (int k = stars; k < 3; ++k) text += " dull";
      out << "\"" << text << "\"," << stars + 1 << "\n";
    }
  }
  const Json data = {{"train", "scores.csv"},
                     {"validation", "scores-val.csv"},
                     {"text_column", "review"},
                     {"label_column", "stars"},
                     {"problem_type", "regression"}};
  const std::string best = (dir_.path() / "best").string();
  const std::string storage = "sqlite:///" + (dir_.path() / "scores.db").string();
  const std::string config = WriteConfig(
      {{"data", data},
       {"epochs", 6},
       {"eval_strategy", "steps"},
       {"eval_steps", 6},
       {"memory", {{"device_memory", "1GiB"}}}},
      {{"direction", "minimize"}, {"pruner", {{"name", "median"}, {"n_startup_trials", 1}}}});
  ProcessRun r = Tune({"--study", "r", "--config", config, "--storage", storage, "--n-trials", "2",
                       "--save-best", best});
#ifdef TUNE_WITH_TORCH
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("a number per example (mean 2.5, standard deviation 1.118)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("objective train (mse,"), std::string::npos) << r.err;
  const Json trial = Json::parse(
      Tune({"best-trial", "--study", "r", "--storage", storage, "--format", "json"}).out);
  const Json& history = trial["user_attrs"]["train"]["history"];
  EXPECT_EQ(history.size(), 6u) << history.dump();  // every 6 of the 36 optimizer steps
  EXPECT_TRUE(trial["intermediate_values"].contains("36")) << trial.dump();
  for (const char* key : {"mse", "rmse", "mae", "r2", "pearson", "spearman"}) {
    EXPECT_TRUE(history.back().contains(key)) << key << ": " << history.back().dump();
  }
  EXPECT_FALSE(history.back().contains("accuracy")) << history.back().dump();
  // It learned: better than predicting the mean (variance 1.25), and ordered.
  EXPECT_LT(trial["value"].get<double>(), 1.25) << history.dump();
  const Json saved = Json::parse(std::ifstream(best + "/config.json"));
  EXPECT_EQ(saved["problem_type"], "regression");
  EXPECT_EQ(saved["num_labels"], 1);
  ProcessRun p = Tune({"predict", "--model", best, "--data",
                       (dir_.path() / "scores-val.csv").string(), "--format", "csv"});
  ASSERT_EQ(p.code, 0) << p.err;
  std::istringstream lines(p.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "text,score");
  int n = 0;
  while (std::getline(lines, line)) {
    const double score = std::stod(line.substr(line.rfind(',') + 1));
    EXPECT_TRUE(std::isfinite(score)) << line;
    ++n;
  }
  EXPECT_EQ(n, 32);
  const Json metrics = Json::parse(LastLine(p.err));
  EXPECT_EQ(metrics["metric"], "mse");
  EXPECT_NEAR(metrics["mse"].get<double>(), trial["value"].get<double>(), 1e-4) << p.err;
  // tune report's trial table shows each trial's metrics (of its best evaluation), mse first.
  const std::string page_path = (dir_.path() / "r.html").string();
  ASSERT_EQ(Tune({"report", "--study-name", "r", "--storage", storage, "--output", page_path}).code,
            0);
  std::ostringstream page;
  page << std::ifstream(page_path).rdbuf();
  const std::string open = "<script id=\"tune-data\" type=\"application/json\">";
  const size_t begin = page.str().find(open) + open.size();
  const Json blob =
      Json::parse(page.str().substr(begin, page.str().find("</script>", begin) - begin));
  EXPECT_EQ(blob["metric"], "mse");
  const Json& shown = blob["trials"][trial["number"].get<size_t>()]["metrics"];
  EXPECT_DOUBLE_EQ(shown["mse"].get<double>(), trial["value"].get<double>()) << shown.dump();
  EXPECT_TRUE(shown.contains("pearson") && shown.contains("validation_loss")) << shown.dump();
  std::ofstream(dir_.path() / "scores.csv", std::ios::app) << "\"the film\",n/a\n";
  r = Tune({"--study", "r2", "--config", config, "--storage", "memory", "--n-trials", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("scores.csv:98: the target 'stars' must be a finite number (problem_type "
                       "regression), got \"n/a\""),
            std::string::npos)
      << r.err;
#else
  EXPECT_EQ(r.code, 1);
#endif
  // A classification metric, class weights, and the study's direction.
  r = Tune({"--study", "r3", "--config", WriteConfig({{"data", data}, {"metric", "accuracy"}}),
            "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("metric 'accuracy' does not apply to problem_type 'regression'; valid: "
                       "mse, rmse, mae, r2, pearson, spearman, loss"),
            std::string::npos)
      << r.err;
  Json weighted = data;
  weighted["class_weights"] = "balanced";
  r = Tune({"--study", "r4", "--config",
            WriteConfig({{"data", weighted}}, {{"direction", "minimize"}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("/objective/data/class_weights: does not apply to problem_type regression"),
            std::string::npos)
      << r.err;
  r = Tune({"--study", "r5", "--config", WriteConfig({{"data", data}}), "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the train objective's metric 'mse' is minimized; set \"direction\": "
                       "\"minimize\""),
            std::string::npos)
      << r.err;
}

// "precision": "bf16" on a CUDA card without bfloat16 (NVML, here the stand-in library: compute
// capability 7.5, a T4) is a config error before the study starts, whatever LibTorch tune was
// built with; the device given by --device is checked the same, over every card of --jobs. fp16
// and "auto" (fp16 on such a card) pass the check (--n-trials 0: nothing trains). A study that
// "auto" began in bf16 on a card with it stops when resumed on the T4.
TEST_F(TrainCli, Bf16OnACardWithoutBfloat16IsAConfigError) {
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_CC", "7.5", 1);
  setenv("TUNE_FAKE_NVML_NAME", "Tesla T4", 1);
  ProcessRun r =
      Tune({"--study", "t", "--config", WriteConfig({{"device", "cuda"}, {"precision", "bf16"}}),
            "--storage", "memory"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("study.json: /objective/precision: precision 'bf16' needs a card with "
                       "bfloat16, which CUDA cards have from compute capability 8.0 (A100, RTX "
                       "30xx, H100 and newer), and cuda (Tesla T4) has compute capability 7.5: "
                       "use \"precision\": \"fp16\""),
            std::string::npos)
      << r.err;
  r = Tune({"--study", "t", "--config", WriteConfig({{"precision", "bf16"}}), "--storage", "memory",
            "--device", "cuda:0", "--jobs", "2"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("cuda:0 (Tesla T4) has compute capability 7.5"), std::string::npos) << r.err;
  for (const char* fits : {"fp16", "auto"}) {
    r = Tune({"--study", "t", "--config", WriteConfig({{"device", "cuda"}, {"precision", fits}}),
              "--storage", "memory", "--n-trials", "0"});
    EXPECT_EQ(r.err.find("bfloat16"), std::string::npos) << fits << ": " << r.err;
  }
  // A card with bfloat16 takes bf16.
  setenv("TUNE_FAKE_NVML_CC", "8.6", 1);
  r = Tune({"--study", "t", "--config", WriteConfig({{"device", "cuda"}, {"precision", "bf16"}}),
            "--storage", "memory", "--n-trials", "0"});
  EXPECT_EQ(r.err.find("bfloat16"), std::string::npos) << r.err;
  // A study whose first run chose bf16 there ("auto", kept per study; --jobs: the parent
  // chooses, whether or not its trial then trains) stops when resumed on the T4.
  const std::string storage = "sqlite:///" + (dir_.path() / "bf16.db").string();
  const std::string config = WriteConfig({{"device", "cuda"}}, {{"n_trials", 1}});
  r = Tune({"--study", "b", "--config", config, "--storage", storage, "--jobs", "2"});
  setenv("TUNE_FAKE_NVML_CC", "7.5", 1);
  r = Tune(
      {"--study", "b", "--config", config, "--storage", storage, "--jobs", "2", "--n-trials", "2"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("study 'b' keeps the precision \"auto\" chose on its first run's card; "
                       "precision 'bf16' needs a card with bfloat16"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("set \"precision\": \"fp16\" in the config"), std::string::npos) << r.err;
  unsetenv("TUNE_FAKE_NVML_NAME");
  unsetenv("TUNE_FAKE_NVML_CC");
  unsetenv("TUNE_NVML_LIBRARY");
}

// The memory guard's settings are checked like every other key, with the closest valid choice.
TEST_F(TrainCli, MemoryGuardSettingsAreChecked) {
  ProcessRun r = Tune({"--study", "t", "--config", WriteConfig({}), "--storage", "memory",
                       "--device-memory", "24XB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--device-memory: invalid memory size '24XB'"), std::string::npos) << r.err;
  r = Tune({"--study", "t", "--config", WriteConfig({{"memory", {{"levers", {"grad_acum"}}}}}),
            "--storage", "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/objective/memory/levers: unknown lever 'grad_acum' (did you mean "
                       "'grad_accum'?)"),
            std::string::npos)
      << r.err;
  r = Tune({"--study", "t", "--config", WriteConfig({{"memory", {{"margin", 1.5}}}}), "--storage",
            "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/objective/memory/margin: 1.5 must be in [0, 1)"), std::string::npos)
      << r.err;
  r = Tune({"--study", "t", "--config",
            WriteConfig({{"memory", {{"device_memory", "lots"}, {"oom_retries", 1}}}}), "--storage",
            "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'oom_retry'?"), std::string::npos) << r.err;
  r = Tune({"--study", "d", "--config", std::string(TUNE_SOURCE_DIR) + "/configs/demo.json",
            "--storage", "memory", "--oom-retry", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("apply to the train objective"), std::string::npos) << r.err;
}

#ifdef TUNE_WITH_TORCH
// configs/criteria.json (the user reports' seven models, heavy/base spaces) on this test's data
// and a card far too small for any of them: the guard prunes every trial without running it,
// and the study ends normally.
TEST_F(TrainCli, CriteriaConfigUnderTheGuardPrunesWhatCannotFit) {
  std::ifstream in(std::string(TUNE_SOURCE_DIR) + "/configs/criteria.json");
  Json doc = Json::parse(in);
  doc["objective"]["data"] = {{"train", "train.csv"},
                              {"validation", "val.csv"},
                              {"text_column", "sentence"},
                              {"label_column", "topic"}};
  doc["objective"]["init"] = "scratch";  // the catalog's shapes; no checkpoints here
  const std::string config = (dir_.path() / "criteria.json").string();
  std::ofstream(config) << doc.dump(2);
  const std::string storage = "sqlite:///" + (dir_.path() / "c.db").string();
  ProcessRun r = Tune({"--study", "criteria", "--config", config, "--storage", storage, "--device",
                       "cpu", "--device-memory", "1GiB", "--n-trials", "6"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("no COMPLETE trial"), std::string::npos) << r.err;
  ProcessRun trials =
      Tune({"trials", "--study", "criteria", "--storage", storage, "--format", "json"});
  ASSERT_EQ(trials.code, 0) << trials.err;
  Json all = Json::parse(trials.out);
  ASSERT_EQ(all.size(), 6u);
  for (const Json& t : all) {
    EXPECT_EQ(t["state"], "PRUNED");
    EXPECT_EQ(t["user_attrs"]["reason"], "predicted");
    const Json& cfg = t["user_attrs"]["oom_config"];
    EXPECT_EQ(cfg["model"], t["params"]["model"]);
    EXPECT_GT(cfg["estimate"].get<int64_t>(), cfg["usable"].get<int64_t>());
    EXPECT_EQ(cfg["usable"], 1020054732);  // 1 GiB x 0.95
    EXPECT_EQ(cfg["precision"], "bf16");
  }
}
#endif

#ifdef TUNE_WITH_TORCH
// The child processes of `pid` (Linux's /proc/PID/task/PID/children).
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; in >> c;) out.push_back(c);
  return out;
}

// SIGTERM to every process of the job, as Slurm's scancel or preemption sends it (the trials'
// `tune run-trial` processes a moment before tune): each running trial ends FAIL "stopped by
// SIGTERM" and is re-enqueued (retry_failed), tune exits 0 within seconds.
TEST_F(TrainCli, SigtermToAJobsStudyStopsItsTrialsAndRequeuesThem) {
  {
    std::ofstream train(dir_.path() / "train.csv", std::ios::app);
    for (int i = 0; i < 3000; ++i) {
      train << "\"the " << (i % 2 ? "goal match" : "rain cloud") << " number " << i << "\","
            << (i % 2 ? "sports" : "weather") << "\n";
    }
  }
  const std::string config =
      WriteConfig({{"epochs", 200}, {"batch_size", 4}}, {{"retry_failed", 1}, {"n_trials", 4}});
  const std::string storage = "sqlite:///" + (dir_.path() / "term.db").string();
  const std::string log = (dir_.path() / "term.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(TUNE_BINARY, TUNE_BINARY, "--study", "t", "--config", config.c_str(), "--storage",
          storage.c_str(), "--jobs", "2", "--device-memory", "2GiB", nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::Slurp(log).find("Trial 1 started") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // both children are training
  const std::vector<pid_t> children = ChildrenOf(pid);
  ASSERT_EQ(children.size(), 2u) << testing::Slurp(log);
  const auto start = std::chrono::steady_clock::now();
  for (pid_t c : children) kill(c, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = testing::Slurp(log);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_LT(seconds, 10.0) << err;
  Json trials =
      Json::parse(Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"}).out);
  ASSERT_EQ(trials.size(), 4u) << trials.dump(2);  // 2 stopped, 2 re-enqueued
  int stopped = 0, waiting = 0;
  for (const Json& t : trials) {
    if (t["state"] == "FAIL") {
      ++stopped;
      EXPECT_EQ(t["user_attrs"]["reason"], "interrupted") << t.dump(2);
      EXPECT_NE(t["user_attrs"]["fail_reason"].get<std::string>().find("SIGTERM"),
                std::string::npos)
          << t.dump(2);
    } else {
      ++waiting;
      EXPECT_EQ(t["state"], "WAITING") << t.dump(2);
      EXPECT_EQ(t["system_attrs"]["interrupt_retry"], true);
    }
  }
  EXPECT_EQ(stopped, 2);
  EXPECT_EQ(waiting, 2);
}
#endif

#ifdef TUNE_WITH_TORCH
// Runs tune with TUNE_TEST_STICKY_CUDA_ERROR=`hook` (torch/torch_cuda_errors.h: the first run of
// each of the run's first K processes fails as a device-side assert, and poisons the process).
ProcessRun TuneWithStickyError(const std::string& hook, const std::vector<std::string>& args) {
  setenv("TUNE_TEST_STICKY_CUDA_ERROR", hook.c_str(), 1);
  ProcessRun r = Tune(args);
  unsetenv("TUNE_TEST_STICKY_CUDA_ERROR");
  return r;
}

// The trials of study "t" as `tune trials --format json` prints them.
Json StoredTrials(const std::string& storage) {
  return Json::parse(
      Tune({"trials", "--study", "t", "--storage", storage, "--format", "json"}).out);
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A sticky CUDA error fails its trial (with the error and where it struck), and the study goes on
// in a fresh process (the same command, resumed from the storage), which completes the others.
TEST_F(TrainCli, StickyCudaErrorFailsItsTrialAndTheStudyContinuesInAFreshProcess) {
  const std::string storage = "sqlite:///" + (dir_.path() / "sticky.db").string();
  ProcessRun r =
      TuneWithStickyError("1", {"--study", "t", "--config", WriteConfig({}), "--storage", storage,
                                "--n-trials", "3", "--format", "json", "--timeout", "600"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(CountOf(r.err, "Continuing the study in a fresh process (restart 1 of at most 3"), 1)
      << r.err;
  // The same command goes on: what is left of its timeout, not a new one.
  const size_t left = r.err.find("Restart 1: ");
  ASSERT_NE(left, std::string::npos) << r.err;
  const double seconds = std::stod(r.err.substr(left + 11));
  EXPECT_LE(seconds, 600.0);
  EXPECT_GT(seconds, 500.0);
  EXPECT_EQ(Json::parse(r.out)["state"], "COMPLETE");  // the fresh process printed the best
  Json trials = StoredTrials(storage);
  ASSERT_EQ(trials.size(), 3u) << trials.dump(2);
  EXPECT_EQ(trials[0]["state"], "FAIL");
  EXPECT_NE(trials[0]["user_attrs"]["fail_reason"].get<std::string>().find(
                "CUDA error: device-side assert triggered"),
            std::string::npos);
  EXPECT_EQ(trials[0]["user_attrs"]["device_lost"]["phase"], "optimizer_step");
  EXPECT_EQ(trials[0]["user_attrs"]["train"]["end"], "device_lost");
  EXPECT_TRUE(trials[0]["params"].contains("learning_rate"));
  EXPECT_EQ(trials[1]["state"], "COMPLETE");
  EXPECT_EQ(trials[2]["state"], "COMPLETE");
}

// An error CUDA reports late (at a later synchronising call, no host sync each step) still fails
// the trial that caused it, not the next one.
TEST_F(TrainCli, StickyCudaErrorReportedLateFailsTheTrialThatCausedIt) {
  const std::string storage = "sqlite:///" + (dir_.path() / "late.db").string();
  ProcessRun r = TuneWithStickyError("1:late", {"--study", "t", "--config", WriteConfig({}),
                                                "--storage", storage, "--n-trials", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json trials = StoredTrials(storage);
  ASSERT_EQ(trials.size(), 2u) << trials.dump(2);
  EXPECT_EQ(trials[0]["state"], "FAIL");
  EXPECT_EQ(trials[0]["user_attrs"]["device_lost"]["phase"], "synchronize");
  EXPECT_EQ(trials[1]["state"], "COMPLETE");
}

// Errors again and again: after 3 fresh processes the run stops, saying why, exit 1, the study
// consistent (every trial FAIL with its error, none RUNNING). In memory: no fresh process can
// continue the study, so it stops at once, saying how to let tune continue.
TEST_F(TrainCli, RepeatedStickyCudaErrorsStopAfterABound) {
  const std::string storage = "sqlite:///" + (dir_.path() / "bound.db").string();
  ProcessRun r = TuneWithStickyError("100", {"--study", "t", "--config", WriteConfig({}),
                                             "--storage", storage, "--n-trials", "10"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("Stopping: this run already continued in a fresh process 3 times"),
            std::string::npos)
      << r.err;
  Json trials = StoredTrials(storage);
  ASSERT_EQ(trials.size(), 4u) << trials.dump(2);  // the first process and 3 fresh ones
  for (const Json& t : trials) {
    EXPECT_EQ(t["state"], "FAIL");
    EXPECT_TRUE(t["user_attrs"].contains("device_lost"));
  }

  ProcessRun memory = TuneWithStickyError(
      "1", {"--study", "t", "--config", WriteConfig({}), "--storage", "memory"});
  EXPECT_EQ(memory.code, 1) << memory.err;
  EXPECT_NE(memory.err.find("The study is in memory, so a fresh process cannot continue it"),
            std::string::npos)
      << memory.err;
}

// With --jobs each trial trains in its own process: a sticky error ends that process alone, its
// memory is released, and the study goes on in the same parent.
TEST_F(TrainCli, StickyCudaErrorUnderJobsEndsOnlyTheTrialsProcess) {
  const std::string storage = "sqlite:///" + (dir_.path() / "jobs.db").string();
  ProcessRun r =
      TuneWithStickyError("1", {"--study", "t", "--config", WriteConfig({}), "--storage", storage,
                                "--n-trials", "3", "--jobs", "2", "--device-memory", "1GiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("fresh process"), std::string::npos) << r.err;
  Json trials = StoredTrials(storage);
  ASSERT_EQ(trials.size(), 3u) << trials.dump(2);
  for (const Json& t : trials) {  // every child process was armed: each failed alone
    EXPECT_EQ(t["state"], "FAIL");
    EXPECT_NE(t["user_attrs"]["fail_reason"].get<std::string>().find("device-side assert"),
              std::string::npos);
    EXPECT_TRUE(t["user_attrs"].contains("device_lost"));
  }
}
#endif

}  // namespace
}  // namespace tune

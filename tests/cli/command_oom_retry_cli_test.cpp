// A command trial that runs out of memory is run again at half the micro-batch (memory.oom_retry,
// as the train objective's): batch_size halved and grad_accum doubled in every way the program
// receives its params, the failed attempts recorded on the "memory" attribute, the trial's own
// params as sampled, the steps an attempt reported kept at their first values; a trial whose
// retries are spent is pruned with them in its oom_config. tests/data/oom_retry_program.py runs out
// of memory above a batch size, without training anything.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/json.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;

class CommandOomRetryCli : public ::testing::TestWithParam<std::string> {
 protected:
  // One enqueued trial at batch_size 64 x grad_accum 1; the program fits at `fits` and below.
  std::string Config(int oom_retry, int fits, bool stderr_oom = false, bool work_dir = false,
                     const std::string& grad_accum = "{grad_accum}") const {
    Json doc = {{"direction", "maximize"},
                {"n_trials", 1},
                {"sampler", {{"name", "random"}, {"seed", 1}}},
                {"search_space", {{"batch_size", {16, 64}}, {"grad_accum", {1}}}},
                {"enqueue_trials", {{{"batch_size", 64}, {"grad_accum", 1}}}},
                {"objective",
                 {{"type", "command"},
                  {"argv",
                   {"/usr/bin/python3", std::string(TUNE_TEST_DATA_DIR) + "/oom_retry_program.py",
                    "--batch-size={batch_size}", "--grad-accum={grad_accum}"}},
                  {"env",
                   {{"OOM_RETRY_LOG", Log()},
                    {"OOM_RETRY_FITS", std::to_string(fits)},
                    {"OOM_RETRY_STDERR", stderr_oom ? "1" : ""}}},
                  {"memory",
                   {{"device_memory", "8GiB"},
                    {"device", "cpu"},
                    {"model", "retry-script"},
                    {"batch_size", "{batch_size}"},
                    {"grad_accum", grad_accum},
                    {"boundary_probes", false},
                    {"oom_retry", oom_retry}}}}}};
    if (work_dir) doc["objective"]["work_dir"] = (dir_.path() / "trials").string();
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  std::string Log() const { return (dir_.path() / "attempts.jsonl").string(); }
  std::string Storage() const { return "sqlite:///" + (dir_.path() / "s.db").string(); }

  // The (batch_size, grad_accum) of each attempt the program logged.
  std::vector<std::pair<int, int>> Attempts() const {
    std::vector<std::pair<int, int>> out;
    std::istringstream lines(Slurp(Log()));
    for (std::string line; std::getline(lines, line);) {
      const Json j = Json::parse(line);
      out.emplace_back(j["batch_size"].get<int>(), j["grad_accum"].get<int>());
    }
    return out;
  }

  ProcessRun Run(const std::string& config, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--study",   "r",       "--config", config,
                                     "--storage", Storage(), "--jobs",   GetParam()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tune(args);
  }

  Json Trial0() const {
    ProcessRun r = Tune({"trials", "--study", "r", "--storage", Storage(), "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out).at(0);
  }

  testing::TempDir dir_;
};

TEST_P(CommandOomRetryCli, RetriesAtHalfTheMicroBatchUntilItFits) {
  ProcessRun r = Run(Config(/*oom_retry=*/2, /*fits=*/16, /*stderr_oom=*/false, /*work_dir=*/true));
  ASSERT_EQ(r.code, 0) << r.err;
  // The program received the halved batch and the doubled accumulation, through argv, the
  // environment and the params file alike (it checks that they agree).
  EXPECT_EQ(Attempts(), (std::vector<std::pair<int, int>>{{64, 1}, {32, 2}, {16, 4}}));
  EXPECT_NE(r.err.find("retry 1/2 after out of memory: batch_size 64 -> 32, grad_accum 1 -> 2"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("retry 2/2 after out of memory: batch_size 32 -> 16, grad_accum 2 -> 4"),
            std::string::npos)
      << r.err;
  const Json t = Trial0();
  EXPECT_EQ(t["state"], "COMPLETE") << t.dump(2);
  EXPECT_EQ(t["values"][0], 64.0);  // the effective batch, kept
  // The sampled params stay the trial's (Optuna's) params; what ran is on "memory".
  EXPECT_EQ(t["params"]["batch_size"], 64);
  EXPECT_EQ(t["params"]["grad_accum"], 1);
  const Json& memory = t["user_attrs"]["memory"];
  EXPECT_EQ(memory["batch_size"], 16) << memory.dump(2);
  EXPECT_EQ(memory["grad_accum"], 4);
  EXPECT_EQ(memory["oom"], false);
  ASSERT_EQ(memory["oom_retries"].size(), 2u) << memory.dump(2);
  EXPECT_EQ(memory["oom_retries"][0]["batch_size"], 64);
  EXPECT_EQ(memory["oom_retries"][0]["grad_accum"], 1);
  EXPECT_EQ(memory["oom_retries"][1]["batch_size"], 32);
  EXPECT_EQ(memory["oom_retries"][1]["grad_accum"], 2);
  EXPECT_NE(memory["oom_retries"][0]["error"].get<std::string>().find("Tried to allocate 64 MiB"),
            std::string::npos);
  EXPECT_FALSE(t["user_attrs"].contains("oom"));
  // Step 0 keeps the first attempt's value; steps 1 and 2 are the last attempt's.
  EXPECT_EQ(t["intermediate_values"], (Json{{"0", 64.0}, {"1", 16.0}, {"2", 32.0}}));
  // The summary counts the retries.
  EXPECT_NE(r.err.find("2 OOM retries in 1 trial(s)"), std::string::npos) << r.err;
}

TEST_P(CommandOomRetryCli, SpentRetriesPruneTheTrialWithItsAttempts) {
  ProcessRun r = Run(Config(/*oom_retry=*/1, /*fits=*/8, /*stderr_oom=*/true));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Attempts(), (std::vector<std::pair<int, int>>{{64, 1}, {32, 2}}));
  const Json t = Trial0();
  EXPECT_EQ(t["state"], "PRUNED") << t.dump(2);
  const Json& attrs = t["user_attrs"];
  EXPECT_EQ(attrs["oom"], true);
  EXPECT_EQ(attrs["reason"], "oom");
  // oom_config: what ran last, and the attempt before it.
  const Json& config = attrs["oom_config"];
  EXPECT_EQ(config["batch_size"], 32) << config.dump(2);
  EXPECT_EQ(config["grad_accum"], 2);
  EXPECT_NE(config["error"].get<std::string>().find("Tried to allocate 32 MiB"), std::string::npos);
  ASSERT_EQ(config["retries"].size(), 1u) << config.dump(2);
  EXPECT_EQ(config["retries"][0]["batch_size"], 64);
  EXPECT_EQ(config["retries"][0]["grad_accum"], 1);
  const Json& memory = attrs["memory"];
  EXPECT_EQ(memory["oom"], true);
  EXPECT_EQ(memory["batch_size"], 32);
  ASSERT_EQ(memory["oom_retries"].size(), 1u);
  EXPECT_EQ(t["params"]["batch_size"], 64);
}

TEST_P(CommandOomRetryCli, NoRetryWithoutOomRetryAndTheFlagOverridesTheConfig) {
  ProcessRun r = Run(Config(/*oom_retry=*/0, /*fits=*/32));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Attempts(), (std::vector<std::pair<int, int>>{{64, 1}}));
  EXPECT_EQ(Trial0()["state"], "PRUNED");
  ProcessRun again = Tune({"--study", "r2", "--config", Config(0, 32), "--storage", Storage(),
                           "--jobs", GetParam(), "--oom-retry", "1"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(Attempts(), (std::vector<std::pair<int, int>>{{64, 1}, {64, 1}, {32, 2}}));
}

INSTANTIATE_TEST_SUITE_P(Jobs, CommandOomRetryCli, ::testing::Values("1", "2"),
                         [](const auto& info) { return "jobs" + info.param; });

TEST(CommandOomRetryConfig, NeedsBatchSizeAndGradAccumAsParameters) {
  testing::TempDir dir;
  Json doc = {{"direction", "maximize"},
              {"search_space", {{"batch_size", {16, 64}}}},
              {"objective",
               {{"type", "command"},
                {"argv", {"/usr/bin/true"}},
                {"memory",
                 {{"device_memory", "8GiB"},
                  {"model", "retry-script"},
                  {"batch_size", "{batch_size}"},
                  {"grad_accum", 2},
                  {"oom_retry", 1}}}}}};
  const std::string path = (dir.path() / "study.json").string();
  std::ofstream(path) << doc.dump(2);
  ProcessRun r = Tune({"--study", "c", "--config", path, "--storage", "memory"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/objective/memory/oom_retry: a retry runs the program again with "
                       "batch_size halved and grad_accum doubled"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("memory.grad_accum is 2"), std::string::npos) << r.err;

  doc["objective"]["memory"]["oom_retry"] = 0;
  std::ofstream(path) << doc.dump(2);
  r = Tune({"--study", "c", "--config", path, "--storage", "memory", "--oom-retry", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--oom-retry 1: a retry runs the program again"), std::string::npos)
      << r.err;

  doc["objective"].erase("memory");
  std::ofstream(path) << doc.dump(2);
  r = Tune({"--study", "c", "--config", path, "--storage", "memory", "--oom-retry", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--oom-retry applies to the train objective and to a command objective "
                       "with a \"memory\" section"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tune

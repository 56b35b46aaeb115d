// `tune plan` through the binary: the user report's plan (configs/plans/proposer_scorer_nli.json),
// flags, --suggest, JSON and CSV, and bad plans (exit 2 naming the file, key and value).
#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Tune;

const std::string kPlan = std::string(TUNE_SOURCE_DIR) + "/configs/plans/proposer_scorer_nli.json";

TEST(PlanCli, UserReportDoesNotFitAtTenRequests) {
  ProcessRun r = Tune({"plan", "--plan", kPlan});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("does not fit at 10 parallel requests"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("largest number of parallel requests that fits: "), std::string::npos);
  for (const char* name : {"proposer", "scorer", "nli", "kv_cache", "per_request"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  }
}

int64_t MaxRequests(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"plan", "--plan", kPlan, "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  ProcessRun r = Tune(args);
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["total"].get<int64_t>(),
            j["weights"].get<int64_t>() +
                j["requests"].get<int64_t>() * j["per_request"].get<int64_t>() +
                j["fragmentation"].get<int64_t>() + j["context"].get<int64_t>() +
                j["workspace"].get<int64_t>());
  return j["max_requests"].get<int64_t>();
}

TEST(PlanCli, FewerRequestsFitAndInt8RaisesTheCount) {
  const int64_t fp16 = MaxRequests({});
  ASSERT_GE(fp16, 1);
  ASSERT_LT(fp16, 10);
  ProcessRun fits = Tune({"plan", "--plan", kPlan, "--requests", std::to_string(fp16)});
  EXPECT_EQ(fits.code, 0) << fits.out;
  EXPECT_NE(fits.out.find("fits at " + std::to_string(fp16) + " parallel requests"),
            std::string::npos)
      << fits.out;
  // The same plan with the scorer in int8, through --model flags.
  ProcessRun int8 =
      Tune({"plan", "--model", "meta-llama/Meta-Llama-3-70B=nf4+dq:generate", "--model",
            "meta-llama/Meta-Llama-3-8B=int8:score", "--model", "microsoft/deberta-v3-large=fp16",
            "--prompt-tokens", "1024", "--max-new-tokens", "512", "--max-length", "512",
            "--requests", "10", "--device-memory", "80GiB", "--format", "json"});
  ASSERT_TRUE(int8.code == 0 || int8.code == 1) << int8.err;
  const Json j = Json::parse(int8.out);
  EXPECT_EQ(j["models"][0]["double_quant"], true);
  EXPECT_EQ(j["models"][1]["format"], "int8");
  EXPECT_GT(j["max_requests"].get<int64_t>(), fp16);
  EXPECT_GT(j["max_requests"].get<int64_t>(), 0);
}

TEST(PlanCli, SuggestListsChangesThatFit) {
  ProcessRun r = Tune({"plan", "--plan", kPlan, "--suggest"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("suggestions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quantise 'scorer' to int8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parallel requests (from 10)"), std::string::npos) << r.out;
  ProcessRun csv = Tune({"plan", "--plan", kPlan, "--format", "csv"});
  EXPECT_NE(csv.out.find("name,model,role,format,weights"), std::string::npos) << csv.out;
}

TEST(PlanCli, BadPlansExitTwoNamingFileKeyAndValue) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "plan.json").string();
  std::ofstream(path) << R"({"requests": 2, "models": [
      {"model": "meta-llama/Meta-Llama-3-8B", "format": "nf5", "prompt_tokens": 8,
       "max_new_tokens": 8}]})";
  ProcessRun r = Tune({"plan", "--plan", path});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.err.find(path + ": /models/0/format: unknown weight format 'nf5' (did you mean 'nf4'?)"),
      std::string::npos)
      << r.err;
  ProcessRun lengths = Tune({"plan", "--model", "gpt2"});
  EXPECT_EQ(lengths.code, 2);
  EXPECT_NE(lengths.err.find("missing required key 'prompt_tokens'"), std::string::npos)
      << lengths.err;
  ProcessRun unknown = Tune({"plan", "--model", "meta-llama/Meta-Llama-3-8b", "--prompt-tokens",
                             "8", "--max-new-tokens", "8"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("did you mean 'meta-llama/Meta-Llama-3-8B'?"), std::string::npos)
      << unknown.err;
}

}  // namespace
}  // namespace tune

// TorchScript models in the 'train' objective through the `tune` binary: a study trains a scripted
// module, --save-best keeps it (model.pt) and `tune predict` reproduces the best value; every file
// tune must refuse is a config error (exit 2) that says what was expected. The modules are written
// by tests/scripts/make_torchscript_fixtures.py (python3-torch; skipped without it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Tune;

class TorchScriptCli : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef TUNE_WITH_TORCH
    GTEST_SKIP() << "built without LibTorch";
#endif
    if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
      GTEST_SKIP() << "python3-torch is not installed: cannot write the TorchScript fixtures";
    }
    const std::string cmd = fmt::format(
        "/usr/bin/python3 '{}/tests/scripts/make_torchscript_fixtures.py' '{}' --num-labels 2 "
        ">/dev/null 2>&1",
        TUNE_SOURCE_DIR, dir_.path().string());
    ASSERT_EQ(std::system(cmd.c_str()), 0);
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

  std::string WriteConfig(const std::string& model, const Json& objective_extra = Json::object(),
                          const Json& top_extra = Json::object()) {
    Json objective = {{"type", "train"},
                      {"data",
                       {{"train", "train.csv"},
                        {"validation", "val.csv"},
                        {"text_column", "sentence"},
                        {"label_column", "topic"}}},
                      {"model", model},
                      {"epochs", 3},
                      {"max_length", 16},
                      {"threads", 1}};
    for (const auto& [k, v] : objective_extra.items()) objective[k] = v;
    Json doc = {
        {"direction", "maximize"},
        {"n_trials", 3},
        {"sampler", {{"name", "random"}, {"seed", 1}}},
        {"search_space",
         {{"learning_rate", {{"type", "float"}, {"low", 5e-3}, {"high", 3e-2}, {"log", true}}},
          {"batch_size", Json::array({8, 16})}}},
        {"objective", objective}};
    for (const auto& [k, v] : top_extra.items()) doc[k] = v;
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  ProcessRun RunStudy(const std::string& config, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--study",   "ts",     "--config", config,
                                     "--storage", "memory", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tune(args);
  }

  testing::TempDir dir_;
};

TEST_F(TorchScriptCli, TrainsSavesTheBestAndPredictsItsValue) {
  const std::string best_dir = (dir_.path() / "best").string();
  ProcessRun r = RunStudy(WriteConfig("bag.pt"), {"--save-best", best_dir});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("forward checked at B=1, T=8"), std::string::npos) << r.err;
  const Json best = Json::parse(r.out);
  ASSERT_EQ(best["state"], "COMPLETE") << r.out;
  EXPECT_TRUE(fs::exists(fs::path(best_dir) / "model.pt"));
  EXPECT_TRUE(fs::exists(fs::path(best_dir) / "vocab.txt"));
  const Json config = Json::parse(testing::Slurp(fs::path(best_dir) / "config.json"));
  EXPECT_EQ(config["model_type"], "torchscript");
  ProcessRun p = Tune({"predict", "--model", best_dir, "--data", (dir_.path() / "val.csv").string(),
                       "--text-column", "sentence", "--label-column", "topic", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  const std::string err = p.err.substr(0, p.err.find_last_not_of('\n') + 1);
  const Json metrics = Json::parse(err.substr(err.rfind('\n') + 1));  // the last line
  EXPECT_NEAR(metrics["value"].get<double>(), best["values"][0].get<double>(), 1e-6) << p.err;
}

TEST_F(TorchScriptCli, ACatalogEntryNamesTheFileAndItsVocabulary) {
  std::ofstream(dir_.path() / "vocab.txt")
      << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nand\na\ntoday\nrain\ncloud\nstorm\ngoal\n"
         "match\nteam\n";
  const Json models = {
      {"my-bag",
       {{"torchscript", "bag.pt"}, {"vocab", "vocab.txt"}, {"max_position_embeddings", 64}}}};
  ProcessRun r = RunStudy(WriteConfig("my-bag", Json::object(), {{"models", models}}),
                          {"--log-level", "debug"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("vocab.txt"), std::string::npos) << r.err;
  EXPECT_EQ(Json::parse(r.out)["state"], "COMPLETE") << r.out;
}

TEST_F(TorchScriptCli, GradientCheckpointingOnlyWhenTheModuleDeclaresIt) {
  ProcessRun r = RunStudy(WriteConfig("bag.pt", {{"gradient_checkpointing", true}}));
  EXPECT_NE(r.err.find("does not declare it"), std::string::npos) << r.err;
  ProcessRun ok = RunStudy(WriteConfig("checkpointing.pt", {{"gradient_checkpointing", true}}));
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(Json::parse(ok.out)["state"], "COMPLETE") << ok.out;
}

TEST_F(TorchScriptCli, AnOutOfMemoryRunIsCaughtRetriedAtHalfTheBatchAndPruned) {
  // 1 MiB holds the module's weights (0.5 MiB) but not its training step: every attempt runs out
  // of memory on the counting allocator's budget.
  ProcessRun r =
      RunStudy(WriteConfig("bag.pt", {{"memory", {{"device_memory", "1MiB"}, {"oom_retry", 1}}}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("retry 1/1 at batch_size"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PRUNED"), std::string::npos) << r.err;
}

struct BadFile {
  const char* file;
  std::vector<const char*> says;
};

TEST_F(TorchScriptCli, EveryFileItCannotTrainIsAConfigError) {
  const std::vector<BadFile> cases = {
      {"state_dict.pt", {"is not a TorchScript file", "torch.jit.script(model).save(\"m.pt\")"}},
      {"pickled.pt", {"is not a TorchScript file", "torch.save(model)"}},
      {"not_a_zip.pt", {"is not a TorchScript file"}},
      {"one_input.pt", {"forward takes 1 input, expected 2 (input_ids, attention_mask)"}},
      {"wrong_shape.pt", {"returned Tensor[1, 8, 2] Float", "floating Tensor[1, 2]"}},
      {"small_vocab.pt", {"forward fails on token id", "vocab_size"}},
      {"missing.pt", {"no TorchScript file", "torch.jit.script(model).save(\"missing.pt\")"}},
  };
  for (const BadFile& c : cases) {
    ProcessRun r = RunStudy(WriteConfig(c.file));
    EXPECT_EQ(r.code, 2) << c.file << ": " << r.err;
    for (const char* s : c.says)
      EXPECT_NE(r.err.find(s), std::string::npos) << c.file << ": " << r.err;
    std::cout << c.file << " -> exit " << r.code << ": " << r.err;  // the message, for the log
  }
}

}  // namespace
}  // namespace tune

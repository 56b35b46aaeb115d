// TorchScript models in the 'train' objective through the `tune` binary: a study trains a scripted
// module, --save-best keeps it (model.pt) and `tune predict` reproduces the best value; every file
// tune must refuse is a config error (exit 2) that says what was expected. The modules are written
// by tests/scripts/make_torchscript_fixtures.py (python3-torch; skipped without it).
// `tune estimate --model m.pt` probes and fits the module's memory, and a study's guard admits
// and shrinks its trials by that fit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

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
    if (NeedsFixtures()) ASSERT_EQ(std::system(cmd.c_str()), 0);
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

  // The modules of make_torchscript_fixtures.py (a second or more of python3-torch).
  virtual bool NeedsFixtures() const { return true; }

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
      {"wrong_shape.pt", {"returned Tensor[1, 8, 2] Float", "floating Tensor[1, num_labels]"}},
      {"small_vocab.pt", {"forward fails on token id", "vocab_size"}},
      {"more_labels.pt",
       {"the data set has 2 labels (sports, weather), but TorchScript model",
        "more_labels.pt returns 3 logits per example (forward at B=1, T=8 returned Tensor[1, 3]); "
        "export the module with one output per label"}},
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

// Display columns of a UTF-8 text (one per character).
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

class TorchScriptFitCli : public TorchScriptCli {
 protected:
  bool NeedsFixtures() const override { return false; }

  // A one-layer block-attention classifier with a small vocabulary: its training step grows
  // with B·T and B·T² from the smallest probes on.
  void ExportModel(int num_labels = 2) {
    model_ = (dir_.path() / fmt::format("ba{}.pt", num_labels)).string();
    const std::string cmd = fmt::format(
        "/usr/bin/python3 '{}/scripts/torchscript_models.py' block-attention --layers 1 "
        "--vocab-size 64 --num-labels {} --out '{}' >/dev/null",
        TUNE_SOURCE_DIR, num_labels, model_);
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // Texts of 80 words (long_train.csv, long_val.csv): batches are 64 tokens wide. The fit
  // predicts batch 16 above 38 MB usable (40 MB less the 5% margin) and batch 8 within it.
  void WriteLongTexts() {
    std::ofstream train(dir_.path() / "long_train.csv"), val(dir_.path() / "long_val.csv");
    train << "sentence,topic\n";
    val << "sentence,topic\n";
    const char* words[2][3] = {{"rain", "cloud", "storm"}, {"goal", "match", "team"}};
    for (int i = 0; i < 48; ++i) {
      std::string text;
      for (int w = 0; w < 80; ++w) text += std::string(words[i % 2][(i + w) % 3]) + " ";
      (i < 32 ? train : val) << "\"" << text << "\"," << (i % 2 ? "sports" : "weather") << "\n";
    }
    train.close();
    val.close();
  }

  // A study of `n_trials` trials of the model at batch size 16 (learning rate searched) on the
  // long texts under a 40 MB simulated card.
  std::string WriteLongConfig(int n_trials) {
    const Json top = {{"n_trials", n_trials},
                      {"search_space",
                       {{"learning_rate", {{"type", "float"}, {"low", 5e-3}, {"high", 3e-2}}},
                        {"batch_size", Json::array({16})}}}};
    const Json data = {{"train", "long_train.csv"},
                       {"validation", "long_val.csv"},
                       {"text_column", "sentence"},
                       {"label_column", "topic"}};
    const Json objective = {
        {"data", data}, {"max_length", 64}, {"epochs", 1}, {"memory", {{"device_memory", "40MB"}}}};
    return WriteConfig(model_, objective, top);
  }

  ProcessRun Estimate(std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--model",   model_, "--device",
                                     "cpu",      "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tune(args);
  }

  std::string model_;
};

TEST_F(TorchScriptFitCli, EstimatePrintsTheFitAndMaxBatchAgreesWithIt) {
  ASSERT_NO_FATAL_FAILURE(ExportModel());
  ProcessRun mb = Estimate(
      {"--max-batch", "--device-memory", "20MB", "--max-lengths", "64", "--format", "json"});
  ASSERT_EQ(mb.code, 0) << mb.err;
  const int64_t best = Json::parse(mb.out)["max_batch"][0]["max_batch_size"].get<int64_t>();
  ASSERT_GT(best, 1) << mb.out;

  // The largest batch fits; the table shows the probes, the fit and the measured peak.
  ProcessRun r = Estimate({"--batch-size", std::to_string(best), "--max-length", "64",
                           "--device-memory", "20MB", "--measure"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* s : {"probe B=1 T=32: measured", "(held out; fit of the others",
                        "fit: b·B·T (b = ", "fit: c·B·T² (c = ", "margin (", "device peak",
                        "measured peak (cpu)", "Estimated by a fit of", "sha256:", "fits: "}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  // The planned peak covers the measured one, and not by much.
  const size_t compared = r.out.find(" vs measured ");
  ASSERT_NE(compared, std::string::npos) << r.out;
  const double error = std::stod(r.out.substr(r.out.find(": ", compared) + 2));
  EXPECT_GE(error, 0.0) << r.out;
  EXPECT_LT(error, 15.0) << r.out;
  // The table's last column starts at the same display column in every row, '·' or not.
  std::istringstream lines(r.out);
  std::string line;
  std::vector<size_t> starts;
  while (std::getline(lines, line) && line.rfind("Estimated", 0) != 0) {
    if (line.rfind("---", 0) != 0) starts.push_back(Columns(line.substr(0, line.rfind("  ") + 2)));
  }
  ASSERT_GT(starts.size(), 8u) << r.out;
  for (size_t k = 1; k < starts.size(); ++k) EXPECT_EQ(starts[k], starts[0]) << r.out;

  // One more does not fit; the JSON has the fit.
  ProcessRun over = Estimate({"--batch-size", std::to_string(best + 1), "--max-length", "64",
                              "--device-memory", "20MB", "--format", "json"});
  EXPECT_EQ(over.code, 1) << over.err;
  const Json out = Json::parse(over.out);
  EXPECT_EQ(out["fits"], false);
  EXPECT_EQ(out["memory_model"]["kind"], "fit");
  const Json& fit = out["memory_model"]["fit"];
  EXPECT_EQ(fit["points"].size(), 5u);  // the first probes: no growth needed
  EXPECT_EQ(fit["held_out"]["batch_size"], 4);
  EXPECT_EQ(fit["held_out"]["max_length"], 64);
  EXPECT_LT(std::abs(fit["held_out_error"].get<double>()), 0.05);
  EXPECT_GE(fit["margin"].get<double>(), 0.05);
}

// Without --num-labels the estimate takes the module's own number of outputs (3 here); a
// --num-labels that differs is named in the error, with the fix.
TEST_F(TorchScriptFitCli, EstimateTakesTheNumberOfLabelsFromTheModel) {
  ASSERT_NO_FATAL_FAILURE(ExportModel(3));
  ProcessRun r = Estimate({"--batch-size", "4", "--max-length", "32", "--measure"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("parameters, 3 outputs; forward checked at B=1, T=8"), std::string::npos)
      << r.err;
  ProcessRun wrong = Estimate({"--num-labels", "2"});
  EXPECT_EQ(wrong.code, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("--num-labels 2, but TorchScript model " + model_ +
                           " returns 3 logits per example (forward at B=1, T=8 returned "
                           "Tensor[1, 3]); leave --num-labels out to take the model's own number "
                           "of outputs"),
            std::string::npos)
      << wrong.err;
}

TEST_F(TorchScriptFitCli, EstimateRefusesWhatIsNotTorchScript) {
  const std::string text = (dir_.path() / "notes.pt").string();
  std::ofstream(text) << "not a model\n";
  ProcessRun bad = Tune({"estimate", "--model", text, "--device", "cpu"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("is not a TorchScript file"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("torch.jit.script(model).save("), std::string::npos) << bad.err;
  ProcessRun missing =
      Tune({"estimate", "--model", (dir_.path() / "none.pt").string(), "--device", "cpu"});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("no TorchScript file"), std::string::npos) << missing.err;
}

TEST_F(TorchScriptFitCli, TheGuardAdmitsAndShrinksTrialsByTheMeasuredFit) {
  ASSERT_NO_FATAL_FAILURE(ExportModel());
  ASSERT_NO_FATAL_FAILURE(WriteLongTexts());
  ProcessRun r = RunStudy(WriteLongConfig(2));
  ASSERT_EQ(r.code, 0) << r.err;
  // Probed once, for both trials.
  const std::string probing = "Measuring the memory of TorchScript model";
  ASSERT_NE(r.err.find(probing), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(probing, r.err.find(probing) + 1), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Trial 0 admitted with batch_size 16 -> 8, grad_accum 1 -> 2"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Trial 1 admitted with batch_size 16 -> 8"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("out of memory in "), std::string::npos) << r.err;
  EXPECT_EQ(Json::parse(r.out)["state"], "COMPLETE") << r.out;
}

// With --jobs the first trial runs alone in its own process, which probes the model (once: the
// fit goes into the study for the others) and then admits the trial by that fit, as without
// --jobs; the parent admits the later trials. `tune summary` lists the fit under the file's name.
TEST_F(TorchScriptFitCli, WithJobsTheFirstTrialProbesAndIsAdmittedByTheFit) {
  ASSERT_NO_FATAL_FAILURE(ExportModel());
  ASSERT_NO_FATAL_FAILURE(WriteLongTexts());
  const std::string storage = "sqlite:///" + (dir_.path() / "ts.db").string();
  ProcessRun r =
      Tune({"--study", "ts", "--config", WriteLongConfig(3), "--storage", storage, "--jobs", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string probing = "Measuring the memory of TorchScript model";
  ASSERT_NE(r.err.find(probing), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(probing, r.err.find(probing) + 1), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Trial 0 admitted with batch_size 16 -> 8"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("out of memory in "), std::string::npos) << r.err;
  ProcessRun summary = Tune({"summary", "--study", "ts", "--storage", storage});
  ASSERT_EQ(summary.code, 0) << summary.err;
  EXPECT_NE(summary.out.find("  COMPLETE       3"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("Measured memory of TorchScript model '" + model_ + "' (fp32): "),
            std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("3 trial(s) predicted by the fit, 0 out of memory at run time"),
            std::string::npos)
      << summary.out;
}

}  // namespace
}  // namespace tune

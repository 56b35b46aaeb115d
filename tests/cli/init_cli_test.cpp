// `tune init --from-cache` (docs/cli.md "tune init"): a study config written for the checkpoints
// of a Hugging Face cache (tests/scripts/make_checkpoints.py, python3-torch), which tune then
// runs; and its errors (an empty cache, an unknown task, --device-memory auto without NVML).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;

class InitCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // No NVML, whatever the machine has: the device is the CPU and auto cannot be read.
    setenv("TUNE_NVML_LIBRARY", (dir_.path() / "no-libnvidia-ml.so.1").c_str(), 1);
    unsetenv("HF_HUB_CACHE");
  }
  void TearDown() override { unsetenv("TUNE_NVML_LIBRARY"); }

  // The test checkpoints (and train.jsonl) under dir_/hub; false without python3-torch.
  bool MakeCheckpoints() {
    if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) return false;
    const std::string cmd = "/usr/bin/python3 '" + std::string(TUNE_SOURCE_DIR) +
                            "/tests/scripts/make_checkpoints.py' '" + dir_.path().string() +
                            "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return true;
  }

  fs::path Hub() const { return dir_.path() / "hub"; }
  std::string Data() const { return (dir_.path() / "train.jsonl").string(); }

  // tune init --from-cache --cache-dir DIR --data train.jsonl `extra`, in dir_.
  ProcessRun Init(const std::vector<std::string>& extra, const fs::path& cache) {
    std::vector<std::string> args = {"init",         "--from-cache", "--cache-dir",
                                     cache.string(), "--data",       Data()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tune(args, dir_.path().string());
  }

  testing::TempDir dir_;
};

#ifdef TUNE_WITH_TORCH
// Three checkpoints (BERT + WordPiece, RoBERTa + byte-level BPE, DeBERTa-v3 + SentencePiece,
// or + WordPiece without python3-sentencepiece), chosen by --models: the config lists them, all
// base by the catalog's rule (a few thousand parameters), and `tune --config` runs two trials.
TEST_F(InitCli, WritesAStudyOfTheCacheThatRunsTwoTrials) {
  if (!MakeCheckpoints()) GTEST_SKIP() << "python3-torch is not installed";
  const bool spm = fs::exists(Hub() / "models--tiny-org--deberta-spm");
  const std::string deberta = spm ? "tiny-org/deberta-spm" : "tiny-org/deberta-wp";
  const std::string out = (dir_.path() / "s.json").string();
  ProcessRun r = Init({"--models", "tiny-org/bert-*", "*/roberta-bpe", deberta, "--device-memory",
                       "2GiB", "--epochs", "1", "--output", out},
                      Hub());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const Json doc = Json::parse(Slurp(out));
  const std::vector<std::string> models = {"tiny-org/bert-wp", deberta, "tiny-org/roberta-bpe"};
  EXPECT_EQ(doc["search_space"]["model"]["choices"], Json(models)) << doc.dump(2);
  for (const std::string& m : models) {
    EXPECT_NE(r.err.find("Found " + m + " ("), std::string::npos) << r.err;
  }
  EXPECT_EQ(r.err.find("heavy) in"), std::string::npos) << r.err;
  ASSERT_EQ(doc["conditional"].size(), 1u) << doc.dump(2);  // base models only
  EXPECT_EQ(doc["conditional"][0]["when"]["model.heavy"], false);
  EXPECT_EQ(doc["objective"]["init"], "pretrained");
  EXPECT_EQ(doc["objective"]["hub_cache"], Hub().string());
  EXPECT_EQ(doc["objective"]["data"]["train"], "train.jsonl");
  EXPECT_EQ(doc["objective"]["device"], "cpu");
  EXPECT_EQ(doc["objective"]["memory"]["device_memory"], "2GiB");
  EXPECT_EQ(doc["direction"], "maximize");
  EXPECT_EQ(doc["sampler"]["name"], "tpe");

  const std::string storage = "sqlite:///" + (dir_.path() / "s.db").string();
  ProcessRun run = Tune({"--study", "s", "--config", out, "--n-trials", "2", "--storage", storage},
                        dir_.path().string());
  ASSERT_EQ(run.code, 0) << run.err;
  ProcessRun trials = Tune({"trials", "--study", "s", "--storage", storage, "--format", "json"});
  ASSERT_EQ(trials.code, 0) << trials.err;
  const Json t = Json::parse(trials.out);
  ASSERT_EQ(t.size(), 2u) << trials.out;
  for (const Json& trial : t) EXPECT_EQ(trial["state"], "COMPLETE") << trial.dump();
}

// A checkpoint whose config.json counts more than 200M parameters is heavy (the catalog's rule):
// both the heavy and the base block are written. Directories that are not checkpoints are
// skipped with the reason.
TEST_F(InitCli, MarksHeavyByTheCatalogRuleAndSaysWhatItSkipped) {
  if (!MakeCheckpoints()) GTEST_SKIP() << "python3-torch is not installed";
  const fs::path big = Hub() / "models--big-org--bert-large";
  fs::create_directories(big / "snapshots");
  fs::copy(Hub() / "models--tiny-org--bert-wp", big,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const fs::path snapshot = big / "snapshots" / "0123456789abcdef0123456789abcdef01234567";
  Json config = Json::parse(Slurp(snapshot / "config.json"));
  config.update({{"hidden_size", 1024},
                 {"num_hidden_layers", 24},
                 {"num_attention_heads", 16},
                 {"intermediate_size", 4096},
                 {"vocab_size", 30522},
                 {"max_position_embeddings", 512}});
  std::ofstream(snapshot / "config.json", std::ios::trunc) << config.dump();
  fs::create_directories(Hub() / "models--empty-org--nothing" / "snapshots");
  ProcessRun r = Init({"--device-memory", "24GiB"}, Hub());
  ASSERT_EQ(r.code, 0) << r.err;
  const Json doc = Json::parse(r.out);
  const size_t found = r.err.find("Found big-org/bert-large (bert, ");
  ASSERT_NE(found, std::string::npos) << r.err;
  EXPECT_NE(r.err.substr(found, r.err.find('\n', found) - found).find("parameters: heavy)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("parameters: base)"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("Skipped " + (Hub() / "models--empty-org--nothing").string() + ": no snapshot"),
      std::string::npos)
      << r.err;
  ASSERT_EQ(doc["conditional"].size(), 2u) << doc.dump(2);
  EXPECT_EQ(doc["conditional"][0]["when"]["model.heavy"], true);
  EXPECT_EQ(doc["conditional"][0]["search_space"]["max_length"]["high"], 384);
  EXPECT_EQ(doc["conditional"][1]["when"]["model.heavy"], false);
  EXPECT_EQ(doc["objective"]["data"]["train"], Data());  // stdout: absolute paths
}
#endif

// The data's columns and problem type are read from the file (a criterion/post pair, lists of
// tags, star ratings), the flags override them, and the config written loads; a column the flags
// name that the file lacks exits 2 with the closest one.
TEST_F(InitCli, InfersTheColumnsAndTheProblemTypeFromTheData) {
  if (!MakeCheckpoints()) GTEST_SKIP() << "python3-torch is not installed";
  struct Case {
    std::string file, content;
    std::vector<std::string> flags;
    Json data;  // the data block expected, but "train"
    std::string direction, metric;
  };
  const std::vector<Case> cases = {
      {"pairs.jsonl",
       R"({"id": "1", "criterion": "mentions sleep", "post": "I could not sleep at all last night", "label": "met"})"
       "\n",
       {},
       {{"text_column", "criterion"},
        {"text_pair_column", "post"},
        {"label_column", "label"},
        {"problem_type", "single_label_classification"}},
       "maximize",
       "macro_f1"},
      {"tags.jsonl",
       R"({"text": "rain and bread", "tags": ["weather", "food"]})"
       "\n"
       R"({"text": "nothing", "tags": []})"
       "\n",
       {},
       {{"text_column", "text"},
        {"label_column", "tags"},
        {"problem_type", "multi_label_classification"}},
       "maximize",
       "macro_f1"},
      {"stars.csv",
       "review,stars\n\"a fine film\",4.5\n\"dull\",1\n",
       {},
       {{"text_column", "review"}, {"label_column", "stars"}, {"problem_type", "regression"}},
       "minimize",
       "mse"},
      {"cells.csv",
       "sentence,topics\n\"rain and bread\",\"weather,food\"\n",
       {"--label-column", "topics", "--problem-type", "multi_label_classification"},
       {{"text_column", "sentence"},
        {"label_column", "topics"},
        {"problem_type", "multi_label_classification"}},
       "maximize",
       "macro_f1"},
  };
  for (const Case& c : cases) {
    std::ofstream(dir_.path() / c.file) << c.content;
    std::vector<std::string> args = {"init",
                                     "--from-cache",
                                     "--cache-dir",
                                     Hub().string(),
                                     "--models",
                                     "tiny-org/bert-*",
                                     "--data",
                                     (dir_.path() / c.file).string(),
                                     "--device-memory",
                                     "2GiB"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    ProcessRun r = Tune(args, dir_.path().string());
    ASSERT_EQ(r.code, 0) << c.file << ": " << r.err;
    Json doc = Json::parse(r.out);
    Json data = doc["objective"]["data"];
    data.erase("train");
    EXPECT_EQ(data, c.data) << c.file;
    EXPECT_EQ(doc["direction"], c.direction) << c.file;
    EXPECT_EQ(doc["objective"]["metric"], c.metric) << c.file;
    EXPECT_NE(r.err.find("Data " + (dir_.path() / c.file).string() + ": "), std::string::npos)
        << r.err;
  }
  ProcessRun r = Tune(
      {"init", "--from-cache", "--cache-dir", Hub().string(), "--data",
       (dir_.path() / "stars.csv").string(), "--device-memory", "2GiB", "--label-column", "star"},
      dir_.path().string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--label-column 'star': " + (dir_.path() / "stars.csv").string() +
                       " has no such column (did you mean 'stars'?); columns: review, stars"),
            std::string::npos)
      << r.err;
  std::ofstream(dir_.path() / "nolabel.csv")
      << "review,comment\nfine,a\ngood,b\nbad,c\ndull,d\n";  // free text only
  r = Tune({"init", "--from-cache", "--cache-dir", Hub().string(), "--data",
            (dir_.path() / "nolabel.csv").string(), "--device-memory", "2GiB"},
           dir_.path().string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot tell which column is the label"), std::string::npos) << r.err;
}

// Nothing found: exit 2, saying where it looked.
TEST_F(InitCli, AnEmptyCacheSaysWhereItLooked) {
  fs::create_directories(Hub());
  std::ofstream(Data()) << "{\"text\": \"a\", \"label\": \"x\"}\n";
  ProcessRun r = Init({"--device-memory", "2GiB"}, Hub());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("no encoder checkpoints in " + Hub().string() +
                       " (looked for models--ORG--NAME/snapshots/<rev>/config.json with weights "
                       "and a tokenizer)"),
            std::string::npos)
      << r.err;
  ProcessRun missing = Init({"--device-memory", "2GiB"}, dir_.path() / "nowhere");
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("not a directory"), std::string::npos) << missing.err;
}

TEST_F(InitCli, UsageErrorsExitTwo) {
  fs::create_directories(Hub());
  std::ofstream(Data()) << "{\"text\": \"a\", \"label\": \"x\"}\n";
  ProcessRun task = Init({"--task", "regression", "--device-memory", "2GiB"}, Hub());
  EXPECT_EQ(task.code, 2) << task.err;
  EXPECT_NE(task.err.find("unknown --task 'regression'"), std::string::npos) << task.err;
  EXPECT_NE(task.err.find("valid: classification"), std::string::npos) << task.err;
  ProcessRun no_cache = Tune({"init", "--data", Data()}, dir_.path().string());
  EXPECT_EQ(no_cache.code, 2) << no_cache.err;
  EXPECT_NE(no_cache.err.find("--from-cache"), std::string::npos) << no_cache.err;
}

// --device-memory auto (the default) without NVML: exit 2, asking for --device-memory SIZE.
TEST_F(InitCli, DeviceMemoryAutoWithoutNvmlAsksForASize) {
  if (!MakeCheckpoints()) GTEST_SKIP() << "python3-torch is not installed";
  const fs::path out = dir_.path() / "s.json";
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--output", out.string()},
        std::vector<std::string>{"--device-memory", "auto", "--output", out.string()}}) {
    ProcessRun r = Init(extra, Hub());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("pass --device-memory SIZE"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// With NVML (a stand-in reporting one 16 GiB device, 2 GiB of it held by another process: this
// test), --device-memory auto reads the card's memory and says what the others hold; the device
// stays the CPU when this tune's LibTorch cannot use CUDA (Debian's is CPU-only), and init says
// why.
TEST_F(InitCli, DeviceMemoryAutoReadsNvmlAndKeepsTheCpuWithoutACudaLibTorch) {
  if (!MakeCheckpoints()) GTEST_SKIP() << "python3-torch is not installed";
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_TOTAL", "17179869184", 1);
  setenv("TUNE_FAKE_NVML_PROCESSES", fmt::format("{}:2147483648", getpid()).c_str(), 1);
  const fs::path out = dir_.path() / "s.json";
  ProcessRun r = Init({"--device-memory", "auto", "--output", out.string()}, Hub());
  unsetenv("TUNE_FAKE_NVML_TOTAL");
  unsetenv("TUNE_FAKE_NVML_PROCESSES");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json doc = Json::parse(Slurp(out));
  // The card's total: each trial's budget takes off what the others hold then.
  EXPECT_EQ(doc["objective"]["memory"]["device_memory"], "16384MiB");
  EXPECT_NE(r.err.find("Device memory: 16.00 GiB (NVML, device 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(fmt::format("Other processes hold 2.00 GiB of device 0 now (tune_cli_tests "
                                   "pid {} 2.00 GiB)",
                                   getpid())),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("256.0 MiB more to grow (now 13.75 GiB of 16.00 GiB)"), std::string::npos)
      << r.err;
#ifdef TUNE_WITH_TORCH
  EXPECT_EQ(doc["objective"]["device"], "cpu");  // this machine has no CUDA LibTorch
  EXPECT_NE(r.err.find("NVML sees a GPU, but this tune cannot train on it"), std::string::npos)
      << r.err;
#endif
}

}  // namespace
}  // namespace tune

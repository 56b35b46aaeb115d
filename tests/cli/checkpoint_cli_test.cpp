// Pretrained checkpoints through the `tune` binary (docs/config.md "Checkpoints"): small random
// checkpoints in the Hugging Face cache layout (tests/scripts/make_checkpoints.py, python3-torch),
// a study whose `model` parameter chooses among them, --save-best and `tune predict`, and the
// config errors for checkpoints tune cannot use.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"
#include "util/text.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Tune;

const char* kBert = "tiny-org/bert-wp";
const char* kRoberta = "tiny-org/roberta-bpe";
const char* kDeberta = "tiny-org/deberta-wp";
const char* kDebertaSpm = "tiny-org/deberta-spm";  // spm.model: only with python3-sentencepiece

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string cmd = "/usr/bin/python3 '" + std::string(TUNE_SOURCE_DIR) +
                            "/tests/scripts/make_checkpoints.py' '" + dir_.path().string() +
                            "' 2>&1";
    if (std::system(("/usr/bin/python3 -c 'import torch' 2>/dev/null")) != 0) {
      GTEST_SKIP() << "python3-torch is not installed: cannot write the test checkpoints";
    }
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    setenv("HF_HUB_CACHE", (dir_.path() / "hub").c_str(), 1);
  }
  void TearDown() override { unsetenv("HF_HUB_CACHE"); }

  // The snapshot directory of a test checkpoint.
  fs::path Snapshot(const std::string& name) const {
    std::string folder = "models--" + name;
    folder.replace(folder.find('/'), 1, "--");
    return dir_.path() / "hub" / folder / "snapshots" / "0123456789abcdef0123456789abcdef01234567";
  }

  std::string WriteConfig(const Json& models, const Json& objective_extra,
                          const Json& space_extra = Json::object(),
                          const Json& top_extra = Json::object()) {
    Json space = {{"model", models}, {"learning_rate", Json::array({3e-3})}};
    for (const auto& [k, v] : space_extra.items()) space[k] = v;
    Json objective = {{"type", "train"},
                      {"data",
                       {{"train", "train.jsonl"},
                        {"validation", "validation.jsonl"},
                        {"labels", {"neg", "pos"}}}},
                      {"epochs", 2},
                      {"batch_size", 16},
                      {"max_length", 16},
                      {"dropout", 0.0},
                      {"attention_dropout", 0.0},
                      {"threads", 1}};
    for (const auto& [k, v] : objective_extra.items()) objective[k] = v;
    Json doc = {{"direction", "maximize"},
                {"sampler", {{"name", "random"}, {"seed", 3}}},
                {"search_space", space},
                {"objective", objective}};
    for (const auto& [k, v] : top_extra.items()) doc[k] = v;
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path, std::ios::trunc) << doc.dump(2);
    return path;
  }

  ProcessRun TrialsJson(const std::string& storage) const {
    return Tune({"trials", "--study", "s", "--storage", storage, "--format", "json"});
  }

  // `tune predict`'s metrics (its last stderr line).
  Json PredictMetrics(const std::string& model_dir) {
    ProcessRun r = Tune({"predict", "--model", model_dir, "--data",
                         (dir_.path() / "validation.jsonl").string(), "--output",
                         (dir_.path() / "predictions.jsonl").string()});
    EXPECT_EQ(r.code, 0) << r.err;
    const std::string err = r.err.substr(0, r.err.find_last_not_of('\n') + 1);
    return Json::parse(err.substr(err.rfind('\n') + 1), nullptr, false);
  }

  testing::TempDir dir_;
};

#ifdef TUNE_WITH_TORCH
// Each trial starts from its checkpoint: with a learning rate of 1e-12 the first evaluation
// (before any useful step) equals `tune predict` on the checkpoint directory itself (BERT's
// classifier head comes from the checkpoint; RoBERTa's and DeBERTa's are initialised with the
// trial's seed, as predict does). The families: BERT + WordPiece, RoBERTa + byte-level BPE,
// DeBERTa-v3 + WordPiece and DeBERTa-v3 + SentencePiece (spm.model trained on the fortunes by
// python3-sentencepiece, when it is installed), chosen by the `model` parameter. The best
// trial, kept with --save-best, is reproduced by `tune predict` to 1e-6.
TEST_F(CheckpointCli, EveryTrialStartsFromItsCheckpoint) {
  const std::string storage = "sqlite:///" + (dir_.path() / "s.db").string();
  const std::string best = (dir_.path() / "best").string();
  std::vector<std::string> models = {kBert, kRoberta, kDeberta};
  if (fs::exists(Snapshot(kDebertaSpm) / "spm.model")) models.push_back(kDebertaSpm);
  Json enqueue = Json::array();
  for (const std::string& m : models) enqueue.push_back({{"model", m}});
  enqueue.push_back({{"model", kBert}});
  const std::string config =
      WriteConfig(Json(models), {{"epochs", 1}, {"max_length", 32}},
                  {{"learning_rate", Json::array({1e-12})}}, {{"enqueue_trials", enqueue}});
  ProcessRun r = Tune({"--study", "s", "--config", config, "--storage", storage, "--n-trials",
                       std::to_string(enqueue.size()), "--save-best", best},
                      dir_.path().string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("are newly initialized: [classifier.out.weight, classifier.out.bias]"),
            std::string::npos)
      << r.err;
  ProcessRun trials = TrialsJson(storage);
  ASSERT_EQ(trials.code, 0) << trials.err;
  std::map<std::string, double> loss;
  for (const Json& t : Json::parse(trials.out)) {
    ASSERT_EQ(t["state"], "COMPLETE") << t.dump();
    const std::string model = t["params"]["model"];
    const double first = t["user_attrs"]["train"]["history"][0]["validation_loss"];
    if (loss.count(model)) EXPECT_DOUBLE_EQ(loss[model], first);
    loss[model] = first;
  }
  ASSERT_EQ(loss.size(), models.size());
  for (const auto& [model, first] : loss) {
    Json m = PredictMetrics(Snapshot(model).string());
    ASSERT_TRUE(m.is_object()) << model;
    EXPECT_NEAR(m["loss"].get<double>(), first, 1e-5) << model;
  }
  ProcessRun top = Tune({"best-trial", "--study", "s", "--storage", storage, "--format", "json"});
  ASSERT_EQ(top.code, 0) << top.err;
  Json m = PredictMetrics(best);
  ASSERT_TRUE(m.is_object());
  EXPECT_NEAR(m["value"].get<double>(), Json::parse(top.out)["values"][0].get<double>(), 1e-6)
      << m.dump();
}

// A SentencePiece checkpoint (DeBERTa's spm.model) trains per trial beside a WordPiece one, each
// with its own tokenizer, and `tune predict` on it reads the same tokenizer (same first loss).
TEST_F(CheckpointCli, SentencePieceCheckpointTrainsWithItsOwnTokenizer) {
  if (!fs::exists(Snapshot(kDebertaSpm) / "spm.model")) {
    GTEST_SKIP() << "python3-sentencepiece is not installed: no SentencePiece test checkpoint";
  }
  const std::string storage = "sqlite:///" + (dir_.path() / "s.db").string();
  Json enqueue = Json::array({{{"model", kDebertaSpm}}, {{"model", kBert}}});
  // The spm.model's 60 pieces spell the texts in up to 23 ids: max_length 32 cuts none, as
  // `tune predict` (the checkpoint's positions) does not.
  const std::string config =
      WriteConfig(Json::array({kBert, kDebertaSpm}), {{"epochs", 1}, {"max_length", 32}},
                  {{"learning_rate", Json::array({1e-12})}}, {{"enqueue_trials", enqueue}});
  ProcessRun r = Tune({"--study", "s", "--config", config, "--storage", storage, "--n-trials", "2"},
                      dir_.path().string());
  ASSERT_EQ(r.code, 0) << r.err;
  ProcessRun trials = TrialsJson(storage);
  ASSERT_EQ(trials.code, 0) << trials.err;
  std::map<std::string, double> loss;
  for (const Json& t : Json::parse(trials.out)) {
    ASSERT_EQ(t["state"], "COMPLETE") << t.dump();
    loss[t["params"]["model"]] = t["user_attrs"]["train"]["history"][0]["validation_loss"];
  }
  ASSERT_EQ(loss.count(kDebertaSpm), 1u) << trials.out;
  Json m = PredictMetrics(Snapshot(kDebertaSpm).string());
  ASSERT_TRUE(m.is_object());
  EXPECT_NEAR(m["loss"].get<double>(), loss[kDebertaSpm], 1e-5);
}

// --save-best keeps the best trial's model; `tune predict` on it reproduces the trial's value.
// With --jobs 2 the trials train in child processes and the parent promotes; there the directory
// is written "best2/", which names the same directory as "best2".
TEST_F(CheckpointCli, SaveBestThenPredictReproducesTheBestValue) {
  for (const char* jobs : {"1", "2"}) {
    SCOPED_TRACE(jobs);
    const std::string storage = "sqlite:///" + (dir_.path() / (std::string(jobs) + ".db")).string();
    const std::string best = (dir_.path() / (std::string("best") + jobs)).string();
    Json models = Json::array({kBert, kRoberta});
    Json top_extra = Json::object();
    if (fs::exists(Snapshot(kDebertaSpm) / "spm.model")) {  // a SentencePiece trial too
      models.push_back(kDebertaSpm);
      top_extra["enqueue_trials"] = {{{"model", kDebertaSpm}, {"learning_rate", 1e-2}}};
    }
    const std::string config =
        WriteConfig(models, {{"epochs", 3}, {"max_length", 32}},
                    {{"learning_rate", Json::array({1e-3, 3e-3, 1e-2})}}, top_extra);
    ProcessRun r =
        Tune({"--study", "s", "--config", config, "--storage", storage, "--n-trials", "4",
              "--save-best", std::string(jobs) == "2" ? best + "/" : best, "--jobs", jobs},
             dir_.path().string());
    ASSERT_EQ(r.code, 0) << r.err;
    ProcessRun top = Tune({"best-trial", "--study", "s", "--storage", storage, "--format", "json"});
    ASSERT_EQ(top.code, 0) << top.err;
    const Json t = Json::parse(top.out);
    std::ifstream in(fs::path(best) / "trial.json");
    ASSERT_TRUE(in) << "no " << best << "/trial.json\n" << r.err;
    const Json saved = Json::parse(in);
    // The saved trial is a best one (with ties, the first to finish).
    EXPECT_DOUBLE_EQ(saved["value"].get<double>(), t["values"][0].get<double>());
    ProcessRun all = TrialsJson(storage);
    ASSERT_EQ(all.code, 0) << all.err;
    for (const Json& trial : Json::parse(all.out)) {
      if (trial["number"] != saved["number"]) continue;
      EXPECT_DOUBLE_EQ(trial["values"][0].get<double>(), saved["value"].get<double>());
      for (const char* key : {"model", "learning_rate"}) {
        EXPECT_EQ(trial["params"][key], saved["params"][key]) << key;
      }
    }
    for (const char* f : {"config.json", "model.safetensors"}) {
      EXPECT_TRUE(fs::exists(fs::path(best) / f)) << f;
    }
    Json m = PredictMetrics(best);
    ASSERT_TRUE(m.is_object());
    EXPECT_NEAR(m["value"].get<double>(), t["values"][0].get<double>(), 1e-6) << m.dump();
    for (const auto& e : fs::directory_iterator(dir_.path())) {  // no staging left behind
      EXPECT_EQ(e.path().filename().string().find(".best"), std::string::npos) << e.path();
    }
  }
}

// "init": "scratch" with the objective's vocabulary file (tokenizer.vocab): --save-best copies
// that file into DIR and `tune predict` reproduces the best value with it.
TEST_F(CheckpointCli, ScratchWithAVocabularyFileSavesItsBest) {
  for (const char* vocab : {"vocab.txt", "vocab.json"}) {
    SCOPED_TRACE(vocab);
    const fs::path source = Snapshot(std::string(vocab) == "vocab.txt" ? kBert : kRoberta);
    const std::string best = (dir_.path() / ("best-" + std::string(vocab))).string();
    const std::string storage =
        "sqlite:///" + (dir_.path() / (std::string(vocab) + ".db")).string();
    const std::string config =
        WriteConfig(Json::array({std::string(vocab) == "vocab.txt" ? "tiny-bert" : "tiny-roberta"}),
                    {{"init", "scratch"}, {"tokenizer", {{"vocab", (source / vocab).string()}}}});
    ProcessRun r = Tune({"--study", "s", "--config", config, "--storage", storage, "--n-trials",
                         "2", "--save-best", best},
                        dir_.path().string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.find("no tokenizer to save"), std::string::npos) << r.err;
    ASSERT_TRUE(fs::exists(fs::path(best) / vocab)) << r.err;
    ProcessRun top = Tune({"best-trial", "--study", "s", "--storage", storage, "--format", "json"});
    ASSERT_EQ(top.code, 0) << top.err;
    Json m = PredictMetrics(best);
    ASSERT_TRUE(m.is_object());
    EXPECT_NEAR(m["value"].get<double>(), Json::parse(top.out)["values"][0].get<double>(), 1e-6);
  }
}

// A config.json with a byte that is not UTF-8: the error names the file and position, and quotes
// the byte as \xff, so that stderr stays valid UTF-8 (found by bench/model_dir_mutations.py).
TEST_F(CheckpointCli, AMessageQuotingBytesThatAreNotUtf8StaysValidUtf8) {
  const fs::path model = dir_.path() / "garbled-model";
  fs::copy(Snapshot(kBert), model, fs::copy_options::recursive);
  std::string config = testing::Slurp(model / "config.json");
  config.replace(config.find("\"neg\""), 5, "\"n\xff\xfeg\"");
  std::ofstream(model / "config.json", std::ios::trunc) << config;
  ProcessRun r = Tune({"predict", "--model", model.string(), "--data",
                       (dir_.path() / "validation.jsonl").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  EXPECT_EQ(ValidUtf8(r.err), r.err) << "stderr is not valid UTF-8: " << r.err;
}

// A model whose weights decode to NaN (docs/config.md "Non-finite values"): `tune predict` used
// to spin forever in the AUROC's rank loop. Here one word's embedding row is NaN, so exactly the
// validation texts with that word get NaN outputs: predict names their lines, writes the other
// rows' predictions, computes no metric and exits 1, well within the timeout; with every weight
// NaN, every row is named.
TEST_F(CheckpointCli, PredictOnNanWeightsNamesTheRowsAndExitsInsteadOfHanging) {
  const fs::path model = dir_.path() / "nan-model";
  fs::copy(Snapshot(kBert), model, fs::copy_options::recursive);
  const fs::path weights = model / "model.safetensors";
  std::string bytes = testing::Slurp(weights);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const Json header = Json::parse(bytes.substr(8, header_len));
  const Json& emb = header["bert.embeddings.word_embeddings.weight"];
  const int64_t hidden = emb["shape"][1].get<int64_t>();
  int64_t id = 0;  // the row of "good" in vocab.txt
  {
    std::ifstream vocab(model / "vocab.txt");
    std::string token;
    while (std::getline(vocab, token) && token != "good") ++id;
  }
  const float nan = std::nanf("");
  const size_t data = 8 + header_len + emb["data_offsets"][0].get<size_t>();
  for (int64_t k = 0; k < hidden; ++k) {
    std::memcpy(&bytes[data + static_cast<size_t>((id * hidden + k) * 4)], &nan, 4);
  }
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  std::vector<int64_t> expected;  // the 1-based lines whose text has "good"
  {
    std::ifstream in(dir_.path() / "validation.jsonl");
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      const std::string text = Json::parse(line)["text"].get<std::string>();
      if ((" " + text + " ").find(" good ") != std::string::npos) expected.push_back(n);
    }
  }
  ASSERT_FALSE(expected.empty());
  const std::string out = (dir_.path() / "nan-predictions.jsonl").string();
  double seconds = 0;
  ProcessRun r = testing::TuneWithin(
      120,
      {"predict", "--model", model.string(), "--data", (dir_.path() / "validation.jsonl").string(),
       "--output", out, "--threads", "1"},
      &seconds);
  ASSERT_NE(r.code, 124) << "tune predict hung on NaN weights (killed after 120 s)";
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_LT(seconds, 60);
  std::string lines;
  for (size_t i = 0; i < expected.size() && i < 8; ++i) {
    lines += (i ? ", " : "") + std::to_string(expected[i]);
  }
  EXPECT_NE(r.err.find(fmt::format("the model's outputs are not finite (e.g. NaN) on {} of 60 rows",
                                   expected.size())),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(lines), std::string::npos) << lines << "\n" << r.err;
  EXPECT_NE(r.err.find("tensor 'bert.embeddings.word_embeddings.weight' has " +
                       std::to_string(hidden) + " non-finite values"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("macro_f1"), std::string::npos) << "no metric: " << r.err;
  std::ifstream in(out);
  std::string line;
  int64_t n = 0, nonfinite = 0;
  while (std::getline(in, line)) {
    ++n;
    const Json j = Json::parse(line);
    const bool bad = std::find(expected.begin(), expected.end(), n) != expected.end();
    EXPECT_EQ(j.value("nonfinite", false), bad) << n << ": " << line;
    EXPECT_EQ(j["label"].is_null(), bad) << n << ": " << line;
    nonfinite += bad;
  }
  EXPECT_EQ(n, 60);
  EXPECT_EQ(nonfinite, static_cast<int64_t>(expected.size()));

  // Every weight NaN: every row named, no row predicted.
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(8 + header_len), bytes.end(), '\xff');
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  r = testing::TuneWithin(120,
                          {"predict", "--model", model.string(), "--data",
                           (dir_.path() / "validation.jsonl").string(), "--output", out},
                          &seconds);
  ASSERT_NE(r.code, 124) << "tune predict hung on NaN weights (killed after 120 s)";
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("on 60 of 60 rows"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lines 1, 2, 3, 4, 5, 6, 7, 8 and 52 more"), std::string::npos) << r.err;
}
#endif

// A name that resolves nowhere is a config error before any trial: exit 2, every place
// searched, and the way out ("init": "scratch").
TEST_F(CheckpointCli, AnUnknownCheckpointIsAConfigErrorListingWhereItLooked) {
  const std::string config =
      WriteConfig(Json::array({kBert, "nobody/missing"}), {{"models_dir", "models"}});
  ProcessRun r =
      Tune({"--study", "s", "--config", config, "--storage", "memory"}, dir_.path().string());
  EXPECT_EQ(r.code, 2) << r.err;
  for (const std::string& s :
       {std::string("model 'nobody/missing' names no checkpoint directory"),
        (dir_.path() / "nobody" / "missing").string(),
        (dir_.path() / "models" / "nobody" / "missing").string(),
        (dir_.path() / "hub" / "models--nobody--missing" / "snapshots").string(),
        std::string("\"init\": \"scratch\"")}) {
    EXPECT_NE(r.err.find(s), std::string::npos) << s << "\n" << r.err;
  }
  EXPECT_EQ(r.err.find("Trial 0"), std::string::npos) << r.err;
}

// Checkpoints tune cannot use: each a config error naming the file, exit 2, no trial run.
TEST_F(CheckpointCli, BadCheckpointsAreConfigErrorsNamingTheFile) {
  const fs::path bert = Snapshot(kBert);
  struct Case {
    const char* what;
    std::function<void()> damage;
    std::string expected;
  };
  const std::string weights = (bert / "model.safetensors").string();
  std::vector<Case> cases = {
      {"no weights", [&] { fs::remove(weights); },
       weights + ": not found; the checkpoint directory has no weights"},
      {"a pytorch_model.bin that is not one",
       [&] { fs::rename(weights, bert / "pytorch_model.bin"); },
       (bert / "pytorch_model.bin").string() +
           ": not a PyTorch checkpoint: it is a safetensors file; name it model.safetensors"},
      {"vocabulary larger than vocab_size",
       [&] {
         std::ofstream(bert / "vocab.txt", std::ios::app) << std::string(200, 'x') << "\n"
                                                          << "y1\ny2\ny3\ny4\n";
       },
       (bert / "vocab.txt").string() + ": the tokenizer has"},
      {"unsupported model_type",
       [&] {
         std::ifstream in(bert / "config.json");
         Json c = Json::parse(in);
         c["model_type"] = "berta";
         std::ofstream(bert / "config.json", std::ios::trunc) << c.dump();
       },
       "'berta' is not supported (did you mean 'bert'?)"},
      {"corrupt safetensors header",
       [&] {
         std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(9);
         f << "garbage";
       },
       weights},
  };
  const std::string config = WriteConfig(Json::array({kBert}), Json::object());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove_all(dir_.path() / "hub");
    ASSERT_EQ(std::system(("/usr/bin/python3 '" + std::string(TUNE_SOURCE_DIR) +
                           "/tests/scripts/make_checkpoints.py' '" + dir_.path().string() + "'")
                              .c_str()),
              0);
    c.damage();
    ProcessRun r =
        Tune({"--study", "s", "--config", config, "--storage", "memory"}, dir_.path().string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("study.json"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Trial 0"), std::string::npos) << r.err;
  }
}

// "init": "scratch" needs no checkpoint (the catalog's shapes, random weights).
TEST_F(CheckpointCli, ScratchNeedsNoCheckpoint) {
  const std::string config = WriteConfig(Json::array({"tiny-bert"}), {{"init", "scratch"}});
  ProcessRun r =
      Tune({"--study", "s", "--config", config, "--storage", "memory", "--n-trials", "0"},
           dir_.path().string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("checkpoint"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tune

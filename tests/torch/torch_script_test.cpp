// TorchScript models in the LibTorch trainer: the checked load, the memory probe
// (train/memory_probe.h) and the fits of probes cached by the file's content
// (train/script_fit.h), on a block-attention module scripted by scripts/torchscript_models.py
// (python3-torch; skipped without it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "testing/temp_dir.h"
#include "torch/torch_trainer.h"
#include "train/memory_probe.h"
#include "train/script_fit.h"
#include "util/sha256.h"

namespace tune {
namespace {

std::optional<std::string> ReadTextFileForTest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class TorchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
      GTEST_SKIP() << "python3-torch is not installed: cannot script the test module";
    }
    path_ = (dir_.path() / "ba.pt").string();
    ASSERT_NO_FATAL_FAILURE(Export(0));
    model_.name = model_.torchscript = path_;
    model_.model_type = kTorchScriptModelType;
    model_.vocab_size = 64;
    TorchTrainerOptions o;
    o.threads = 1;
    auto t = NewTorchTrainer(o);
    ASSERT_TRUE(t.ok()) << t.status().message();
    trainer_ = std::move(t).value();
  }

  // Writes the module to path_, its weights drawn with `seed`.
  void Export(int seed) {
    const std::string cmd = fmt::format(
        "/usr/bin/python3 '{}/scripts/torchscript_models.py' block-attention --layers 1 "
        "--vocab-size 64 --num-labels 3 --dropout 0 --seed {} --out '{}' >/dev/null",
        TUNE_SOURCE_DIR, seed, path_);
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  int64_t Peak(int64_t batch_size, int64_t max_length) {
    ProbeRequest r;
    r.model = model_;
    r.num_labels = 3;
    r.hp.batch_size = batch_size;
    r.hp.max_length = max_length;
    auto peak = MeasureTrainingPeak(*trainer_, r);
    EXPECT_TRUE(peak.ok()) << peak.status().message();
    return peak.ok() ? *peak : -1;
  }

  testing::TempDir dir_;
  std::string path_;
  ModelSpec model_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_F(TorchScriptTest, TheCheckedLoadCountsTheParameters) {
  TextTrainData data;
  data.num_labels = 3;
  data.vocab_size = 64;
  TrainJob job;
  job.model = model_;
  job.data = &data;
  auto n = trainer_->CheckTorchScriptModel(job);
  ASSERT_TRUE(n.ok()) << n.status().message();
  // embed 64x64 + positions 512x64 + LayerNorm 128; one layer: 16 x (4x12+12 + 4x4+4) block
  // attentions, cross attention 64x192+192 + 64x64+64, three LayerNorms, FFN 64x256+256 +
  // 256x64+64; classifier 64x3+3.
  const int64_t layer = 16 * (48 + 12 + 16 + 4) + (64 * 192 + 192 + 64 * 64 + 64) + 3 * 128 +
                        (64 * 256 + 256 + 256 * 64 + 64);
  EXPECT_EQ(n->parameters, 64 * 64 + 512 * 64 + 128 + layer + 64 * 3 + 3);
  EXPECT_EQ(n->num_labels, 3);
  data.num_labels = 4;  // the module has 3
  auto wrong = trainer_->CheckTorchScriptModel(job);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("floating Tensor[1, 4]"), std::string::npos)
      << wrong.status().message();
  data.num_labels = 0;  // any width: the module's own
  auto any = trainer_->CheckTorchScriptModel(job);
  ASSERT_TRUE(any.ok()) << any.status().message();
  EXPECT_EQ(any->num_labels, 3);
}

TEST_F(TorchScriptTest, ProbesMeasurePeaksThatGrowWithTheBatchAndTheLength) {
  const int64_t small = Peak(2, 32), batch = Peak(4, 32), length = Peak(4, 64);
  EXPECT_GT(small, 0);
  EXPECT_GT(batch, small);
  EXPECT_GT(length, batch);
  EXPECT_EQ(Peak(4, 32), batch);  // the same shape measures the same peak
}

// The study's system attributes, as a map.
class MapFitStore : public FitStore {
 public:
  Result<std::optional<Json>> Get(const std::string& key) override {
    auto it = attrs.find(key);
    return it == attrs.end() ? std::optional<Json>() : std::optional<Json>(it->second);
  }
  Status Put(const std::string& key, const Json& value) override {
    attrs[key] = value;
    return Status::Ok();
  }
  std::map<std::string, Json> attrs;
};

// The real trainer, counting its runs.
class CountingTrainer : public Trainer {
 public:
  explicit CountingTrainer(Trainer& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) override {
    ++runs;
    return inner_.Train(job, on_epoch);
  }
  int runs = 0;

 private:
  Trainer& inner_;
};

TEST_F(TorchScriptTest, AFitIsProbedOncePerFileContent) {
  CountingTrainer trainer(*trainer_);
  MapFitStore store;
  ScriptFitRequest request;
  request.model = model_;
  request.num_labels = 3;
  ScriptFitCache cache;
  auto fit = cache.Get(&trainer, request, &store);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(cache.probed(), 1);
  EXPECT_GE(trainer.runs, 5);  // the five first probes, and more if they grew
  EXPECT_EQ(fit->points.size(), static_cast<size_t>(trainer.runs));
  EXPECT_EQ(fit->precision, "fp32");
  const std::string hash = "sha256:" + Sha256Hex(*ReadTextFileForTest(path_));
  EXPECT_EQ(fit->model, hash);
  ASSERT_EQ(store.attrs.count("memory_fit:" + hash + "/fp32"), 1u);
  // The fit predicts a larger shape's measured peak.
  const double measured = static_cast<double>(Peak(16, 128));
  EXPECT_NEAR(fit->Fitted(16, 128) / measured, 1.0, 0.05) << MeasuredFitText(*fit);
  EXPECT_GE(static_cast<double>(fit->Predict(16, 128)), measured);

  // The same file: from memory, and in another process (cache) from the study, without probes.
  const int runs = trainer.runs;
  ASSERT_TRUE(cache.Get(&trainer, request, &store).ok());
  ScriptFitCache other;
  auto stored = other.Get(&trainer, request, &store);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(other.probed(), 0);
  EXPECT_EQ(trainer.runs, runs);
  EXPECT_EQ(stored->Predict(16, 128), fit->Predict(16, 128));

  // A changed file (other weights, so other bytes) is probed again, under its own hash.
  ASSERT_NO_FATAL_FAILURE(Export(1));
  auto changed = cache.Get(&trainer, request, &store);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_EQ(cache.probed(), 2);
  EXPECT_GT(trainer.runs, runs);
  EXPECT_NE(changed->model, hash);
  EXPECT_EQ(store.attrs.size(), 2u);
}

}  // namespace
}  // namespace tune

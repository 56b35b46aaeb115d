// TorchScript models in the LibTorch trainer: the checked load and the memory probe
// (train/memory_probe.h) on a block-attention module scripted by scripts/torchscript_models.py
// (python3-torch; skipped without it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "testing/temp_dir.h"
#include "torch/torch_trainer.h"
#include "train/memory_probe.h"

namespace tune {
namespace {

class TorchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
      GTEST_SKIP() << "python3-torch is not installed: cannot script the test module";
    }
    path_ = (dir_.path() / "ba.pt").string();
    const std::string cmd = fmt::format(
        "/usr/bin/python3 '{}/scripts/torchscript_models.py' block-attention --layers 1 "
        "--vocab-size 64 --num-labels 3 --dropout 0 --out '{}' >/dev/null",
        TUNE_SOURCE_DIR, path_);
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    model_.name = model_.torchscript = path_;
    model_.model_type = kTorchScriptModelType;
    model_.vocab_size = 64;
    TorchTrainerOptions o;
    o.threads = 1;
    auto t = NewTorchTrainer(o);
    ASSERT_TRUE(t.ok()) << t.status().message();
    trainer_ = std::move(t).value();
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
  EXPECT_EQ(*n, 64 * 64 + 512 * 64 + 128 + layer + 64 * 3 + 3);
  data.num_labels = 4;  // the module has 3
  auto wrong = trainer_->CheckTorchScriptModel(job);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("floating Tensor[1, 4]"), std::string::npos)
      << wrong.status().message();
}

TEST_F(TorchScriptTest, ProbesMeasurePeaksThatGrowWithTheBatchAndTheLength) {
  const int64_t small = Peak(2, 32), batch = Peak(4, 32), length = Peak(4, 64);
  EXPECT_GT(small, 0);
  EXPECT_GT(batch, small);
  EXPECT_GT(length, batch);
  EXPECT_EQ(Peak(4, 32), batch);  // the same shape measures the same peak
}

}  // namespace
}  // namespace tune

// The probing of a TorchScript model's memory (train/script_fit.h) with a trainer whose peaks
// follow a known curve: the growth rounds and what a fit is made of when the activations stay
// small beside the floor.
#include "train/script_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace tune {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// Reports peak(B, T) for every run (no LibTorch).
class CurveTrainer : public Trainer {
 public:
  explicit CurveTrainer(std::function<int64_t(int64_t, int64_t)> peak) : peak_(std::move(peak)) {}
  std::string name() const override { return "curve"; }
  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& /*on_epoch*/) override {
    ++runs;
    TrainResult r;
    r.peak_memory_bytes = peak_(job.hp.batch_size, job.hp.max_length);
    return r;
  }
  int runs = 0;

 private:
  std::function<int64_t(int64_t, int64_t)> peak_;
};

ScriptFitRequest Request() {
  ScriptFitRequest r;
  r.model.name = "curve-model";
  r.model.model_type = "bert";
  r.model.vocab_size = 100;
  r.model.hidden_size = 8;
  r.model.num_hidden_layers = 1;
  r.model.num_attention_heads = 2;
  r.model.intermediate_size = 16;
  r.model.max_position_embeddings = 4096;
  r.num_labels = 2;
  return r;
}

TEST(ScriptFit, ActivationsAboveTheFloorAreFittedWithoutGrowth) {
  // The block-attention model's shape: attention dominates from the first probes.
  CurveTrainer trainer([](int64_t b, int64_t t) { return 10 * kMiB + 2000 * b * t * t; });
  auto fit = ProbeScriptMemory(trainer, Request(), "sha256:curve");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(trainer.runs, 5);
  const double truth = 10.0 * kMiB + 2000.0 * 16 * 256 * 256;
  EXPECT_NEAR(fit->Fitted(16, 256) / truth, 1.0, 0.02) << MeasuredFitText(*fit);
}

// A CNN on CUDA: a floor of 78 MiB (weights, AdamW's moments and 65 MiB of cuBLAS workspaces)
// and 3.4 kB per token: up to 4 x B and 4 x T (16 x 256) only one probe is 10% above the floor.
// The fit then takes every probe rather than failing, and still predicts the larger shape.
TEST(ScriptFit, FlatProbesAreFittedTogetherWhenGrowthEnds) {
  auto curve = [](int64_t b, int64_t t) {
    return std::max<int64_t>(78 * kMiB, 70 * kMiB + 3400 * b * t);
  };
  CurveTrainer trainer(curve);
  auto fit = ProbeScriptMemory(trainer, Request(), "sha256:cnn");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_GT(trainer.runs, 5);  // it grew, to the last round
  EXPECT_FALSE(CanFit(fit->points, fit->floor));
  EXPECT_DOUBLE_EQ(fit->floor, static_cast<double>(curve(1, 32)));
  for (auto [b, t] : {std::pair<int64_t, int64_t>{16, 256}, {32, 128}}) {
    const auto measured = static_cast<double>(curve(b, t));
    EXPECT_GE(static_cast<double>(fit->Predict(b, t)), measured) << MeasuredFitText(*fit);
    EXPECT_LT(static_cast<double>(fit->Predict(b, t)), 1.15 * measured) << MeasuredFitText(*fit);
  }
}

TEST(ScriptFit, AModelThatNeverLeavesItsFloorIsFittedFlat) {
  CurveTrainer trainer([](int64_t, int64_t) { return 50 * kMiB; });
  auto fit = ProbeScriptMemory(trainer, Request(), "sha256:flat");
  EXPECT_TRUE(fit.ok()) << fit.status().message();
  // Flat everywhere: the fit is its floor.
  EXPECT_NEAR(fit->Fitted(64, 512) / (50.0 * kMiB), 1.0, 0.01) << MeasuredFitText(*fit);
}

}  // namespace
}  // namespace tune

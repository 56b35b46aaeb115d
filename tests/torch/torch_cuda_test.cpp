// The LibTorch trainer and tune's CUDA memory backend on a real CUDA device (ctest label `cuda`):
// the caching allocator's statistics and emptyCache, a trial that runs out of memory on the
// device (pruned with its oom_config, the memory returned), the estimator against the measured
// max_memory_allocated, the trainer learning the separable task on the card, and the fused
// AdamW step and device-side clipping against LibTorch's AdamW. Each test skips,
// saying why, where this LibTorch cannot use CUDA (a CPU-only LibTorch, or no GPU or driver); on
// a GPU machine they all run: `ctest -L cuda`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "config/config.h"
#include "memory/estimator.h"
#include "testing/separable_text.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "torch/torch_cuda_memory.h"
#include "torch/torch_fused_adamw.h"
#include "torch/torch_trainer.h"
#include "tune/pruners/pruner.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string status = TorchCudaStatus();
    if (status.rfind(kCudaUsable, 0) != 0) {
      GTEST_SKIP() << "no usable CUDA device: " << status << " (these tests run on a GPU machine)";
    }
    ASSERT_TRUE(cuda_memory::Compiled()) << "CUDA usable, but tune_torch lacks its CUDA backend";
  }
  // Removes any cap a test's trainer put on the allocator (setMemoryFraction is per process).
  void TearDown() override {
    if (!IsSkipped()) {
      EXPECT_TRUE(cuda_memory::SetDeviceMemory(0, 0).ok());
    }
  }
  static cuda_memory::Stats Stats() {
    auto s = cuda_memory::GetStats(0);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : cuda_memory::Stats{};
  }
  static std::unique_ptr<Trainer> CudaTrainer(std::optional<int64_t> device_memory = std::nullopt) {
    TorchTrainerOptions o;
    o.device = "cuda:0";
    o.device_memory = device_memory;
    auto t = NewTorchTrainer(o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }
};

// Freed blocks stay reserved in the caching allocator until emptyCache returns them.
TEST_F(CudaTest, EmptyCacheReturnsReservedMemory) {
  cuda_memory::EmptyCache();
  const cuda_memory::Stats before = Stats();
  ASSERT_GT(before.total, 0);
  {
    auto trainer = CudaTrainer();
    ASSERT_NE(trainer, nullptr);
    testing::Synthetic s = testing::MakeSynthetic(64, 2, 1);
    TextTrainData d = testing::Tokenize(s, s, 2);
    ModelSpec wide = testing::TinyModel();
    wide.vocab_size = 2 * 1024 * 1024;  // a 256 MiB word embedding (fp32, hidden 32)
    TrainHyperparams hp = testing::FastHyperparams();
    hp.epochs = 1;
    auto r = trainer->Train(TrainJob{wide, hp, &d}, [](const EpochMetrics&) {
      return Result<EpochDecision>(EpochDecision::kContinue);
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
    EXPECT_GT(r->peak_memory_bytes, 256 * kMiB);
  }
  const cuda_memory::Stats cached = Stats();
  EXPECT_GE(cached.reserved, before.reserved + 256 * kMiB) << "the freed blocks stay cached";
  cuda_memory::EmptyCache();
  const cuda_memory::Stats emptied = Stats();
  EXPECT_LT(emptied.reserved, before.reserved + 64 * kMiB);
  EXPECT_GT(emptied.free, cached.free + 192 * kMiB) << "the driver got the memory back";
}

// In fp32 and in bf16 autocast (what precision "auto" picks on cards of compute capability >= 8).
class CudaPrecisionTest : public CudaTest, public ::testing::WithParamInterface<Precision> {};

TEST_P(CudaPrecisionTest, TrainerLearnsTheSeparableTaskOnTheCard) {
  TextTrainData d =
      testing::Tokenize(testing::MakeSynthetic(480, 4, 1), testing::MakeSynthetic(160, 4, 2), 4);
  auto trainer = CudaTrainer();
  ASSERT_NE(trainer, nullptr);
  EXPECT_NE(trainer->name().find("cuda:0"), std::string::npos) << trainer->name();
  TrainHyperparams hp = testing::FastHyperparams();
  hp.precision = GetParam();
  auto r = trainer->Train(TrainJob{testing::TinyModel(), hp, &d}, [](const EpochMetrics&) {
    return Result<EpochDecision>(EpochDecision::kContinue);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  EXPECT_GT(r->epochs.back().classification.accuracy, 0.9);  // chance: 0.25
  EXPECT_LT(r->epochs.back().train_loss, r->epochs.front().train_loss);
  EXPECT_GT(r->peak_memory_bytes, 0);  // the caching allocator's peak above the start
}
INSTANTIATE_TEST_SUITE_P(Precisions, CudaPrecisionTest,
                         ::testing::Values(Precision::kFp32, Precision::kBf16),
                         [](const auto& p) { return std::string(PrecisionName(p.param)); });

// The train objective on cuda:0 in a study, as `tune` runs it.
class CudaObjectiveTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    Write("train.jsonl", testing::MakeSynthetic(256, 4, 3));
    Write("validation.jsonl", testing::MakeSynthetic(64, 4, 4));
  }
  void Write(const std::string& name, const testing::Synthetic& s) {
    std::ofstream out(dir_.path() / name);
    for (size_t i = 0; i < s.texts.size(); ++i) {
      out << Json{{"text", s.texts[i]}, {"label", "topic" + std::to_string(s.labels[i])}}.dump()
          << "\n";
    }
  }
  // A 1-layer encoder whose 60,000-word embedding (7.3 MiB; as much again for its gradient and
  // twice for AdamW's state) makes every step ask the allocator for new 20 MiB segments.
  std::unique_ptr<Objective> MakeTrain(int64_t device_memory) {
    Json objective = {{"type", "train"},
                      {"data", {{"train", "train.jsonl"}, {"validation", "validation.jsonl"}}},
                      {"model", "tiny-wide-vocab"},
                      {"init", "scratch"},
                      {"device", "cuda:0"},
                      {"epochs", 1},
                      {"max_length", 32},
                      {"batch_size", 64},
                      {"padding", "max_length"}};
    if (device_memory > 0) {
      objective["memory"] = {{"device_memory", device_memory}, {"admission", false}};
    }
    Json doc = {{"direction", "maximize"},
                {"models",
                 {{"tiny-wide-vocab",
                   {{"model_type", "bert"},
                    {"num_hidden_layers", 1},
                    {"hidden_size", 32},
                    {"num_attention_heads", 2},
                    {"intermediate_size", 64},
                    {"vocab_size", 60000},
                    {"max_position_embeddings", 64},
                    {"type_vocab_size", 2}}}}},
                {"search_space", {{"learning_rate", Json::array({3e-3})}}},
                {"objective", objective}};
    auto c = ParseStudyConfig(doc, "study.json", dir_.path());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return nullptr;
    auto trainer = CudaTrainer(c->objective.train.guard.device_memory);
    if (trainer == nullptr) return nullptr;
    auto o = MakeObjective(*c, std::move(trainer));
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return o.ok() ? std::move(o).value() : nullptr;
  }
  FrozenTrial RunTrial(Study& study, Objective& objective) {
    auto trial = std::move(study.Ask()).value();
    std::vector<Json> choice = {3e-3};
    EXPECT_TRUE(trial->Suggest("learning_rate", *MakeCategoricalDistribution(choice)).ok());
    auto outcome = objective.Run(*trial, trial->params());
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return std::move(study.Tell(*trial, outcome->state, outcome->values)).value();
  }
  std::unique_ptr<Study> NewStudy() {
    return std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMaximize},
                                         std::make_unique<RandomSampler>(),
                                         std::make_unique<NopPruner>(), 1))
        .value();
  }
  testing::TempDir dir_;
};

TEST_F(CudaObjectiveTest, OutOfMemoryOnTheDeviceIsPrunedAndMemoryReturns) {
  auto study = NewStudy();
  // A first trial without a cap: CUDA's context, cuBLAS's workspace and the like stay
  // allocated after it, so the baseline is taken after it.
  auto free_run = MakeTrain(-1);
  ASSERT_NE(free_run, nullptr);
  ASSERT_EQ(RunTrial(*study, *free_run).state, TrialState::kComplete);
  cuda_memory::EmptyCache();
  const cuda_memory::Stats baseline = Stats();
  // Room for the weights' 20 MiB segment and little else.
  auto capped = MakeTrain(baseline.reserved + 24 * kMiB);
  ASSERT_NE(capped, nullptr);
  FrozenTrial t = RunTrial(*study, *capped);
  EXPECT_EQ(t.state, TrialState::kPruned) << t.user_attrs.dump();
  EXPECT_EQ(t.user_attrs["oom"], true);
  EXPECT_EQ(t.user_attrs["reason"], "oom");
  const Json& oom = t.user_attrs["oom_config"];
  EXPECT_EQ(oom["learning_rate"], 3e-3);
  EXPECT_EQ(oom["model"], "tiny-wide-vocab");
  EXPECT_TRUE(oom.contains("phase")) << oom.dump();
  EXPECT_NE(oom["error"].get<std::string>().find("CUDA out of memory"), std::string::npos)
      << oom.dump();
  // memory_allocated is back at its baseline, and the trainer's emptyCache after the OOM gave
  // the reserved blocks back.
  const cuda_memory::Stats after = Stats();
  EXPECT_EQ(after.allocated, baseline.allocated);
  EXPECT_LE(after.reserved, baseline.reserved);
  // Without the cap the same trial completes.
  ASSERT_TRUE(cuda_memory::SetDeviceMemory(0, 0).ok());
  EXPECT_EQ(RunTrial(*study, *free_run).state, TrialState::kComplete);
  EXPECT_EQ(Stats().allocated, baseline.allocated);
}

// `tune estimate --measure` on the card: the estimate (allocated peak plus cuBLAS workspace)
// against the caching allocator's max_memory_allocated over two optimizer steps and an
// evaluation. A model large enough that the workspace's exact size does not decide the result.
// CUDA parameters take the fused AdamW kernel with LibTorch >= 2.0 (tensor ops with 1.13), and
// clipping keeps its coefficient on the card: after 5 steps the weights equal torch::optim::AdamW
// with clip_grad_norm_ to float rounding.
TEST_F(CudaTest, FusedAdamWAndDeviceClippingMatchTorchAdamW) {
  const auto cuda = torch::TensorOptions(torch::kFloat).device(torch::kCUDA, 0);
  auto make = [&] {
    torch::manual_seed(3);
    return std::vector<torch::Tensor>{torch::randn({400, 100}, cuda).requires_grad_(),
                                      torch::randn({100}, cuda).requires_grad_()};
  };
  std::vector<torch::Tensor> ours = make(), theirs = make();
  auto options = [] {
    auto o = std::make_unique<torch::optim::AdamWOptions>(1e-2);
    o->betas({0.9, 0.98}).eps(1e-6).weight_decay(0.05);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> a, b;
  a.emplace_back(ours, options());
  b.emplace_back(theirs, options());
  internal::FusedAdamW fused(a, torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW reference(b, torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    torch::manual_seed(100 + step);
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < ours.size(); ++i) {
      torch::Tensor g = torch::randn(ours[i].sizes(), cuda) * (step + 1);
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
      grads.push_back(ours[i].grad());
    }
    internal::ClipGradientsOnDevice(grads, 20.0);
    torch::nn::utils::clip_grad_norm_(theirs, 20.0);
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    const double worst =
        ((ours[i] - theirs[i]).abs() / (theirs[i].abs() + 1e-3)).max().item<double>();
    EXPECT_LT(worst, 1e-5) << "parameter " << i;
  }
  EXPECT_EQ(fused.steps(ours[0]), 5);
  EXPECT_EQ(internal::FusedDeviceAdamW(), TORCH_VERSION_MAJOR >= 2);
}

TEST_F(CudaTest, EstimateAgainstMaxMemoryAllocated) {
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"--model", "bert-base-uncased", "--batch-size", "16", "--max-length", "128"},
           {"--model", "bert-base-uncased", "--batch-size", "8", "--max-length", "256",
            "--gradient-checkpointing"}}) {
    std::vector<std::string> args = {"estimate",  "--device", "cuda",
                                     "--measure", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::ProcessRun r = testing::Tune(args);
    ASSERT_EQ(r.code, 0) << r.err;
    Json j = Json::parse(r.out);
    std::cout << extra[1] << " b" << extra[3] << " T" << extra[5] << ": estimate "
              << j["allocated_peak"] << " + workspace " << j["breakdown"]["workspace"]
              << ", measured " << j["measured_peak"] << ", error " << j["error"] << "\n";
    EXPECT_GT(j["measured_peak"].get<int64_t>(), 256 * kMiB);
    EXPECT_LT(std::abs(j["error"].get<double>()), 0.15) << j.dump(1);
  }
}

}  // namespace
}  // namespace tune

// The LibTorch trainer and tune's CUDA memory backend on a real CUDA device (ctest label `cuda`):
// the caching allocator's statistics and emptyCache, a trial that runs out of memory on the
// device (pruned with its oom_config, the memory returned), the estimator against the measured
// max_memory_allocated, the trainer learning the separable task on the card (fp32, bf16, fp16;
// eagerly, with tune's fused kernels, with CUDA graphs), CUDA graphs against the eager trainer,
// tune's CUDA kernels against their references, and the fused AdamW step and device-side
// clipping against LibTorch's AdamW. Each test skips,
// saying why, where this LibTorch cannot use CUDA (a CPU-only LibTorch, or no GPU or driver); on
// a GPU machine they all run: `ctest -L cuda`.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <ostream>

#include "config/config.h"
#include "memory/estimator.h"
#include "testing/separable_text.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "torch/torch_cuda_graphs.h"
#include "torch/torch_cuda_memory.h"
#include "torch/torch_fused_adamw.h"
#include "torch/torch_fused_elementwise.h"
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

// How a learning test trains: its precision, and tune's fused kernels and CUDA graphs on or off.
struct TrainingPath {
  Precision precision = Precision::kFp32;
  bool fused_elementwise = false;
  bool cuda_graphs = false;
};

std::string TrainingPathName(const TrainingPath& path) {
  return std::string(PrecisionName(path.precision)) + (path.fused_elementwise ? "_fused" : "") +
         (path.cuda_graphs ? "_graphs" : "");
}

// gtest prints a parameter in the test's name (and so in ctest's): by name, not by its bytes.
void PrintTo(const TrainingPath& path, std::ostream* os) { *os << TrainingPathName(path); }

// In fp32, bf16 autocast (what precision "auto" picks on cards of compute capability >= 8) and
// fp16 autocast with dynamic loss scaling (what it picks on older cards), each eagerly, and with
// tune's fused elementwise kernels and CUDA graphs.
class CudaPrecisionTest : public CudaTest, public ::testing::WithParamInterface<TrainingPath> {};

TEST_P(CudaPrecisionTest, TrainerLearnsTheSeparableTaskOnTheCard) {
  if (GetParam().fused_elementwise && !internal::FusedElementwiseKernelsBuilt()) {
    GTEST_SKIP() << "tune_torch was built without its CUDA kernels (no nvcc at build time)";
  }
  if (GetParam().cuda_graphs && !internal::CudaGraphsBuilt()) {
    GTEST_SKIP() << "CUDA graphs need LibTorch 2.4 or newer";
  }
  TextTrainData d =
      testing::Tokenize(testing::MakeSynthetic(480, 4, 1), testing::MakeSynthetic(160, 4, 2), 4);
  auto trainer = CudaTrainer();
  ASSERT_NE(trainer, nullptr);
  EXPECT_NE(trainer->name().find("cuda:0"), std::string::npos) << trainer->name();
  TrainHyperparams hp = testing::FastHyperparams();
  hp.precision = GetParam().precision;
  hp.fused_elementwise = GetParam().fused_elementwise;
  hp.cuda_graphs = GetParam().cuda_graphs ? CudaGraphs::kOn : CudaGraphs::kOff;
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
                         ::testing::Values(TrainingPath{Precision::kFp32},
                                           TrainingPath{Precision::kBf16},
                                           TrainingPath{Precision::kFp16},
                                           TrainingPath{Precision::kFp32, true, false},
                                           TrainingPath{Precision::kBf16, true, false},
                                           TrainingPath{Precision::kFp16, true, false},
                                           TrainingPath{Precision::kFp32, false, true},
                                           TrainingPath{Precision::kBf16, false, true},
                                           TrainingPath{Precision::kFp16, true, true},
                                           TrainingPath{Precision::kBf16, true, true}),
                         [](const auto& p) { return TrainingPathName(p.param); });

// Each optimizer step's loss of a run, and what the trainer logged.
struct StepLosses {
  std::vector<double> losses;
  std::string log;
};

StepLosses TrainRecordingSteps(Trainer& trainer, const TextTrainData& d, TrainHyperparams hp) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(200);
  sink->set_level(spdlog::level::debug);
  auto logger = spdlog::default_logger();
  const auto level = logger->level();
  logger->sinks().push_back(sink);
  logger->set_level(spdlog::level::debug);
  StepLosses out;
  TrainJob job{testing::TinyModel(), hp, &d};
  job.on_step = [&](const StepRecord& r) { out.losses.push_back(r.loss); };
  auto r = trainer.Train(
      job, [](const EpochMetrics&) { return Result<EpochDecision>(EpochDecision::kContinue); });
  logger->sinks().pop_back();
  logger->set_level(level);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) {
    EXPECT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  }
  for (const std::string& line : sink->last_formatted()) out.log += line;
  return out;
}

// CUDA graphs replay what the eager trainer does: without dropout, in fp32 without TF32, every
// step's loss equals the eager run's (the batches padded to their 64-token bucket change only
// the masked positions), and the log shows the micro-batches and the optimizer step captured.
TEST_F(CudaTest, CudaGraphsTrainAsTheEagerTrainerDoes) {
  if (!internal::CudaGraphsBuilt()) GTEST_SKIP() << "CUDA graphs need LibTorch 2.4 or newer";
  TextTrainData d =
      testing::Tokenize(testing::MakeSynthetic(320, 4, 5), testing::MakeSynthetic(64, 4, 6), 4);
  TrainHyperparams hp = testing::FastHyperparams();
  hp.dropout = 0.0;
  hp.attention_dropout = 0.0;
  hp.classifier_dropout = 0.0;
  hp.tf32 = false;
  hp.epochs = 2;
  auto trainer = CudaTrainer();
  ASSERT_NE(trainer, nullptr);
  hp.cuda_graphs = CudaGraphs::kOff;
  const StepLosses eager = TrainRecordingSteps(*trainer, d, hp);
  hp.cuda_graphs = CudaGraphs::kOn;
  const StepLosses graphed = TrainRecordingSteps(*trainer, d, hp);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  ASSERT_GT(eager.losses.size(), 10u);
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_NEAR(graphed.losses[i], eager.losses[i], 1e-4 * std::max(1.0, eager.losses[i]))
        << "step " << i + 1;
  }
  EXPECT_NE(graphed.log.find("captured the micro-batch"), std::string::npos) << graphed.log;
  EXPECT_NE(graphed.log.find("captured the optimizer step"), std::string::npos) << graphed.log;
  EXPECT_EQ(graphed.log.find("failed"), std::string::npos) << graphed.log;
  EXPECT_EQ(eager.log.find("CUDA graphs"), std::string::npos) << eager.log;
}

// tune's CUDA kernels against the unfused references on the card, given the mask the kernel
// drew: the output and every gradient, fp32, bf16 and fp16 inputs; the keep rate of the mask.
TEST_F(CudaTest, FusedKernelsEqualTheirReferencesOnTheCard) {
  if (!internal::FusedElementwiseKernelsBuilt()) {
    GTEST_SKIP() << "tune_torch was built without its CUDA kernels (no nvcc at build time)";
  }
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    for (double p : {0.0, 0.1}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " p " + std::to_string(p));
      torch::manual_seed(41);
      const torch::Tensor x0 = torch::randn({4, 130, 768}, cuda).to(dtype);
      const torch::Tensor r0 = torch::randn({4, 130, 768}, cuda);
      const torch::Tensor b0 = 0.1 * torch::randn({768}, cuda);
      const torch::Tensor g0 = 1 + 0.2 * torch::randn({768}, cuda);
      const torch::Tensor be0 = 0.1 * torch::randn({768}, cuda);
      auto leaf = [](const torch::Tensor& t) { return t.clone().requires_grad_(); };
      std::vector<torch::Tensor> f = {leaf(x0), leaf(b0), leaf(r0), leaf(g0), leaf(be0)};
      std::vector<torch::Tensor> e = {leaf(x0), leaf(b0), leaf(r0), leaf(g0), leaf(be0)};
      auto [out, mask] =
          internal::BiasDropoutAddLayerNormWithMask(f[0], f[1], f[2], f[3], f[4], p, 1e-12, true);
      if (p > 0) {
        const double kept = mask.to(torch::kFloat).mean().item<double>();
        EXPECT_NEAR(kept, 1 - p, 5 * std::sqrt(p * (1 - p) / static_cast<double>(mask.numel())));
      }
      const torch::Tensor expected =
          internal::BiasDropoutAddLayerNormReference(e[0], e[1], e[2], mask, e[3], e[4], p, 1e-12);
      EXPECT_TRUE(torch::allclose(out, expected, 1e-4, 1e-4))
          << (out - expected).abs().max().item<double>();
      const torch::Tensor upstream = torch::randn(out.sizes(), cuda);
      out.backward(upstream);
      expected.backward(upstream);
      for (size_t i = 0; i < f.size(); ++i) {
        const torch::Tensor a = f[i].grad().to(torch::kFloat), b = e[i].grad().to(torch::kFloat);
        const double tolerance = i == 0 && dtype != torch::kFloat ? 1e-2 : 1e-3;
        EXPECT_LT((a - b).abs().max().item<double>(),
                  tolerance * std::max(1.0, b.abs().max().item<double>()))
            << "gradient " << i;
      }
      torch::Tensor xg = leaf(x0), bg = leaf(b0), xr = leaf(x0), br = leaf(b0);
      const torch::Tensor gelu = internal::BiasGelu(xg, bg);
      const torch::Tensor gelu_ref = internal::BiasGeluReference(xr, br);
      const double tolerance = dtype == torch::kFloat ? 1e-5 : 1e-2;
      EXPECT_TRUE(torch::allclose(gelu.to(torch::kFloat), gelu_ref.to(torch::kFloat), tolerance,
                                  tolerance));
      const torch::Tensor up = torch::randn(gelu.sizes(), cuda).to(dtype);
      gelu.backward(up);
      gelu_ref.backward(up);
      EXPECT_TRUE(torch::allclose(xg.grad().to(torch::kFloat), xr.grad().to(torch::kFloat),
                                  tolerance, tolerance));
      EXPECT_LT((bg.grad() - br.grad()).abs().max().item<double>(),
                tolerance * br.grad().abs().max().item<double>() + 1e-4);
    }
  }
}

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

// The LibTorch trainer on real (small) training runs: learning, reproducibility, gradient
// accumulation, stopping, the train objective end to end (early stopping, pruning), out-of-memory
// under a byte budget, and device errors. Every run uses one intra-op thread: ctest runs tests in
// parallel on the CI's two cores.
#include "torch/torch_trainer.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "config/config.h"
#include "memory/estimator.h"
#include "testing/separable_text.h"
#include "testing/temp_dir.h"
#include "tokenizers/tokenizer.h"
#include "torch/torch_counting_allocator.h"
#include "tune/pruners/threshold.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "util/interrupt.h"

namespace tune {
namespace {

using testing::FastHyperparams;
using testing::MakeSynthetic;
using testing::Synthetic;
using testing::TinyDeberta;
using testing::TinyModel;
using testing::Tokenize;

std::unique_ptr<Trainer> NewCpuTrainer() {
  TorchTrainerOptions o;
  o.threads = 1;
  auto t = NewTorchTrainer(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

Result<TrainResult> Train(
    Trainer& trainer, const TrainJob& job,
    const EpochCallback& cb = [](const EpochMetrics&) -> Result<EpochDecision> {
      return EpochDecision::kContinue;
    }) {
  return trainer.Train(job, cb);
}

class TorchTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new TextTrainData(Tokenize(MakeSynthetic(480, 4, 1), MakeSynthetic(160, 4, 2), 4));
  }
  static void TearDownTestSuite() { delete data_; }
  static TextTrainData* data_;
};
TextTrainData* TorchTrainerTest::data_ = nullptr;

TEST_F(TorchTrainerTest, TinyTransformerLearnsASeparableTask) {
  auto trainer = NewCpuTrainer();
  TrainJob job{TinyModel(), FastHyperparams(), data_};
  auto r = Train(*trainer, job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  ASSERT_EQ(r->epochs.size(), 4u);
  const EpochMetrics& last = r->epochs.back();
  EXPECT_GT(last.classification.accuracy, 0.9);  // chance: 0.25
  EXPECT_GT(last.classification.macro_f1, 0.9);
  EXPECT_LT(last.train_loss, r->epochs.front().train_loss);
  EXPECT_LT(last.validation_loss, 0.5);
  EXPECT_EQ(last.optimizer_steps, 4 * 30);  // 480 / 16 per epoch
  // The encoder as the catalog formula counts it, plus the output layer.
  EXPECT_EQ(r->num_parameters, EncoderParameterCount(job.model) + 32 * 4 + 4);
  EXPECT_GT(r->peak_memory_bytes, 0);
}

// Each optimizer step's loss of a run of the tiny model with `hp`, which completes.
std::vector<double> StepLosses(Trainer& trainer, const TextTrainData* data,
                               const TrainHyperparams& hp) {
  std::vector<double> out;
  TrainJob job{TinyModel(), hp, data};
  job.on_step = [&](const StepRecord& r) { out.push_back(r.loss); };
  auto r = Train(trainer, job);
  EXPECT_TRUE(r.ok() && r->end == TrainResult::End::kCompleted);
  return out;
}

// fused_elementwise takes effect on CUDA only (tune's CPU loops are slower than ATen's
// vectorised kernels): on the CPU every step's loss is the unfused run's, exactly. The fused
// functions themselves are compared with the unfused layers in FusedElementwise.* (the modules,
// on the CPU) and on a card in CudaPrecisionTest's *_fused runs.
TEST_F(TorchTrainerTest, FusedElementwiseLeavesCpuTrainingAsItIs) {
  auto trainer = NewCpuTrainer();
  auto losses = [&](bool fused) {
    TrainHyperparams hp = FastHyperparams();
    hp.epochs = 1;
    hp.dropout = 0.1;  // the unfused layers' masks, drawn the same way both times
    hp.fused_elementwise = fused;
    return StepLosses(*trainer, data_, hp);
  };
  const std::vector<double> plain = losses(false);
  ASSERT_GT(plain.size(), 10u);
  EXPECT_EQ(losses(true), plain);
}

// CUDA graphs' eager path (the test hook runs it on the CPU, where nothing is captured): batches
// padded to their 64-token bucket with their masks, the loss divided by a tensor, gradients
// zeroed in place instead of freed. Each step's loss equals the plain path's; off the hook,
// cuda_graphs "on" changes nothing on the CPU.
TEST_F(TorchTrainerTest, CudaGraphsEagerPathTrainsAsThePlainPathDoes) {
  auto trainer = NewCpuTrainer();
  auto losses = [&](CudaGraphs graphs) {
    TrainHyperparams hp = FastHyperparams();
    hp.epochs = 2;
    hp.grad_accum = 2;  // the tensor 1 / examples of a group of micro-batches
    hp.cuda_graphs = graphs;
    return StepLosses(*trainer, data_, hp);
  };
  const std::vector<double> plain = losses(CudaGraphs::kOff);
  ASSERT_EQ(setenv("TUNE_TEST_GRAPH_PATH_ON_CPU", "1", 1), 0);
  const std::vector<double> graph_path = losses(CudaGraphs::kOn);
  const std::vector<double> auto_path = losses(CudaGraphs::kAuto);
  ASSERT_EQ(unsetenv("TUNE_TEST_GRAPH_PATH_ON_CPU"), 0);
  const std::vector<double> on_without_hook = losses(CudaGraphs::kOn);
  ASSERT_EQ(plain.size(), graph_path.size());
  ASSERT_GT(plain.size(), 20u);
  double largest_difference = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(graph_path[i], plain[i], 1e-4 * std::max(1.0, plain[i])) << "step " << i + 1;
    largest_difference = std::max(largest_difference, std::abs(graph_path[i] - plain[i]));
  }
  EXPECT_EQ(auto_path, plain);  // "auto" is off for now
  EXPECT_EQ(on_without_hook, plain);
  // The padded batches do differ from the plain ones (the hook did take the other path).
  EXPECT_GT(largest_difference, 0.0);
}

TEST_F(TorchTrainerTest, TinyDebertaLearnsASeparableTask) {
  auto trainer = NewCpuTrainer();
  TrainJob job{TinyDeberta(), FastHyperparams(), data_};
  auto r = Train(*trainer, job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  EXPECT_GT(r->epochs.back().classification.accuracy, 0.9);  // chance: 0.25
  EXPECT_LT(r->epochs.back().train_loss, r->epochs.front().train_loss);
  // The encoder as the catalog formula counts it (DebertaV2Model: no pooler), plus HF's
  // ContextPooler (dense) and the output layer.
  EXPECT_EQ(r->num_parameters, EncoderParameterCount(job.model) + (32 * 32 + 32) + 32 * 4 + 4);
}

// bf16 autocast on CPU: the forward pass in bfloat16, weights, gradients and AdamW state in fp32.
TEST_F(TorchTrainerTest, Bf16AutocastOnCpuLearnsTooAndDiffersFromFp32) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.precision = Precision::kBf16;
  TrainJob job{TinyModel(), hp, data_};
  auto bf16 = Train(*trainer, job);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  ASSERT_EQ(bf16->end, TrainResult::End::kCompleted) << bf16->message;
  EXPECT_GT(bf16->epochs.back().classification.accuracy, 0.9);  // chance: 0.25
  job.hp.precision = Precision::kFp32;
  job.hp.epochs = 1;
  job.hp.precision = Precision::kFp32;
  auto fp32 = Train(*trainer, job);
  job.hp.precision = Precision::kBf16;
  auto bf16_one = Train(*trainer, job);
  ASSERT_TRUE(fp32.ok() && bf16_one.ok());
  // Really another precision: the same run's loss differs, though only slightly.
  EXPECT_NE(fp32->epochs[0].train_loss, bf16_one->epochs[0].train_loss);
  EXPECT_NEAR(fp32->epochs[0].train_loss, bf16_one->epochs[0].train_loss, 0.1);
}

TEST_F(TorchTrainerTest, Fp16OnCpuFailsTheRunWithTheReason) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.precision = Precision::kFp16;
  auto r = Train(*trainer, TrainJob{TinyModel(), hp, data_});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kFailed);
  EXPECT_NE(r->message.find("precision 'fp16' needs a CUDA device"), std::string::npos)
      << r->message;
}

// "attention": "sdpa": with LibTorch 2.x the run learns as the eager one does (padded batches
// and unpadded ones both reach SDPA); with 1.13 the run fails, naming the version.
TEST_F(TorchTrainerTest, SdpaLearnsOrNamesTheLibTorchItNeeds) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.attention = Attention::kSdpa;
  auto r = Train(*trainer, TrainJob{TinyModel(), hp, data_});
  if (TorchVersion().rfind("1.", 0) == 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("attention 'sdpa' needs LibTorch 2.0 or newer"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(TorchVersion()), std::string::npos);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  EXPECT_GT(r->epochs.back().classification.accuracy, 0.9);  // chance: 0.25
  EXPECT_LT(r->epochs.back().train_loss, r->epochs.front().train_loss);
}

TEST_F(TorchTrainerTest, RobertaPositionsCosineMaxLengthPaddingAndAClassifierHeadAlsoLearn) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.learning_rate = 5e-3;
  hp.scheduler = Schedule::kCosine;
  hp.classifier_layers = 2;
  hp.classifier_hidden_sizes = {24, 16, 0};
  hp.classifier_activation = Activation::kRelu;
  hp.epochs = 6;
  hp.padding = Padding::kMaxLength;
  TrainJob job{TinyModel("roberta"), hp, data_};
  auto r = Train(*trainer, job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  EXPECT_GT(r->epochs.back().classification.accuracy, 0.9);
}

TEST_F(TorchTrainerTest, SameSeedSameResultOtherSeedOtherResult) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.epochs = 2;
  hp.dropout = 0.1;  // dropout masks come from the seeded generator too
  TrainJob job{TinyModel(), hp, data_};
  auto a = Train(*trainer, job);
  auto b = Train(*trainer, job);
  job.hp.seed = 1;
  auto c = Train(*trainer, job);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(a->epochs[e].train_loss, b->epochs[e].train_loss);
    EXPECT_EQ(a->epochs[e].validation_loss, b->epochs[e].validation_loss);
    EXPECT_EQ(a->epochs[e].classification.macro_f1, b->epochs[e].classification.macro_f1);
  }
  EXPECT_NE(a->epochs[0].train_loss, c->epochs[0].train_loss);
}

// Class weights scale each example's loss by its class's weight (single-label) or each label's
// positive term (multi-label pos_weight): with every weight 2 (every target positive), the first
// step's loss, before any update, is twice the unweighted one; the validation loss uses them too
// (learning rate 0: the weights stay as initialised, so the ratio is exact there as well).
TEST_F(TorchTrainerTest, ClassWeightsScaleTheLossTheyWeigh) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.epochs = 1;
  hp.learning_rate = 0;
  auto first_step_loss = [&](const TextTrainData& data, double& validation_loss) {
    double loss = NAN;
    TrainJob job{TinyModel(), hp, &data};
    job.on_step = [&](const StepRecord& s) {
      if (s.step == 1) loss = s.loss;
    };
    auto r = Train(*trainer, job);
    EXPECT_TRUE(r.ok() && r->end == TrainResult::End::kCompleted);
    validation_loss = r.ok() && !r->epochs.empty() ? r->epochs[0].validation_loss : NAN;
    return loss;
  };
  TextTrainData single = *data_;
  double v0 = 0, v1 = 0;
  const double plain = first_step_loss(single, v0);
  single.class_weights.assign(static_cast<size_t>(single.num_labels), 2.0f);
  EXPECT_NEAR(first_step_loss(single, v1), 2 * plain, 1e-6 * plain);
  EXPECT_NEAR(v1, 2 * v0, 1e-6 * v0);
  single.class_weights = {1.0f, 3.0f, 1.0f, 1.0f};  // not uniform: another loss
  EXPECT_GT(std::abs(first_step_loss(single, v1) - 2 * plain), 1e-3);
  // Multi-label with every label on every example: pos_weight multiplies the whole loss.
  TextTrainData multi = *data_;
  multi.problem_type = ProblemType::kMultiLabel;
  multi.train_labels.clear();
  multi.validation_labels.clear();
  multi.train_targets.assign(multi.train_ids.size() * 4, 1.0f);
  multi.validation_targets.assign(multi.validation_ids.size() * 4, 1.0f);
  const double bce = first_step_loss(multi, v0);
  multi.class_weights.assign(4, 2.0f);
  EXPECT_NEAR(first_step_loss(multi, v1), 2 * bce, 1e-6 * bce);
  EXPECT_NEAR(v1, 2 * v0, 1e-6 * v0);
}

// A regression's one output learns a number per text (the synthetic set's class as a score):
// the squared error falls below the targets' variance, and the predictions correlate.
TEST_F(TorchTrainerTest, RegressionLearnsANumberPerText) {
  auto trainer = NewCpuTrainer();
  TextTrainData data = *data_;
  data.problem_type = ProblemType::kRegression;
  data.num_labels = 1;
  for (int64_t y : data.train_labels) data.train_targets.push_back(static_cast<float>(y));
  for (int64_t y : data.validation_labels) data.validation_targets.push_back(static_cast<float>(y));
  data.train_labels.clear();
  data.validation_labels.clear();
  TrainJob job{TinyModel(), FastHyperparams(), &data};
  auto r = Train(*trainer, job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  const EpochMetrics& last = r->epochs.back();
  EXPECT_EQ(last.problem_type, ProblemType::kRegression);
  EXPECT_LT(last.regression.mse, 0.5);  // the targets 0-3 have variance 1.25
  EXPECT_NEAR(last.validation_loss, last.regression.mse, 1e-5 * last.regression.mse);
  ASSERT_TRUE(last.regression.pearson.has_value());
  EXPECT_GT(*last.regression.pearson, 0.8);
  EXPECT_LT(last.regression.mse, r->epochs.front().regression.mse);
}

// Each micro-batch's summed loss is divided by the examples of its whole group, so the gradient,
// and with it every optimizer (AdamW; SGD with momentum and weight decay), takes the same step.
TEST_F(TorchTrainerTest, AccumulatingKMicroBatchesEqualsOneKTimesLargerBatch) {
  auto trainer = NewCpuTrainer();
  for (OptimizerKind optimizer : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    TrainHyperparams hp = FastHyperparams();
    hp.optimizer = optimizer;
    if (optimizer == OptimizerKind::kSgd) hp.learning_rate = 0.05;
    hp.epochs = 1;
    hp.bucket_batches = 0;  // the same examples per optimizer step either way
    hp.batch_size = 32;
    hp.grad_accum = 1;
    auto big = Train(*trainer, TrainJob{TinyModel(), hp, data_});
    hp.batch_size = 8;
    hp.grad_accum = 4;
    auto accumulated = Train(*trainer, TrainJob{TinyModel(), hp, data_});
    ASSERT_TRUE(big.ok() && accumulated.ok());
    EXPECT_EQ(big->epochs[0].optimizer_steps, 15);
    EXPECT_EQ(accumulated->epochs[0].optimizer_steps, 15);
    EXPECT_NEAR(big->epochs[0].train_loss, accumulated->epochs[0].train_loss, 1e-5);
    EXPECT_NEAR(big->epochs[0].validation_loss, accumulated->epochs[0].validation_loss, 1e-5);
    // Not trivially equal: a different batch size alone changes the result.
    hp.grad_accum = 1;
    auto small = Train(*trainer, TrainJob{TinyModel(), hp, data_});
    ASSERT_TRUE(small.ok());
    EXPECT_GT(std::abs(small->epochs[0].validation_loss - big->epochs[0].validation_loss), 1e-4);
  }
}

// Checkpointing recomputes each layer in backward with the same dropout masks: the same
// training run, with a lower measured peak.
TEST_F(TorchTrainerTest, GradientCheckpointingGivesTheSameRunWithALowerPeak) {
  auto trainer = NewCpuTrainer();
  ModelSpec model = TinyModel();
  model.num_hidden_layers = 4;
  TrainHyperparams hp = FastHyperparams();
  hp.epochs = 1;
  hp.dropout = 0.1;
  hp.attention_dropout = 0.1;
  hp.batch_size = 64;
  hp.padding = Padding::kMaxLength;
  auto plain = Train(*trainer, TrainJob{model, hp, data_});
  hp.gradient_checkpointing = true;
  auto checkpointed = Train(*trainer, TrainJob{model, hp, data_});
  ASSERT_TRUE(plain.ok() && checkpointed.ok());
  ASSERT_EQ(checkpointed->end, TrainResult::End::kCompleted) << checkpointed->message;
  EXPECT_NEAR(plain->epochs[0].train_loss, checkpointed->epochs[0].train_loss, 1e-5);
  EXPECT_NEAR(plain->epochs[0].validation_loss, checkpointed->epochs[0].validation_loss, 1e-5);
  EXPECT_EQ(plain->epochs[0].classification.accuracy,
            checkpointed->epochs[0].classification.accuracy);
  ASSERT_GT(plain->peak_memory_bytes, 0);
  EXPECT_LT(checkpointed->peak_memory_bytes, plain->peak_memory_bytes * 3 / 4)
      << plain->peak_memory_bytes << " vs " << checkpointed->peak_memory_bytes;
}

TEST_F(TorchTrainerTest, StopsWhenTheCallbackSaysSoAndReportsCallbackErrors) {
  auto trainer = NewCpuTrainer();
  TrainJob job{TinyModel(), FastHyperparams(), data_};
  int calls = 0;
  auto stopped = trainer->Train(job, [&](const EpochMetrics& m) -> Result<EpochDecision> {
    ++calls;
    return m.epoch == 1 ? EpochDecision::kStop : EpochDecision::kContinue;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->end, TrainResult::End::kStopped);
  EXPECT_EQ(stopped->epochs.size(), 2u);
  EXPECT_EQ(calls, 2);
  auto failed = trainer->Train(job, [](const EpochMetrics&) -> Result<EpochDecision> {
    return UnavailableError("database is locked");
  });
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
}

// LibTorch 1.13's CPU allocator reports a failed malloc as a plain c10::Error ("can't allocate
// memory"); it is recognised by its message. 2^40 embedding rows cannot be allocated anywhere.
TEST_F(TorchTrainerTest, AnAllocationTheMachineCannotServeIsOutOfMemoryToo) {
  auto trainer = NewCpuTrainer();
  const int64_t before = GetCpuMemoryStats().live_bytes;
  ModelSpec huge = TinyModel();
  huge.vocab_size = int64_t{1} << 40;
  auto r = Train(*trainer, TrainJob{huge, FastHyperparams(), data_});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->end, TrainResult::End::kOutOfMemory) << r->message;
  EXPECT_EQ(r->details["phase"], "setup");
  EXPECT_TRUE(r->epochs.empty());
  EXPECT_EQ(GetCpuMemoryStats().live_bytes, before);
}

// SGD at a learning rate of 1e12 without clipping or warmup: the loss is not finite within a
// few steps.
TrainHyperparams DivergingHyperparams() {
  TrainHyperparams hp = FastHyperparams();
  hp.optimizer = OptimizerKind::kSgd;
  hp.learning_rate = 1e12;
  hp.max_grad_norm = 0;
  hp.warmup_ratio = 0;
  return hp;
}

// eval_strategy "steps": 480 examples in batches of 16 are 30 optimizer steps per epoch; with
// eval_steps 20 over 2 epochs the evaluations come at steps 20 and 40 and at the end (60 is a
// multiple: no extra one), each with the epoch it ran in and its own time; a stop at the second
// ends the run mid-epoch, after step 40.
TEST_F(TorchTrainerTest, EvaluationEveryNStepsReportsAndStopsBetweenEpochs) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.epochs = 2;
  hp.eval_strategy = EvalStrategy::kSteps;
  hp.eval_steps = 20;
  std::vector<std::pair<int64_t, int64_t>> seen;  // (optimizer step, epoch)
  auto r = Train(*trainer, TrainJob{TinyModel(), hp, data_},
                 [&](const EpochMetrics& m) -> Result<EpochDecision> {
                   seen.emplace_back(m.optimizer_steps, m.epoch);
                   EXPECT_GT(m.eval_seconds, 0.0);
                   EXPECT_GE(m.seconds, m.eval_seconds);
                   return EpochDecision::kContinue;
                 });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kCompleted);
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{20, 0}, {40, 1}, {60, 1}}));
  hp.eval_steps = 25;  // 25, 50 and the end at 60
  seen.clear();
  r = Train(*trainer, TrainJob{TinyModel(), hp, data_}, [&](const EpochMetrics& m) {
    seen.emplace_back(m.optimizer_steps, m.epoch);
    return Result<EpochDecision>(seen.size() == 2 ? EpochDecision::kStop
                                                  : EpochDecision::kContinue);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kStopped);
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{25, 0}, {50, 1}}));
  EXPECT_EQ(r->epochs.size(), 2u);
}

TEST_F(TorchTrainerTest, DivergenceFailsTheRun) {
  auto trainer = NewCpuTrainer();
  auto r = Train(*trainer, TrainJob{TinyModel(), DivergingHyperparams(), data_});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kNonFinite);
  EXPECT_NE(r->message.find("the run diverged"), std::string::npos) << r->message;
  EXPECT_EQ(r->details["where"], "training_loss") << r->details.dump();
  EXPECT_EQ(r->details["epoch"], 1);
}

// The evaluation's outputs are checked once read back: NaN or infinite outputs end the run
// (kNonFinite, where "logits", the rows counted) while the training loss stays finite, and no
// metric is computed from them; a validation loss that is not finite ends it too.
TEST_F(TorchTrainerTest, NonFiniteEvaluationOutputsEndTheRun) {
  auto trainer = NewCpuTrainer();
  for (float bad : {std::nanf(""), HUGE_VALF, -HUGE_VALF}) {
    TrainJob job{TinyModel(), FastHyperparams(), data_};
    job.on_eval_outputs = [bad](int64_t, std::vector<float>& out) { out[out.size() - 1] = bad; };
    int reported = 0;
    auto r = Train(*trainer, job, [&](const EpochMetrics&) -> Result<EpochDecision> {
      ++reported;
      return EpochDecision::kContinue;
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->end, TrainResult::End::kNonFinite) << bad;
    EXPECT_EQ(r->details["where"], "logits") << r->details.dump();
    EXPECT_EQ(r->details["count"], 1) << r->details.dump();
    EXPECT_EQ(r->details["epoch"], 1);
    EXPECT_EQ(reported, 0);
    EXPECT_NE(r->message.find("the training loss was"), std::string::npos) << r->message;
  }
}

// The loss stays on the device and is read back every 50 optimizer steps and at each epoch's
// end: a run that diverges in its first steps fails at step 50 of its first epoch (120 steps),
// not later, and reports no epoch.
TEST_F(TorchTrainerTest, DivergenceIsFoundAtTheNextCheckWithinTheEpoch) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = DivergingHyperparams();
  hp.batch_size = 4;
  int epochs_reported = 0;
  auto r = Train(*trainer, TrainJob{TinyModel(), hp, data_},
                 [&](const EpochMetrics&) -> Result<EpochDecision> {
                   ++epochs_reported;
                   return EpochDecision::kContinue;
                 });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kNonFinite);
  EXPECT_EQ(r->details["step"], 50);
  EXPECT_NE(r->message.find("at epoch 1, found at step 50 (checked every 50 optimizer steps"),
            std::string::npos)
      << r->message;
  EXPECT_NE(r->message.find("the run diverged"), std::string::npos) << r->message;
  EXPECT_TRUE(r->epochs.empty());
  EXPECT_EQ(epochs_reported, 0);
}

// What the host reads back from the trainer's tensors, counted by LibTorch's profiler (each
// `.item()` is one aten::_local_scalar_dense, a host wait on a device): one epoch of 120
// optimizer steps with clipping reads the loss at steps 50 and 100 and at the epoch's end, and
// the validation loss once; nothing per step.
TEST_F(TorchTrainerTest, TrainingStepsReadNothingBackToTheHost) {
  auto trainer = NewCpuTrainer();
  TrainHyperparams hp = FastHyperparams();
  hp.batch_size = 4;
  hp.epochs = 1;
  hp.max_grad_norm = 1.0;
  std::ostringstream trace;
  {
    torch::autograd::profiler::RecordProfile profile(trace);
    auto r = Train(*trainer, TrainJob{TinyModel(), hp, data_});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
    ASSERT_EQ(r->epochs.size(), 1u);
    EXPECT_EQ(r->epochs[0].optimizer_steps, 120);
  }
  const std::string text = trace.str();
  int64_t reads = 0;
  for (size_t at = text.find("_local_scalar_dense"); at != std::string::npos;
       at = text.find("_local_scalar_dense", at + 1)) {
    ++reads;
  }
  EXPECT_GT(text.size(), 1000u);  // the profile was recorded
  EXPECT_EQ(reads, 4);
}

TEST_F(TorchTrainerTest, CtrlCStopsTheRunBeforeTheNextBatch) {
  auto trainer = NewCpuTrainer();
  RequestInterrupt();
  auto r = Train(*trainer, TrainJob{TinyModel(), FastHyperparams(), data_});
  ResetInterrupt();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, TrainResult::End::kInterrupted);
  EXPECT_TRUE(r->epochs.empty());
}

// Two Gaussian blobs per class in 4 features (one of them noise): an MLP separates them.
TEST(TorchTrainer, MlpLearnsATabularTask) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  TabularTrainData d;
  d.num_features = 4;
  d.num_labels = 3;
  auto add = [&](std::vector<float>& x, std::vector<int64_t>& y, int n) {
    for (int i = 0; i < n; ++i) {
      const int label = i % 3;
      const float cx = label == 0 ? -2.0f : label == 1 ? 2.0f : 0.0f;
      const float cy = label == 2 ? 2.0f : -1.0f;
      x.insert(x.end(), {cx + noise(rng), cy + noise(rng), noise(rng), cx * cy + noise(rng)});
      y.push_back(label);
    }
  };
  add(d.train_x, d.train_labels, 300);
  add(d.validation_x, d.validation_labels, 90);
  TrainHyperparams hp;
  hp.learning_rate = 1e-2;
  hp.batch_size = 32;
  hp.epochs = 5;
  hp.mlp_layers = 2;
  hp.mlp_hidden = 16;
  hp.classifier_activation = Activation::kRelu;
  TrainJob job;
  job.model.name = "mlp";
  job.hp = hp;
  job.tabular = &d;
  auto trainer = NewCpuTrainer();
  auto r = Train(*trainer, job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->end, TrainResult::End::kCompleted) << r->message;
  EXPECT_GT(r->epochs.back().classification.accuracy, 0.9);  // chance: 1/3
  EXPECT_EQ(r->num_parameters, (4 * 16 + 16) + (16 * 16 + 16) + (16 * 3 + 3));
}

TEST(TorchTrainer, DeviceErrors) {
  TorchTrainerOptions o;
  o.device = "cuda:x";
  EXPECT_EQ(NewTorchTrainer(o).status().code(), StatusCode::kInvalidArgument);
  o.device = "tpu";
  EXPECT_EQ(NewTorchTrainer(o).status().code(), StatusCode::kInvalidArgument);
  // A device index no machine has fails with or without CUDA: for the index, or for the lack
  // of CUDA.
  o.device = "cuda:99";
  auto missing = NewTorchTrainer(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("device 'cuda:99'"), std::string::npos);
  std::cout << missing.status().message() << "\n";
  // cuda:0 works exactly when this LibTorch can use CUDA here (tests labelled cuda train there).
  const std::string cuda_status = TorchCudaStatus();
  const bool usable = cuda_status.rfind(kCudaUsable, 0) == 0;
  o.device = "cuda:0";
  auto cuda = NewTorchTrainer(o);
  EXPECT_EQ(cuda.ok(), usable) << cuda_status;
  if (!cuda.ok()) {
    EXPECT_EQ(cuda.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(cuda.status().message().find("device 'cuda:0'"), std::string::npos);
  }
}

// The train objective over files, driven by a study: the real trainer end to end.
class TrainObjectiveTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write("train.jsonl", MakeSynthetic(480, 4, 3));
    Write("validation.jsonl", MakeSynthetic(80, 4, 4));
  }
  void Write(const std::string& name, const Synthetic& s) {
    std::ofstream out(dir_.path() / name);
    for (size_t i = 0; i < s.texts.size(); ++i) {
      out << Json{{"text", s.texts[i]}, {"label", "topic" + std::to_string(s.labels[i])}}.dump()
          << "\n";
    }
  }
  Result<StudyConfig> Config(const Json& objective_keys, const Json& space) {
    Json objective = {
        {"type", "train"}, {"data", {{"train", "train.jsonl"}, {"validation", "validation.jsonl"}}},
        {"model", "tiny"}, {"init", "scratch"},
        {"threads", 1},    {"max_length", 32},
        {"dropout", 0.0},  {"batch_size", 16}};
    for (const auto& [k, v] : objective_keys.items()) objective[k] = v;
    Json doc = {{"direction", "maximize"},
                {"models",
                 {{"tiny",
                   {{"model_type", "bert"},
                    {"num_hidden_layers", 1},
                    {"hidden_size", 32},
                    {"num_attention_heads", 2},
                    {"intermediate_size", 64},
                    {"vocab_size", 512},
                    {"max_position_embeddings", 64},
                    {"type_vocab_size", 2}}},
                  // The same with a large vocabulary: its dense embedding gradient makes the
                  // run's peak fall in backward.
                  {"tiny-wide-vocab",
                   {{"model_type", "bert"},
                    {"num_hidden_layers", 1},
                    {"hidden_size", 32},
                    {"num_attention_heads", 2},
                    {"intermediate_size", 64},
                    {"vocab_size", 60000},
                    {"max_position_embeddings", 64},
                    {"type_vocab_size", 2}}}}},
                {"search_space", space},
                {"objective", objective}};
    return ParseStudyConfig(doc, "study.json", dir_.path());
  }
  std::unique_ptr<Objective> MakeTrain(const StudyConfig& c) {
    TorchTrainerOptions o;
    o.threads = 1;
    o.device_memory = c.objective.train.guard.device_memory;
    auto trainer = NewTorchTrainer(o);
    EXPECT_TRUE(trainer.ok());
    auto objective = MakeObjective(c, std::move(trainer).value());
    EXPECT_TRUE(objective.ok()) << objective.status().ToString();
    return std::move(objective).value();
  }
  std::unique_ptr<Study> NewStudy(std::unique_ptr<Pruner> pruner = std::make_unique<NopPruner>()) {
    return std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMaximize},
                                         std::make_unique<RandomSampler>(), std::move(pruner), 1))
        .value();
  }
  FrozenTrial RunTrial(Study& study, Objective& objective, const Json& params) {
    auto trial = std::move(study.Ask()).value();
    for (const auto& [k, v] : params.items()) {
      std::vector<Json> choice = {v};
      EXPECT_TRUE(trial->Suggest(k, *MakeCategoricalDistribution(choice)).ok());
    }
    auto outcome = objective.Run(*trial, trial->params());
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return std::move(study.Tell(*trial, outcome->state, outcome->values)).value();
  }

  testing::TempDir dir_;
};

TEST_F(TrainObjectiveTorchTest, CompletesWithTheBestMacroF1) {
  auto c = Config({{"epochs", 4}, {"warmup_ratio", 0.1}}, {{"learning_rate", Json::array({3e-3})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);
  auto study = NewStudy();
  FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  ASSERT_EQ(t.state, TrialState::kComplete) << t.user_attrs.dump();
  EXPECT_GT(t.value(), 0.8);
  EXPECT_EQ(t.intermediate_values.size(), 4u);
  double best = 0;
  for (const auto& [step, v] : t.intermediate_values) best = std::max(best, v);
  EXPECT_EQ(t.value(), best);
  EXPECT_GT(t.user_attrs["train"]["peak_memory_bytes"].get<int64_t>(), 0);
}

TEST_F(TrainObjectiveTorchTest, EarlyStoppingAndPruningEndTrialsEarly) {
  // A learning rate of ~0 never improves: patience 1 stops it after epoch 2.
  auto c = Config({{"epochs", 6}, {"patience", 1}, {"scheduler", "constant"}},
                  {{"learning_rate", Json::array({1e-9, 3e-3})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);
  auto study = NewStudy();
  FrozenTrial stuck = RunTrial(*study, *objective, {{"learning_rate", 1e-9}});
  EXPECT_EQ(stuck.state, TrialState::kComplete);
  EXPECT_EQ(stuck.intermediate_values.size(), 2u);
  EXPECT_EQ(stuck.user_attrs["train"]["stopped_early"], true);
  // A threshold pruner with a bar no first epoch reaches prunes after one report.
  ThresholdOptions t;
  t.lower = 0.999;
  auto pruned_study = NewStudy(std::make_unique<ThresholdPruner>(t));
  FrozenTrial pruned = RunTrial(*pruned_study, *objective, {{"learning_rate", 3e-3}});
  EXPECT_EQ(pruned.state, TrialState::kPruned);
  EXPECT_EQ(pruned.intermediate_values.size(), 1u);
}

TEST_F(TrainObjectiveTorchTest, OutOfMemoryUnderAByteBudgetIsPrunedAndMemoryReturns) {
  auto c = Config({{"epochs", 2}, {"batch_size", 64}, {"padding", "max_length"}},
                  {{"learning_rate", Json::array({3e-3})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);  // installs the counting allocator
  ASSERT_TRUE(CountingCpuAllocatorInstalled());
  const int64_t baseline = GetCpuMemoryStats().live_bytes;
  // The model (~60k parameters) fits; a forward pass over 64 x 32 tokens does not.
  SetCpuDeviceMemory(baseline + 700 * 1024);
  auto study = NewStudy();
  FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  SetCpuDeviceMemory(std::nullopt);
  EXPECT_EQ(t.state, TrialState::kPruned);
  EXPECT_EQ(t.user_attrs["oom"], true);
  EXPECT_EQ(t.user_attrs["reason"], "oom");
  const Json& oom = t.user_attrs["oom_config"];
  EXPECT_EQ(oom["learning_rate"], 3e-3);
  EXPECT_EQ(oom["model"], "tiny");
  EXPECT_EQ(oom["phase"], "forward");
  EXPECT_EQ(oom["batch_shape"], Json::array({64, 32}));
  EXPECT_NE(oom["error"].get<std::string>().find("CPU out of memory (tune memory budget)"),
            std::string::npos);
  EXPECT_GT(GetCpuMemoryStats().oom_count, 0);
  // Everything the trial allocated is released.
  EXPECT_EQ(GetCpuMemoryStats().live_bytes, baseline);
  // And the next trial runs normally.
  FrozenTrial next = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  EXPECT_EQ(next.state, TrialState::kComplete);
  EXPECT_EQ(GetCpuMemoryStats().live_bytes, baseline);
}

// The memory guard around real training runs, with the counting allocator as the device.
class MemoryGuardTorchTest : public TrainObjectiveTorchTest {
 protected:
  void TearDown() override { SetCpuDeviceMemory(std::nullopt); }
  // The estimate of the fixture's tiny model at `batch` x 32 tokens, fp32, AdamW.
  int64_t Estimate(int64_t batch) {
    auto c = Config({}, {{"learning_rate", Json::array({3e-3})}});
    EXPECT_TRUE(c.ok());
    TrainHyperparams hp;  // the objective's keys, as every trial starts from them
    for (const auto& [key, value] : c->objective.train.defaults.items()) {
      EXPECT_TRUE(SetHyperparam(hp, key, value).ok()) << key;
    }
    hp.batch_size = batch;
    auto e = EstimateMemory(MemoryRequestFor(*c->space.catalog().Find("tiny").value(), hp, 4),
                            DeviceMemoryModel::Cpu());
    EXPECT_TRUE(e.ok()) << e.status().message();
    return e.ok() ? e->device_peak : 0;
  }
  Result<StudyConfig> GuardConfig(int64_t device_memory, const Json& memory) {
    Json m = memory;
    m["device_memory"] = device_memory;
    m["margin"] = 0.0;
    return Config({{"epochs", 1}, {"batch_size", 64}, {"padding", "max_length"}, {"memory", m}},
                  {{"learning_rate", Json::array({3e-3})}});
  }
};

TEST_F(MemoryGuardTorchTest, AdmissionPrunesAPredictedMisfitWithoutRunningIt) {
  // Less than the model's weights and AdamW state: no lever helps.
  auto c = GuardConfig(Estimate(1) / 2, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);
  auto study = NewStudy();
  const int64_t allocations = GetCpuMemoryStats().allocations;
  FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  EXPECT_EQ(t.state, TrialState::kPruned);
  EXPECT_EQ(t.user_attrs["oom"], true);
  EXPECT_EQ(t.user_attrs["reason"], "predicted");
  EXPECT_FALSE(t.user_attrs.contains("train"));  // it did not run
  EXPECT_EQ(GetCpuMemoryStats().allocations, allocations);
  const Json& cfg = t.user_attrs["oom_config"];
  EXPECT_EQ(cfg["estimate"], Estimate(64));
  EXPECT_EQ(cfg["batch_size"], 64);
  EXPECT_EQ(cfg["effective_batch_size"], 64);
  EXPECT_EQ(cfg["usable"], Estimate(1) / 2);
  EXPECT_EQ(t.user_attrs["memory"]["admission"], "reject");
}

TEST_F(MemoryGuardTorchTest, AdmissionRunsAMisfitAtASmallerMicroBatchWithinTheBudget) {
  // Room for batch 16 (x4 accumulation), not for 64 or 32.
  const int64_t budget = (Estimate(16) + Estimate(32)) / 2;
  auto c = GuardConfig(budget, {{"levers", Json::array({"grad_accum"})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);
  auto study = NewStudy();
  FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  ASSERT_EQ(t.state, TrialState::kComplete) << t.user_attrs.dump();
  const Json& m = t.user_attrs["memory"];
  EXPECT_EQ(m["admission"], "run_with_levers");
  EXPECT_EQ(m["batch_size"], 16);
  EXPECT_EQ(m["grad_accum"], 4);
  EXPECT_EQ(m["levers"], "batch_size 64 -> 16, grad_accum 1 -> 4");
  EXPECT_EQ(m["oom"], false);
  EXPECT_LE(m["peak"].get<int64_t>(), budget);
  EXPECT_EQ(m["after"], m["before"]);
  EXPECT_GT(m["rss"].get<int64_t>(), m["peak"].get<int64_t>());  // the process holds more
}

TEST_F(MemoryGuardTorchTest, OomRetryHalvesTheMicroBatchAndKeepsTheEffectiveBatch) {
  const int64_t budget = (Estimate(16) + Estimate(32)) / 2;
  auto c = GuardConfig(budget, {{"admission", false}, {"oom_retry", 3}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective = MakeTrain(*c);
  auto study = NewStudy();
  FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  ASSERT_EQ(t.state, TrialState::kComplete) << t.user_attrs.dump();
  const Json& m = t.user_attrs["memory"];
  ASSERT_EQ(m["oom_retries"].size(), 2u);  // 64 and 32 ran out of memory
  EXPECT_EQ(m["oom_retries"][0]["batch_size"], 64);
  EXPECT_EQ(m["oom_retries"][1]["batch_size"], 32);
  EXPECT_EQ(m["oom_retries"][1]["grad_accum"], 2);
  EXPECT_EQ(m["batch_size"].get<int64_t>() * m["grad_accum"].get<int64_t>(), 64);
  EXPECT_EQ(m["after"], m["before"]);
  // Without retries the same trial is PRUNED as out of memory.
  auto plain = GuardConfig(budget, {{"admission", false}});
  ASSERT_TRUE(plain.ok());
  auto no_retry = MakeTrain(*plain);
  FrozenTrial pruned = RunTrial(*study, *no_retry, {{"learning_rate", 3e-3}});
  EXPECT_EQ(pruned.state, TrialState::kPruned);
  EXPECT_EQ(pruned.user_attrs["reason"], "oom");
}

TEST_F(MemoryGuardTorchTest, AnOomInBackwardLeavesNoMemoryBehind) {
  // Measure the run's peak, then lower the budget until the allocation that fails is in
  // backward (a failed backward leaves gradient buffers in the autograd engine's queue).
  auto free_run = Config({{"epochs", 1},
                          {"batch_size", 64},
                          {"padding", "max_length"},
                          {"model", "tiny-wide-vocab"},
                          {"optimizer", "sgd"},
                          {"momentum", 0.0}},
                         {{"learning_rate", Json::array({3e-3})}});
  ASSERT_TRUE(free_run.ok());
  auto objective = MakeTrain(*free_run);
  auto study = NewStudy();
  const int64_t baseline = GetCpuMemoryStats().live_bytes;
  FrozenTrial ok = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
  ASSERT_EQ(ok.state, TrialState::kComplete);
  const int64_t peak = ok.user_attrs["memory"]["peak"].get<int64_t>();
  bool in_backward = false;
  for (int k = 99; k >= 50 && !in_backward; --k) {
    SetCpuDeviceMemory(baseline + peak * k / 100);
    FrozenTrial t = RunTrial(*study, *objective, {{"learning_rate", 3e-3}});
    SetCpuDeviceMemory(std::nullopt);
    ASSERT_EQ(t.state, TrialState::kPruned) << k;
    in_backward = t.user_attrs["oom_config"]["phase"] == "backward";
    // Whatever the phase, everything is released, the failed backward's buffers included.
    EXPECT_EQ(t.user_attrs["memory"]["after"], t.user_attrs["memory"]["before"]) << k;
    EXPECT_EQ(GetCpuMemoryStats().live_bytes, baseline) << k;
  }
  EXPECT_TRUE(in_backward) << "no budget between 50% and 99% of the peak failed in backward";
}

}  // namespace
}  // namespace tune

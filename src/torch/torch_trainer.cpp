// The LibTorch trainer (torch_trainer.h).
#include "torch/torch_trainer.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <type_traits>

#include "torch/torch_compat.h"
#include "torch/torch_counting_allocator.h"
#include "torch/torch_cpu_malloc.h"
#include "torch/torch_cuda_errors.h"
#include "torch/torch_cuda_graphs.h"
#include "torch/torch_cuda_memory.h"
#include "torch/torch_fused_adamw.h"
#include "torch/torch_fused_elementwise.h"
#include "torch/torch_models.h"
#include "torch/torch_plugin.h"
#include "torch/torch_pretrained.h"
#include "torch/torch_script.h"
#include "train/batching.h"
#include "train/metrics.h"
#include "tune/trial_attrs.h"
#include "util/device.h"
#include "util/interrupt.h"
#include "util/nonfinite.h"

namespace tune {
namespace {

// The trainer reads the epoch's training loss back to check that it is finite every this many
// optimizer steps and at each epoch's end: a diverged run goes on for at most this many steps
// before it fails, and at the other steps the device never waits for the host.
constexpr int64_t kFiniteCheckSteps = 50;

// CUDA graphs: a training batch is padded up to a multiple of this many tokens, so that the
// lengths of one bucket share a graph; each shape runs eagerly this many times (lazy
// initialisation, AdamW's state) before it is captured.
constexpr int64_t kGraphLengthMultiple = 64;
constexpr int64_t kGraphWarmupRuns = 2;

using internal::TransformerClassifier;

// Where a run is, for the report of an error that interrupts it.
struct Progress {
  std::string phase = "setup";  // setup, forward, backward, optimizer_step, evaluation
  int64_t epoch = 0;
  int64_t step = 0;  // optimizer steps done
  int64_t batch_rows = 0;
  int64_t batch_cols = 0;
};

// Out-of-memory errors that are not c10::OutOfMemoryError: the default CPU allocator's
// c10::Error, cuBLAS/cuDNN allocation failures (docs/memory.md#out-of-memory-errors).
bool LooksLikeOutOfMemory(const std::string& what) {
  static const char* const kPatterns[] = {"out of memory", "can't allocate memory",
                                          "not enough memory", "CUBLAS_STATUS_ALLOC_FAILED",
                                          "CUDNN_STATUS_ALLOC_FAILED"};
  for (const char* p : kPatterns) {
    if (what.find(p) != std::string::npos) return true;
  }
  return false;
}

// What ended a run with an exception: its text, and whether it was out of memory or a CUDA error
// that leaves the process's context unusable.
struct RunError {
  std::string text;
  bool oom = false;
  bool sticky = false;
};

// Inside a catch (...): the RunError of the exception in flight.
RunError CaughtRunError() {
  RunError e;
  try {
    throw;
  } catch (const c10::OutOfMemoryError& x) {
    e.text = x.what_without_backtrace();
    e.oom = true;
  } catch (const c10::Error& x) {
    e.text = x.what_without_backtrace();
  } catch (const std::bad_alloc& x) {
    e.text = std::string("std::bad_alloc: ") + x.what();
    e.oom = true;
  } catch (const std::exception& x) {
    // The TorchScript interpreter rethrows what failed inside it (an out-of-memory error too)
    // as a std::runtime_error whose last line is the original message.
    e.text = internal::ScriptErrorText(x.what());
  }
  e.oom = e.oom || LooksLikeOutOfMemory(e.text);
  e.sticky = !e.oom && IsStickyCudaError(e.text);
  return e;
}

template <typename T>
torch::Tensor ToTensor(const std::vector<T>& v, int64_t rows, int64_t cols,
                       const torch::Device& device) {
  std::vector<int64_t> shape =
      cols > 0 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
  // from_blob borrows the vector; clone() owns a copy. For CUDA the copy goes through pinned
  // memory (the caching host allocator, which keeps the buffer until the copy is done) and does
  // not block the host: the host goes on to queue the step's kernels.
  torch::Tensor t = torch::from_blob(const_cast<T*>(v.data()), shape,
                                     std::is_same_v<T, float> ? torch::kFloat : torch::kLong);
  if (device.is_cpu()) return t.clone();
  if (device.is_cuda()) return t.pin_memory().to(device, /*non_blocking=*/true);
  return t.to(device);
}

// The summed loss of a batch as its problem type trains (the mean loss times the examples):
// cross-entropy with the class weights; multi-label, the binary cross-entropy averaged over the
// labels with each label's positive weight (Hugging Face's BCEWithLogitsLoss mean, times the
// examples); regression, the squared error of the one output. `weights`: undefined for none.
torch::Tensor SummedLoss(ProblemType type, const torch::Tensor& logits,
                         const torch::Tensor& targets, const torch::Tensor& weights) {
  namespace F = torch::nn::functional;
  switch (type) {
    case ProblemType::kSingleLabel:
      return F::cross_entropy(logits, targets,
                              F::CrossEntropyFuncOptions().reduction(torch::kSum).weight(weights));
    case ProblemType::kMultiLabel:
      return F::binary_cross_entropy_with_logits(logits.to(torch::kFloat), targets,
                                                 F::BinaryCrossEntropyWithLogitsFuncOptions()
                                                     .reduction(torch::kSum)
                                                     .pos_weight(weights)) /
             static_cast<double>(logits.size(1));
    case ProblemType::kRegression:
      return F::mse_loss(logits.to(torch::kFloat).reshape({-1}), targets,
                         F::MSELossFuncOptions(torch::kSum));
  }
  return {};
}

// clip_grad_norm_. AdamW folds the coefficient into its step (one pass fewer over the
// gradients); SGD's gradients are scaled in place. On a device the coefficient stays there: no
// host wait in the step.
void ClipGradients(const std::vector<torch::Tensor>& params, double max_norm,
                   torch::optim::Optimizer& optimizer) {
  auto* adamw = dynamic_cast<internal::FusedAdamW*>(&optimizer);
  if (!params.empty() && !params.front().device().is_cpu()) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    if (grads.empty()) return;
    if (adamw != nullptr) {
      adamw->set_clip_coefficient(internal::ClipCoefficientOnDevice(grads, max_norm));
    } else {
      internal::ClipGradientsOnDevice(grads, max_norm);
    }
    return;
  }
  const double coefficient = internal::ClipCoefficient(internal::GradientNorm(params), max_norm);
  if (coefficient >= 1.0) return;
  if (adamw != nullptr) {
    adamw->set_grad_scale(coefficient);
    return;
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (p.grad().defined()) p.grad().mul_(coefficient);
  }
}

void SetLearningRate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

// No weight decay on biases and LayerNorm weights (Hugging Face's Trainer does the same).
void DecayGroups(torch::nn::Module& model, std::vector<torch::Tensor>& decay,
                 std::vector<torch::Tensor>& no_decay) {
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const bool exempt = name.size() >= 4 && (name.compare(name.size() - 4, 4, "bias") == 0 ||
                                             name.find("LayerNorm") != std::string::npos);
    (exempt ? no_decay : decay).push_back(item.value());
  }
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainHyperparams& hp,
                                                       const std::vector<torch::Tensor>& decay,
                                                       const std::vector<torch::Tensor>& no_decay) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (hp.optimizer == OptimizerKind::kAdamW) {
    auto options = [&](double wd) {
      auto o = std::make_unique<torch::optim::AdamWOptions>(hp.learning_rate);
      o->betas({hp.adam_beta1, hp.adam_beta2}).eps(hp.adam_epsilon).weight_decay(wd);
      return o;
    };
    groups.emplace_back(decay, options(hp.weight_decay));
    groups.emplace_back(no_decay, options(0.0));
    return std::make_unique<internal::FusedAdamW>(groups,
                                                  torch::optim::AdamWOptions(hp.learning_rate));
  }
  auto options = [&](double wd) {
    auto o = std::make_unique<torch::optim::SGDOptions>(hp.learning_rate);
    o->momentum(hp.momentum).nesterov(hp.nesterov && hp.momentum > 0).weight_decay(wd);
    return o;
  };
  groups.emplace_back(decay, options(hp.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(hp.learning_rate));
}

// What differs between a transformer on text, a TorchScript module on text and an MLP on
// tabular rows.
class Task {
 public:
  virtual ~Task() = default;
  virtual std::vector<torch::Tensor> parameters() = 0;
  // The trainable parameters with and without weight decay.
  virtual void ParameterGroups(std::vector<torch::Tensor>& decay,
                               std::vector<torch::Tensor>& no_decay) = 0;
  virtual void SetTraining(bool on) = 0;
  virtual torch::Device device() const = 0;
  // Writes the model where TrainJob::save_weights says (text models only).
  virtual Status Save(const std::string& path) {
    return InternalError("cannot save this model to " + path);
  }
  virtual int64_t num_labels() const = 0;
  // What the model predicts and the loss's class weights (TextTrainData's).
  virtual ProblemType problem_type() const { return ProblemType::kSingleLabel; }
  virtual std::vector<float> class_weights() const { return {}; }
  // Per example of the training or validation split: the length batching sorts by.
  virtual const std::vector<int64_t>& lengths(bool train) const = 0;
  // The logits and targets of a batch of the training or validation split: class indices
  // (single-label), [B, labels] 0/1 floats (multi-label), [B] floats (regression).
  virtual std::pair<torch::Tensor, torch::Tensor> Forward(const std::vector<int64_t>& batch,
                                                          bool train, Progress& p) = 0;
  // The pretrained checkpoint's tensors that held NaN or infinite values (text models).
  virtual std::vector<internal::PretrainedLoadReport::NonFinite> nonfinite_weights() const {
    return {};
  }
  // The pretrained weights' file ("" for none).
  virtual std::string weights_path() const { return ""; }

  // A training batch's tensors, for CUDA graphs: built on the host, copied into a graph's inputs.
  struct Batch {
    torch::Tensor input_ids, attention_mask, token_type_ids, targets;
  };
  // Whether the trainer may capture this task's training step in CUDA graphs.
  virtual bool Capturable() const { return false; }
  // A training batch on the host, its rows padded up to a multiple of `length_multiple` tokens
  // (at most max_length), always with its attention mask (so that one graph serves a bucket).
  virtual Batch HostBatch(const std::vector<int64_t>& /*batch*/, int64_t /*length_multiple*/,
                          Progress& /*p*/) {
    TORCH_CHECK(false, "this model's training step is not captured in CUDA graphs");
  }
  // The logits of a batch already on the device.
  virtual torch::Tensor LogitsOf(const Batch& /*b*/) {
    TORCH_CHECK(false, "this model's training step is not captured in CUDA graphs");
  }
};

// A model on tokenized text: batches of token ids and attention masks in, logits out.
class TokenTask : public Task {
 public:
  TokenTask(const TrainJob& job, const torch::Device& device)
      : data_(*job.data), hp_(job.hp), device_(device) {
    for (size_t i = 0; i < data_.train_ids.size(); ++i)
      train_lengths_.push_back(ExampleLength(data_, true, i, hp_.max_length));
    for (size_t i = 0; i < data_.validation_ids.size(); ++i)
      eval_lengths_.push_back(ExampleLength(data_, false, i, hp_.max_length));
  }
  torch::Device device() const override { return device_; }
  int64_t num_labels() const override { return data_.num_labels; }
  ProblemType problem_type() const override { return data_.problem_type; }
  std::vector<float> class_weights() const override { return data_.class_weights; }
  const std::vector<int64_t>& lengths(bool train) const override {
    return train ? train_lengths_ : eval_lengths_;
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const std::vector<int64_t>& batch, bool train,
                                                  Progress& p) override {
    TokenBatch tb = Build(batch, train, p);
    // A batch without padding sends no mask (known here, on the host, without a device sync):
    // SDPA may then use FlashAttention, which refuses masks. One with padding (DeBERTa's: any,
    // its relative terms being SDPA's bias) is widened, where the model attends through SDPA on
    // CUDA, to the width the memory-efficient kernel takes its mask at without copying it into
    // a [B, heads, T, T] bias; the widening pads it.
    auto has_padding = [&tb] {
      return std::find(tb.attention_mask.begin(), tb.attention_mask.end(), 0) !=
             tb.attention_mask.end();
    };
    bool padded = has_padding();
    if ((padded || sdpa_bias_) && sdpa_mask_limit_ > 0) {
      PadTokenBatchTo(tb, SdpaMaskWidth(tb.cols, sdpa_mask_limit_), data_.pad_id);
      p.batch_cols = tb.cols;
      padded = has_padding();
    }
    torch::Tensor logits =
        Logits(ToTensor(tb.input_ids, tb.rows, tb.cols, device_),
               padded ? ToTensor(tb.attention_mask, tb.rows, tb.cols, device_) : torch::Tensor(),
               tb.token_type_ids.empty() ? torch::Tensor()
                                         : ToTensor(tb.token_type_ids, tb.rows, tb.cols, device_));
    return {logits, Targets(tb, batch, train, device_)};
  }
  Batch HostBatch(const std::vector<int64_t>& batch, int64_t length_multiple,
                  Progress& p) override {
    TokenBatch tb = Build(batch, /*train=*/true, p);
    const int64_t bucket = (tb.cols + length_multiple - 1) / length_multiple * length_multiple;
    PadTokenBatchTo(tb, std::min(bucket, std::max(tb.cols, hp_.max_length)), data_.pad_id);
    // A bucket cut at max_length may not be a width SDPA's memory-efficient kernel takes its
    // mask at (every graph's batch has a mask): widened as Forward widens a padded batch.
    if (sdpa_mask_limit_ > 0) {
      PadTokenBatchTo(tb, SdpaMaskWidth(tb.cols, sdpa_mask_limit_), data_.pad_id);
    }
    p.batch_cols = tb.cols;
    const torch::Device cpu(torch::kCPU);
    return {ToTensor(tb.input_ids, tb.rows, tb.cols, cpu),
            ToTensor(tb.attention_mask, tb.rows, tb.cols, cpu),
            tb.token_type_ids.empty() ? torch::Tensor()
                                      : ToTensor(tb.token_type_ids, tb.rows, tb.cols, cpu),
            Targets(tb, batch, /*train=*/true, cpu)};
  }
  torch::Tensor LogitsOf(const Batch& b) override {
    return Logits(b.input_ids, b.attention_mask, b.token_type_ids);
  }

 protected:
  // Whether the model takes token type ids (sentence pairs on BERT).
  virtual bool token_types() const { return false; }
  // The model's logits, Tensor[B, num_labels]; attention_mask undefined without padding,
  // token_type_ids without token types.
  virtual torch::Tensor Logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                               const torch::Tensor& token_type_ids) = 0;

  const TextTrainData& data_;
  const TrainHyperparams& hp_;
  torch::Device device_;
  // > 0: padded batches are widened with SdpaMaskWidth up to this many columns (TextTask); with
  // sdpa_bias_ (DeBERTa, whose relative terms are SDPA's bias) every batch.
  int64_t sdpa_mask_limit_ = 0;
  bool sdpa_bias_ = false;

 private:
  // The batch's token ids, mask and labels (Task::Forward).
  TokenBatch Build(const std::vector<int64_t>& batch, bool train, Progress& p) const {
    const std::optional<PairSplit> pairs = PairSplitOf(data_, train, token_types());
    TokenBatch tb = BuildTokenBatch(train ? data_.train_ids : data_.validation_ids,
                                    train ? data_.train_labels : data_.validation_labels, batch,
                                    hp_.max_length, hp_.padding, data_.pad_id, data_.cls_id,
                                    data_.sep_id, pairs ? &*pairs : nullptr);
    p.batch_rows = tb.rows;
    p.batch_cols = tb.cols;
    p.phase = train ? "forward" : "evaluation";
    return tb;
  }

  // The batch's targets (Task::Forward), on `device`.
  torch::Tensor Targets(const TokenBatch& tb, const std::vector<int64_t>& batch, bool train,
                        const torch::Device& device) const {
    if (data_.problem_type == ProblemType::kSingleLabel) {
      return ToTensor(tb.labels, tb.rows, 0, device);
    }
    const std::vector<float>& all = train ? data_.train_targets : data_.validation_targets;
    const auto width =
        static_cast<size_t>(data_.problem_type == ProblemType::kMultiLabel ? data_.num_labels : 1);
    std::vector<float> values;
    values.reserve(batch.size() * width);
    for (int64_t i : batch) {
      const auto row = all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * width);
      values.insert(values.end(), row, row + static_cast<std::ptrdiff_t>(width));
    }
    return ToTensor(values, tb.rows,
                    data_.problem_type == ProblemType::kMultiLabel ? data_.num_labels : 0, device);
  }

  std::vector<int64_t> train_lengths_, eval_lengths_;
};

class TextTask final : public TokenTask {
  // fused_elementwise takes effect on CUDA only: on the CPU tune's loops of the kernels'
  // arithmetic are slower than ATen's vectorised kernels (docs/benchmarks.md), so the layers
  // keep those there.
  static internal::EncoderConfig EncoderConfigOn(const torch::Device& device,
                                                 internal::EncoderConfig c) {
    c.fused_elementwise = c.fused_elementwise && device.is_cuda();
    return c;
  }

 public:
  TextTask(const TrainJob& job, const torch::Device& device)
      : TokenTask(job, device),
        model_type_(job.model.model_type),
        model_(EncoderConfigOn(device,
                               internal::MakeEncoderConfig(job.model, job.hp, job.data->pad_id)),
               internal::MakeHeadConfig(job.model, job.hp, job.data->num_labels)) {
    model_->to(device);
    if (device.is_cuda() && job.hp.attention == Attention::kSdpa) {
      sdpa_mask_limit_ = job.model.max_position_embeddings;
      sdpa_bias_ = UsesRelativePositions(job.model) && internal::DebertaSdpaAvailable();
    }
  }
  bool Capturable() const override { return true; }
  // Copies the checkpoint's weights into the model (a non-OK Status when they do not fit). What
  // is newly initialised and what the checkpoint has that the model does not use are logged
  // once per checkpoint and process, as Hugging Face's from_pretrained does.
  Status LoadPretrained(const std::string& weights_path) {
    TUNE_ASSIGN_OR_RETURN(internal::PretrainedLoadReport report,
                          internal::LoadPretrainedWeights(*model_, weights_path));
    nonfinite_weights_ = report.nonfinite;
    weights_path_ = weights_path;
    static std::mutex mu;
    static std::set<std::string> logged;
    std::lock_guard<std::mutex> lock(mu);
    const bool first = logged.insert(weights_path).second;
    const auto level = first ? spdlog::level::info : spdlog::level::debug;
    spdlog::log(level, "Loaded {} tensors from {}{}", report.loaded, weights_path,
                report.prefix.empty() ? "" : fmt::format(" (prefix '{}')", report.prefix));
    if (!report.fresh.empty()) {
      spdlog::log(
          level,
          "Some weights of the model were not initialized from the checkpoint at "
          "{} and are newly initialized: [{}]{}",
          weights_path, fmt::join(report.fresh, ", "),
          report.resized.empty() ? "" : fmt::format(" ({})", fmt::join(report.resized, "; ")));
    }
    if (!report.unexpected.empty()) {
      spdlog::log(level, "Some weights of the checkpoint at {} were not used: [{}]", weights_path,
                  fmt::join(report.unexpected, ", "));
    }
    return Status::Ok();
  }
  // The model as a model.safetensors that LoadPretrained reads back (torch_pretrained.h).
  Status SaveWeights(const std::string& path) {
    return internal::SavePretrainedWeights(*model_, internal::PretrainedPrefix(model_type_), path);
  }
  std::vector<torch::Tensor> parameters() override { return model_->parameters(); }
  void ParameterGroups(std::vector<torch::Tensor>& decay,
                       std::vector<torch::Tensor>& no_decay) override {
    DecayGroups(*model_, decay, no_decay);
  }
  void SetTraining(bool on) override { model_->train(on); }
  Status Save(const std::string& path) override { return SaveWeights(path); }
  std::vector<internal::PretrainedLoadReport::NonFinite> nonfinite_weights() const override {
    return nonfinite_weights_;
  }
  std::string weights_path() const override { return weights_path_; }

 private:
  bool token_types() const override { return model_->has_token_types(); }
  torch::Tensor Logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& token_type_ids) override {
    return model_->forward(input_ids, attention_mask, token_type_ids);
  }

  std::string model_type_;
  TransformerClassifier model_;
  std::vector<internal::PretrainedLoadReport::NonFinite> nonfinite_weights_;
  std::string weights_path_;
};

class TabularTask final : public Task {
 public:
  TabularTask(const TrainJob& job, const torch::Device& device)
      : data_(*job.tabular),
        device_(device),
        model_(job.tabular->num_features, job.hp, job.tabular->num_labels),
        train_lengths_(job.tabular->train_labels.size(), 1),
        eval_lengths_(job.tabular->validation_labels.size(), 1) {
    model_->to(device);
  }
  std::vector<torch::Tensor> parameters() override { return model_->parameters(); }
  void ParameterGroups(std::vector<torch::Tensor>& decay,
                       std::vector<torch::Tensor>& no_decay) override {
    DecayGroups(*model_, decay, no_decay);
  }
  void SetTraining(bool on) override { model_->train(on); }
  torch::Device device() const override { return device_; }
  int64_t num_labels() const override { return data_.num_labels; }
  const std::vector<int64_t>& lengths(bool train) const override {
    return train ? train_lengths_ : eval_lengths_;
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const std::vector<int64_t>& batch, bool train,
                                                  Progress& p) override {
    const std::vector<float>& x = train ? data_.train_x : data_.validation_x;
    const std::vector<int64_t>& y = train ? data_.train_labels : data_.validation_labels;
    const auto f = static_cast<size_t>(data_.num_features);
    std::vector<float> rows;
    std::vector<int64_t> labels;
    rows.reserve(batch.size() * f);
    for (int64_t i : batch) {
      const auto begin = x.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * f);
      rows.insert(rows.end(), begin, begin + static_cast<std::ptrdiff_t>(f));
      labels.push_back(y[static_cast<size_t>(i)]);
    }
    p.batch_rows = static_cast<int64_t>(batch.size());
    p.batch_cols = data_.num_features;
    p.phase = train ? "forward" : "evaluation";
    torch::Tensor t = torch::from_blob(rows.data(), {p.batch_rows, p.batch_cols}, torch::kFloat);
    torch::Tensor input = device_.is_cpu() ? t.clone() : t.to(device_);
    return {model_->forward(input), ToTensor(labels, p.batch_rows, 0, device_)};
  }

 private:
  const TabularTrainData& data_;
  torch::Device device_;
  internal::MlpClassifier model_;
  std::vector<int64_t> train_lengths_, eval_lengths_;
};

// A TorchScript module on text (torch_script.h): forward(input_ids, attention_mask) -> logits.
class ScriptTask final : public TokenTask {
 public:
  // The module of job.model.torchscript, loaded on `device`; with hp.gradient_checkpointing, the
  // module must declare it. InvalidArgument/NotFound otherwise.
  static Result<std::unique_ptr<ScriptTask>> Load(const TrainJob& job,
                                                  const torch::Device& device) {
    TUNE_ASSIGN_OR_RETURN(torch::jit::Module module,
                          internal::LoadScriptModule(job.model.torchscript, device));
    if (job.hp.gradient_checkpointing) {
      TUNE_RETURN_IF_ERROR(internal::EnableScriptCheckpointing(module, job.model.torchscript));
    }
    return std::unique_ptr<ScriptTask>(new ScriptTask(job, device, std::move(module)));
  }
  std::vector<torch::Tensor> parameters() override { return internal::ScriptParameters(module_); }
  void ParameterGroups(std::vector<torch::Tensor>& decay,
                       std::vector<torch::Tensor>& no_decay) override {
    internal::ScriptDecayGroups(module_, decay, no_decay);
  }
  void SetTraining(bool on) override { module_.train(on); }
  Status Save(const std::string& path) override {
    return internal::SaveScriptModule(module_, path);
  }

 private:
  ScriptTask(const TrainJob& job, const torch::Device& device, torch::jit::Module module)
      : TokenTask(job, device), module_(std::move(module)) {}
  // A TorchScript module takes (input_ids, attention_mask): a pair reaches it joined, without
  // token types.
  torch::Tensor Logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& /*token_type_ids*/) override {
    return module_
        .forward(
            {input_ids, attention_mask.defined() ? attention_mask : torch::ones_like(input_ids)})
        .toTensor();
  }

  torch::jit::Module module_;
};

// The text task of `job` with its weights: a TorchScript module, or a transformer with its
// pretrained weights (when job.model.pretrained is set).
Result<std::unique_ptr<Task>> MakeTextTask(const TrainJob& job, const torch::Device& device) {
  if (IsTorchScriptModel(job.model)) {
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<ScriptTask> task, ScriptTask::Load(job, device));
    return std::unique_ptr<Task>(std::move(task));
  }
  if (job.hp.fused_elementwise && device.is_cuda() && !internal::FusedElementwiseRunsOn(device)) {
    return InvalidArgumentError(fmt::format(
        "fused_elementwise on {} needs tune's CUDA kernels, and this trainer (LibTorch {}) was "
        "built without them (they need nvcc and a LibTorch with CUDA, 2.4 or newer, at build "
        "time); use \"fused_elementwise\": false",
        device.str(), TORCH_VERSION));
  }
  if (job.hp.attention == Attention::kSdpa && !internal::SdpaAvailable()) {
    return InvalidArgumentError(fmt::format(
        "attention 'sdpa' needs LibTorch 2.0 or newer (at::scaled_dot_product_attention), and "
        "tune's trainer is built with LibTorch {}; use \"attention\": \"eager\" or \"auto\", or "
        "build the trainer with a newer LibTorch (docs/gpu.md)",
        TORCH_VERSION));
  }
  auto text = std::make_unique<TextTask>(job, device);
  if (!job.model.pretrained.empty()) {
    TUNE_RETURN_IF_ERROR(text->LoadPretrained(job.model.pretrained));
  }
  return std::unique_ptr<Task>(std::move(text));
}

// The forward pass of a batch under autocast for bf16/fp16 (docs/memory.md#the-autocast-guard);
// logits come back as float32 so that the loss is computed in full precision, outside autocast.
// `forward` (logits and targets) under autocast on `device` for bf16/fp16; `cache` false
// during a CUDA graph capture.
template <typename F>
std::pair<torch::Tensor, torch::Tensor> UnderAutocast(Precision precision,
                                                      const torch::Device& device, bool cache,
                                                      F&& forward) {
  if (precision == Precision::kFp32) return forward();
  std::pair<torch::Tensor, torch::Tensor> out;
  {
    internal::AutocastGuard autocast(
        device.type(), precision == Precision::kBf16 ? torch::kBFloat16 : torch::kHalf, cache);
    out = forward();
  }
  out.first = out.first.to(torch::kFloat);
  return out;
}

std::pair<torch::Tensor, torch::Tensor> ForwardIn(Precision precision, Task& task,
                                                  const std::vector<int64_t>& batch, bool train,
                                                  Progress& p) {
  return UnderAutocast(precision, task.device(), /*cache=*/true,
                       [&] { return task.Forward(batch, train, p); });
}

// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's defaults: initial scale 2^16, x2
// after 2000 finite steps, x0.5 after a step with inf/NaN gradients), built from the ATen ops
// GradScaler itself uses. CUDA only in LibTorch 1.13.
class LossScaler {
 public:
  explicit LossScaler(const torch::Device& device)
      : scale_(torch::full({1}, 65536.0, torch::TensorOptions(torch::kFloat).device(device))),
        growth_tracker_(torch::zeros({1}, torch::TensorOptions(torch::kInt).device(device))),
        found_inf_(torch::zeros({1}, torch::TensorOptions(torch::kFloat).device(device))) {}
  torch::Tensor Scale(const torch::Tensor& loss) const { return loss * scale_; }
  // Divides the gradients by the scale in place and sets found_inf() when one of them is inf or
  // NaN, on the device (nothing is read back).
  void Unscale(const std::vector<torch::Tensor>& params) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    found_inf_.zero_();
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, scale_.reciprocal());
  }
  const torch::Tensor& found_inf() const { return found_inf_; }
  // Reads found_inf back: a host wait (the optimizers that cannot skip a step on the device).
  bool Finite() const { return found_inf_.item<float>() == 0.0f; }
  void Update() { at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, 2.0, 0.5, 2000); }

 private:
  torch::Tensor scale_, growth_tracker_, found_inf_;
};

// A backward that fails (out of memory) leaves its pending NodeTasks, and the gradient buffers
// they hold, in the calling thread's autograd ready queue (LibTorch 1.13 and 2.x); the next
// backward on the thread pops and drops them. This backward is that next one.
void DrainAutogradQueue() {
  try {
    torch::Tensor x = torch::ones({1}, torch::TensorOptions().requires_grad(true));
    (x * 2).sum().backward();
  } catch (const std::exception& e) {
    spdlog::warn("Draining the autograd queue after a failed backward: {}", e.what());
  }
}

class TorchTrainer final : public Trainer {
 public:
  TorchTrainer(torch::Device device, int threads, bool count_memory,
               std::optional<int64_t> device_memory)
      : device_(device),
        threads_(threads),
        count_memory_(count_memory),
        device_memory_(device_memory) {}

  std::string name() const override {
    return fmt::format(
        "libtorch {} {}{}", TorchVersion(), device_.str(),
        device_.is_cpu() ? fmt::format(" ({} thread{})", threads_, threads_ == 1 ? "" : "s") : "");
  }

  DeviceMemoryStatus MemoryStatus() const override {
    DeviceMemoryStatus m;
    m.device_memory = device_memory_;
    if (device_.is_cuda()) {
      if (auto s = cuda_memory::GetStats(CudaIndex()); s.ok()) {
        m.allocated = s->allocated;
        m.reserved = s->reserved;
        m.free = s->free;
        m.total = s->total;
      }
    } else if (count_memory_) {
      m.allocated = GetCpuMemoryStats().live_bytes;
    }
    return m;
  }

  Result<std::vector<std::vector<float>>> Predict(const TrainJob& job) override {
    if (job.data == nullptr) return InvalidArgumentError("Predict needs text data");
    try {
      torch::manual_seed(job.hp.seed);
      TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Task> made, MakeTextTask(job, device_));
      Task& task = *made;
      if (const auto bad = task.nonfinite_weights(); !bad.empty()) {
        spdlog::warn(
            "{}: the weights are not all finite: {}; the outputs that depend on them "
            "will not be either",
            task.weights_path(), internal::NonFiniteWeightsText(bad));
      }
      task.SetTraining(false);
      torch::NoGradGuard no_grad;
      Progress p;
      std::vector<std::vector<float>> out(job.data->validation_ids.size());
      const int64_t batch_size =
          job.hp.eval_batch_size > 0 ? job.hp.eval_batch_size : job.hp.batch_size;
      for (const auto& batch : MakeEvalBatches(task.lengths(false), batch_size)) {
        if (InterruptRequested()) return CancelledError("interrupted");
        torch::Tensor logits = task.Forward(batch, /*train=*/false, p)
                                   .first.to(torch::kCPU, torch::kFloat)
                                   .contiguous();
        const int64_t labels = logits.size(1);
        for (size_t row = 0; row < batch.size(); ++row) {
          const float* v = logits.data_ptr<float>() + static_cast<int64_t>(row) * labels;
          out[static_cast<size_t>(batch[row])].assign(v, v + labels);
        }
      }
      return out;
    } catch (const std::exception& e) {
      return InternalError(fmt::format("LibTorch error while predicting: {}", e.what()));
    }
  }

  Result<ScriptModelInfo> CheckTorchScriptModel(const TrainJob& job) override {
    if (job.data == nullptr) return InvalidArgumentError("a TorchScript model trains on text");
    try {
      TUNE_ASSIGN_OR_RETURN(torch::jit::Module module,
                            internal::LoadScriptModule(job.model.torchscript, device_));
      ScriptModelInfo info;
      TUNE_ASSIGN_OR_RETURN(
          info.num_labels,
          internal::CheckScriptForward(module, job.model.torchscript, job.data->num_labels,
                                       std::max<int64_t>(job.data->vocab_size - 1, 4), device_));
      for (const auto& p : internal::ScriptParameters(module)) info.parameters += p.numel();
      return info;
    } catch (const std::exception& e) {
      return InternalError(
          fmt::format("LibTorch error while loading {}: {}", job.model.torchscript, e.what()));
    }
  }

  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) override {
    TrainResult result;
    Progress progress;
    // cuBLAS workspaces an earlier forward (a TorchScript model's check, an earlier run) left
    // allocated would count as this run's baseline, and be freed by it.
    if (device_.is_cuda()) cuda_memory::ReleaseWorkspaces();
    result.memory_before_bytes = MemoryStatus().allocated;
    if (count_memory_) ResetCpuPeakMemory();
    if (device_.is_cuda()) cuda_memory::ResetPeak(CudaIndex());
    spdlog::debug("Memory at training start: {}", DeviceMemoryStatusText(MemoryStatus()));
    Status status;
    RunError run_error;
    try {
      status = Run(job, on_epoch, result, progress);
    } catch (...) {
      run_error = CaughtRunError();
    }
    const std::string& error = run_error.text;
    const bool oom = run_error.oom;
    // Everything the run allocated (model, optimizer state, gradients, activations, the autocast
    // cache, which AutocastGuard clears) was local to Run() and is released by now; the caching
    // allocator still holds the blocks. Except after an error in backward: the autograd engine
    // leaves that backward's pending tasks, holding their gradient buffers, in this thread's
    // ready queue until the next backward pops them. Run a trivial backward to drain it.
    if (!error.empty() && progress.phase == "backward") DrainAutogradQueue();
    if (device_.is_cuda()) {
      if (auto s = cuda_memory::GetStats(CudaIndex()); s.ok()) {
        result.peak_memory_bytes =
            s->allocated_peak - std::max<int64_t>(result.memory_before_bytes, 0);
        result.peak_reserved_bytes = s->reserved_peak;
      }
      cuda_memory::ReleaseWorkspaces();
      if (oom) cuda_memory::EmptyCache();
    } else if (count_memory_) {
      result.peak_memory_bytes =
          GetCpuMemoryStats().peak_bytes - std::max<int64_t>(result.memory_before_bytes, 0);
    }
    if (device_.is_cpu()) internal::ReleaseFreeCpuMemory();
    result.memory_after_bytes = MemoryStatus().allocated;
    if (result.memory_after_bytes > result.memory_before_bytes) {
      spdlog::warn("Memory after the run: {} bytes allocated, {} before it: the run leaked",
                   result.memory_after_bytes, result.memory_before_bytes);
    }
    spdlog::debug("Memory at training end: {}", DeviceMemoryStatusText(MemoryStatus()));
    if (!status.ok()) return status;
    if (!error.empty()) {
      result.end = oom                ? TrainResult::End::kOutOfMemory
                   : run_error.sticky ? TrainResult::End::kDeviceLost
                                      : TrainResult::End::kFailed;
      result.message = error;
      result.details =
          Json{{"phase", progress.phase},
               {"epoch", progress.epoch},
               {"step", progress.step},
               {"batch_shape", Json::array({progress.batch_rows, progress.batch_cols})},
               {"device", device_.str()}};
      if (!oom) {
        result.message = fmt::format("LibTorch error in {} (epoch {}, step {}): {}", progress.phase,
                                     progress.epoch + 1, progress.step, error);
      }
    }
    return result;
  }

 private:
  // A run's CUDA graphs (hyperparams.h's cuda_graphs; docs/config.md, `cuda_graphs`): one graph
  // per micro-batch shape (rows x length bucket) of forward and backward, captured after
  // kGraphWarmupRuns eager runs of that shape, and one of the optimizer step (AdamW with its
  // learning rate as a tensor). Their inputs are tensors each batch and step is copied into.
  // On the CPU (the test hook TUNE_TEST_GRAPH_PATH_ON_CPU=1) there is no CudaGraphRun and
  // nothing is captured: every batch takes the graphs' eager path (length buckets, the loss
  // divided by a tensor, gradients zeroed in place), which tests compare with the plain path.
  struct StepGraphs {
    explicit StepGraphs(const torch::Device& device)
        : run(device.is_cuda() ? std::make_unique<internal::CudaGraphRun>(device) : nullptr),
          inv_examples(torch::ones({}, torch::TensorOptions(torch::kFloat).device(device))),
          lr(torch::zeros({}, torch::TensorOptions(torch::kFloat).device(device))),
          failed(run == nullptr) {}
    struct MicroBatchGraph {
      int64_t eager_runs = 0;
      Task::Batch inputs;    // the graph's inputs: each batch of this shape is copied into them
      torch::Tensor summed;  // its output: the batch's summed loss
      std::unique_ptr<internal::CapturedGraph> graph;
    };
    std::unique_ptr<internal::CudaGraphRun> run;  // null: no captures (the CPU test hook)
    torch::Tensor inv_examples;                   // 1 / the examples of the step's micro-batches
    torch::Tensor lr;  // the scheduled learning rate (AdamW's tensor learning rate)
    std::map<std::pair<int64_t, int64_t>, MicroBatchGraph> micro_batches;
    bool optimizer_capturable = false;
    int64_t optimizer_eager_runs = 0;
    std::unique_ptr<internal::CapturedGraph> optimizer;
    bool failed;  // a capture failed (or none can be made): the rest of the run is eager
  };

  // What one run holds while it trains: its task and model, the optimizer, the fp16 loss
  // scaler, and the step counter and learning rate across epochs.
  struct RunState {
    const TrainJob& job;
    std::unique_ptr<Task> task;
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    Precision precision = Precision::kFp32;
    std::optional<LossScaler> scaler;
    torch::Tensor class_weights;  // on the device; undefined: none
    int64_t total_steps = 0, warmup_steps = 0, eval_batch_size = 0;
    int64_t step = 0;
    double lr = 0;
    std::unique_ptr<StepGraphs> graphs;  // cuda_graphs on; destroyed first (last member)
  };

  // The run's task (text or tabular, pretrained weights loaded), optimizer, precision and
  // schedule; result.end kFailed (and nullopt) for a precision the device cannot run.
  Result<std::optional<RunState>> Prepare(const TrainJob& job, TrainResult& result) {
    const TrainHyperparams& hp = job.hp;
    std::optional<RunState> rs(RunState{job, nullptr});
    if (job.tabular != nullptr) {
      rs->task = std::make_unique<TabularTask>(job, device_);
    } else {
      auto task = MakeTextTask(job, device_);
      if (!task.ok() && IsTorchScriptModel(job.model)) {  // e.g. checkpointing not declared
        result.end = TrainResult::End::kFailed;
        result.message = task.status().message();
        return std::optional<RunState>();
      }
      TUNE_RETURN_IF_ERROR(task.status());
      rs->task = std::move(task).value();
      if (const auto bad = rs->task->nonfinite_weights(); !bad.empty()) {
        NonFinitePretrained(rs->task->weights_path(), bad, result);
        return std::optional<RunState>();
      }
    }
    result.num_parameters = 0;
    for (const auto& t : rs->task->parameters()) result.num_parameters += t.numel();
    std::vector<torch::Tensor> decay, no_decay;
    rs->task->ParameterGroups(decay, no_decay);
    rs->optimizer = MakeOptimizer(hp, decay, no_decay);
    rs->precision = job.tabular != nullptr ? Precision::kFp32 : hp.precision;
    if (Status st = CheckPrecisionForDevice(rs->precision, device_.str()); !st.ok()) {
      result.end = TrainResult::End::kFailed;
      result.message = st.message();
      return std::optional<RunState>();
    }
    if (rs->precision == Precision::kFp16) rs->scaler.emplace(device_);
    if (std::vector<float> w = rs->task->class_weights(); !w.empty()) {
      rs->class_weights = torch::tensor(w, torch::kFloat).to(device_);
    }
    if (device_.is_cuda()) {  // TF32 tensor cores for fp32 matmuls and convolutions, or not
      at::globalContext().setAllowTF32CuBLAS(hp.tf32);
      at::globalContext().setAllowTF32CuDNN(hp.tf32);
    }
    const auto n_train = static_cast<int64_t>(rs->task->lengths(true).size());
    const int64_t batches_per_epoch = (n_train + hp.batch_size - 1) / hp.batch_size;
    const int64_t steps_per_epoch = (batches_per_epoch + hp.grad_accum - 1) / hp.grad_accum;
    rs->total_steps = steps_per_epoch * hp.epochs;
    rs->warmup_steps =
        static_cast<int64_t>(std::ceil(hp.warmup_ratio * static_cast<double>(rs->total_steps)));
    rs->eval_batch_size = hp.eval_batch_size > 0 ? hp.eval_batch_size : hp.batch_size;
    spdlog::debug("Training {} ({} parameters): {} batches, {} optimizer steps per epoch",
                  job.model.name, result.num_parameters, batches_per_epoch, steps_per_epoch);
    return rs;
  }

  // One micro-batch's forward and backward; adds its summed loss to `loss_sum`, a double on the
  // device (nothing is read back: the GPU never waits for the host here).
  void MicroBatch(RunState& rs, const std::vector<int64_t>& batch, int64_t group_examples,
                  torch::Tensor& loss_sum, Progress& p) {
    if (rs.graphs) {
      GraphedMicroBatch(rs, batch, group_examples, loss_sum, p);
      return;
    }
    auto [logits, targets] = ForwardIn(rs.precision, *rs.task, batch, /*train=*/true, p);
    torch::Tensor summed = SummedLoss(rs.task->problem_type(), logits, targets, rs.class_weights);
    p.phase = "backward";
    // Each micro-batch's summed loss is divided by the examples of the whole group, so that k
    // micro-batches give the gradient of one k-times larger batch. Backward runs outside
    // autocast (it follows the forward's dtypes by itself).
    torch::Tensor loss = summed / static_cast<double>(group_examples);
    (rs.scaler ? rs.scaler->Scale(loss) : loss).backward();
    loss_sum.add_(summed.detach());
  }

  // Whether this run captures CUDA graphs: cuda_graphs "on" (a request; "auto" is off until a
  // card has measured them), a CUDA device, a build that can, a transformer on text.
  bool UsesCudaGraphs(const RunState& rs) const {
    if (rs.job.hp.cuda_graphs != CudaGraphs::kOn) return false;
    if (device_.is_cpu()) {
      const char* hook = std::getenv("TUNE_TEST_GRAPH_PATH_ON_CPU");
      return hook != nullptr && std::string_view(hook) == "1" && rs.task->Capturable();
    }
    if (!device_.is_cuda()) return false;
    if (!internal::CudaGraphsBuilt()) {
      spdlog::warn(
          "cuda_graphs 'on': this trainer (LibTorch {}) cannot capture CUDA graphs (they "
          "need a LibTorch with CUDA, 2.4 or newer); the run is eager",
          TORCH_VERSION);
      return false;
    }
    if (!rs.task->Capturable()) {
      spdlog::info("cuda_graphs 'on': TorchScript and tabular models train without CUDA graphs");
      return false;
    }
    return true;
  }

  void CaptureFailed(RunState& rs, const char* what, const std::string& error) {
    rs.graphs->failed = true;
    spdlog::warn("CUDA graphs: capturing {} failed, the rest of the run is eager: {}", what, error);
  }

  static Task::Batch ToDevice(const Task::Batch& b, const torch::Device& device) {
    auto to = [&](const torch::Tensor& t) {
      if (!t.defined() || device.is_cpu()) return t;
      return t.pin_memory().to(device, /*non_blocking=*/true);
    };
    return {to(b.input_ids), to(b.attention_mask), to(b.token_type_ids), to(b.targets)};
  }

  static void CopyInto(Task::Batch& to, const Task::Batch& from) {
    auto copy = [](torch::Tensor& dst, const torch::Tensor& src) {
      if (src.defined()) dst.copy_(src.pin_memory(), /*non_blocking=*/true);
    };
    copy(to.input_ids, from.input_ids);
    copy(to.attention_mask, from.attention_mask);
    copy(to.token_type_ids, from.token_type_ids);
    copy(to.targets, from.targets);
  }

  // A micro-batch's forward and backward from tensors on the device, the loss divided by the
  // group's examples as a tensor: what a graph captures (autocast's cache off then). Returns
  // the summed loss.
  torch::Tensor MicroBatchOn(RunState& rs, const Task::Batch& b, bool capturing, Progress& p) {
    p.phase = "forward";
    auto [logits, targets] = UnderAutocast(rs.precision, rs.task->device(), !capturing, [&] {
      return std::make_pair(rs.task->LogitsOf(b), b.targets);
    });
    torch::Tensor summed = SummedLoss(rs.task->problem_type(), logits, targets, rs.class_weights);
    p.phase = "backward";
    torch::Tensor loss = summed * rs.graphs->inv_examples;
    (rs.scaler ? rs.scaler->Scale(loss) : loss).backward();
    return summed.detach();
  }

  // MicroBatch with CUDA graphs: the batch padded to its length bucket; the first
  // kGraphWarmupRuns batches of a shape eager, the next one captured, the rest replayed.
  void GraphedMicroBatch(RunState& rs, const std::vector<int64_t>& batch, int64_t group_examples,
                         torch::Tensor& loss_sum, Progress& p) {
    StepGraphs& g = *rs.graphs;
    const Task::Batch host = rs.task->HostBatch(batch, kGraphLengthMultiple, p);
    g.inv_examples.fill_(1.0 / static_cast<double>(group_examples));
    StepGraphs::MicroBatchGraph& m =
        g.micro_batches[{host.input_ids.size(0), host.input_ids.size(1)}];
    if (m.graph) {
      CopyInto(m.inputs, host);
      p.phase = "forward";
      m.graph->Replay();
      loss_sum.add_(m.summed);
      return;
    }
    if (g.failed || m.eager_runs < kGraphWarmupRuns) {
      ++m.eager_runs;
      loss_sum.add_(MicroBatchOn(rs, ToDevice(host, device_), /*capturing=*/false, p));
      return;
    }
    m.inputs = ToDevice(host, device_);
    std::string error;
    m.graph = g.run->Capture([&] { m.summed = MicroBatchOn(rs, m.inputs, /*capturing=*/true, p); },
                             error);
    if (!m.graph) {
      DrainAutogradQueue();
      CaptureFailed(rs, "a micro-batch's forward and backward", error);
      loss_sum.add_(MicroBatchOn(rs, m.inputs, /*capturing=*/false, p));
      return;
    }
    spdlog::debug("CUDA graphs: captured the micro-batch of {} x {}", host.input_ids.size(0),
                  host.input_ids.size(1));
    m.graph->Replay();
    loss_sum.add_(m.summed);
  }

  // The optimizer step's work on the device: fp16 unscaling, clipping, the step, the scale's
  // update and zero_grad, which sets the gradients to None, or with CUDA graphs zeroes them in
  // place (their storage is what the graphs accumulate into).
  void OptimizerWork(RunState& rs) {
    const TrainHyperparams& hp = rs.job.hp;
    const std::vector<torch::Tensor> params = rs.task->parameters();
    auto* adamw = dynamic_cast<internal::FusedAdamW*>(rs.optimizer.get());
    if (rs.scaler) rs.scaler->Unscale(params);
    const bool finite = !rs.scaler || adamw != nullptr || rs.scaler->Finite();
    if (finite && hp.max_grad_norm > 0) ClipGradients(params, hp.max_grad_norm, *rs.optimizer);
    if (rs.scaler && adamw != nullptr) adamw->set_found_inf(rs.scaler->found_inf());
    if (finite) rs.optimizer->step();
    if (rs.scaler) rs.scaler->Update();
    for (const torch::Tensor& t : params) {
      if (!rs.graphs) {
        t.mutable_grad().reset();  // zero_grad(set_to_none)
      } else if (t.grad().defined()) {
        t.mutable_grad().zero_();
      }
    }
  }

  // OptimizerWork with CUDA graphs: eager for kGraphWarmupRuns steps (AdamW's state appears at
  // the first), then captured once and replayed, the learning rate read from StepGraphs::lr.
  void GraphedOptimizerWork(RunState& rs) {
    StepGraphs& g = *rs.graphs;
    g.lr.fill_(rs.lr);
    if (g.optimizer) {
      g.optimizer->Replay();
      return;
    }
    if (g.failed || !g.optimizer_capturable || g.optimizer_eager_runs < kGraphWarmupRuns) {
      ++g.optimizer_eager_runs;
      OptimizerWork(rs);
      return;
    }
    std::string error;
    g.optimizer = g.run->Capture([&] { OptimizerWork(rs); }, error);
    if (!g.optimizer) {
      CaptureFailed(rs, "the optimizer step", error);
      OptimizerWork(rs);
      return;
    }
    spdlog::debug("CUDA graphs: captured the optimizer step");
    g.optimizer->Replay();
  }

  // The epoch's summed training loss so far, read back (a host wait): false, with result.end
  // kNonFinite, when it is not finite. Called every kFiniteCheckSteps optimizer steps and at the
  // epoch's end.
  bool LossFinite(const RunState& rs, const torch::Tensor& loss_sum, int64_t epoch, double& loss,
                  TrainResult& result) const {
    loss = loss_sum.item<double>();
    if (std::isfinite(loss)) return true;
    result.end = TrainResult::End::kNonFinite;
    result.message = fmt::format(
        "the training loss is {} at epoch {}, found at step {} (checked every {} optimizer steps "
        "and at each epoch's end; learning rate {:.3g}); the run diverged",
        FormatNumber(loss), epoch + 1, rs.step, kFiniteCheckSteps, rs.lr);
    result.details = NonFiniteAttrToJson({.where = "training_loss",
                                          .epoch = epoch + 1,
                                          .step = rs.step,
                                          .value = FormatNumber(loss)});
    return false;
  }

  // A checkpoint whose weights are not all finite: the run ends before it starts.
  static void NonFinitePretrained(const std::string& path,
                                  const std::vector<internal::PretrainedLoadReport::NonFinite>& bad,
                                  TrainResult& result) {
    int64_t count = 0, total = 0;
    for (const auto& t : bad) {
      count += t.count;
      total += t.total;
    }
    result.end = TrainResult::End::kNonFinite;
    result.message = fmt::format(
        "the pretrained weights in {} are not all finite (the run diverged before its first "
        "step): {}",
        path, internal::NonFiniteWeightsText(bad));
    result.details = NonFiniteAttrToJson({.where = "weights",
                                          .count = count,
                                          .total = total,
                                          .name = bad.front().name,
                                          .value = FormatNumber(bad.front().example)});
  }

  // The optimizer step after a group of micro-batches: fp16 unscaling (a step with inf/NaN
  // gradients is skipped and the scale backs off, as torch.cuda.amp.GradScaler), clipping, the
  // scheduled learning rate, zero_grad. With fp16, AdamW skips the step on the device (clipping
  // inf gradients gives NaN ones, which the skipped step never reads), so a step waits for the
  // host nowhere; SGD reads the flag back.
  void OptimizerStep(RunState& rs, Progress& p) {
    const TrainHyperparams& hp = rs.job.hp;
    p.phase = "optimizer_step";
    rs.lr =
        LearningRateAt(hp.scheduler, hp.learning_rate, rs.step, rs.total_steps, rs.warmup_steps);
    SetLearningRate(*rs.optimizer, rs.lr);
    if (rs.graphs) {
      GraphedOptimizerWork(rs);
    } else {
      OptimizerWork(rs);
    }
    ++rs.step;
    p.step = rs.step;
  }

  // Evaluates after a step (eval_strategy "steps"): the epoch so far's training loss into a
  // fresh EpochMetrics, then Evaluation(). Ok(false) when the run ended (result.end says why).
  using StepEvaluation = std::function<Result<bool>(EpochMetrics&)>;

  // One epoch of training; its mean training loss into m.train_loss. Ok(false) when the run ended
  // (interrupted, a non-finite loss, or stopped at an evaluation: result.end says which).
  // `evaluate_at_step` runs after every eval_steps-th optimizer step (eval_strategy "steps").
  Result<bool> TrainEpoch(RunState& rs, int64_t epoch, std::mt19937_64& rng, EpochMetrics& m,
                          TrainResult& result, Progress& p,
                          const StepEvaluation& evaluate_at_step) {
    const TrainHyperparams& hp = rs.job.hp;
    rs.task->SetTraining(true);
    const auto batches =
        MakeTrainBatches(rs.task->lengths(true), hp.batch_size, hp.bucket_batches, rng);
    torch::Tensor loss_sum =
        torch::zeros({}, torch::TensorOptions(torch::kDouble).device(rs.task->device()));
    double loss = 0;
    int64_t seen = 0;
    for (size_t g = 0; g < batches.size(); g += static_cast<size_t>(hp.grad_accum)) {
      const size_t g_end = std::min(batches.size(), g + static_cast<size_t>(hp.grad_accum));
      int64_t group_examples = 0;
      for (size_t b = g; b < g_end; ++b) group_examples += static_cast<int64_t>(batches[b].size());
      // Only a step callback (tests, the trajectory check) reads each step's loss back.
      const double group_start = rs.job.on_step ? loss_sum.item<double>() : 0.0;
      for (size_t b = g; b < g_end; ++b) {
        if (InterruptRequested()) {
          result.end = TrainResult::End::kInterrupted;
          return false;
        }
        MicroBatch(rs, batches[b], group_examples, loss_sum, p);
        seen += static_cast<int64_t>(batches[b].size());
      }
      OptimizerStep(rs, p);
      StickyCudaErrorHook::Get().AtStep(rs.step);
      if (StickyCudaErrorHook::Get().WantsRealError(rs.step)) LaunchDeviceSideAssert(rs);
      if (rs.job.on_step) {
        if (!LossFinite(rs, loss_sum, epoch, loss, result)) return false;
        const double group_loss = loss - group_start;
        const auto first = batches.begin() + static_cast<std::ptrdiff_t>(g);
        const auto last = batches.begin() + static_cast<std::ptrdiff_t>(g_end);
        rs.job.on_step(StepRecord{rs.step, group_loss / static_cast<double>(group_examples), rs.lr,
                                  std::vector<std::vector<int64_t>>(first, last)});
      } else if (rs.step % kFiniteCheckSteps == 0 &&
                 !LossFinite(rs, loss_sum, epoch, loss, result)) {
        return false;
      }
      if (hp.eval_strategy == EvalStrategy::kSteps && rs.step % hp.eval_steps == 0) {
        if (!LossFinite(rs, loss_sum, epoch, loss, result)) return false;
        EpochMetrics at;
        at.epoch = epoch;
        at.train_loss = seen > 0 ? loss / static_cast<double>(seen) : 0.0;
        at.optimizer_steps = rs.step;
        at.learning_rate = rs.lr;
        TUNE_ASSIGN_OR_RETURN(bool go_on, evaluate_at_step(at));
        if (!go_on) return false;
        rs.task->SetTraining(true);
      }
    }
    if (!LossFinite(rs, loss_sum, epoch, loss, result)) return false;
    m.epoch = epoch;
    m.train_loss = seen > 0 ? loss / static_cast<double>(seen) : 0.0;
    m.optimizer_steps = rs.step;
    m.learning_rate = rs.lr;
    return true;
  }

  // Trains; throws what LibTorch throws. A non-OK Status only when on_epoch fails.
  // TUNE_TEST_STICKY_CUDA_ERROR=K:real (torch_cuda_errors.h): a loss over a label out of range,
  // which on CUDA trips the kernel's device-side assert; read back, so it is reported here.
  static void LaunchDeviceSideAssert(RunState& rs) {
    const auto options = torch::TensorOptions().device(rs.task->device());
    const torch::Tensor logits = torch::zeros({2, 3}, options.dtype(torch::kFloat));
    const torch::Tensor labels = torch::full({2}, 7, options.dtype(torch::kLong));
    (void)torch::nll_loss(logits, labels).item<float>();
  }

  Status Run(const TrainJob& job, const EpochCallback& on_epoch, TrainResult& result, Progress& p) {
    StickyCudaErrorHook::Get().AtRunStart();
    torch::manual_seed(job.hp.seed);
    std::mt19937_64 rng(job.hp.seed);
    TUNE_ASSIGN_OR_RETURN(std::optional<RunState> prepared, Prepare(job, result));
    if (!prepared) return Status::Ok();
    RunState& rs = *prepared;
    if (UsesCudaGraphs(rs)) {
      rs.graphs = std::make_unique<StepGraphs>(device_);
      auto* adamw = dynamic_cast<internal::FusedAdamW*>(rs.optimizer.get());
      if (adamw != nullptr && internal::FusedDeviceLrTensor() && rs.graphs->run != nullptr) {
        adamw->set_lr_tensor(rs.graphs->lr);
        rs.graphs->optimizer_capturable = true;
      }
    }
    auto since = std::chrono::steady_clock::now();  // the previous evaluation's end
    // Evaluates, asks on_epoch, keeps the weights of the best evaluation: Ok(false) when the
    // run ends here (stopped, interrupted).
    auto evaluation = [&](EpochMetrics& m) -> Result<bool> {
      const auto eval_start = std::chrono::steady_clock::now();
      if (!Evaluate(rs, m, p, result)) return false;
      const auto now = std::chrono::steady_clock::now();
      m.seconds = std::chrono::duration<double>(now - since).count();
      m.eval_seconds = std::chrono::duration<double>(now - eval_start).count();
      result.epochs.push_back(m);
      p.phase = "callback";
      TUNE_ASSIGN_OR_RETURN(EpochDecision decision, on_epoch(m));
      since = std::chrono::steady_clock::now();
      if (decision == EpochDecision::kStop) {
        result.end = TrainResult::End::kStopped;
        return false;
      }
      if (decision == EpochDecision::kKeep && job.data != nullptr && !job.save_weights.empty()) {
        p.phase = "saving";
        TUNE_RETURN_IF_ERROR(rs.task->Save(job.save_weights));
      }
      return true;
    };
    const bool by_steps = job.hp.eval_strategy == EvalStrategy::kSteps;
    for (int64_t epoch = 0; epoch < job.hp.epochs; ++epoch) {
      p.epoch = epoch;
      EpochMetrics m;
      TUNE_ASSIGN_OR_RETURN(bool trained, TrainEpoch(rs, epoch, rng, m, result, p, evaluation));
      if (!trained) return Status::Ok();
      // By steps, the end of training is evaluated too, unless its last step just was.
      const bool last = epoch + 1 == job.hp.epochs;
      if (by_steps && !(last && rs.step % job.hp.eval_steps != 0)) continue;
      TUNE_ASSIGN_OR_RETURN(bool go_on, evaluation(m));
      if (!go_on) return Status::Ok();
    }
    // An error of a kernel still queued surfaces here, in the run that caused it.
    p.phase = "synchronize";
    if (device_.is_cuda()) torch::cuda::synchronize(CudaIndex());
    StickyCudaErrorHook::Get().AtSync();
    result.end = TrainResult::End::kCompleted;
    return Status::Ok();
  }

  // The validation loss and every metric of the problem type into `m`. False when the run ends
  // here, result.end saying why: kInterrupted, or kNonFinite when an output (a probability, or
  // regression's value) or the validation loss is not finite. The loss, outputs and targets stay
  // on the device until the last batch (one read back per evaluation).
  bool Evaluate(RunState& rs, EpochMetrics& m, Progress& p, TrainResult& result) {
    Task& task = *rs.task;
    task.SetTraining(false);
    torch::NoGradGuard no_grad;
    const ProblemType type = task.problem_type();
    std::vector<torch::Tensor> target_parts, output_parts;
    torch::Tensor loss_sum =
        torch::zeros({}, torch::TensorOptions(torch::kDouble).device(task.device()));
    for (const auto& batch : MakeEvalBatches(task.lengths(false), rs.eval_batch_size)) {
      if (InterruptRequested()) {
        result.end = TrainResult::End::kInterrupted;
        return false;
      }
      auto [logits, y] = ForwardIn(rs.precision, task, batch, /*train=*/false, p);
      loss_sum.add_(SummedLoss(type, logits, y, rs.class_weights));
      const torch::Tensor out = logits.to(torch::kFloat);
      // Probabilities for classification (softmax / one sigmoid per label), the value for
      // regression.
      output_parts.push_back(type == ProblemType::kSingleLabel  ? torch::softmax(out, 1)
                             : type == ProblemType::kMultiLabel ? torch::sigmoid(out)
                                                                : out.reshape({-1}));
      target_parts.push_back(y);
    }
    m.problem_type = type;
    if (target_parts.empty()) return true;
    const torch::Tensor outputs = torch::cat(output_parts).to(torch::kCPU).contiguous();
    const torch::Tensor targets = torch::cat(target_parts).to(torch::kCPU).contiguous();
    const auto n = targets.size(0);
    m.validation_loss = loss_sum.item<double>() / static_cast<double>(n);
    std::vector<float> out(outputs.data_ptr<float>(), outputs.data_ptr<float>() + outputs.numel());
    if (rs.job.on_eval_outputs) rs.job.on_eval_outputs(rs.step, out);
    if (!EvaluationFinite(rs, m, out, n, result)) return false;
    if (type == ProblemType::kRegression) {
      const std::vector<double> predictions(out.begin(), out.end());
      const std::vector<double> values(targets.data_ptr<float>(),
                                       targets.data_ptr<float>() + targets.numel());
      m.regression = ComputeRegressionMetrics(values, predictions);
      return true;
    }
    if (type == ProblemType::kMultiLabel) {
      const std::vector<float> values(targets.data_ptr<float>(),
                                      targets.data_ptr<float>() + targets.numel());
      m.classification =
          ComputeMultiLabelMetrics(values, out, task.num_labels(), rs.job.hp.threshold);
    } else {
      const torch::Tensor predicted = outputs.argmax(1).contiguous();
      const torch::Tensor labels = targets.to(torch::kLong).contiguous();
      m.classification = ComputeClassificationMetrics(
          std::vector<int64_t>(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n),
          std::vector<int64_t>(predicted.data_ptr<int64_t>(), predicted.data_ptr<int64_t>() + n),
          task.num_labels(), &out);
    }
    return true;
  }

  // False, with result.end kNonFinite, when an evaluation output or the validation loss is not
  // finite: the outputs first (the logits, or what the model made of them), then the loss.
  static bool EvaluationFinite(const RunState& rs, const EpochMetrics& m,
                               const std::vector<float>& out, int64_t n, TrainResult& result) {
    const std::vector<int64_t> rows =
        NonFiniteRows(out, static_cast<size_t>(n > 0 ? static_cast<int64_t>(out.size()) / n : 1));
    if (rows.empty() && std::isfinite(m.validation_loss)) return true;
    NonFiniteAttr a{.where = rows.empty() ? "validation_loss" : "logits",
                    .epoch = m.epoch + 1,
                    .step = rs.step,
                    .count = rows.empty() ? 0 : static_cast<int64_t>(rows.size()),
                    .total = rows.empty() ? 0 : n};
    std::string what;
    if (rows.empty()) {
      a.value = FormatNumber(m.validation_loss);
      what = fmt::format("the validation loss is {}", a.value);
    } else {
      for (float v : out) {
        if (!std::isfinite(v)) {
          a.value = FormatNumber(v);
          break;
        }
      }
      std::vector<int64_t> shown;
      for (int64_t r : rows) shown.push_back(r + 1);
      what = fmt::format(
          "the model's outputs are not finite (e.g. {}) on {} of {} validation examples "
          "(examples {})",
          a.value, rows.size(), n, ShortList(shown));
    }
    result.end = TrainResult::End::kNonFinite;
    result.message =
        fmt::format("{} at the evaluation of epoch {}, step {} (the training loss was {:.4g})",
                    what, m.epoch + 1, rs.step, m.train_loss);
    result.details = NonFiniteAttrToJson(a);
    return false;
  }

  int CudaIndex() const { return device_.has_index() ? device_.index() : 0; }

  torch::Device device_;
  int threads_;
  bool count_memory_;
  std::optional<int64_t> device_memory_;  // the limit enforced; unset: none
};

}  // namespace

namespace {
// Whether this LibTorch has CUDA: libtorch_cuda's hooks are registered (it is linked and loaded)
// and tune_torch has its CUDA memory backend. Not at::hasCUDA(), which is false on a CUDA build
// that finds no device.
bool CudaCompiledIn() { return at::detail::getCUDAHooks().hasCUDART() && cuda_memory::Compiled(); }

// Why CUDA finds no device here, for messages.
std::string NoCudaDeviceText() {
  const std::string reason = cuda_memory::NoDeviceReason();
  return reason.empty() ? "it reports a device, LibTorch does not" : reason;
}
}  // namespace

std::string TorchVersion() { return TORCH_VERSION; }

std::string TorchCudaStatus() {
  if (!CudaCompiledIn()) {
    return "CUDA not compiled in (a CPU-only LibTorch)";
  }
  if (!torch::cuda::is_available()) {
    return "CUDA compiled in, not usable here (no CUDA device or driver visible: " +
           NoCudaDeviceText() + ")";
  }
  const auto n = static_cast<int64_t>(torch::cuda::device_count());
  return fmt::format("{} ({} device{})", kCudaUsable, n, n == 1 ? "" : "s");
}

Result<std::unique_ptr<Trainer>> NewTorchTrainer(const TorchTrainerOptions& options) {
  (void)StickyCudaErrorHook::Init(options.restarts);
  TUNE_ASSIGN_OR_RETURN(const Device parsed, ParseDevice(options.device));
  const torch::Device device =
      parsed.is_cuda()
          ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(parsed.index.value_or(-1)))
          : torch::Device(torch::kCPU);
  if (device.is_cuda()) {
    if (const std::string setting = cuda_memory::ConfigureAllocator(); !setting.empty()) {
      spdlog::debug("CUDA caching allocator: {}", setting);
    }
    if (!CudaCompiledIn()) {
      return FailedPreconditionError(fmt::format(
          "device '{}': this LibTorch {} was built without CUDA (Debian's libtorch is CPU-only); "
          "use \"device\": \"cpu\" or build tune against a CUDA LibTorch",
          options.device, TorchVersion()));
    }
    if (!torch::cuda::is_available()) {
      return FailedPreconditionError(
          fmt::format("device '{}': no CUDA device is visible to this process (CUDA runtime: {}); "
                      "use \"device\": \"cpu\" or run on a machine with an NVIDIA GPU and driver",
                      options.device, NoCudaDeviceText()));
    }
    const auto count = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= count) {
      return FailedPreconditionError(fmt::format("device '{}': only {} CUDA device{} visible",
                                                 options.device, count,
                                                 count == 1 ? " is" : "s are"));
    }
  }
  int threads = static_cast<int>(options.threads);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (device.is_cpu()) {
    at::set_num_threads(threads);
    // Keeps the freed activations and gradients of a step in the heap for the next one.
    internal::ConfigureCpuMalloc();
  }
  const std::optional<int64_t> device_memory =
      options.device_memory && *options.device_memory > 0 ? options.device_memory : std::nullopt;
  const bool count_memory = device.is_cpu() && (options.count_cpu_memory || device_memory);
  if (count_memory) {
    InstallCountingCpuAllocator();
    SetCpuDeviceMemory(device_memory);
  }
  if (device.is_cuda() && device_memory) {
    TUNE_RETURN_IF_ERROR(
        cuda_memory::SetDeviceMemory(device.has_index() ? device.index() : 0, *device_memory));
  }
  return std::unique_ptr<Trainer>(
      std::make_unique<TorchTrainer>(device, threads, count_memory, device_memory));
}

}  // namespace tune

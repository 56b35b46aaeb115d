// The LibTorch trainer (torch_trainer.h).
#include "tune/train/torch_trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <random>
#include <thread>

#include "torch/torch_models.h"
#include "tune/interrupt.h"
#include "tune/memory/counting_cpu_allocator.h"
#include "tune/train/batching.h"
#include "tune/train/metrics.h"

namespace tune {
namespace {

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
// c10::Error, cuBLAS/cuDNN allocation failures (memory-reference §3.1).
bool LooksLikeOutOfMemory(const std::string& what) {
  static const char* const kPatterns[] = {"out of memory", "can't allocate memory",
                                          "not enough memory", "CUBLAS_STATUS_ALLOC_FAILED",
                                          "CUDNN_STATUS_ALLOC_FAILED"};
  for (const char* p : kPatterns) {
    if (what.find(p) != std::string::npos) return true;
  }
  return false;
}

torch::Tensor ToTensor(const std::vector<int64_t>& v, int64_t rows, int64_t cols,
                       const torch::Device& device) {
  std::vector<int64_t> shape =
      cols > 0 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
  // from_blob borrows the vector; clone() owns a copy (and .to() moves it to the device).
  torch::Tensor t = torch::from_blob(const_cast<int64_t*>(v.data()), shape, torch::kLong);
  return device.is_cpu() ? t.clone() : t.to(device);
}

void SetLearningRate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainHyperparams& hp,
                                                       TransformerClassifier& model) {
  // No weight decay on biases and LayerNorm weights (Hugging Face's Trainer does the same).
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const bool exempt = name.size() >= 4 && (name.compare(name.size() - 4, 4, "bias") == 0 ||
                                             name.find("LayerNorm") != std::string::npos);
    (exempt ? no_decay : decay).push_back(item.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (hp.optimizer == OptimizerKind::kAdamW) {
    auto options = [&](double wd) {
      auto o = std::make_unique<torch::optim::AdamWOptions>(hp.learning_rate);
      o->betas({hp.adam_beta1, hp.adam_beta2}).eps(hp.adam_epsilon).weight_decay(wd);
      return o;
    };
    groups.emplace_back(decay, options(hp.weight_decay));
    groups.emplace_back(no_decay, options(0.0));
    return std::make_unique<torch::optim::AdamW>(groups,
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

class TorchTrainer final : public Trainer {
 public:
  TorchTrainer(torch::Device device, int threads, bool count_memory)
      : device_(device), threads_(threads), count_memory_(count_memory) {}

  std::string name() const override {
    return fmt::format("libtorch {} {}{}", TorchVersion(), device_.str(),
                       device_.is_cpu() ? fmt::format(" ({} thread{})", threads_, threads_ == 1 ? "" : "s")
                                        : "");
  }

  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) override {
    TrainResult result;
    Progress progress;
    int64_t baseline = 0;
    if (count_memory_) {
      ResetCpuPeakMemory();
      baseline = GetCpuMemoryStats().live_bytes;
    }
    Status status;
    std::string error;
    bool oom = false;
    try {
      status = Run(job, on_epoch, result, progress);
    } catch (const c10::OutOfMemoryError& e) {
      oom = true;
      error = e.what_without_backtrace();
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
      oom = LooksLikeOutOfMemory(error);
    } catch (const std::bad_alloc& e) {
      oom = true;
      error = std::string("std::bad_alloc: ") + e.what();
    } catch (const std::exception& e) {
      error = e.what();
    }
    // Everything the run allocated (model, optimizer state, gradients, activations) was local to
    // Run() and is released by now.
    if (count_memory_) {
      const CpuMemoryStats stats = GetCpuMemoryStats();
      result.peak_memory_bytes = stats.peak_bytes - baseline;
      if (stats.live_bytes != baseline) {
        spdlog::warn("Memory after the run: {} bytes live, {} before it", stats.live_bytes,
                     baseline);
      }
    }
    if (!status.ok()) return status;
    if (!error.empty()) {
      result.end = oom ? TrainResult::End::kOutOfMemory : TrainResult::End::kFailed;
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
  // Trains; throws what LibTorch throws. A non-OK Status only when on_epoch fails.
  Status Run(const TrainJob& job, const EpochCallback& on_epoch, TrainResult& result, Progress& p) {
    const TrainHyperparams& hp = job.hp;
    const TextTrainData& data = *job.data;
    const auto started = std::chrono::steady_clock::now();
    torch::manual_seed(hp.seed);
    std::mt19937_64 rng(hp.seed);

    TransformerClassifier model(internal::MakeEncoderConfig(job.model, hp, data.pad_id),
                                internal::MakeHeadConfig(job.model, hp, data.num_labels));
    model->to(device_);
    result.num_parameters = 0;
    for (const auto& t : model->parameters()) result.num_parameters += t.numel();
    std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(hp, model);

    std::vector<int64_t> train_lengths, eval_lengths;
    for (const auto& ids : data.train_ids)
      train_lengths.push_back(SequenceLength(ids.size(), hp.max_length));
    for (const auto& ids : data.validation_ids)
      eval_lengths.push_back(SequenceLength(ids.size(), hp.max_length));
    const auto n_train = static_cast<int64_t>(data.train_ids.size());
    const int64_t batches_per_epoch = (n_train + hp.batch_size - 1) / hp.batch_size;
    const int64_t steps_per_epoch = (batches_per_epoch + hp.grad_accum - 1) / hp.grad_accum;
    const int64_t total_steps = steps_per_epoch * hp.epochs;
    const auto warmup_steps =
        static_cast<int64_t>(std::ceil(hp.warmup_ratio * static_cast<double>(total_steps)));
    const int64_t eval_batch_size = hp.eval_batch_size > 0 ? hp.eval_batch_size : hp.batch_size;
    spdlog::debug("Training {} ({} parameters): {} batches, {} optimizer steps per epoch",
                  job.model.name, result.num_parameters, batches_per_epoch, steps_per_epoch);

    int64_t step = 0;
    double lr = 0;
    auto epoch_start = started;
    for (int64_t epoch = 0; epoch < hp.epochs; ++epoch) {
      p.epoch = epoch;
      epoch_start = std::chrono::steady_clock::now();
      model->train();
      const auto batches = MakeTrainBatches(train_lengths, hp.batch_size, hp.bucket_batches, rng);
      double loss_sum = 0;
      int64_t seen = 0;
      for (size_t g = 0; g < batches.size(); g += static_cast<size_t>(hp.grad_accum)) {
        const size_t g_end = std::min(batches.size(), g + static_cast<size_t>(hp.grad_accum));
        // Each micro-batch's summed loss is divided by the examples of the whole group, so that k
        // micro-batches give the gradient of one k-times larger batch.
        int64_t group_examples = 0;
        for (size_t b = g; b < g_end; ++b)
          group_examples += static_cast<int64_t>(batches[b].size());
        for (size_t b = g; b < g_end; ++b) {
          if (InterruptRequested()) {
            result.end = TrainResult::End::kInterrupted;
            return Status::Ok();
          }
          TokenBatch tb =
              BuildTokenBatch(data.train_ids, data.train_labels, batches[b], hp.max_length,
                              hp.padding, data.pad_id, data.cls_id, data.sep_id);
          p.batch_rows = tb.rows;
          p.batch_cols = tb.cols;
          p.phase = "forward";
          torch::Tensor ids = ToTensor(tb.input_ids, tb.rows, tb.cols, device_);
          torch::Tensor mask = ToTensor(tb.attention_mask, tb.rows, tb.cols, device_);
          torch::Tensor labels = ToTensor(tb.labels, tb.rows, 0, device_);
          torch::Tensor summed = torch::nn::functional::cross_entropy(
              model->forward(ids, mask), labels,
              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
          const double batch_loss = summed.item<double>();
          if (!std::isfinite(batch_loss)) {
            result.end = TrainResult::End::kFailed;
            result.message = fmt::format(
                "the training loss is {} at epoch {}, step {} (learning "
                "rate {:.3g}); the run diverged",
                batch_loss, epoch + 1, step, lr);
            return Status::Ok();
          }
          p.phase = "backward";
          (summed / static_cast<double>(group_examples)).backward();
          loss_sum += batch_loss;
          seen += tb.rows;
        }
        p.phase = "optimizer_step";
        if (hp.max_grad_norm > 0)
          torch::nn::utils::clip_grad_norm_(model->parameters(), hp.max_grad_norm);
        lr = LearningRateAt(hp.scheduler, hp.learning_rate, step, total_steps, warmup_steps);
        SetLearningRate(*optimizer, lr);
        optimizer->step();
        model->zero_grad(/*set_to_none=*/true);
        ++step;
        p.step = step;
      }

      p.phase = "evaluation";
      EpochMetrics m;
      m.epoch = epoch;
      m.train_loss = seen > 0 ? loss_sum / static_cast<double>(seen) : 0.0;
      m.optimizer_steps = step;
      m.learning_rate = lr;
      if (!Evaluate(model, data, hp, eval_lengths, eval_batch_size, m, p)) {
        result.end = TrainResult::End::kInterrupted;
        return Status::Ok();
      }
      m.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      result.epochs.push_back(m);
      p.phase = "callback";
      Result<EpochDecision> decision = on_epoch(m);
      if (!decision.ok()) return decision.status();
      if (*decision == EpochDecision::kStop) {
        result.end = TrainResult::End::kStopped;
        return Status::Ok();
      }
    }
    result.end = TrainResult::End::kCompleted;
    return Status::Ok();
  }

  // Validation loss, accuracy and macro-F1 into `m`; false when interrupted.
  bool Evaluate(TransformerClassifier& model, const TextTrainData& data, const TrainHyperparams& hp,
                const std::vector<int64_t>& lengths, int64_t batch_size, EpochMetrics& m,
                Progress& p) {
    model->eval();
    torch::NoGradGuard no_grad;
    std::vector<int64_t> labels, predictions;
    double loss_sum = 0;
    for (const auto& batch : MakeEvalBatches(lengths, batch_size)) {
      if (InterruptRequested()) return false;
      TokenBatch tb =
          BuildTokenBatch(data.validation_ids, data.validation_labels, batch, hp.max_length,
                          hp.padding, data.pad_id, data.cls_id, data.sep_id);
      p.batch_rows = tb.rows;
      p.batch_cols = tb.cols;
      torch::Tensor logits = model->forward(ToTensor(tb.input_ids, tb.rows, tb.cols, device_),
                                            ToTensor(tb.attention_mask, tb.rows, tb.cols, device_));
      torch::Tensor y = ToTensor(tb.labels, tb.rows, 0, device_);
      loss_sum +=
          torch::nn::functional::cross_entropy(
              logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
              .item<double>();
      torch::Tensor pred = logits.argmax(1).to(torch::kCPU).contiguous();
      const int64_t* pp = pred.data_ptr<int64_t>();
      predictions.insert(predictions.end(), pp, pp + tb.rows);
      labels.insert(labels.end(), tb.labels.begin(), tb.labels.end());
    }
    const ClassificationMetrics cm =
        ComputeClassificationMetrics(labels, predictions, data.num_labels);
    m.validation_loss = labels.empty() ? 0.0 : loss_sum / static_cast<double>(labels.size());
    m.accuracy = cm.accuracy;
    m.macro_f1 = cm.macro_f1;
    return true;
  }

  torch::Device device_;
  int threads_;
  bool count_memory_;
};

}  // namespace

std::string TorchVersion() { return TORCH_VERSION; }

Result<std::unique_ptr<Trainer>> NewTorchTrainer(const TorchTrainerOptions& options) {
  torch::Device device(torch::kCPU);
  try {
    device = torch::Device(options.device);
  } catch (const c10::Error& e) {
    return InvalidArgumentError(
        fmt::format("unknown device '{}': {}", options.device, e.what_without_backtrace()));
  }
  if (device.is_cuda()) {
    if (!at::hasCUDA()) {
      return FailedPreconditionError(fmt::format(
          "device '{}': this LibTorch {} was built without CUDA (Debian's libtorch is CPU-only); "
          "use \"device\": \"cpu\" or build tune against a CUDA LibTorch",
          options.device, TorchVersion()));
    }
    if (!torch::cuda::is_available()) {
      return FailedPreconditionError(
          fmt::format("device '{}': no CUDA device is visible to this process", options.device));
    }
    const auto count = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= count) {
      return FailedPreconditionError(fmt::format("device '{}': only {} CUDA device{} visible",
                                                 options.device, count,
                                                 count == 1 ? " is" : "s are"));
    }
  } else if (!device.is_cpu()) {
    return InvalidArgumentError(
        fmt::format("device '{}': only cpu and cuda are supported", options.device));
  }
  int threads = static_cast<int>(options.threads);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (device.is_cpu()) at::set_num_threads(threads);
  const bool count_memory = device.is_cpu() && options.count_cpu_memory;
  if (count_memory) InstallCountingCpuAllocator();
  return std::unique_ptr<Trainer>(std::make_unique<TorchTrainer>(device, threads, count_memory));
}

}  // namespace tune

#include "train/memory_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace tune {
namespace {

// `n` texts of max_length - 2 ids ([CLS] and [SEP] make them max_length), labels in turn.
void AddExamples(int64_t n, const ProbeRequest& r, std::mt19937& rng,
                 std::vector<std::vector<int32_t>>& ids, std::vector<int64_t>& labels) {
  const int64_t vocab = r.model.vocab_size > 0 ? r.model.vocab_size : 16;
  std::uniform_int_distribution<int32_t> token(
      5, static_cast<int32_t>(std::max<int64_t>(vocab - 1, 5)));
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int32_t> text(static_cast<size_t>(std::max<int64_t>(r.hp.max_length - 2, 1)));
    for (auto& id : text) id = token(rng);
    ids.push_back(std::move(text));
    labels.push_back(k % r.num_labels);
  }
}

}  // namespace

Result<int64_t> MeasureTrainingPeak(Trainer& trainer, const ProbeRequest& r) {
  if (r.num_labels < 2) return InvalidArgumentError("a probe needs num_labels >= 2");
  TrainJob job;
  job.model = r.model;
  job.hp = r.hp;
  job.hp.epochs = 1;
  job.hp.bucket_batches = 0;
  job.hp.seed = 1;
  TUNE_RETURN_IF_ERROR(CheckModelForTraining(r.model, job.hp));
  const int64_t steps = std::max<int64_t>(r.steps, 2);
  const int64_t n_eval = job.hp.eval_batch_size > 0 ? job.hp.eval_batch_size : job.hp.batch_size;
  std::mt19937 rng(7);
  TextTrainData text;
  text.num_labels = r.num_labels;
  text.vocab_size = r.model.vocab_size > 0 ? r.model.vocab_size : 16;
  AddExamples(job.hp.batch_size * job.hp.grad_accum * steps, r, rng, text.train_ids,
              text.train_labels);
  AddExamples(n_eval, r, rng, text.validation_ids, text.validation_labels);
  job.data = &text;
  TUNE_ASSIGN_OR_RETURN(TrainResult result, trainer.Train(job, [](const EpochMetrics&) {
    return Result<EpochDecision>(EpochDecision::kContinue);
  }));
  if (result.end != TrainResult::End::kCompleted) {
    return InternalError(fmt::format("the probe at batch_size {} x max_length {} ended {}: {}",
                                     job.hp.batch_size, job.hp.max_length, TrainEndName(result.end),
                                     result.message));
  }
  if (result.peak_memory_bytes < 0) {
    return FailedPreconditionError("the trainer does not measure memory (count_cpu_memory off)");
  }
  return result.peak_memory_bytes;
}

}  // namespace tune

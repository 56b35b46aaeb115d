// Training throughput of tune's LibTorch trainer (issue 5), the tune side of
// bench/train_throughput.py. Trains a BERT-style encoder classifier through the public Trainer
// API (NewTorchTrainer + Train, exactly what a 'train' trial runs) on synthetic token ids of a
// fixed length, for two epochs of `steps` optimizer steps each: the first epoch warms up
// (allocations, AdamW state), the second is timed: wall time and the process's CPU time.
// Prints one JSON line. On CUDA (--device cuda) the epoch's time ends with the trainer's read of
// the epoch's loss, which waits for the card: the timed epoch is the card's work, not its queue.
//
// Usage: tune_bench_train_throughput --layers 4 --hidden 256 --heads 4 --intermediate 1024
//          --vocab 16384 --batch 16 --length 64 --steps 8 --threads 1
//          [--device cpu|cuda|cuda:N] [--precision fp32|bf16|fp16]
//          [--model NAME] [--attention auto|sdpa|eager] [--padded 0|1] [--fused-qkv 0|1]
//          [--fused-elementwise 0|1] [--cuda-graphs auto|on|off]
// --model takes the architecture of a catalog model (bert-base-uncased, bert-large-uncased,
// microsoft/deberta-v3-base: configs/models.json) instead of the sizes, randomly initialised.
// --padded 1 draws each example's length as real text's (a lognormal with median length/3,
// sigma 0.6, clipped to [3, length]) and pads every batch to `length`, so that the attention
// masks users hit are measured; 0: every example fills `length` (no padding, no mask).
// --fused-qkv 1 sets the fused_qkv hyperparameter (Q/K/V in one GEMM; off by default);
// --fused-elementwise 1 the fused_elementwise one (tune's fused kernels); --cuda-graphs the
// cuda_graphs one (the step captured in CUDA graphs on a card).
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>

#include "torch/torch_trainer.h"
#include "tune/model_catalog.h"

namespace {

struct Args {
  int64_t layers = 4, hidden = 256, heads = 4, intermediate = 1024, vocab = 16384;
  int64_t batch = 16, length = 64, steps = 8, threads = 1;
  int64_t count_memory = 1;  // tune's default on CPU: the counting allocator measures the peak
  int64_t padded = 0;
  int64_t fused_qkv = 0;
  int64_t fused_elementwise = 0;
  std::string cuda_graphs = "auto";
  std::string name = "encoder";
  std::string model;  // a catalog model's architecture, instead of the sizes
  std::string attention = "auto";
  std::string device = "cpu";
  std::string precision = "fp32";
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--name" || k == "--device" || k == "--precision" || k == "--model" ||
        k == "--attention" || k == "--cuda-graphs") {
      (k == "--name"        ? a.name
       : k == "--device"    ? a.device
       : k == "--precision" ? a.precision
       : k == "--model"     ? a.model
       : k == "--attention" ? a.attention
                            : a.cuda_graphs) = v;
      continue;
    }
    int64_t* dst = k == "--layers"              ? &a.layers
                   : k == "--hidden"            ? &a.hidden
                   : k == "--heads"             ? &a.heads
                   : k == "--intermediate"      ? &a.intermediate
                   : k == "--vocab"             ? &a.vocab
                   : k == "--batch"             ? &a.batch
                   : k == "--length"            ? &a.length
                   : k == "--steps"             ? &a.steps
                   : k == "--threads"           ? &a.threads
                   : k == "--count-memory"      ? &a.count_memory
                   : k == "--padded"            ? &a.padded
                   : k == "--fused-qkv"         ? &a.fused_qkv
                   : k == "--fused-elementwise" ? &a.fused_elementwise
                                                : nullptr;
    if (dst == nullptr) {
      std::cerr << "unknown option " << k << "\n";
      return false;
    }
    *dst = std::atoll(v);
  }
  return true;
}

// CPU time of the whole process (all threads), in seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) return 2;
  tune::TorchTrainerOptions options;
  options.device = a.device;
  options.threads = a.threads;
  options.count_cpu_memory = a.count_memory != 0;
  auto trainer = tune::NewTorchTrainer(options);
  if (!trainer.ok()) {
    std::cerr << trainer.status().ToString() << "\n";
    return 1;
  }

  tune::TrainJob job;
  if (!a.model.empty()) {
    auto catalog = tune::ModelCatalog::Builtin();
    auto spec = catalog.ok() ? catalog->Find(a.model)
                             : tune::Result<const tune::ModelSpec*>(catalog.status());
    if (!spec.ok()) {
      std::cerr << spec.status().ToString() << "\n";
      return 2;
    }
    job.model = **spec;
    a.vocab = job.model.vocab_size;
    a.name = a.model;
  } else {
    job.model.name = a.name;
    job.model.model_type = "bert";
    job.model.num_hidden_layers = a.layers;
    job.model.hidden_size = a.hidden;
    job.model.num_attention_heads = a.heads;
    job.model.intermediate_size = a.intermediate;
    job.model.vocab_size = a.vocab;
    job.model.max_position_embeddings = 512;
    job.model.type_vocab_size = 2;
  }
  // Random ids: [CLS] + ids + [SEP], filling max_length exactly, or (--padded) of a length drawn
  // as real text's and padded to max_length by the batcher.
  tune::TextTrainData data;
  std::mt19937_64 rng(0);
  std::uniform_int_distribution<int32_t> id(4, static_cast<int32_t>(a.vocab) - 1);
  std::lognormal_distribution<double> text_length(std::log(static_cast<double>(a.length) / 3.0),
                                                  0.6);
  auto example = [&] {
    int64_t n = a.length;
    if (a.padded != 0) {
      n = std::clamp<int64_t>(std::llround(text_length(rng)), 3, a.length);
    }
    std::vector<int32_t> ids(static_cast<size_t>(n - 2));
    for (auto& t : ids) t = id(rng);
    return ids;
  };
  for (int64_t i = 0; i < a.steps * a.batch; ++i) {
    data.train_ids.push_back(example());
    data.train_labels.push_back(i % 2);
  }
  data.validation_ids.push_back(example());  // evaluation is timed too: keep it one example
  data.validation_labels.push_back(0);
  data.num_labels = 2;
  data.vocab_size = a.vocab;
  data.pad_id = 0;
  data.cls_id = 2;
  data.sep_id = 3;

  job.hp.learning_rate = 5e-5;
  job.hp.batch_size = a.batch;
  job.hp.max_length = a.length;
  job.hp.epochs = 2;
  job.hp.padding = tune::Padding::kMaxLength;
  job.hp.bucket_batches = 0;
  auto precision = tune::ParsePrecision(a.precision);
  if (!precision.ok()) {
    std::cerr << precision.status().ToString() << "\n";
    return 2;
  }
  job.hp.precision = *precision;
  if (const tune::Status set = tune::SetHyperparam(job.hp, "attention", a.attention); !set.ok()) {
    std::cerr << set.ToString() << "\n";
    return 2;
  }
  job.hp.fused_qkv = a.fused_qkv != 0;
  job.hp.fused_elementwise = a.fused_elementwise != 0;
  if (const tune::Status set = tune::SetHyperparam(job.hp, "cuda_graphs", a.cuda_graphs);
      !set.ok()) {
    std::cerr << set.ToString() << "\n";
    return 2;
  }
  job.data = &data;

  std::vector<double> seconds, cpu;  // cpu: the process's CPU time at the end of each epoch
  auto result = (*trainer)->Train(job, [&](const tune::EpochMetrics& m) {
    seconds.push_back(m.seconds);
    cpu.push_back(ProcessCpuSeconds());
    return tune::Result<tune::EpochDecision>(tune::EpochDecision::kContinue);
  });
  if (!result.ok() || result->end != tune::TrainResult::End::kCompleted || seconds.size() != 2) {
    std::cerr << (result.ok() ? result->message : result.status().ToString()) << "\n";
    return 1;
  }
  const double samples = static_cast<double>(a.steps * a.batch);
  std::cout << fmt::format(
                   "{{\"impl\": \"tune\", \"name\": \"{}\", \"parameters\": {}, \"threads\": {}, "
                   "\"batch\": {}, \"length\": {}, \"steps\": {}, \"warmup_seconds\": {:.4f}, "
                   "\"seconds\": {:.4f}, \"samples_per_second\": {:.3f}, "
                   "\"cpu_seconds\": {:.4f}, \"samples_per_cpu_second\": {:.3f}, "
                   "\"libtorch\": \"{}\", \"count_memory\": {}, \"peak_memory_bytes\": {}, "
                   "\"device\": \"{}\", \"precision\": \"{}\", \"model\": \"{}\", "
                   "\"attention\": \"{}\", \"padded\": {}, \"fused_qkv\": {}, "
                   "\"fused_elementwise\": {}, \"cuda_graphs\": \"{}\", \"hidden\": {}, "
                   "\"layers\": {}, "
                   "\"vocab\": {}, \"type_vocab\": {}, \"max_positions\": {}}}",
                   a.name, result->num_parameters, a.threads, a.batch, a.length, a.steps,
                   seconds[0], seconds[1], samples / seconds[1], cpu[1] - cpu[0],
                   samples / (cpu[1] - cpu[0]), tune::TorchVersion(), a.count_memory != 0,
                   result->peak_memory_bytes, a.device, a.precision, a.model, a.attention,
                   a.padded != 0, a.fused_qkv != 0, a.fused_elementwise != 0, a.cuda_graphs,
                   job.model.hidden_size, job.model.num_hidden_layers, job.model.vocab_size,
                   job.model.type_vocab_size, job.model.max_position_embeddings)
            << std::endl;
  return 0;
}

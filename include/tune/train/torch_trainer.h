// The LibTorch trainer [tune_torch]: trains the transformer encoder classifiers of the model
// catalog in process (BERT/RoBERTa-style: word, position and token-type embeddings, post-LN
// self-attention layers with GELU feed-forward, tanh pooler on [CLS]; or DeBERTa-v3: relative
// positions and disentangled attention, GELU pooler; then a head with 0-3 hidden layers), with AdamW or SGD, warmup + linear/cosine decay, gradient accumulation and clipping,
// optional gradient checkpointing, and evaluates after every epoch; or an MLP on tabular rows.
// No LibTorch types here.
//
// Out-of-memory (c10::OutOfMemoryError, a c10::Error whose message says out of memory, or
// std::bad_alloc) and other LibTorch errors are caught here and become TrainResult::End values,
// after the run's model, optimizer state and gradients are released (see trainer.h).
//
// Reproducibility: a run seeds torch::manual_seed and its data order from hp.seed; the same job on
// the same machine, LibTorch and thread count gives the same metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tune/status.h"
#include "tune/train/trainer.h"

namespace tune {

struct TorchTrainerOptions {
  // "cpu", "cuda" or "cuda:N".
  std::string device = "cpu";
  // Intra-op threads (at::set_num_threads) on CPU; 0: one per hardware thread.
  int64_t threads = 0;
  // On CPU: install the counting allocator (counting_cpu_allocator.h) to measure every run's peak
  // memory and to check that memory returns to its level before the run.
  bool count_cpu_memory = true;
  // The memory trials may use, in bytes; -1: no limit. CPU: the counting allocator's budget (an
  // allocation above it throws c10::OutOfMemoryError, as a card would); CUDA: the caching
  // allocator is capped at this share of the card (setMemoryFraction) when it is less than the
  // card.
  int64_t memory_budget_bytes = -1;
};

// InvalidArgument for a malformed device; FailedPrecondition for a CUDA device this LibTorch
// cannot use (Debian's LibTorch is built without CUDA) or that does not exist.
Result<std::unique_ptr<Trainer>> NewTorchTrainer(const TorchTrainerOptions& options);

// "1.13.0".
std::string TorchVersion();

// The tune binary does not link tune_torch: it loads libtune_torch.so with dlopen when a study
// trains (apps/tune/torch_loader.cpp) and calls these C entry points, found by name.
// kTorchPluginAbi changes whenever TorchTrainerOptions, Trainer or what they use change shape, so
// a stale library next to a new binary is refused instead of misread.
inline constexpr int kTorchPluginAbi = 4;

}  // namespace tune

extern "C" {
// kTorchPluginAbi of the library.
int tune_torch_plugin_abi();
// A new trainer (the caller owns it), or nullptr with *status set.
tune::Trainer* tune_torch_new_trainer(const tune::TorchTrainerOptions* options,
                                      tune::Status* status);
// TorchVersion() into *out.
void tune_torch_version(std::string* out);
}

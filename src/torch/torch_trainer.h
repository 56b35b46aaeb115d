// The LibTorch trainer [tune_torch, private]: trains the model catalog's transformer encoder
// classifiers, or an MLP on tabular rows, in process. The tune binary reaches it through the
// plugin entry points of torch/torch_plugin.h. No LibTorch types here.
#pragma once

#include <memory>
#include <string>

#include "torch/torch_plugin.h"
#include "train/trainer.h"
#include "tune/status.h"

namespace tune {

// The trainer: BERT/RoBERTa-style encoders (word, position and token-type embeddings, post-LN
// self-attention layers with GELU feed-forward, tanh pooler on [CLS]) or DeBERTa-v3 (relative
// positions and disentangled attention, GELU pooler), then a head with 0-3 hidden layers; AdamW
// or SGD, warmup + linear/cosine decay, gradient accumulation and clipping, optional gradient
// checkpointing; evaluation after every epoch.
//  - Out-of-memory (c10::OutOfMemoryError, std::bad_alloc, or an error whose message matches an
//    out-of-memory pattern: the CPU allocator's, cuBLAS/cuDNN allocation failures, one a
//    TorchScript module rethrows) and other LibTorch errors are caught and become
//    TrainResult::End values (kOutOfMemory, kDeviceLost for a sticky CUDA error, kFailed),
//    after the run's model, optimizer state and gradients are released (see trainer.h).
//  - Ctrl-C: the run checks InterruptRequested() (interrupt.h) before every micro-batch and
//    every evaluation batch and ends with TrainResult::End::kInterrupted, released as after an
//    OOM.
//  - Reproducibility: a run seeds torch::manual_seed and its data order from hp.seed; the same
//    job on the same machine, LibTorch and thread count gives the same metrics.
// InvalidArgument for a malformed device; FailedPrecondition for a CUDA device this LibTorch
// cannot use (Debian's LibTorch is built without CUDA) or that does not exist.
Result<std::unique_ptr<Trainer>> NewTorchTrainer(const TorchTrainerOptions& options);

// "1.13.0".
std::string TorchVersion();
// Whether CUDA is compiled in (a CUDA LibTorch) and usable in this process, as a sentence.
std::string TorchCudaStatus();

}  // namespace tune

// Loads the LibTorch trainer (libtune_torch.so) at run time, so that only studies that train pay
// LibTorch's start-up.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "torch/torch_plugin.h"
#include "tune/status.h"

namespace tune::app {

// Finds libtune_torch.so -- $TUNE_TORCH_LIBRARY if set, else next to the tune binary, else in
// ../lib/tune/ relative to it -- loads it once and asks it for a trainer. FailedPrecondition,
// naming where it looked and what to do, when this tune was built without LibTorch, when the
// library is missing or cannot load (a LibTorch library it needs is missing), or when it comes
// from another build of tune.
Result<std::unique_ptr<Trainer>> LoadTorchTrainer(const TorchTrainerOptions& options);

// The trainer a command trains with (run, run-trial, predict, estimate): on `device` with
// `threads` (a config's or the command line's), its runs limited to `device_memory` (the guard's
// device_memory, or a --jobs child's reservation; unset: no limit), every run's peak measured
// on CPU unless `count_cpu_memory` is false. LoadTorchTrainer's errors.
Result<std::unique_ptr<Trainer>> LoadTrainer(const std::string& device, int64_t threads,
                                             std::optional<int64_t> device_memory,
                                             bool count_cpu_memory = true);

// For --version: "LibTorch 1.13.0; CUDA not compiled in (...)", or why the trainer library is
// not available.
std::string TorchVersionText();

// Whether the trainer library loads and can train on CUDA here (a CUDA LibTorch and a device).
bool TorchCudaUsable();

}  // namespace tune::app

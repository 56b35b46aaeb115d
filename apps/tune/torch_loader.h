// Loads the LibTorch trainer (libtune_torch.so) at run time, so that only studies that train pay
// LibTorch's start-up.
#pragma once

#include <memory>

#include "torch/torch_plugin.h"
#include "tune/status.h"

namespace tune::app {

// Finds libtune_torch.so -- $TUNE_TORCH_LIBRARY if set, else next to the tune binary, else in
// ../lib/tune/ relative to it -- loads it once and asks it for a trainer. FailedPrecondition,
// naming where it looked and what to do, when this tune was built without LibTorch, when the
// library is missing or cannot load (a LibTorch library it needs is missing), or when it comes
// from another build of tune.
Result<std::unique_ptr<Trainer>> LoadTorchTrainer(const TorchTrainerOptions& options);

// For --version: "LibTorch 1.13.0; CUDA not compiled in (...)", or why the trainer library is
// not available.
std::string TorchVersionText();

// Whether the trainer library loads and can train on CUDA here (a CUDA LibTorch and a device).
bool TorchCudaUsable();

}  // namespace tune::app

// The boundary between the tune binary and the LibTorch trainer plugin (libtune_torch.so).
//
// The tune binary does not link LibTorch: it loads libtune_torch.so with dlopen when a study
// trains (apps/tune/torch_loader.cpp) and calls the C entry points below, found by name. Both
// sides link the shared libraries libtune_core.so and libtune_train.so, so process state (the
// Ctrl-C flag of interrupt.h, spdlog's loggers, the model catalog) exists once and is seen by
// the trainer as the binary sets it. No LibTorch types here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "train/trainer.h"
#include "tune/status.h"

namespace tune {

struct TorchTrainerOptions {
  // "cpu", "cuda" or "cuda:N" (device.h).
  std::string device = "cpu";
  // Intra-op threads (at::set_num_threads) on CPU; 0: one per hardware thread.
  int64_t threads = 0;
  // On CPU: install the counting allocator to measure every run's peak memory and to check that
  // memory returns to its level before the run.
  bool count_cpu_memory = true;
  // The memory trials may use, in bytes (the guard's device_memory); unset: no limit. CPU: the
  // counting allocator's limit (an allocation above it throws c10::OutOfMemoryError, as a card
  // would); CUDA: the caching allocator is capped at this share of the card
  // (setMemoryFraction) when it is less than the card.
  std::optional<int64_t> device_memory;
  // How many fresh processes this study run started before this one (the app's restart count
  // after sticky CUDA errors; 0 the first time). Only the sticky-error test hook reads it
  // (torch_cuda_errors.h).
  int restarts = 0;
};

// Changes whenever TorchTrainerOptions, Trainer or what they use change shape, or how the two
// sides share state, so that a stale library next to a new binary is refused instead of misread.
// 5: tune_core and tune_train are shared libraries (one copy of process state).
// 6: Trainer::Predict, TrainJob::save_weights, TextTrainData::label_names, EpochDecision::kKeep.
// 7: tune_torch_cuda_status.
// 8: TorchScript models: Trainer::CheckTorchScriptModel, TrainJob::on_step, ModelSpec::torchscript.
// 9: one name for the memory budget: TorchTrainerOptions::device_memory and
//    DeviceMemoryStatus::device_memory, std::optional (were memory_budget_bytes and budget, -1).
// 10: Trainer::CheckTorchScriptModel returns ScriptModelInfo (parameters and outputs).
// 11: TorchTrainerOptions::restarts (the test hook no longer reads the app's TUNE_RESTARTS).
inline constexpr int kTorchPluginAbi = 11;

// The beginning of tune_torch_cuda_status's sentence when CUDA is usable.
inline constexpr const char* kCudaUsable = "CUDA compiled in and usable";

}  // namespace tune

extern "C" {
// kTorchPluginAbi of the library.
int tune_torch_plugin_abi();
// A new trainer (the caller owns it), or nullptr with *status set.
tune::Trainer* tune_torch_new_trainer(const tune::TorchTrainerOptions* options,
                                      tune::Status* status);
// The LibTorch version the library was built with ("1.13.0") into *out.
void tune_torch_version(std::string* out);
// Whether CUDA is compiled in and usable here, as a sentence ("CUDA not compiled in (...)",
// "CUDA compiled in, not usable here (...)", "CUDA compiled in and usable (1 device)"; the
// last begins with tune::kCudaUsable).
void tune_torch_cuda_status(std::string* out);
}

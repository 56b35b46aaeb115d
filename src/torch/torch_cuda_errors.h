// CUDA errors after which the process's CUDA context is unusable [tune_torch, private], and a
// test hook that fakes them.
#pragma once

#include <cstdint>
#include <string>

namespace tune {

// Whether `what` (a LibTorch error's text) is a CUDA error that leaves the context unusable: a
// device-side assert (an out-of-range label or index), an illegal memory access, a launch
// failure. CUDA reports such an error on the call that caught it and on every CUDA call after,
// for the life of the process; no cache flush or reset in the process brings the device back.
// The trainer ends such a run with TrainResult::End::kDeviceLost, so that tune fails that trial
// and continues the study in a fresh process (docs/gpu.md "A poisoned CUDA context").
bool IsStickyCudaError(const std::string& what);

// The test hook TUNE_TEST_STICKY_CUDA_ERROR=K[:late|:real]: the first run in each of a study
// run's first K processes (TorchTrainerOptions::restarts counts the fresh processes, 0 for the
// first) fails as a device-side assert would, at its second optimizer step, or with ":late" at
// the run's closing device synchronisation (as CUDA reports a kernel's error at a later call);
// every later run of that process then fails at its start, as on a poisoned context. It lets the
// CPU suite test the whole path. With ":real" (on a CUDA device) the trainer instead launches a
// real device-side assert at that step (a loss over an out-of-range label), and CUDA itself
// poisons the context. Its methods throw c10::Error with CUDA's message.
class StickyCudaErrorHook {
 public:
  // The process's hook, from the environment (inactive without TUNE_TEST_STICKY_CUDA_ERROR) and
  // `restarts` (this process's place in the study run). The first call makes it; later calls
  // return it, whatever their `restarts`. NewTorchTrainer calls this before any Get().
  static StickyCudaErrorHook& Init(int restarts);
  static StickyCudaErrorHook& Get() { return Init(0); }
  void AtRunStart();                  // a poisoned process: every run fails here
  void AtStep(int64_t step);          // the armed first run fails at step 2 (unless late or real)
  bool WantsRealError(int64_t step);  // real: true once, at the armed first run's step 2
  void AtSync();                      // the run's closing device synchronisation

 private:
  explicit StickyCudaErrorHook(int restarts);
  [[noreturn]] void Fail(const char* where);
  bool armed_ = false;    // this process's first run fails
  bool late_ = false;     // ... at AtSync, after AtStep(2) poisoned it
  bool real_ = false;     // ... by a real device-side assert the trainer launches
  bool pending_ = false;  // poisoned, not yet reported (late)
  bool poisoned_ = false;
};

}  // namespace tune

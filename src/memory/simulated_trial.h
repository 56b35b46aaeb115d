// A training trial on a SimulatedCard, for the packing benchmark's synthetic trial [tune_train]
// (bench/synthetic_trial.py, issue 32): memory is reached late, compute is shared.
//
// The trial first starts up (imports, the model's weights loaded and its optimizer state
// created: it holds `static_bytes` on the card for `startup_seconds`, computing nothing), then
// reaches its activation peak at its first micro-step (`peak_bytes` in all). An allocation that
// does not fit there is an out-of-memory error after the start-up, which is then lost; the
// process frees its memory as a crashed one does, when it exits. Otherwise it runs its
// micro-steps under the card's shared compute (SimulatedCard::RunSteps).
#pragma once

#include <cstdint>
#include <string>

#include "memory/simulated_card.h"
#include "tune/status.h"

namespace tune {

struct SimulatedTrialSpec {
  int64_t static_bytes = 0;      // weights, optimizer state, the CUDA context
  int64_t peak_bytes = 0;        // its whole peak, reached at the first micro-step
  double startup_seconds = 0.0;  // simulated
  MicroSteps steps;
  double time_scale = 1.0;          // real seconds per simulated second
  double real_seconds_spent = 0.0;  // real time the process already spent starting (counted in
                                    // the start-up, not added to it)
};

struct SimulatedTrialRun {
  bool oom = false;
  double seconds = 0.0;  // simulated: the start-up, plus the micro-steps when it did not run out
  std::string message;   // the out-of-memory error
};

// REQUIRES: static_bytes <= peak_bytes.
Result<SimulatedTrialRun> RunSimulatedTrial(SimulatedCard& card, const SimulatedTrialSpec& spec,
                                            const CardCompute& compute = {});

}  // namespace tune

extern "C" {
// For the synthetic trial (ctypes): runs a trial on card `name` (see RunSimulatedTrial; one
// call per process). 0: it ran; 1: out of memory (the error on stderr); -1: another error.
// *seconds: the simulated seconds it took.
int tune_simulated_trial_run(const char* name, int64_t capacity, int64_t static_bytes,
                             int64_t peak_bytes, double startup_seconds, double steps,
                             double gpu_seconds, double host_seconds, double time_scale,
                             double real_seconds_spent, double* seconds);
}

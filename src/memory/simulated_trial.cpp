// A training trial on a SimulatedCard (simulated_trial.h).
#include "memory/simulated_trial.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace tune {

Result<SimulatedTrialRun> RunSimulatedTrial(SimulatedCard& card, const SimulatedTrialSpec& spec,
                                            const CardCompute& compute) {
  if (spec.static_bytes < 0 || spec.peak_bytes < spec.static_bytes || !(spec.time_scale > 0)) {
    return InvalidArgumentError(
        "a simulated trial needs 0 <= static_bytes <= peak_bytes and a "
        "time scale > 0");
  }
  SimulatedTrialRun run;
  Status loaded = card.Charge(spec.static_bytes);
  if (!loaded.ok() && loaded.code() != StatusCode::kResourceExhausted) return loaded;
  if (loaded.ok()) {
    const double left = spec.startup_seconds * spec.time_scale - spec.real_seconds_spent;
    if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
    run.seconds = spec.startup_seconds;
    loaded = card.Charge(spec.peak_bytes - spec.static_bytes);  // the first micro-step
    if (!loaded.ok() && loaded.code() != StatusCode::kResourceExhausted) return loaded;
  }
  if (!loaded.ok()) {
    run.oom = true;
    run.message = loaded.message();
    return run;
  }
  TUNE_ASSIGN_OR_RETURN(double stepped, card.RunSteps(spec.steps, spec.time_scale, compute));
  run.seconds += stepped;
  return run;
}

}  // namespace tune

extern "C" {

int tune_simulated_trial_run(const char* name, int64_t capacity, int64_t static_bytes,
                             int64_t peak_bytes, double startup_seconds, double steps,
                             double gpu_seconds, double host_seconds, double time_scale,
                             double real_seconds_spent, double* seconds) {
  auto card = tune::SimulatedCard::Open(name, capacity);
  if (!card.ok()) {
    std::fprintf(stderr, "tune: %s\n", card.status().message().c_str());
    return -1;
  }
  tune::SimulatedTrialSpec spec;
  spec.static_bytes = static_bytes;
  spec.peak_bytes = peak_bytes;
  spec.startup_seconds = startup_seconds;
  spec.steps = {steps, gpu_seconds, host_seconds};
  spec.time_scale = time_scale;
  spec.real_seconds_spent = real_seconds_spent;
  auto run = tune::RunSimulatedTrial(**card, spec);
  if (!run.ok()) {
    std::fprintf(stderr, "tune: %s\n", run.status().message().c_str());
    return -1;
  }
  if (seconds != nullptr) *seconds = run->seconds;
  if (run->oom) std::fprintf(stderr, "%s\n", run->message.c_str());
  return run->oom ? 1 : 0;
}

}  // extern "C"

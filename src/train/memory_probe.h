// Measured training peaks (plain C++; the device work is the Trainer's): one configuration of a
// text model, a catalog encoder or a TorchScript module, trained for a few optimizer steps on
// synthetic texts of exactly hp.max_length tokens, its peak memory read from the trainer (CPU: the
// counting allocator; CUDA: the caching allocator's allocated peak).
//
// This is a probe for models tune has no formula for (a TorchScript module): peaks measured at a
// few small shapes are the points a measured-memory fit is made from. The peak covers the
// optimizer steps after the first (the steady state: AdamW's moments exist from the first step
// on) as well as the first, and one evaluation batch.
#pragma once

#include <cstdint>

#include "train/hyperparams.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

struct ProbeRequest {
  ModelSpec model;      // a catalog encoder or a TorchScript model (model.torchscript)
  TrainHyperparams hp;  // batch_size, max_length, grad_accum, precision, optimizer, ...
  int64_t num_labels = 2;
  int64_t steps = 2;  // optimizer steps, at least 2
};

// The run's peak of allocated bytes above the level before it (TrainResult::peak_memory_bytes).
// Token ids are drawn from [5, model.vocab_size) (a TorchScript model without a vocab_size:
// [5, 16)). FailedPrecondition when the trainer does not measure memory (-1); Internal when the
// run ends otherwise than completed (an out-of-memory error included: the shape does not fit).
// REQUIRES: a trainer that counts memory (TorchTrainerOptions::count_cpu_memory on CPU).
Result<int64_t> MeasureTrainingPeak(Trainer& trainer, const ProbeRequest& request);

}  // namespace tune

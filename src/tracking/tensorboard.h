// The TensorBoard sink: DIR/<study>/trial_<N>/ holds each trial's scalars (trial_scalars.h: a
// train trial's training loss and evaluation metrics at their optimizer steps as Hugging Face's
// Trainer names them, other trials' intermediate values, the final value); DIR/<study>/study/
// holds the study's value and best_value at step = trial number. Every worker writes its own
// event files, so several workers (and runs) share the directories.
#pragma once

#include <memory>
#include <string>

#include "tracking/sink.h"

namespace tune {

// REQUIRES: `dir` is absolute or relative to the working directory.
std::unique_ptr<TrackingSink> NewTensorBoardSink(const std::string& dir, const TrackedStudy& study);

// A study or trial directory's name: the study's name with '/' and other characters a path
// cannot hold replaced by '_'.
std::string TensorBoardRunName(const std::string& name);

}  // namespace tune

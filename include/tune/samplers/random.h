// RandomSampler: independent uniform sampling (Optuna's RandomSampler). Uniform in the
// transformed space: log-uniform for log distributions, uniform over the step grid for step and
// int distributions, uniform over choices for categoricals. Stateless.
#pragma once

#include "tune/samplers/sampler.h"

namespace tune {

class RandomSampler : public Sampler {
 public:
  std::string name() const override { return "random"; }
  double SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                           const std::string& name, const Distribution& distribution,
                           Rng& rng) override;
};

// The sampling primitive, shared with samplers that start with random trials (TPE).
double SampleUniform(const Distribution& distribution, Rng& rng);

}  // namespace tune

#include "tune/samplers/sampler.h"

namespace tune {

Result<SamplerRecords> Sampler::BeforeSample(const TrialHistory& /*history*/,
                                             const FrozenTrial& /*trial*/,
                                             const Json& /*study_system_attrs*/) {
  return SamplerRecords{};
}

SearchSpace Sampler::InferRelativeSearchSpace(const TrialHistory& /*history*/) { return {}; }

std::map<std::string, double> Sampler::SampleRelative(const TrialHistory& /*history*/,
                                                      const FrozenTrial& /*trial*/,
                                                      const SearchSpace& /*space*/, Rng& /*rng*/) {
  return {};
}

}  // namespace tune

#include "tune/samplers/sampler.h"

namespace tune {

SearchSpace Sampler::InferRelativeSearchSpace(const TrialHistory& /*history*/) { return {}; }

std::map<std::string, double> Sampler::SampleRelative(const TrialHistory& /*history*/,
                                                      const FrozenTrial& /*trial*/,
                                                      const SearchSpace& /*space*/, Rng& /*rng*/) {
  return {};
}

}  // namespace tune

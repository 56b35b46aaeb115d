#include "tune/samplers/sampler.h"

namespace tune {

StudyAttrReader ReadFrom(Json study_system_attrs) {
  return [attrs = std::move(study_system_attrs)](
             const std::string& key) -> Result<std::optional<Json>> {
    if (!attrs.is_object() || !attrs.contains(key)) return std::optional<Json>();
    return std::optional<Json>(attrs.at(key));
  };
}

Result<SamplerRecords> Sampler::BeforeSample(const TrialHistory& /*history*/,
                                             const FrozenTrial& /*trial*/,
                                             const StudyAttrReader& /*study_attrs*/) {
  return SamplerRecords{};
}

SamplerRecords Sampler::AfterSampleRelative(const SearchSpace& /*space*/,
                                            const std::map<std::string, double>& /*params*/) const {
  return SamplerRecords{};
}

SearchSpace Sampler::InferRelativeSearchSpace(const TrialHistory& /*history*/) { return {}; }

std::map<std::string, double> Sampler::SampleRelative(const TrialHistory& /*history*/,
                                                      const FrozenTrial& /*trial*/,
                                                      const SearchSpace& /*space*/, Rng& /*rng*/) {
  return {};
}

}  // namespace tune

// Sampler: proposes parameter values from the trial history. Optuna's BaseSampler, minus the
// study: a sampler receives data (history, search space, RNG), never the study or its storage.
//
// Per trial, at its first suggest that needs a sample (not an enqueued value, not a single-valued
// distribution; Optuna's lazy relative_params), the study calls BeforeSample, records what it
// returns, then calls InferRelativeSearchSpace + SampleRelative once (joint sampling), then
// SampleIndependent for each suggested parameter not covered by the relative sample. Values are
// in internal representation (distributions.h). The RNG is owned by the study (seeded per trial),
// so samplers are reproducible and need no lock for it; a sampler may keep caches of its own and
// must then be safe to call from one thread at a time (the study serialises calls).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "tune/distributions.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

using Rng = std::mt19937_64;
// A search space: parameter name -> distribution.
using SearchSpace = std::map<std::string, Distribution>;

// What a sampler records while it samples a trial, as Optuna's samplers write to the storage
// from sample_relative (NSGA-II: the trial's generation, the study's parent-population cache).
struct SamplerRecords {
  Json trial_system_attrs = Json::object();
  Json study_system_attrs = Json::object();
};

// Reads one of the study's system attributes (nullopt when it is not set): all a sampler reads of
// the study besides the history, one key at a time (a study's attributes grow with its age).
using StudyAttrReader = std::function<Result<std::optional<Json>>(const std::string& key)>;
// A reader over attributes already in hand (tests, the differential driver).
StudyAttrReader ReadFrom(Json study_system_attrs);

class Sampler {
 public:
  virtual ~Sampler() = default;

  // The name used in configs ("random", "tpe").
  virtual std::string name() const = 0;

  // Once per trial, before InferRelativeSearchSpace: the attributes to record, reading the
  // study's system attributes it needs through `study_attrs`. The study stores them (the
  // trial's first, also in the `trial` that SampleRelative then sees). Errors fail the suggest.
  // The default records nothing.
  virtual Result<SamplerRecords> BeforeSample(const TrialHistory& history, const FrozenTrial& trial,
                                              const StudyAttrReader& study_attrs);

  // The space to sample jointly for the next trial; empty = none (the default).
  virtual SearchSpace InferRelativeSearchSpace(const TrialHistory& history);

  // Joint sample of `space` for `trial` (internal representation).
  virtual std::map<std::string, double> SampleRelative(const TrialHistory& history,
                                                       const FrozenTrial& trial,
                                                       const SearchSpace& space, Rng& rng);

  // After a non-empty SampleRelative: the attributes to record about the joint sample `params`
  // (internal representation) of `space`, which the study writes at once (TPE with
  // constant_liar: Optuna 5.0's "tpe:relative_params:<i>", so that concurrent workers see the
  // sample before the trial suggests it). The default records nothing.
  virtual SamplerRecords AfterSampleRelative(const SearchSpace& space,
                                             const std::map<std::string, double>& params) const;

  // One value of `name` drawn from `distribution` (internal representation).
  virtual double SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                                   const std::string& name, const Distribution& distribution,
                                   Rng& rng) = 0;
};

}  // namespace tune

// NsgaIISampler: the Nondominated Sorting Genetic Algorithm II, Optuna 4.9's NSGAIISampler
// (docs/config.md#nsgaii), for one objective or several.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/samplers/sampler.h"

namespace tune {

// Optuna's crossovers (optuna.samplers.nsgaii.*Crossover). Categorical parameters always get
// the uniform crossover.
enum class NsgaIICrossover { kUniform, kBlxAlpha, kSbx, kVsbx, kSpx, kUndx };

struct NsgaIIOptions {
  // Optuna's names and defaults.
  int population_size = 50;
  std::optional<double> mutation_prob;  // unset: 1 / max(1, number of parameters of the child)
  NsgaIICrossover crossover = NsgaIICrossover::kUniform;
  double crossover_prob = 0.9;
  double swapping_prob = 0.5;
  // The trials' constraints (trial_attrs.h: "constraints:<name>" and the old list; <= 0 each =
  // feasible) in the elite selection and the tournaments. Unset ("auto", Optuna 5.0): constrained
  // domination whenever a trial of the population has constraints, a trial without them
  // feasible; true (Optuna 4.9's constraints_func): always, a trial without them losing; false:
  // ignored.
  std::optional<bool> constraints;
  // The crossovers' own options (Optuna's constructor arguments).
  double alpha = 0.5;                   // BLX-alpha
  std::optional<double> eta;            // SBX, VSBX; unset: 20 multi-objective, 2 single
  double uniform_crossover_prob = 0.5;  // SBX, VSBX
  double use_child_gene_prob = 0.5;     // SBX, VSBX
  std::optional<double> epsilon;        // SPX; unset: sqrt(number of parameters + 2)
  double sigma_xi = 0.5;                // UNDX
  std::optional<double> sigma_eta;      // UNDX; unset: 0.35 / sqrt(number of parameters)
};

// The crossover's number of parents: 3 for SPX and UNDX, else 2.
int CrossoverParents(NsgaIICrossover crossover);
// "uniform", "blxalpha", "sbx", "vsbx", "spx", "undx".
const char* CrossoverName(NsgaIICrossover crossover);

// The random draws of NSGA-II, as Optuna takes them from numpy's RandomState: the sampler draws
// from the study's RNG; the differential test (tests/differential/) feeds tune and Optuna the
// same draws.
class GaRandom {
 public:
  virtual ~GaRandom() = default;
  virtual double Rand() = 0;                            // rng.rand(): uniform in [0, 1)
  virtual std::size_t Choice(std::size_t n) = 0;        // rng.choice(n)
  virtual double Normal(double loc, double scale) = 0;  // rng.normal(loc, scale)
};

// GaRandom over the study's RNG.
class RngGaRandom : public GaRandom {
 public:
  explicit RngGaRandom(Rng& rng) : rng_(rng) {}
  double Rand() override;
  std::size_t Choice(std::size_t n) override;
  double Normal(double loc, double scale) override;

 private:
  Rng& rng_;
};

// The NSGA-II elite of `population` (COMPLETE trials): Optuna's
// NSGAIIElitePopulationSelectionStrategy, in its order, with `constraints` as
// NsgaIIOptions::constraints. InvalidArgument, as Optuna's ValueError, for a NaN constraint value
// or (true: Optuna 4.9) trials with different numbers of constraints.
using TrialPtrs = std::vector<std::shared_ptr<const FrozenTrial>>;
Result<TrialPtrs> SelectElitePopulation(const TrialPtrs& population,
                                        const std::vector<StudyDirection>& directions,
                                        int population_size, std::optional<bool> constraints);

// One numerical crossover in the transformed space: `parents` rows (CrossoverParents of them),
// `bounds` one [low, high] per column. Optuna's BaseCrossover.crossover.
std::vector<double> Crossover(const NsgaIIOptions& options,
                              const std::vector<std::vector<double>>& parents,
                              const std::vector<std::pair<double, double>>& bounds,
                              bool multi_objective, GaRandom& random);

// Trials belong to generations; Optuna writes and reads the same attributes
// (kNsgaIIGenerationKey, kNsgaIIParentKeyPrefix), so either can continue a study the other began.
class NsgaIISampler : public Sampler {
 public:
  explicit NsgaIISampler(NsgaIIOptions options = {});
  ~NsgaIISampler() override;
  std::string name() const override { return "nsgaii"; }
  const NsgaIIOptions& options() const { return options_; }

  // The trial's generation and its generation's parents. A trial without a generation gets the
  // newest generation among COMPLETE trials, or the next one once that generation holds
  // population_size COMPLETE trials, recorded in its system attribute kNsgaIIGenerationKey.
  // The parents of generation g > 0 are SelectElitePopulation of generation g - 1's COMPLETE
  // trials plus g - 1's parents; generation 0 has none. They are read from, or cached as trial
  // ids in, the study system attribute kNsgaIIParentKeyPrefix + g. Errors: those of
  // SelectElitePopulation and of reading `study_attrs`.
  Result<SamplerRecords> BeforeSample(const TrialHistory& history, const FrozenTrial& trial,
                                      const StudyAttrReader& study_attrs) override;
  // The intersection of the COMPLETE trials' spaces, without single-valued distributions.
  SearchSpace InferRelativeSearchSpace(const TrialHistory& history) override;
  std::map<std::string, double> SampleRelative(const TrialHistory& history,
                                               const FrozenTrial& trial, const SearchSpace& space,
                                               Rng& rng) override;
  double SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                           const std::string& name, const Distribution& distribution,
                           Rng& rng) override;  // uniform

  // SampleRelative with its draws from `random`. The child: with probability crossover_prob, the
  // crossover of parents picked by binary tournaments (repeated until the child lies in `space`),
  // else a copy of a random parent; then each parameter mutates (is left out, for
  // SampleIndependent) with probability mutation_prob. Empty (all uniform) in generation 0, and,
  // with a warning, when there are fewer parents than the crossover needs, no child fits the
  // space after a bounded number of tries, or the parents cannot be found.
  std::map<std::string, double> SampleRelative(const TrialHistory& history,
                                               const FrozenTrial& trial, const SearchSpace& space,
                                               GaRandom& random);

  class State;  // caches of finished trials and the parents BeforeSample found

 private:
  NsgaIIOptions options_;
  std::unique_ptr<State> state_;
};

// The attribute keys Optuna 4.9 uses.
inline constexpr const char* kNsgaIIGenerationKey = "NSGAIISampler:generation";
inline constexpr const char* kNsgaIIParentKeyPrefix = "NSGAIISampler:parent:";

}  // namespace tune

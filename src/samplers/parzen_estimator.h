// ParzenEstimator [tune_core, private]: the kernel mixture TPE builds for the "below" (l) and
// "above" (g) trials, as Optuna's _ParzenEstimator / _MixtureOfProductDistribution. The kernels,
// the prior and the bandwidth rules are docs/tpe.md#the-parzen-estimator's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tune/distributions.h"
#include "tune/samplers/sampler.h"
#include "tune/samplers/tpe.h"  // MultivariateBandwidth

namespace tune {

enum class KernelKind { kContinuous, kDiscrete, kCategorical };

// One dimension of the transformed space.
struct ParzenDimension {
  KernelKind kind = KernelKind::kContinuous;
  double low = 0.0;  // kernel domain [low, high] (numerical kinds)
  double high = 1.0;
  double step = 0.0;      // kDiscrete, linear grid: the step q
  double grid_low = 0.0;  // kDiscrete: the first and last value of the grid (external units)
  double grid_high = 0.0;
  bool log_int = false;  // kDiscrete on a log scale (IntDistribution with log=true)
  int n_choices = 0;     // kCategorical
};

ParzenDimension MakeParzenDimension(const Distribution& distribution);
// Internal representation <-> TPE's transformed space, where the kernels live: a log
// distribution's values are ln x, a categorical's are choice indices.
double ToParzenSpace(const Distribution& distribution, double internal);
// Snaps to the distribution (grid, bounds) and returns the internal representation.
double FromParzenSpace(const Distribution& distribution, double t);

struct ParzenOptions {
  double prior_weight = 1.0;
  bool consider_magic_clip = true;
  double min_bandwidth_factor = 0.01;  // sigma_min = width / min(1/factor, (m+2)^exponent)
  double magic_clip_exponent = 1.0;
  bool consider_endpoints = false;
  BandwidthRule rule = BandwidthRule::kOptuna;  // per dimension (see TpeOptions::bandwidth)
  bool multivariate = false;                    // selects `bandwidth` for numerical dimensions
  MultivariateBandwidth bandwidth = MultivariateBandwidth::kPerDimension;
  std::optional<double> categorical_prior_weight;  // see TpeOptions
};

// One product kernel per observation plus the prior (mu = middle, sigma = width, uniform over
// choices) weighted by prior_weight: truncated normals on [L, H], correctly normalised
// (continuous); the normal mass of the value's bin over that of [L, H] (discrete); a kernel
// peaked on the observed choice (categorical).
class ParzenEstimator {
 public:
  // observations[d][i]: observation i in dimension d (transformed space, inside the domain).
  // weights[i] >= 0, one per observation (not normalised). `sorted_order`, when given, holds
  // for each numerical dimension the observation indices ascending by value, equal values by
  // ascending index (categorical dimensions may be empty): the caller's incremental index then
  // saves the sort the bandwidth rule needs.
  ParzenEstimator(std::vector<ParzenDimension> dims,
                  const std::vector<std::vector<double>>& observations,
                  const std::vector<double>& weights, const ParzenOptions& options,
                  const std::vector<std::vector<uint32_t>>* sorted_order = nullptr);

  size_t n_dims() const { return dims_.size(); }
  // Observations + the prior (the last component).
  size_t n_components() const { return weights_.size(); }
  // Normalised mixture weights (sum 1).
  const std::vector<double>& weights() const { return weights_; }
  // Kernel centres and bandwidths of a numerical dimension (prior last).
  const std::vector<double>& mus(size_t d) const { return dim_state_[d].mu; }
  const std::vector<double>& sigmas(size_t d) const { return dim_state_[d].sigma; }
  const ParzenDimension& dim(size_t d) const { return dims_[d]; }
  // The probabilities of the choices under one component of a categorical dimension.
  std::vector<double> CategoricalProbabilities(size_t d, size_t component) const;

  // n points drawn from the mixture; result[d][j], on the grid for discrete dimensions.
  std::vector<std::vector<double>> Sample(Rng& rng, int n) const;
  // ln p(x) for each point; points[d][j].
  std::vector<double> LogPdf(const std::vector<std::vector<double>>& points) const;

 private:
  struct DimState {
    // numerical
    std::vector<double> mu, sigma, inv_sigma, log_norm;  // log_norm: -ln Z (- ln sigma sqrt 2pi)
    std::vector<uint32_t> order;     // one continuous dimension: observations ascending by mu
    std::vector<int32_t> uid;        // discrete: index of (mu, sigma) class
    std::vector<int32_t> uid_first;  // a component of each class
    // categorical
    std::vector<int32_t> choice;  // -1 for the prior
    std::vector<double> log_hit, log_miss;
    double hit_probability = 1.0;   // P(choose the observed choice outright) when sampling
    bool miss_others_only = false;  // otherwise draw among the other choices (else among all)
  };
  // A discrete dimension's log kernels: of each (mu, sigma) class at each distinct point value.
  struct DiscreteTable {
    std::vector<double> values;       // distinct point values
    std::vector<size_t> point_index;  // point j -> index into values
    std::vector<double> table;        // [class][value]
  };
  // The bin edges of a discrete value t (clipped to the domain).
  static void BinEdges(const ParzenDimension& d, double t, double* lo, double* hi);
  DiscreteTable MakeDiscreteTable(size_t d, const std::vector<double>& xs) const;
  // ln p(x) of one dimension (LogPdf's cases): continuous, evaluating only the kernels that can
  // matter; discrete, one term per kernel class; categorical, one probability per choice.
  std::vector<double> LogPdfContinuous1D(const std::vector<double>& xs) const;
  std::vector<double> LogPdfDiscrete1D(const DiscreteTable& tab) const;
  std::vector<double> LogPdfCategorical1D(const std::vector<double>& xs) const;
  // ln p(x) of several dimensions: per point, the log product kernel of every component summed
  // over the dimensions, then their log-sum-exp. `tables[d]` for each discrete dimension d.
  std::vector<double> LogPdfProduct(const std::vector<std::vector<double>>& points,
                                    const std::vector<DiscreteTable>& tables) const;
  void ComputeNumerical(size_t d, const std::vector<double>& obs, const ParzenOptions& options,
                        const std::vector<uint32_t>* order);
  void ComputeCategorical(size_t d, const std::vector<double>& obs, const ParzenOptions& options);
  // The bandwidths of the observations (sigma[i] for obs i, unclipped) by options.rule, from
  // the observations sorted by value.
  static void NeighborBandwidths(const ParzenDimension& dim,
                                 const std::vector<std::pair<double, uint32_t>>& sorted,
                                 const ParzenOptions& options, std::vector<double>& sigma);
  // st.inv_sigma and st.log_norm (ln of the kernel's normaliser: truncation mass, and for a
  // continuous dimension 1 / (sigma sqrt(2 pi))) from st.mu and st.sigma.
  static void TruncationNorms(const ParzenDimension& dim,
                              const std::vector<std::pair<double, uint32_t>>& sorted, DimState& st);

  std::vector<ParzenDimension> dims_;
  std::vector<DimState> dim_state_;
  std::vector<double> weights_;     // normalised
  std::vector<double> cumulative_;  // for sampling components
};

}  // namespace tune

// Multi-objective building blocks shared by multi-objective TPE and NSGA-II, each equal to its
// Optuna 4.9 counterpart (optuna/study/_multi_objective.py, optuna/_hypervolume/hssp.py,
// optuna/samplers/_tpe/sampler.py) so that tune and Optuna split, weigh and select the same
// trials (tests/differential/multi_objective_diff.py). Every objective is a loss here: callers
// negate maximized values first. [tune_core, private]
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tune {

using LossPoints = std::vector<std::vector<double>>;

// Per point, whether no other point dominates it (copies of a front point are all on it).
// Optuna's _is_pareto_front(assume_unique_lexsorted=False).
std::vector<char> IsParetoFront(const LossPoints& losses);

// Non-domination ranks, 0 = the Pareto front; only the fronts needed to rank `n_below` distinct
// points are peeled, every point after them gets the next rank; n_below <= 0 ranks every point
// 0. With one objective, the rank of a value among the distinct values. Optuna's
// _calculate_nondomination_rank.
std::vector<int> NondominationRank(const LossPoints& losses,
                                   int n_below = std::numeric_limits<int>::max());

// Optuna's _fast_non_domination_rank with penalties (constrained NSGA-II): feasible points
// (penalty <= 0) ranked by their losses, then infeasible ones by their penalty, then those with
// a NaN penalty (no constraint values) by their losses. `penalty` empty = no constraints.
std::vector<int> FastNondominationRank(const LossPoints& losses, const std::vector<double>& penalty,
                                       int n_below = 0);

// The reference point of a set of losses: per objective max(1.1 w, 0.9 w) of the worst value w,
// 1e-12 where that is 0. Optuna's _get_reference_point.
std::vector<double> ReferencePoint(const LossPoints& losses);

// Greedy hypervolume subset selection: `subset_size` of `ids` (parallel to `losses`) whose
// hypervolume with respect to `reference` is (1 - 1/e)-approximately largest. Optuna's
// _solve_hssp, tie-breaks and lazy contribution updates included. REQUIRES: subset_size <=
// ids.size().
std::vector<int64_t> SolveHssp(const LossPoints& losses, const std::vector<int64_t>& ids,
                               int subset_size, const std::vector<double>& reference);

// The indices of `losses` that multi-objective TPE puts below: whole non-domination fronts while
// they fit in `n_below`, the rest of the next front by SolveHssp. Ascending.
// Optuna's _split_complete_trials_multi_objective.
std::vector<int64_t> SplitBelowMultiObjective(const LossPoints& losses, int n_below);

// The weights of the below group's observations: each feasible point's hypervolume contribution
// among the below group's Pareto front, divided by the largest (1e-12 at least: dominated points
// and infeasible ones, `feasible[i] == 0`, get 1e-12); all 1 (infeasible 1e-12) when at most one
// point is feasible or the front's hypervolume is infinite.
// Optuna's _calculate_weights_below_for_multi_objective.
std::vector<double> BelowWeightsMultiObjective(const LossPoints& losses,
                                               const std::vector<char>& feasible);

// NSGA-II's crowding distances of one front (the trials' values as stored, one row per trial, in
// the population's order): per objective, the rows stably sorted by it (each sort starting from
// the previous one's order), the two ends infinite and each inner row the gap between its
// neighbours over the objective's finite range; an objective with one value adds nothing.
// Optuna's _calc_crowding_distance (optuna/samplers/nsgaii/_elite_population_selection_strategy).
// `sorted`, if given, receives the rows in _crowding_distance_sort's order (largest first).
std::vector<double> CrowdingDistance(const LossPoints& front,
                                     std::vector<std::size_t>* sorted = nullptr);
std::vector<std::size_t> CrowdingDistanceSort(const LossPoints& front);

}  // namespace tune

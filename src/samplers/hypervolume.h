// The hypervolume of a set of points in loss space (every objective minimized): the measure of
// the region they dominate, bounded by a reference point. The building block of multi-objective
// TPE (the below group's weights, the split's last front) and of a study's Pareto-front quality.
// As Optuna 4.9's compute_hypervolume (optuna/_hypervolume/wfg.py): duplicates and dominated
// points are dropped first; then an exact sweep in 2-d (O(n log n)), coordinate compression with
// cumulative maxima in 3-d (O(n^2) time, O(n) memory), and WFG (While et al., "A Fast Way of
// Calculating Exact Hypervolumes", 2012) above. [tune_core, private]
#pragma once

#include <vector>

#include "tune/status.h"

namespace tune {

// InvalidArgument when a point has another dimension than `reference` or does not dominate or
// equal it (some coordinate above the reference's). +inf when a reference coordinate is infinite
// (and the points are not empty), 0 for no points.
Result<double> Hypervolume(std::vector<std::vector<double>> points,
                           const std::vector<double>& reference);

// The hypervolume of `front`: distinct points, none dominating another, each dominating or equal
// to `reference` (Optuna's compute_hypervolume with assume_pareto=True). Not checked: HSSP's hot
// loop calls this on subsets of one front, where Hypervolume's checks and filtering cost more
// than the volume. Equal to Hypervolume(front, reference) on such points.
double FrontHypervolume(const std::vector<std::vector<double>>& front,
                        const std::vector<double>& reference);
// The same for the points `sorted` points at, already in lexicographic order (HSSP keeps the
// chosen subset sorted and inserts each candidate in its place instead of sorting again).
double SortedFrontHypervolume(const std::vector<const std::vector<double>*>& sorted,
                              const std::vector<double>& reference);

// The points of `points` that no other point weakly dominates, in lexicographic order, without
// duplicates.
std::vector<std::vector<double>> ParetoFront(std::vector<std::vector<double>> points);

}  // namespace tune

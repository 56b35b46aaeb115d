#include "samplers/hypervolume.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tune {
namespace {

using Points = std::vector<std::vector<double>>;

// a <= b in every coordinate.
bool WeaklyDominates(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] > b[k]) return false;
  }
  return true;
}

// The points of a lexicographically sorted list that no earlier point weakly dominates (a later
// point cannot dominate an earlier one, and a duplicate is dominated by its first copy).
Points FrontOfSorted(const Points& sorted) {
  Points front;
  for (const auto& p : sorted) {
    bool dominated = false;
    for (const auto& q : front) {
      if (WeaklyDominates(q, p)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(p);
  }
  return front;
}

// 2-d: the front sorted by the first loss (so the second decreases): a sum of rectangles.
double Compute2d(const Points& front, const std::vector<double>& r) {
  double hv = 0.0, y_above = r[1];
  for (const auto& p : front) {
    hv += (r[0] - p[0]) * (y_above - p[1]);
    y_above = p[1];
  }
  return hv;
}

// 3-d, after Optuna: with the x order given and y compressed to ranks, the dominated depth above
// cell (i, j) is the largest r_z - z of the points with x-rank <= i and y-rank <= j (cumulative
// maxima along both axes); the volume sums depth x cell width x cell height. One row at a time:
// `column[j]` holds the maxima along x so far, its running maximum along y the row's depths (the
// same maxima and sums, in the same order, as the n x n table).
// `at(i)` is the i-th point in x order.
template <typename At>
double Compute3d(size_t n, const At& at, const std::vector<double>& r) {
  thread_local std::vector<size_t> y_order;  // reused: HSSP computes thousands of volumes
  thread_local std::vector<size_t> y_rank;
  thread_local std::vector<double> column;
  thread_local std::vector<double> dy;  // cell heights in y order
  y_order.resize(n);
  std::iota(y_order.begin(), y_order.end(), size_t{0});
  std::sort(y_order.begin(), y_order.end(), [&](size_t a, size_t b) {
    return at(a)[1] < at(b)[1] || (at(a)[1] == at(b)[1] && a < b);  // stable
  });
  y_rank.resize(n);
  dy.resize(n);
  for (size_t j = 0; j < n; ++j) {
    y_rank[y_order[j]] = j;
    dy[j] = (j + 1 < n ? at(y_order[j + 1])[1] : r[1]) - at(y_order[j])[1];
  }
  column.assign(n, 0.0);
  double hv = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double& own = column[y_rank[i]];
    own = std::max(own, r[2] - at(i)[2]);
    const double dx = (i + 1 < n ? at(i + 1)[0] : r[0]) - at(i)[0];
    double row = 0.0, depth = 0.0;
    for (size_t j = 0; j < n; ++j) {
      depth = std::max(depth, column[j]);
      row += depth * dy[j];
    }
    hv += row * dx;
  }
  return hv;
}

double Inclusive(const std::vector<double>& p, const std::vector<double>& r) {
  double v = 1.0;
  for (size_t k = 0; k < p.size(); ++k) v *= r[k] - p[k];
  return v;
}

double ComputeWfg(const Points& sorted, const std::vector<double>& r);

// The volume only `inclusive` point's box adds beyond `later` (the points after it, each limited
// to that box: the max of the two coordinates).
double Exclusive(const Points& limited, double inclusive, const std::vector<double>& r) {
  if (limited.size() <= 3) return inclusive - ComputeWfg(limited, r);
  return inclusive - ComputeWfg(FrontOfSorted(limited), r);
}

// WFG over points sorted by the first loss: the last point's box plus, for each earlier point,
// what its box adds beyond the later points (Eqs. 6 and 7 of the paper).
double ComputeWfg(const Points& sorted, const std::vector<double>& r) {
  const size_t n = sorted.size();
  if (n == 1) return Inclusive(sorted[0], r);
  if (n == 2) {
    double hv1 = 1.0, hv2 = 1.0, both = 1.0;
    for (size_t k = 0; k < r.size(); ++k) {
      hv1 *= r[k] - sorted[0][k];
      hv2 *= r[k] - sorted[1][k];
      both *= r[k] - std::max(sorted[0][k], sorted[1][k]);
    }
    return hv1 + hv2 - both;
  }
  double hv = Inclusive(sorted[n - 1], r);
  for (size_t i = 0; i + 1 < n; ++i) {
    Points limited;
    limited.reserve(n - i - 1);
    for (size_t j = i + 1; j < n; ++j) {
      std::vector<double> q(r.size());
      for (size_t k = 0; k < r.size(); ++k) q[k] = std::max(sorted[i][k], sorted[j][k]);
      limited.push_back(std::move(q));
    }
    hv += Exclusive(limited, Inclusive(sorted[i], r), r);
  }
  return hv;
}

}  // namespace

Points ParetoFront(Points points) {
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return FrontOfSorted(points);
}

namespace {

// The volume of a front in lexicographic order, `reference` finite: the sweeps by dimension.
// inf - inf gives nan; the volume is then infinite (a point at -inf).
double VolumeOfSorted(const Points& front, const std::vector<double>& reference) {
  double hv = 0.0;
  if (reference.size() == 1) {
    hv = reference[0] - front[0][0];
  } else if (reference.size() == 2) {
    hv = Compute2d(front, reference);
  } else if (reference.size() == 3) {
    hv = Compute3d(
        front.size(), [&](size_t i) -> const std::vector<double>& { return front[i]; }, reference);
  } else {
    hv = ComputeWfg(front, reference);
  }
  return std::isfinite(hv) ? hv : std::numeric_limits<double>::infinity();
}

bool AllFinite(const std::vector<double>& reference) {
  return std::all_of(reference.begin(), reference.end(), [](double v) { return std::isfinite(v); });
}

}  // namespace

Result<double> Hypervolume(Points points, const std::vector<double>& reference) {
  for (const auto& p : points) {
    if (p.size() != reference.size()) {
      return InvalidArgumentError(fmt::format("a point has {} objectives, the reference point {}",
                                              p.size(), reference.size()));
    }
    if (!WeaklyDominates(p, reference)) {
      return InvalidArgumentError(
          "every point must dominate or equal the reference point (loss <= reference in every "
          "objective)");
    }
  }
  if (points.empty()) return 0.0;
  if (!AllFinite(reference)) return std::numeric_limits<double>::infinity();
  return VolumeOfSorted(ParetoFront(std::move(points)), reference);  // sorted, no copy
}

double FrontHypervolume(const Points& front, const std::vector<double>& reference) {
  thread_local std::vector<const std::vector<double>*> sorted;
  sorted.clear();
  for (const auto& p : front) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return *a < *b; });
  return SortedFrontHypervolume(sorted, reference);
}

double SortedFrontHypervolume(const std::vector<const std::vector<double>*>& sorted,
                              const std::vector<double>& reference) {
  if (sorted.empty()) return 0.0;
  if (!AllFinite(reference)) return std::numeric_limits<double>::infinity();
  if (reference.size() != 3) {  // HSSP's hot loop is 3-d (2-d has its own exact updates)
    Points copy;
    for (const auto* p : sorted) copy.push_back(*p);
    return VolumeOfSorted(copy, reference);
  }
  const double hv = Compute3d(
      sorted.size(), [&](size_t i) -> const std::vector<double>& { return *sorted[i]; },
      reference);  // through the pointers: no copy of the points
  return std::isfinite(hv) ? hv : std::numeric_limits<double>::infinity();
}

}  // namespace tune

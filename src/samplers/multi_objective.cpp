#include "samplers/multi_objective.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "samplers/hypervolume.h"
#include "util/nonfinite.h"

namespace tune {
namespace {

constexpr double kEps = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

bool LexLess(const std::vector<double>& a, const std::vector<double>& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

// numpy.unique(rows, axis=0, return_index=True, return_inverse=True): the distinct rows in
// lexicographic order, the position of each one's first occurrence and each row's distinct index.
struct UniqueRows {
  LossPoints rows;
  std::vector<size_t> first;
  std::vector<size_t> inverse;
};

UniqueRows Unique(const LossPoints& points) {
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return LexLess(points[a], points[b]); });
  UniqueRows u;
  u.inverse.resize(points.size());
  for (size_t pos : order) {
    if (u.rows.empty() || LexLess(u.rows.back(), points[pos])) {
      u.rows.push_back(points[pos]);
      u.first.push_back(pos);
    }
    u.inverse[pos] = u.rows.size() - 1;
  }
  return u;
}

// Optuna's _is_pareto_front_for_unique_sorted.
std::vector<char> FrontOfUniqueSorted(const LossPoints& rows) {
  const size_t n = rows.size();
  std::vector<char> on_front(n, 0);
  if (n == 0) return on_front;
  const size_t d = rows[0].size();
  if (d == 1) {
    on_front[0] = 1;
  } else if (d == 2) {
    double cummin = rows[0][1];
    on_front[0] = 1;
    for (size_t i = 1; i < n; ++i) {
      on_front[i] = rows[i][1] < cummin;
      cummin = std::min(cummin, rows[i][1]);
    }
  } else {
    std::vector<size_t> remaining(n);
    std::iota(remaining.begin(), remaining.end(), size_t{0});
    while (!remaining.empty()) {
      const std::vector<double>& top = rows[remaining[0]];
      on_front[remaining[0]] = 1;
      std::vector<size_t> next;
      for (size_t i : remaining) {
        for (size_t k = 1; k < d; ++k) {
          if (rows[i][k] < top[k]) {
            next.push_back(i);
            break;
          }
        }
      }
      remaining.swap(next);
    }
  }
  return on_front;
}

// numpy.argmax: the first NaN if any, else the first maximum.
size_t ArgMax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return i;
    if (v[i] > v[best]) best = i;
  }
  return best;
}

double BoxVolume(const std::vector<double>& reference, const std::vector<double>& point) {
  double v = 1.0;
  for (size_t k = 0; k < point.size(); ++k) v *= reference[k] - point[k];
  return v;
}

double Hv(LossPoints points, const std::vector<double>& reference) {
  Result<double> hv = Hypervolume(std::move(points), reference);
  return hv.ok() ? *hv : std::numeric_limits<double>::quiet_NaN();
}

template <typename T>
void EraseAt(std::vector<T>& v, size_t i) {
  v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
}

// Optuna's _solve_hssp_2d over distinct, lexicographically sorted points.
std::vector<int64_t> Hssp2d(LossPoints points, std::vector<int64_t> ids, int subset_size,
                            const std::vector<double>& reference) {
  LossPoints corners(points.size(), reference);
  std::vector<int64_t> selected;
  for (int i = 0; i < subset_size; ++i) {
    std::vector<double> contribs(points.size());
    for (size_t j = 0; j < points.size(); ++j) contribs[j] = BoxVolume(corners[j], points[j]);
    const size_t m = ArgMax(contribs);
    selected.push_back(ids[m]);
    const std::vector<double> chosen = points[m];
    EraseAt(points, m);
    EraseAt(ids, m);
    EraseAt(corners, m);
    for (size_t j = 0; j < m; ++j) corners[j][0] = std::min(chosen[0], corners[j][0]);
    for (size_t j = m; j < corners.size(); ++j) corners[j][1] = std::min(chosen[1], corners[j][1]);
  }
  return selected;
}

// Optuna's _lazy_contribs_update: `contribs` are upper bounds of each remaining point's
// contribution to `selected` (whose hypervolume is `hv_selected`); exact contributions are
// computed from the largest bound down until no bound can beat the best exact one.
void LazyContribsUpdate(std::vector<double>& contribs, const LossPoints& points,
                        const LossPoints& selected, const std::vector<double>& reference,
                        double hv_selected) {
  if (std::isinf(hv_selected)) {
    std::fill(contribs.begin(), contribs.end(), kInf);
    return;
  }
  const size_t n = points.size(), d = reference.size();
  auto limited = [&](size_t i, size_t j) {
    std::vector<double> q(d);
    for (size_t k = 0; k < d; ++k) q[k] = std::max(points[i][k], selected[j][k]);
    return q;
  };
  std::vector<double> inclusive(n);
  for (size_t i = 0; i < n; ++i) {
    inclusive[i] = BoxVolume(reference, points[i]);
    double last = 1.0;  // BoxVolume(reference, limited(i, selected.size() - 1)), not allocated
    for (size_t k = 0; k < d; ++k)
      last *= reference[k] - std::max(points[i][k], selected.back()[k]);
    const double bound = inclusive[i] - last;
    contribs[i] =
        std::isnan(contribs[i]) || std::isnan(bound) ? std::nan("") : std::min(contribs[i], bound);
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return NanLastLess(-contribs[a], -contribs[b]); });
  double max_contrib = 0.0;
  // The chosen subset in lexicographic order; each candidate goes in at its place.
  std::vector<const std::vector<double>*> sorted_selected;
  for (const auto& s : selected) sorted_selected.push_back(&s);
  auto less = [](const std::vector<double>* a, const std::vector<double>* b) { return *a < *b; };
  std::sort(sorted_selected.begin(), sorted_selected.end(), less);
  std::vector<const std::vector<double>*> with_candidate(sorted_selected.size() + 1);
  for (size_t i : order) {
    if (std::isinf(inclusive[i])) {
      max_contrib = contribs[i] = kInf;
      continue;
    }
    if (contribs[i] < max_contrib) continue;
    if (d <= 3) {  // incremental: H(S + {i}) - H(S); S + {i} are distinct points of one front
      const auto at =
          std::lower_bound(sorted_selected.begin(), sorted_selected.end(), &points[i], less);
      auto out = std::copy(sorted_selected.begin(), at, with_candidate.begin());
      *out++ = &points[i];
      std::copy(at, sorted_selected.end(), out);
      contribs[i] = SortedFrontHypervolume(with_candidate, reference) - hv_selected;
    } else {  // decremental: H({i}) - H(S limited to i's box)
      LossPoints box;
      for (size_t j = 0; j < selected.size(); ++j) box.push_back(limited(i, j));
      contribs[i] = inclusive[i] - Hv(std::move(box), reference);
    }
    max_contrib = std::max(contribs[i], max_contrib);
  }
}

// Optuna's _solve_hssp_on_unique_loss_vals (3 or more objectives: greedy with lazy updates).
std::vector<int64_t> HsspOnUnique(LossPoints points, std::vector<int64_t> ids, int subset_size,
                                  const std::vector<double>& reference) {
  for (double r : reference) {
    if (!std::isfinite(r)) return {ids.begin(), ids.begin() + subset_size};
  }
  if (ids.size() == static_cast<size_t>(subset_size)) return ids;
  if (reference.size() == 2)
    return Hssp2d(std::move(points), std::move(ids), subset_size, reference);
  std::vector<double> contribs(points.size());
  for (size_t i = 0; i < points.size(); ++i) contribs[i] = BoxVolume(reference, points[i]);
  std::vector<int64_t> selected_ids;
  LossPoints selected;
  double hv = 0.0;
  for (int k = 0; k < subset_size; ++k) {
    const size_t m = ArgMax(contribs);
    hv += contribs[m];
    selected_ids.push_back(ids[m]);
    selected.push_back(points[m]);
    EraseAt(contribs, m);
    EraseAt(ids, m);
    EraseAt(points, m);
    if (k == subset_size - 1) break;
    LazyContribsUpdate(contribs, points, selected, reference, hv);
  }
  return selected_ids;
}

// The hypervolume contributions of the points of a Pareto front.
std::vector<double> FrontContributions(const LossPoints& front,
                                       const std::vector<double>& reference, double hv) {
  const size_t n = front.size(), d = reference.size();
  std::vector<double> contribs(n);
  for (size_t i = 0; i < n; ++i) {
    LossPoints others;
    for (size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      if (d <= 3) {
        others.push_back(front[j]);
      } else {
        std::vector<double> q(d);
        for (size_t k = 0; k < d; ++k) q[k] = std::max(front[j][k], front[i][k]);
        others.push_back(std::move(q));
      }
    }
    contribs[i] = d <= 3 ? hv - Hv(std::move(others), reference)
                         : BoxVolume(reference, front[i]) - Hv(std::move(others), reference);
  }
  return contribs;
}

}  // namespace

std::vector<char> IsParetoFront(const LossPoints& losses) {
  UniqueRows u = Unique(losses);
  std::vector<char> unique_front = FrontOfUniqueSorted(u.rows);
  std::vector<char> out(losses.size());
  for (size_t i = 0; i < losses.size(); ++i) out[i] = unique_front[u.inverse[i]];
  return out;
}

std::vector<int> NondominationRank(const LossPoints& losses, int n_below) {
  if (losses.empty() || n_below <= 0) return std::vector<int>(losses.size(), 0);
  UniqueRows u = Unique(losses);
  std::vector<int> unique_rank(u.rows.size(), 0);
  if (losses[0].size() > 1) {
    const size_t n_unique = u.rows.size();
    const size_t want = std::min(static_cast<size_t>(n_below), n_unique);
    std::vector<size_t> remaining(n_unique);
    std::iota(remaining.begin(), remaining.end(), size_t{0});
    int rank = 0;
    while (n_unique - remaining.size() < want) {
      LossPoints rows;
      for (size_t i : remaining) rows.push_back(u.rows[i]);
      std::vector<char> on_front = FrontOfUniqueSorted(rows);
      std::vector<size_t> next;
      for (size_t j = 0; j < remaining.size(); ++j) {
        if (on_front[j]) {
          unique_rank[remaining[j]] = rank;
        } else {
          next.push_back(remaining[j]);
        }
      }
      remaining.swap(next);
      ++rank;
    }
    for (size_t i : remaining) unique_rank[i] = rank;
  } else {
    std::iota(unique_rank.begin(), unique_rank.end(), 0);
  }
  std::vector<int> out(losses.size());
  for (size_t i = 0; i < losses.size(); ++i) out[i] = unique_rank[u.inverse[i]];
  return out;
}

std::vector<int> FastNondominationRank(const LossPoints& losses, const std::vector<double>& penalty,
                                       int n_below) {
  if (losses.empty()) return {};
  if (n_below <= 0) n_below = static_cast<int>(losses.size());
  if (penalty.empty()) return NondominationRank(losses, n_below);
  std::vector<int> ranks(losses.size(), -1);
  // Ranks the points selected by `pick` from `points`, offset by one past the best rank so far.
  auto rank_group = [&](auto pick, const LossPoints& points) {
    std::vector<size_t> members;
    LossPoints group;
    int top = -1;
    for (size_t i = 0; i < losses.size(); ++i) {
      if (pick(i)) {
        members.push_back(i);
        group.push_back(points[i]);
      } else if (ranks[i] >= 0) {
        top = std::max(top, ranks[i]);
      }
    }
    std::vector<int> r = NondominationRank(group, n_below);
    for (size_t j = 0; j < members.size(); ++j) ranks[members[j]] = top + 1 + r[j];
    n_below -= static_cast<int>(members.size());
  };
  LossPoints penalties;
  for (double p : penalty) penalties.push_back({p});
  rank_group([&](size_t i) { return !std::isnan(penalty[i]) && penalty[i] <= 0; }, losses);
  rank_group([&](size_t i) { return !std::isnan(penalty[i]) && penalty[i] > 0; }, penalties);
  rank_group([&](size_t i) { return std::isnan(penalty[i]); }, losses);
  return ranks;
}

std::vector<double> ReferencePoint(const LossPoints& losses) {
  std::vector<double> worst = losses.at(0);
  for (const auto& p : losses) {
    for (size_t k = 0; k < worst.size(); ++k) worst[k] = std::max(worst[k], p[k]);
  }
  for (double& w : worst) {
    w = std::max(1.1 * w, 0.9 * w);
    if (w == 0.0) w = kEps;
  }
  return worst;
}

std::vector<int64_t> SolveHssp(const LossPoints& losses, const std::vector<int64_t>& ids,
                               int subset_size, const std::vector<double>& reference) {
  if (static_cast<size_t>(subset_size) == ids.size()) return ids;
  UniqueRows u = Unique(losses);
  const size_t n_unique = u.rows.size();
  if (n_unique < static_cast<size_t>(subset_size)) {
    std::vector<char> chosen(ids.size(), 0);
    for (size_t pos : u.first) chosen[pos] = 1;
    size_t extra = static_cast<size_t>(subset_size) - n_unique;
    for (size_t pos = 0; pos < ids.size() && extra > 0; ++pos) {
      if (!chosen[pos]) {
        chosen[pos] = 1;
        --extra;
      }
    }
    std::vector<int64_t> out;
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      if (chosen[pos]) out.push_back(ids[pos]);
    }
    return out;
  }
  std::vector<int64_t> positions(u.first.begin(), u.first.end());
  std::vector<int64_t> picked = HsspOnUnique(u.rows, positions, subset_size, reference);
  for (int64_t& p : picked) p = ids[static_cast<size_t>(p)];
  return picked;
}

std::vector<int64_t> SplitBelowMultiObjective(const LossPoints& losses, int n_below) {
  const auto n = static_cast<int>(losses.size());
  n_below = std::min(n_below, n);
  std::vector<int64_t> below;
  if (n_below <= 0) return below;
  if (n_below == n) {
    for (int i = 0; i < n; ++i) below.push_back(i);
    return below;
  }
  const std::vector<int> ranks = NondominationRank(losses, n_below);
  // The last rank whose points all fit: the ranks are 0, 1, ... and counted cumulatively.
  const int max_rank = *std::max_element(ranks.begin(), ranks.end());
  std::vector<int> count(static_cast<size_t>(max_rank) + 1, 0);
  for (int r : ranks) ++count[static_cast<size_t>(r)];
  int last = -1, cumulative = 0;
  for (int r = 0; r <= max_rank; ++r) {
    cumulative += count[static_cast<size_t>(r)];
    if (cumulative <= n_below) last = r;
  }
  LossPoints tie;
  std::vector<int64_t> tie_ids;
  for (int i = 0; i < n; ++i) {
    if (ranks[static_cast<size_t>(i)] <= last) {
      below.push_back(i);
    } else if (ranks[static_cast<size_t>(i)] == last + 1) {
      tie.push_back(losses[static_cast<size_t>(i)]);
      tie_ids.push_back(i);
    }
  }
  const int need = n_below - static_cast<int>(below.size());
  if (need > 0) {
    std::vector<int64_t> chosen = SolveHssp(tie, tie_ids, need, ReferencePoint(tie));
    below.insert(below.end(), chosen.begin(), chosen.end());
  }
  std::sort(below.begin(), below.end());
  return below;
}

std::vector<double> BelowWeightsMultiObjective(const LossPoints& losses,
                                               const std::vector<char>& feasible) {
  std::vector<double> weights(losses.size(), kEps);
  LossPoints points;
  std::vector<size_t> where;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!feasible[i]) continue;
    weights[i] = 1.0;
    points.push_back(losses[i]);
    where.push_back(i);
  }
  if (points.size() <= 1) return weights;
  const std::vector<double> reference = ReferencePoint(points);
  const std::vector<char> on_front = IsParetoFront(points);
  LossPoints front;
  for (size_t j = 0; j < points.size(); ++j) {
    if (on_front[j]) front.push_back(points[j]);
  }
  const double hv = Hv(front, reference);
  if (std::isinf(hv)) return weights;
  const std::vector<double> front_contribs = FrontContributions(front, reference, hv);
  std::vector<double> contribs(points.size(), 0.0);
  for (size_t j = 0, f = 0; j < points.size(); ++j) {
    if (on_front[j]) contribs[j] = front_contribs[f++];
  }
  double max_contrib = kEps;
  for (double c : contribs) max_contrib = std::max(max_contrib, c);
  for (size_t j = 0; j < points.size(); ++j) {
    weights[where[j]] = std::max(contribs[j] / max_contrib, kEps);
  }
  return weights;
}

std::vector<double> CrowdingDistance(const LossPoints& front, std::vector<size_t>* sorted) {
  std::vector<double> distance(front.size(), 0.0);
  std::vector<size_t> order(front.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t d = front.empty() ? 0 : front[0].size();
  for (size_t k = 0; k < d; ++k) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return front[a][k] < front[b][k]; });
    if (front[order.front()][k] == front[order.back()][k]) continue;
    std::vector<double> vs{-kInf};
    for (size_t i : order) vs.push_back(front[i][k]);
    vs.push_back(kInf);
    double v_min = kInf, v_max = -kInf;
    for (double v : vs) {
      if (v != -kInf) {
        v_min = v;
        break;
      }
    }
    for (auto it = vs.rbegin(); it != vs.rend(); ++it) {
      if (*it != kInf) {
        v_max = *it;
        break;
      }
    }
    double width = v_max - v_min;
    if (width <= 0) width = 1.0;  // 0 or -inf; NaN stays, as in Optuna
    for (size_t j = 0; j < order.size(); ++j) {
      const double gap = vs[j] == vs[j + 2] ? 0.0 : vs[j + 2] - vs[j];
      distance[order[j]] += gap / width;
    }
  }
  if (sorted != nullptr) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return distance[a] < distance[b]; });
    std::reverse(order.begin(), order.end());
    *sorted = std::move(order);
  }
  return distance;
}

std::vector<size_t> CrowdingDistanceSort(const LossPoints& front) {
  std::vector<size_t> order;
  CrowdingDistance(front, &order);
  return order;
}

}  // namespace tune

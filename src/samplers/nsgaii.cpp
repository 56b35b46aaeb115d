// NsgaIISampler (include/tune/samplers/nsgaii.h): Optuna 4.9's NSGAIISampler with its
// BaseGASampler bookkeeping (optuna/samplers/_ga/_base.py), elite selection, child generation
// and crossover driver (optuna/samplers/nsgaii/), draw for draw.
#include "tune/samplers/nsgaii.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include "samplers/multi_objective.h"
#include "tune/samplers/random.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

// Optuna repeats the crossover until the child lies in the search space, without a limit.
constexpr int kMaxCrossoverTries = 100000;
constexpr int kNoGeneration = -1;

using Child = std::vector<std::pair<std::string, double>>;  // internal values, Optuna's order

// A JSON number that is an integer, as Python compares it (3.0 == 3).
std::optional<int64_t> IntegerOf(const Json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) {
    double v = j.get<double>();
    if (std::isfinite(v) && v == std::floor(v)) return static_cast<int64_t>(v);
  }
  return std::nullopt;
}

int GenerationAttr(const FrozenTrial& t) {
  auto it = t.system_attrs.find(kNsgaIIGenerationKey);
  if (it == t.system_attrs.end()) return kNoGeneration;
  std::optional<int64_t> g = IntegerOf(*it);
  return g ? static_cast<int>(*g) : kNoGeneration;
}

// The trial's constraint values (trial_attrs.h: "constraints:<name>" and the old list), in name
// order; nullopt when it has none. Non-numbers read as NaN.
std::optional<std::vector<double>> ConstraintsOf(const FrozenTrial& t) {
  const std::map<std::string, double> named = TrialConstraints(t);
  if (named.empty()) return std::nullopt;
  std::vector<double> out;
  for (const auto& [name, v] : named) out.push_back(v);
  return out;
}

double Violation(const std::vector<double>& constraints) {
  double sum = 0.0;
  for (double v : constraints) {
    if (v > 0) sum += v;
  }
  return sum;
}

// Optuna's _dominates: COMPLETE trials by their values (maximized ones negated).
bool Dominates(const FrozenTrial& a, const FrozenTrial& b,
               const std::vector<StudyDirection>& directions) {
  if (a.state != TrialState::kComplete) return false;
  if (b.state != TrialState::kComplete) return true;
  if (a.values.size() != b.values.size() || a.values.size() != directions.size()) return false;
  bool equal = true;
  bool no_worse = true;
  for (size_t k = 0; k < directions.size(); ++k) {
    double sign = directions[k] == StudyDirection::kMaximize ? -1.0 : 1.0;
    double va = sign * a.values[k];
    double vb = sign * b.values[k];
    equal = equal && va == vb;
    no_worse = no_worse && va <= vb;
  }
  return !equal && no_worse;
}

// Optuna 5.0's _constrained_dominates: COMPLETE beats the rest, feasible beats infeasible (a
// trial without constraints is feasible), the smaller total violation wins among infeasible
// ones, and feasible trials compare by domination.
bool ConstrainedDominates50(const FrozenTrial& a, const FrozenTrial& b,
                            const std::vector<StudyDirection>& directions) {
  if (a.state != TrialState::kComplete) return false;
  if (b.state != TrialState::kComplete) return true;
  const std::map<std::string, double> ca = TrialConstraints(a), cb = TrialConstraints(b);
  auto feasible = [](const std::map<std::string, double>& c) {
    return std::all_of(c.begin(), c.end(), [](const auto& kv) { return kv.second <= 0; });
  };
  const bool fa = feasible(ca), fb = feasible(cb);
  if (fa && fb) return Dominates(a, b, directions);
  if (fa || fb) return fa;
  return ConstraintViolation(ca) < ConstraintViolation(cb);
}

// Optuna 5.0's _is_constrained_optimization: whether any trial has constraints.
bool AnyConstraints(const TrialPtrs& trials) {
  return std::any_of(trials.begin(), trials.end(),
                     [](const auto& t) { return !TrialConstraints(*t).empty(); });
}

// Optuna 4.9's _constrained_dominates: feasible beats infeasible, the smaller total violation
// wins among infeasible ones, trials without constraint values lose to those with them.
bool ConstrainedDominates(const FrozenTrial& a, const FrozenTrial& b,
                          const std::vector<StudyDirection>& directions) {
  auto ca = ConstraintsOf(a);
  auto cb = ConstraintsOf(b);
  if (!ca && !cb) return Dominates(a, b, directions);
  if (!ca || !cb) return ca.has_value();
  if (ca->size() != cb->size()) return false;  // Optuna raises ValueError
  if (a.state != TrialState::kComplete) return false;
  if (b.state != TrialState::kComplete) return true;
  bool fa = std::all_of(ca->begin(), ca->end(), [](double v) { return v <= 0; });
  bool fb = std::all_of(cb->begin(), cb->end(), [](double v) { return v <= 0; });
  if (fa && fb) return Dominates(a, b, directions);
  if (fa || fb) return fa;
  return Violation(*ca) < Violation(*cb);
}

// Optuna's _validate_constraints: a NaN value is an error, and (Optuna 4.9, `same_count`)
// so are trials with different numbers of constraints.
Status ValidateConstraints(const TrialPtrs& population, bool same_count) {
  size_t n = 0;
  for (const auto& t : population) {
    if (auto c = ConstraintsOf(*t)) n = std::max(n, c->size());
  }
  for (const auto& t : population) {
    auto c = ConstraintsOf(*t);
    if (!c) continue;
    if (std::any_of(c->begin(), c->end(), [](double v) { return std::isnan(v); })) {
      return InvalidArgumentError(fmt::format(
          "NSGA-II: trial {} has a NaN constraint value (system attribute \"constraints\")",
          t->number));
    }
    if (same_count && c->size() != n) {
      return InvalidArgumentError(fmt::format(
          "NSGA-II: trial {} has {} constraint values, other trials {}; trials with different "
          "numbers of constraints cannot be compared",
          t->number, c->size(), n));
    }
  }
  return Status::Ok();
}

// Optuna's _rank_population: the population by non-domination rank, each rank in order. With
// `constrained`, a trial's penalty is its violation; one without constraints has a NaN penalty
// (Optuna 4.9) or, with `missing_feasible` (5.0), none.
std::vector<TrialPtrs> RankPopulation(const TrialPtrs& population,
                                      const std::vector<StudyDirection>& directions,
                                      bool constrained, bool missing_feasible) {
  LossPoints losses;
  std::vector<double> penalty;
  for (const auto& t : population) {
    std::vector<double> loss = t->values;
    for (size_t k = 0; k < loss.size() && k < directions.size(); ++k) {
      if (directions[k] == StudyDirection::kMaximize) loss[k] = -loss[k];
    }
    losses.push_back(std::move(loss));
    if (constrained) {
      auto c = ConstraintsOf(*t);
      penalty.push_back(c                  ? Violation(*c)
                        : missing_feasible ? 0.0
                                           : std::numeric_limits<double>::quiet_NaN());
    }
  }
  std::vector<int> ranks = FastNondominationRank(losses, penalty, 0);
  std::vector<TrialPtrs> by_rank(
      static_cast<size_t>(*std::max_element(ranks.begin(), ranks.end())) + 1);
  for (size_t i = 0; i < population.size(); ++i) {
    if (ranks[i] >= 0) by_rank[static_cast<size_t>(ranks[i])].push_back(population[i]);
  }
  return by_rank;
}

}  // namespace

Result<TrialPtrs> SelectElitePopulation(const TrialPtrs& population,
                                        const std::vector<StudyDirection>& directions,
                                        int population_size, std::optional<bool> constraints) {
  const bool constrained = constraints.value_or(AnyConstraints(population));
  if (constrained) TUNE_RETURN_IF_ERROR(ValidateConstraints(population, constraints.has_value()));
  if (population.empty()) return TrialPtrs{};
  TrialPtrs elite;
  const auto size = static_cast<size_t>(population_size);
  for (const TrialPtrs& front :
       RankPopulation(population, directions, constrained, !constraints.has_value())) {
    if (elite.size() + front.size() < size) {
      elite.insert(elite.end(), front.begin(), front.end());
      continue;
    }
    LossPoints values;
    for (const auto& t : front) values.push_back(t->values);
    std::vector<size_t> order = CrowdingDistanceSort(values);
    for (size_t i = 0; elite.size() < size && i < order.size(); ++i) {
      elite.push_back(front[order[i]]);
    }
    break;
  }
  return elite;
}

// ---------------------------------------------------------------------------------------------
// State: what the sampler keeps between calls.

class NsgaIISampler::State {
 public:
  // The generation attribute of a trial, cached for finished (immutable) trials.
  int Generation(const FrozenTrial& t) {
    if (!IsFinished(t.state)) return GenerationAttr(t);
    auto n = static_cast<size_t>(t.number);
    if (n >= generations_.size()) generations_.resize(n + 1, kUnread);
    if (generations_[n] == kUnread) generations_[n] = GenerationAttr(t);
    return generations_[n];
  }

  // The intersection of the distributions of COMPLETE trials (Optuna's IntersectionSearchSpace);
  // nullopt before the first COMPLETE trial. The part over a prefix of finished trials is kept.
  std::optional<SearchSpace> Intersection(const TrialHistory& history) {
    size_t k = 0;
    while (k < prefix_.size() && k < history.trials.size() &&
           prefix_[k] == history.trials[k].get()) {
      ++k;
    }
    if (k < prefix_.size()) {  // another history: start again
      prefix_.clear();
      prefix_space_.reset();
    }
    for (size_t i = prefix_.size(); i < history.trials.size(); ++i) {
      const FrozenTrial& t = *history.trials[i];
      if (!IsFinished(t.state)) break;
      Intersect(prefix_space_, t);
      prefix_.push_back(&t);
    }
    std::optional<SearchSpace> space = prefix_space_;
    for (size_t i = prefix_.size(); i < history.trials.size(); ++i) {
      Intersect(space, *history.trials[i]);
    }
    return space;
  }

  // The parents BeforeSample found for trial `number`, in the order Optuna would use them.
  struct Pending {
    int64_t number = -1;
    TrialPtrs parents;
  };
  Pending pending;
  bool warned_constraints = false;

  // The trials of `history` whose ids are in `ids` (a JSON list), in order of number; the last
  // answer per key is kept, as parent lists are read again for every trial of a generation.
  TrialPtrs TrialsWithIds(const std::string& key, const TrialHistory& history, const Json& ids) {
    auto& [cached_ids, trials] = parent_lists_[key];
    if (cached_ids != ids || trials.size() != ids.size() || !InHistory(history, trials)) {
      cached_ids = ids;
      trials = FindTrialsWithIds(history, ids);
    }
    return trials;
  }

 private:
  static constexpr int kUnread = -2;

  static void Intersect(std::optional<SearchSpace>& space, const FrozenTrial& t) {
    if (t.state != TrialState::kComplete) return;
    if (!space) {
      space = SearchSpace(t.distributions.begin(), t.distributions.end());
      return;
    }
    for (auto it = space->begin(); it != space->end();) {
      auto found = t.distributions.find(it->first);
      it = found != t.distributions.end() && found->second == it->second ? std::next(it)
                                                                         : space->erase(it);
    }
  }

  static TrialPtrs FindTrialsWithIds(const TrialHistory& history, const Json& ids) {
    std::set<int64_t> wanted;
    for (const Json& id : ids) {
      if (auto v = IntegerOf(id)) wanted.insert(*v);
    }
    TrialPtrs out;
    for (const auto& t : history.trials) {
      if (wanted.count(t->trial_id)) out.push_back(t);
    }
    return out;
  }
  // Whether `trials` are still the history's (finished trials keep their objects).
  static bool InHistory(const TrialHistory& history, const TrialPtrs& trials) {
    return std::all_of(trials.begin(), trials.end(), [&](const auto& t) {
      auto n = static_cast<size_t>(t->number);
      return n < history.trials.size() && history.trials[n] == t;
    });
  }

  std::map<std::string, std::pair<Json, TrialPtrs>> parent_lists_;
  std::vector<int> generations_;
  std::vector<const FrozenTrial*> prefix_;
  std::optional<SearchSpace> prefix_space_;
};

// ---------------------------------------------------------------------------------------------
// Generations and parents (Optuna's BaseGASampler).

namespace {

// Optuna's get_trial_generation for a trial without one: the newest generation among COMPLETE
// trials, or the next once it holds population_size of them.
int NextGeneration(const TrialHistory& history, int population_size,
                   const std::function<int(const FrozenTrial&)>& generation_of) {
  int max_generation = 0;
  int count = 0;
  for (auto it = history.trials.rbegin(); it != history.trials.rend(); ++it) {
    if ((*it)->state != TrialState::kComplete) continue;
    int g = generation_of(**it);
    if (g < max_generation) continue;
    if (g > max_generation) {
      max_generation = g;
      count = 1;
    } else {
      ++count;
    }
  }
  return count < population_size ? max_generation : max_generation + 1;
}

}  // namespace

NsgaIISampler::NsgaIISampler(NsgaIIOptions options)
    : options_(options), state_(std::make_unique<State>()) {}

NsgaIISampler::~NsgaIISampler() = default;

namespace {

// What finding a generation's parents needs: the sampler's options and state, the history, the
// study's cached parent lists and where new ones go.
struct ParentSearch {
  const NsgaIIOptions& options;
  NsgaIISampler::State& state;
  const TrialHistory& history;
  const StudyAttrReader& cached;
  Json& written;
  std::function<int(const FrozenTrial&)> generation_of;

  // Optuna's get_population: the COMPLETE trials of generation g.
  TrialPtrs Population(int g) const {
    TrialPtrs out;
    for (const auto& t : history.trials) {
      if (t->state == TrialState::kComplete && generation_of(*t) == g) out.push_back(t);
    }
    return out;
  }

  // Optuna's get_parent_population: cached (order of number) or selected now (elite order) and
  // cached.
  Result<TrialPtrs> Parents(int g) {
    if (g <= 0) return TrialPtrs{};
    const std::string key = kNsgaIIParentKeyPrefix + std::to_string(g);
    if (auto it = written.find(key); it != written.end()) {
      return state.TrialsWithIds(key, history, *it);
    }
    TUNE_ASSIGN_OR_RETURN(std::optional<Json> stored, cached(key));
    if (stored && !stored->is_null()) return state.TrialsWithIds(key, history, *stored);
    TUNE_ASSIGN_OR_RETURN(TrialPtrs previous, Parents(g - 1));
    TrialPtrs pool = Population(g - 1);
    pool.insert(pool.end(), previous.begin(), previous.end());
    TUNE_ASSIGN_OR_RETURN(TrialPtrs elite,
                          SelectElitePopulation(pool, history.directions, options.population_size,
                                                options.constraints));
    Json ids = Json::array();
    for (const auto& t : elite) ids.push_back(t->trial_id);
    written[key] = std::move(ids);
    return elite;
  }
};

}  // namespace

Result<SamplerRecords> NsgaIISampler::BeforeSample(const TrialHistory& history,
                                                   const FrozenTrial& trial,
                                                   const StudyAttrReader& study_attrs) {
  SamplerRecords records;
  auto generation_of = [this](const FrozenTrial& t) { return state_->Generation(t); };
  int generation = GenerationAttr(trial);
  if (generation == kNoGeneration) {
    generation = NextGeneration(history, options_.population_size, generation_of);
    records.trial_system_attrs[kNsgaIIGenerationKey] = generation;
  }
  ParentSearch search{options_,     *state_, history, study_attrs, records.study_system_attrs,
                      generation_of};
  TUNE_ASSIGN_OR_RETURN(TrialPtrs parents, search.Parents(generation));
  state_->pending = {trial.number, std::move(parents)};
  return records;
}

SearchSpace NsgaIISampler::InferRelativeSearchSpace(const TrialHistory& history) {
  std::optional<SearchSpace> space = state_->Intersection(history);
  if (!space) return {};
  for (auto it = space->begin(); it != space->end();) {
    it = IsSingle(it->second) ? space->erase(it) : std::next(it);
  }
  return *space;
}

double NsgaIISampler::SampleIndependent(const TrialHistory& /*history*/,
                                        const FrozenTrial& /*trial*/, const std::string& /*name*/,
                                        const Distribution& distribution, Rng& rng) {
  return SampleUniform(distribution, rng);
}

std::map<std::string, double> NsgaIISampler::SampleRelative(const TrialHistory& history,
                                                            const FrozenTrial& trial,
                                                            const SearchSpace& space, Rng& rng) {
  RngGaRandom random(rng);
  return SampleRelative(history, trial, space, random);
}

// ---------------------------------------------------------------------------------------------
// Children (Optuna's NSGAIIChildGenerationStrategy and perform_crossover).

namespace {

bool IsNumerical(const Distribution& d) {
  return !std::holds_alternative<CategoricalDistribution>(d);
}

// Optuna's _SearchSpaceTransform (transform_log, transform_step) for one numerical parameter.
double Transform(const Distribution& d, double v) {
  bool log = std::visit(
      [](const auto& x) {
        if constexpr (requires { x.log; })
          return x.log;
        else
          return false;
      },
      d);
  return log ? std::log(v) : v;
}

std::pair<double, double> TransformedBounds(const Distribution& d) {
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    if (f->step) return {f->low - 0.5 * *f->step, f->high + 0.5 * *f->step};
    if (f->log) return {std::log(f->low), std::log(f->high)};
    return {f->low, f->high};
  }
  const auto& i = std::get<IntDistribution>(d);
  double half = 0.5 * static_cast<double>(i.step);
  auto low = static_cast<double>(i.low);
  auto high = static_cast<double>(i.high);
  if (i.log) return {std::log(low - half), std::log(high + half)};
  return {low - half, high + half};
}

// Optuna's _untransform_numerical_param (numpy's round: half to even, as std::nearbyint).
double Untransform(const Distribution& d, double t) {
  if (const auto* f = std::get_if<FloatDistribution>(&d)) {
    double below_high = std::nextafter(f->high, -std::numeric_limits<double>::infinity());
    if (f->log) return std::min(std::exp(t), below_high);
    if (f->step) {
      return std::clamp(std::nearbyint((t - f->low) / *f->step) * *f->step + f->low, f->low,
                        f->high);
    }
    return std::min(t, below_high);
  }
  const auto& i = std::get<IntDistribution>(d);
  auto low = static_cast<double>(i.low);
  auto high = static_cast<double>(i.high);
  if (i.log) return std::clamp(std::nearbyint(std::exp(t)), low, high);
  auto step = static_cast<double>(i.step);
  return std::clamp(std::nearbyint((t - low) / step) * step + low, low, high);
}

using Dominance = bool (*)(const FrozenTrial&, const FrozenTrial&,
                           const std::vector<StudyDirection>&);

// Optuna's _select_parents: n binary tournaments, each among the parents not yet chosen.
TrialPtrs SelectParents(const TrialPtrs& population, int n, Dominance dominates,
                        const std::vector<StudyDirection>& directions, GaRandom& random) {
  TrialPtrs chosen;
  for (int k = 0; k < n; ++k) {
    TrialPtrs pool;
    for (const auto& t : population) {
      if (std::find(chosen.begin(), chosen.end(), t) == chosen.end()) pool.push_back(t);
    }
    const auto& c0 = pool[random.Choice(pool.size())];
    const auto& c1 = pool[random.Choice(pool.size())];
    chosen.push_back(dominates(*c0, *c1, directions) ? c0 : c1);
  }
  return chosen;
}

double ParamOf(const FrozenTrial& t, const std::string& name) {
  auto it = t.params.find(name);
  return it == t.params.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

struct CrossoverJob {
  const NsgaIIOptions& options;
  const TrialPtrs& population;
  const std::vector<StudyDirection>& directions;
  Dominance dominates;
  std::vector<std::pair<std::string, Distribution>> categorical;
  std::vector<std::pair<std::string, Distribution>> numerical;
  std::vector<std::pair<double, double>> bounds;

  // Optuna's _try_crossover: categorical parameters from the first or the last parent, then the
  // numerical crossover in the transformed space.
  Child Try(GaRandom& random) const {
    TrialPtrs parents = SelectParents(population, CrossoverParents(options.crossover), dominates,
                                      directions, random);
    Child child;
    std::vector<double> swap(categorical.size());
    for (double& u : swap) u = random.Rand();
    for (size_t i = 0; i < categorical.size(); ++i) {
      const auto& from = swap[i] >= options.swapping_prob ? parents.back() : parents.front();
      child.emplace_back(categorical[i].first, ParamOf(*from, categorical[i].first));
    }
    if (numerical.empty()) return child;
    std::vector<std::vector<double>> rows;
    for (const auto& p : parents) {
      std::vector<double> row;
      for (const auto& [name, d] : numerical) row.push_back(Transform(d, ParamOf(*p, name)));
      rows.push_back(std::move(row));
    }
    std::vector<double> c = Crossover(options, rows, bounds, directions.size() > 1, random);
    for (size_t i = 0; i < numerical.size(); ++i) {
      child.emplace_back(numerical[i].first, Untransform(numerical[i].second, c[i]));
    }
    return child;
  }
};

bool InSpace(const Child& child, const SearchSpace& space) {
  return std::all_of(child.begin(), child.end(),
                     [&](const auto& p) { return Contains(space.at(p.first), p.second); });
}

}  // namespace

namespace {

// Optuna's perform_crossover: tournaments and crossover until the child lies in `space`; nullopt
// (with a warning) when there are too few parents or no child fits after kMaxCrossoverTries.
std::optional<Child> PerformCrossover(const NsgaIIOptions& options, const TrialPtrs& parents,
                                      const SearchSpace& space,
                                      const std::vector<StudyDirection>& directions, int64_t number,
                                      GaRandom& random) {
  if (parents.size() < static_cast<size_t>(CrossoverParents(options.crossover))) {
    spdlog::warn(
        "NSGA-II: trial {}: {} parents, fewer than the crossover needs; sampling at "
        "random",
        number, parents.size());
    return std::nullopt;
  }
  CrossoverJob job{options,
                   parents,
                   directions,
                   !options.constraints
                       ? (AnyConstraints(parents) ? ConstrainedDominates50 : Dominates)
                   : *options.constraints ? ConstrainedDominates
                                          : Dominates,
                   {},
                   {},
                   {}};
  for (const auto& [name, d] : space) {
    if (IsNumerical(d)) {
      job.numerical.emplace_back(name, d);
      job.bounds.push_back(TransformedBounds(d));
    } else {
      job.categorical.emplace_back(name, d);
    }
  }
  for (int tries = 0; tries < kMaxCrossoverTries; ++tries) {
    Child child = job.Try(random);
    if (InSpace(child, space)) return child;
  }
  spdlog::warn(
      "NSGA-II: trial {}: no crossover child in the search space after {} tries; "
      "sampling at random",
      number, kMaxCrossoverTries);
  return std::nullopt;
}

}  // namespace

std::map<std::string, double> NsgaIISampler::SampleRelative(const TrialHistory& history,
                                                            const FrozenTrial& trial,
                                                            const SearchSpace& space,
                                                            GaRandom& random) {
  if (state_->pending.number != trial.number) {
    Result<SamplerRecords> found = BeforeSample(history, trial, ReadFrom(Json::object()));
    if (!found.ok()) {
      spdlog::warn("NSGA-II: trial {}: {}; sampling at random", trial.number,
                   found.status().message());
      return {};
    }
  }
  const TrialPtrs& parents = state_->pending.parents;
  if (parents.empty()) return {};
  Child child;
  if (random.Rand() < options_.crossover_prob) {
    std::optional<Child> crossed =
        PerformCrossover(options_, parents, space, history.directions, trial.number, random);
    if (!crossed) return {};
    child = std::move(*crossed);
  } else {
    const auto& parent = parents[random.Choice(parents.size())];
    for (const auto& [name, d] : space) child.emplace_back(name, ParamOf(*parent, name));
  }
  // Mutation: each parameter is left to SampleIndependent with probability mutation_prob.
  double mutation_prob =
      options_.mutation_prob.value_or(1.0 / std::max(1.0, static_cast<double>(child.size())));
  std::map<std::string, double> out;
  for (const auto& [name, value] : child) {
    if (random.Rand() >= mutation_prob) out[name] = value;
  }
  return out;
}

}  // namespace tune

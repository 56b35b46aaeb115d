// The tune side of the differential tests against Optuna (tests/differential/README.md).
//
//   tune_diff_driver tpe     < cases.json > tune.json
//   tune_diff_driver pruners < cases.json > tune.json
//   tune_diff_driver hypervolume < cases.json > tune.json
//   tune_diff_driver multi_objective < cases.json > tune.json
//   tune_diff_driver nsgaii < cases.json > tune.json
//
// Reads a JSON document of cases on stdin and prints what tune computes for them, for
// tests/differential/tpe_diff.py and pruner_diff.py to compare with Optuna 4.9. Non-finite
// numbers travel as the strings "nan", "inf" and "-inf" both ways (JSON has no literal for them).
//
// tpe: each case is a study snapshot (trials with states, values, reports, params, attributes),
// the asking trial's number, TPE options and queries; a query is a search space (one parameter:
// independent sampling; several: joint sampling) and candidate points. Output per query: the
// below/above split, every kernel of l and g (mixture weight; per dimension mu, sigma and the
// domain [low, high] in the transformed space, or the choice probabilities) and ln l, ln g at the
// points. Per case also the relative search space (multivariate) and the groups (group).
//
// pruners: each case is a pruner configuration and a script of events (trial starts, reports,
// prune checks, finishes), replayed on an in-memory study: output the decision and the system
// attributes written at every prune check, and the hyperband bracket of each trial number.
//
// hypervolume: each case is points in loss space and a reference point; output the hypervolume
// (or the error when the points do not dominate the reference).
//
// multi_objective: each case names an operation ("rank", "front", "reference", "hssp", "split",
// "weights", "crowding") and its inputs; output what samplers/multi_objective.h computes.
//
// nsgaii: each case is an elite selection (values, constraints: per trial null, the old list or
// an object of system attributes; "constrained" true, false or "auto" as the option
// "constraints"), a crossover (parents, bounds, options) or a proposal (a study snapshot with its
// system attributes, the asking trial, options), with a stream of uniform draws that stands in
// for the RNG; output the elite, the child, or the generation, the parent lists written, the
// relative search space and params, and how many draws were taken.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "samplers/hypervolume.h"
#include "samplers/multi_objective.h"
#include "samplers/parzen_estimator.h"
#include "samplers/tpe_model.h"
#include "tune/distributions.h"
#include "tune/pruners/hyperband.h"
#include "tune/pruners/patient.h"
#include "tune/pruners/percentile.h"
#include "tune/pruners/pruner.h"
#include "tune/pruners/successive_halving.h"
#include "tune/pruners/threshold.h"
#include "tune/samplers/nsgaii.h"
#include "tune/samplers/tpe.h"
#include "tune/trial.h"

namespace tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "tune_diff_driver: %s\n", message.c_str());
  std::exit(2);
}

// A number, or one of the strings "nan", "inf", "-inf".
double Num(const Json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return kNaN;
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
  }
  Die("not a number: " + j.dump());
}

Json Out(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

Json OutVector(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(Out(x));
  return a;
}

// Decodes "nan"/"inf"/"-inf" strings inside attribute values (constraints lists).
Json DecodeAttrs(const Json& j) {
  if (j.is_array()) {
    Json a = Json::array();
    for (const Json& e : j) a.push_back(DecodeAttrs(e));
    return a;
  }
  if (j.is_object()) {
    Json o = Json::object();
    for (const auto& [k, v] : j.items()) o[k] = DecodeAttrs(v);
    return o;
  }
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan" || s == "inf" || s == "-inf") return Num(j);
  }
  return j;
}

Distribution ParseDistribution(const Json& j) {
  Result<Distribution> d = DistributionFromJson(j.get<std::string>());
  if (!d.ok()) Die("bad distribution " + j.dump() + ": " + d.status().ToString());
  return *d;
}

TrialState ParseState(const Json& j) {
  Result<TrialState> s = ParseTrialState(j.get<std::string>());
  if (!s.ok()) Die("bad state " + j.dump());
  return *s;
}

StudyDirection ParseDirection(const Json& j) {
  Result<StudyDirection> d = ParseStudyDirection(j.get<std::string>());
  if (!d.ok()) Die("bad direction " + j.dump());
  return *d;
}

// {"number", "state", "values", "intermediate": [[step, value], ...], "params": {name: internal},
//  "distributions": {name: distribution JSON}, "user_attrs", "system_attrs"}
FrozenTrial ParseTrial(const Json& j) {
  FrozenTrial t;
  t.number = j.at("number").get<int64_t>();
  t.trial_id = j.value("trial_id", t.number + 1);
  t.state = ParseState(j.at("state"));
  for (const Json& v : j.value("values", Json::array())) t.values.push_back(Num(v));
  for (const Json& r : j.value("intermediate", Json::array())) {
    t.intermediate_values[r.at(0).get<int64_t>()] = Num(r.at(1));
  }
  const Json distributions = j.value("distributions", Json::object());
  for (const auto& [name, d] : distributions.items()) {
    t.distributions[name] = ParseDistribution(d);
    t.params[name] = Num(j.at("params").at(name));
  }
  t.user_attrs = DecodeAttrs(j.value("user_attrs", Json::object()));
  t.system_attrs = DecodeAttrs(j.value("system_attrs", Json::object()));
  return t;
}

// ---------------------------------------------------------------------------------------------
// tpe

// The case's options over its preset ("optuna-4.9" unless named: the cases against Optuna 4.9
// name every option they change; those against 5.0 name "optuna-5.0").
TpeOptions ParseTpeOptions(const Json& j) {
  const bool v50 = j.value("preset", std::string("optuna-4.9")) == "optuna-5.0";
  TpeOptions o = TpePresetOptions(v50 ? TpePreset::kOptuna50 : TpePreset::kOptuna49);
  o.n_startup_trials = 0;
  o.prior_weight = j.value("prior_weight", 1.0);
  o.consider_magic_clip = j.value("consider_magic_clip", true);
  o.consider_endpoints = j.value("consider_endpoints", false);
  if (j.contains("multivariate") && j.at("multivariate").is_null()) {
    o.multivariate.reset();
  } else if (j.contains("multivariate")) {
    o.multivariate = j.at("multivariate").get<bool>();
  }
  o.group = j.value("group", false);
  o.constant_liar = j.value("constant_liar", o.constant_liar);
  o.constraints = j.value("constraints", o.constraints);
  if (j.contains("multivariate_bandwidth")) {
    o.multivariate_bandwidth = j.at("multivariate_bandwidth") == "scott"
                                   ? MultivariateBandwidth::kScott
                                   : MultivariateBandwidth::kPerDimension;
  }
  o.oom_feasibility = false;  // not part of the model (docs/tpe.md#oom-feasibility)
  const Json& gamma = j.value("gamma", Json("default"));
  if (gamma.is_number()) {
    o.gamma_ratio = gamma.get<double>();
    o.gamma_uncapped_multi_objective = false;
  } else if (gamma == "hyperopt") {
    o.gamma_hyperopt = true;
    o.gamma_uncapped_multi_objective = false;
  }
  if (j.value("weights", std::string("default")) == "uniform") o.weights = WeightRule::kUniform;
  return o;
}

Json EstimatorJson(const ParzenEstimator& e, const std::vector<std::string>& names) {
  Json out;
  out["weights"] = OutVector(e.weights());
  Json dims = Json::object();
  for (size_t d = 0; d < e.n_dims(); ++d) {
    const ParzenDimension& dim = e.dim(d);
    Json k;
    if (dim.kind == KernelKind::kCategorical) {
      k["kind"] = "categorical";
      Json rows = Json::array();
      for (size_t i = 0; i < e.n_components(); ++i) {
        rows.push_back(OutVector(e.CategoricalProbabilities(d, i)));
      }
      k["probs"] = rows;
    } else {
      k["kind"] = dim.kind == KernelKind::kContinuous ? "continuous" : "discrete";
      k["mu"] = OutVector(e.mus(d));
      k["sigma"] = OutVector(e.sigmas(d));
      k["low"] = Out(dim.low);
      k["high"] = Out(dim.high);
    }
    dims[names[d]] = k;
  }
  out["dims"] = dims;
  return out;
}

Json RunTpeCase(const Json& c) {
  TrialHistory h;
  h.study_name = c.value("study_name", std::string("diff"));
  if (c.contains("directions")) {
    for (const Json& d : c.at("directions")) h.directions.push_back(ParseDirection(d));
  } else {
    h.directions = {ParseDirection(c.at("direction"))};
  }
  for (const Json& t : c.at("trials")) {
    h.trials.push_back(std::make_shared<const FrozenTrial>(ParseTrial(t)));
  }
  const int64_t asking_number = c.at("trial_number").get<int64_t>();
  FrozenTrial asking;
  asking.number = asking_number;
  for (const auto& t : h.trials) {
    if (t->number == asking_number) asking = *t;
  }

  TpeSampler tpe(ParseTpeOptions(c.at("options")));
  Json out;
  out["id"] = c.at("id");
  if (tpe.options().Multivariate(h.directions.size())) {
    Json space = Json::object();
    for (const auto& [name, d] : tpe.InferRelativeSearchSpace(h)) {
      space[name] = DistributionToJson(d);
    }
    out["relative_space"] = space;
    if (tpe.options().group) out["groups"] = tpe.Groups(h);
  }
  Json queries = Json::array();
  for (const Json& q : c.at("queries")) {
    SearchSpace space;
    for (const auto& [name, d] : q.at("distributions").items()) {
      space[name] = ParseDistribution(d);
    }
    TpeModel model = tpe.Model(h, asking, space);
    // Candidate points, internal representation -> the estimators' transformed space.
    std::vector<std::vector<double>> points;
    for (const std::string& name : model.names) {
      std::vector<double> column;
      for (const Json& v : q.at("points").at(name)) {
        column.push_back(ToParzenSpace(space.at(name), Num(v)));
      }
      points.push_back(std::move(column));
    }
    Json r;
    r["below"] = model.split.below;
    r["above"] = model.split.above;
    r["l"] = EstimatorJson(model.below, model.names);
    r["g"] = EstimatorJson(model.above, model.names);
    r["log_l"] = OutVector(model.below.LogPdf(points));
    r["log_g"] = OutVector(model.above.LogPdf(points));
    queries.push_back(r);
  }
  out["queries"] = queries;
  return out;
}

// ---------------------------------------------------------------------------------------------
// pruners

std::unique_ptr<Pruner> MakePruner(const Json& j) {
  const std::string kind = j.at("kind").get<std::string>();
  if (kind == "median" || kind == "percentile") {
    PercentileOptions o;
    o.percentile = j.value("percentile", 50.0);
    o.n_startup_trials = j.value("n_startup_trials", int64_t{5});
    o.n_warmup_steps = j.value("n_warmup_steps", int64_t{0});
    o.interval_steps = j.value("interval_steps", int64_t{1});
    o.n_min_trials = j.value("n_min_trials", int64_t{1});
    if (kind == "median") return std::make_unique<MedianPruner>(o);
    return std::make_unique<PercentilePruner>(o);
  }
  if (kind == "successive_halving") {
    SuccessiveHalvingOptions o;
    if (j.contains("min_resource") && j.at("min_resource").is_number()) {
      o.min_resource = j.at("min_resource").get<int64_t>();
    }
    o.reduction_factor = j.value("reduction_factor", int64_t{4});
    o.min_early_stopping_rate = j.value("min_early_stopping_rate", int64_t{0});
    o.bootstrap_count = j.value("bootstrap_count", int64_t{0});
    return std::make_unique<SuccessiveHalvingPruner>(o);
  }
  if (kind == "hyperband") {
    HyperbandOptions o;
    o.min_resource = j.value("min_resource", int64_t{1});
    if (j.contains("max_resource") && j.at("max_resource").is_number()) {
      o.max_resource = j.at("max_resource").get<int64_t>();
    }
    o.reduction_factor = j.value("reduction_factor", int64_t{3});
    o.bootstrap_count = j.value("bootstrap_count", int64_t{0});
    return std::make_unique<HyperbandPruner>(o);
  }
  if (kind == "patient") {
    PatientOptions o;
    o.patience = j.at("patience").get<int64_t>();
    o.min_delta = j.value("min_delta", 0.0);
    std::unique_ptr<Pruner> wrapped;
    if (j.contains("wrapped") && !j.at("wrapped").is_null()) wrapped = MakePruner(j.at("wrapped"));
    return std::make_unique<PatientPruner>(std::move(wrapped), o);
  }
  if (kind == "threshold") {
    ThresholdOptions o;
    if (j.contains("lower") && !j.at("lower").is_null()) o.lower = Num(j.at("lower"));
    if (j.contains("upper") && !j.at("upper").is_null()) o.upper = Num(j.at("upper"));
    o.n_warmup_steps = j.value("n_warmup_steps", int64_t{0});
    o.interval_steps = j.value("interval_steps", int64_t{1});
    return std::make_unique<ThresholdPruner>(o);
  }
  Die("unknown pruner " + kind);
}

// Replays the events on an in-memory study, as tune's Study/Trial do (src/study/study.cpp): a
// report is stored at once (a repeated step is ignored), a prune check hands the pruner the study
// as it is now and this trial, and the system attributes the pruner returns are stored on the
// trial. Events: {"op": "start"} (the next number), {"op": "report", "trial", "step", "value"},
// {"op": "check", "trial"}, {"op": "finish", "trial", "state", "value"}.
Json RunPrunerCase(const Json& c) {
  std::unique_ptr<Pruner> pruner = MakePruner(c.at("pruner"));
  std::string study_name = c.value("study_name", std::string("diff"));
  StudyDirection direction = ParseDirection(c.at("direction"));
  std::vector<FrozenTrial> trials;
  Json decisions = Json::array();
  Json brackets = Json::array();
  auto* hyperband = dynamic_cast<HyperbandPruner*>(pruner.get());
  for (const Json& e : c.at("events")) {
    const std::string op = e.at("op").get<std::string>();
    if (op == "start") {
      FrozenTrial t;
      t.number = static_cast<int64_t>(trials.size());
      t.trial_id = t.number + 1;
      t.state = TrialState::kRunning;
      trials.push_back(std::move(t));
      continue;
    }
    FrozenTrial& t = trials.at(e.at("trial").get<size_t>());
    if (op == "report") {
      t.intermediate_values.try_emplace(e.at("step").get<int64_t>(), Num(e.at("value")));
    } else if (op == "check") {
      TrialHistory h;
      h.study_name = study_name;
      h.directions = {direction};
      for (const FrozenTrial& x : trials) h.trials.push_back(std::make_shared<FrozenTrial>(x));
      PruneDecision d = pruner->Prune(h, t);
      for (const auto& [key, value] : d.system_attrs.items()) t.system_attrs[key] = value;
      Json attrs = Json::object();
      for (const auto& [key, value] : d.system_attrs.items()) {
        attrs[key] = value.is_number() ? Out(value.get<double>()) : value;
      }
      decisions.push_back({{"trial", t.number}, {"prune", d.prune}, {"attrs", attrs}});
    } else if (op == "finish") {
      t.state = ParseState(e.at("state"));
      t.values.clear();
      if (e.contains("value") && !e.at("value").is_null()) t.values = {Num(e.at("value"))};
    } else {
      Die("unknown event " + op);
    }
  }
  if (hyperband != nullptr) {
    for (int64_t n = 0; n < c.value("bracket_numbers", int64_t{0}); ++n) {
      brackets.push_back(hyperband->BracketId(study_name, n));
    }
  }
  Json out;
  out["id"] = c.at("id");
  out["decisions"] = decisions;
  out["brackets"] = brackets;
  return out;
}

Json RunHypervolumeCase(const Json& c) {
  std::vector<std::vector<double>> points;
  for (const Json& p : c.at("points")) {
    std::vector<double> v;
    for (const Json& x : p) v.push_back(Num(x));
    points.push_back(std::move(v));
  }
  std::vector<double> reference;
  for (const Json& x : c.at("reference")) reference.push_back(Num(x));
  Result<double> hv = Hypervolume(std::move(points), reference);
  if (!hv.ok()) return Json{{"id", c.at("id")}, {"error", hv.status().message()}};
  return Json{{"id", c.at("id")}, {"hv", Out(*hv)}};
}

LossPoints PointsOf(const Json& rows) {
  LossPoints points;
  for (const Json& p : rows) {
    std::vector<double> v;
    for (const Json& x : p) v.push_back(Num(x));
    points.push_back(std::move(v));
  }
  return points;
}

std::vector<double> NumbersOf(const Json& list) {
  std::vector<double> v;
  for (const Json& x : list) v.push_back(Num(x));
  return v;
}

Json RunMultiObjectiveCase(const Json& c) {
  const std::string op = c.at("op");
  const LossPoints losses = PointsOf(c.at("losses"));
  Json out{{"id", c.at("id")}};
  if (op == "rank") {
    out["ranks"] = FastNondominationRank(losses, NumbersOf(c.value("penalty", Json::array())),
                                         c.value("n_below", 0));
  } else if (op == "front") {
    std::vector<int> front;
    for (char f : IsParetoFront(losses)) front.push_back(f);
    out["front"] = front;
  } else if (op == "reference") {
    out["reference"] = OutVector(ReferencePoint(losses));
  } else if (op == "hssp") {
    out["selected"] = SolveHssp(losses, c.at("ids").get<std::vector<int64_t>>(),
                                c.at("subset_size"), NumbersOf(c.at("reference")));
  } else if (op == "split") {
    out["below"] = SplitBelowMultiObjective(losses, c.at("n_below"));
  } else if (op == "weights") {
    std::vector<char> feasible;
    for (const Json& f : c.at("feasible")) feasible.push_back(f.get<bool>() ? 1 : 0);
    out["weights"] = OutVector(BelowWeightsMultiObjective(losses, feasible));
  } else if (op == "crowding") {
    std::vector<size_t> order;
    out["distances"] = OutVector(CrowdingDistance(losses, &order));
    out["order"] = order;
  } else {
    Die("unknown multi_objective op " + op);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// nsgaii

// The draws of tests/differential/nsgaii_diff.py's StreamRng: rand = the next number, choice(n)
// = floor(u n), normal = Box-Muller of the next two.
class StreamRandom : public GaRandom {
 public:
  explicit StreamRandom(std::vector<double> draws) : draws_(std::move(draws)) {}
  struct Exhausted {};
  double Rand() override {
    if (used_ >= draws_.size()) throw Exhausted{};
    return draws_[used_++];
  }
  std::size_t Choice(std::size_t n) override {
    return static_cast<std::size_t>(std::floor(Rand() * static_cast<double>(n)));
  }
  double Normal(double loc, double scale) override {
    double u1 = Rand();
    double u2 = Rand();
    return loc + scale * (std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2));
  }
  std::size_t used() const { return used_; }

 private:
  std::vector<double> draws_;
  std::size_t used_ = 0;
};

// NsgaIIOptions::constraints: true (Optuna 4.9's constraints_func), false, or "auto" (unset:
// Optuna 5.0's rule, constrained whenever a trial of the population has constraints).
std::optional<bool> ParseNsgaIIConstraints(const Json& j) {
  if (j == "auto") return std::nullopt;
  return j.get<bool>();
}

NsgaIIOptions ParseNsgaIIOptions(const Json& j) {
  NsgaIIOptions o;
  o.population_size = j.value("population_size", 50);
  if (j.contains("mutation_prob") && !j.at("mutation_prob").is_null()) {
    o.mutation_prob = j.at("mutation_prob").get<double>();
  }
  o.crossover_prob = j.value("crossover_prob", 0.9);
  o.swapping_prob = j.value("swapping_prob", 0.5);
  o.constraints = ParseNsgaIIConstraints(j.value("constraints", Json(false)));
  const Json c = j.value("crossover", Json{{"name", "uniform"}});
  const std::string name = c.at("name");
  for (auto kind : {NsgaIICrossover::kUniform, NsgaIICrossover::kBlxAlpha, NsgaIICrossover::kSbx,
                    NsgaIICrossover::kVsbx, NsgaIICrossover::kSpx, NsgaIICrossover::kUndx}) {
    if (name == CrossoverName(kind)) o.crossover = kind;
  }
  auto opt = [&c](const char* key) -> std::optional<double> {
    if (!c.contains(key) || c.at(key).is_null()) return std::nullopt;
    return c.at(key).get<double>();
  };
  if (o.crossover == NsgaIICrossover::kUniform && opt("swapping_prob")) {
    o.swapping_prob = *opt("swapping_prob");  // a crossover case's UniformCrossover(p)
  }
  o.alpha = opt("alpha").value_or(o.alpha);
  o.eta = opt("eta");
  o.uniform_crossover_prob = opt("uniform_crossover_prob").value_or(o.uniform_crossover_prob);
  o.use_child_gene_prob = opt("use_child_gene_prob").value_or(o.use_child_gene_prob);
  o.epsilon = opt("epsilon");
  o.sigma_xi = opt("sigma_xi").value_or(o.sigma_xi);
  o.sigma_eta = opt("sigma_eta");
  return o;
}

std::vector<StudyDirection> DirectionsOf(const Json& list) {
  std::vector<StudyDirection> out;
  for (const Json& d : list) out.push_back(ParseDirection(d));
  return out;
}

Json RunEliteCase(const Json& c) {
  TrialPtrs population;
  const Json& values = c.at("values");
  for (size_t i = 0; i < values.size(); ++i) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = static_cast<int64_t>(i);
    t->state = TrialState::kComplete;
    for (const Json& v : values[i]) t->values.push_back(Num(v));
    const Json& con = c.at("constraints")[i];
    if (con.is_object()) {
      t->system_attrs = DecodeAttrs(con);  // the system attributes ("constraints:<name>")
    } else if (!con.is_null()) {
      t->system_attrs["constraints"] = DecodeAttrs(con);  // the old list
    }
    population.push_back(t);
  }
  Result<TrialPtrs> elite =
      SelectElitePopulation(population, DirectionsOf(c.at("directions")), c.at("population_size"),
                            ParseNsgaIIConstraints(c.at("constrained")));
  if (!elite.ok()) return Json{{"id", c.at("id")}, {"error", true}};
  Json numbers = Json::array();
  for (const auto& t : *elite) numbers.push_back(t->number);
  return Json{{"id", c.at("id")}, {"elite", numbers}};
}

Json RunCrossoverCase(const Json& c) {
  NsgaIIOptions o = ParseNsgaIIOptions(Json{{"crossover", c.at("crossover")}});
  std::vector<std::vector<double>> parents;
  for (const Json& row : c.at("parents")) parents.push_back(NumbersOf(row));
  std::vector<std::pair<double, double>> bounds;
  for (const Json& b : c.at("bounds")) bounds.emplace_back(Num(b.at(0)), Num(b.at(1)));
  StreamRandom random(NumbersOf(c.at("draws")));
  std::vector<double> child = Crossover(o, parents, bounds, c.at("multi_objective"), random);
  return Json{{"id", c.at("id")}, {"child", OutVector(child)}, {"used", random.used()}};
}

Json RunSampleCase(const Json& c) {
  TrialHistory history;
  history.study_name = "nsgaii";
  history.directions = DirectionsOf(c.at("directions"));
  FrozenTrial asked;
  for (const Json& tj : c.at("trials")) {
    FrozenTrial t = ParseTrial(tj);
    if (t.number == c.at("asked").get<int64_t>()) asked = t;
    history.trials.push_back(std::make_shared<const FrozenTrial>(std::move(t)));
  }
  NsgaIISampler sampler(ParseNsgaIIOptions(c.at("options")));
  Json out{{"id", c.at("id")}};
  Result<SamplerRecords> records =
      sampler.BeforeSample(history, asked, ReadFrom(DecodeAttrs(c.at("study_system_attrs"))));
  if (!records.ok()) Die("BeforeSample: " + records.status().ToString());
  for (const auto& [key, value] : records->trial_system_attrs.items()) {
    asked.system_attrs[key] = value;
  }
  out["generation"] = asked.system_attrs.value(kNsgaIIGenerationKey, Json());
  out["written"] = records->study_system_attrs;
  SearchSpace space = sampler.InferRelativeSearchSpace(history);
  Json names = Json::array();
  for (const auto& [name, d] : space) names.push_back(name);
  out["space"] = names;
  StreamRandom random(NumbersOf(c.at("draws")));
  try {
    Json params = Json::object();
    for (const auto& [name, v] : sampler.SampleRelative(history, asked, space, random)) {
      params[name] = Out(v);
    }
    out["params"] = params;
  } catch (const StreamRandom::Exhausted&) {
    out["exhausted"] = true;
  }
  out["used"] = random.used();
  return out;
}

Json RunNsgaIICase(const Json& c) {
  const std::string op = c.at("op");
  if (op == "elite") return RunEliteCase(c);
  if (op == "crossover") return RunCrossoverCase(c);
  if (op == "sample") return RunSampleCase(c);
  Die("unknown nsgaii op " + op);
}

}  // namespace
}  // namespace tune

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "tpe" && mode != "pruners" && mode != "hypervolume" && mode != "multi_objective" &&
      mode != "nsgaii") {
    std::fprintf(stderr,
                 "usage: tune_diff_driver tpe|pruners|hypervolume|multi_objective|nsgaii "
                 "< cases.json > results.json\n");
    return 2;
  }
  tune::Json in;
  try {
    std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    in = tune::Json::parse(text);
  } catch (const std::exception& e) {
    tune::Die(std::string("bad JSON on stdin: ") + e.what());
  }
  tune::Json results = tune::Json::array();
  for (const tune::Json& c : in.at("cases")) {
    results.push_back(mode == "tpe"           ? tune::RunTpeCase(c)
                      : mode == "pruners"     ? tune::RunPrunerCase(c)
                      : mode == "hypervolume" ? tune::RunHypervolumeCase(c)
                      : mode == "nsgaii"      ? tune::RunNsgaIICase(c)
                                              : tune::RunMultiObjectiveCase(c));
  }
  std::cout << tune::Json{{"results", results}}.dump() << "\n";
  return 0;
}

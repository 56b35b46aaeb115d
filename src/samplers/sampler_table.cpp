// The sampler family's table (registry.h): one row per sampler a config can name.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "samplers/registry.h"
#include "tune/samplers/nsgaii.h"
#include "tune/samplers/random.h"
#include "tune/samplers/tpe.h"
#include "util/family_table.h"
#include "util/json_reader.h"

namespace tune {
namespace {

using internal::JsonReader;
using internal::OptionKey;

struct SamplerRow {
  const char* name;
  std::vector<OptionKey> keys;  // besides "name" and "seed"
  // Parses the options (their keys already checked) and makes the sampler.
  Result<std::unique_ptr<Sampler>> (*make)(const JsonReader& options);
};

Result<std::unique_ptr<Sampler>> MakeRandom(const JsonReader&) {
  return std::unique_ptr<Sampler>(std::make_unique<RandomSampler>());
}

// "preset": a named set of options, applied before the explicit keys (which override it).
Status ParsePreset(const JsonReader& r, TpeOptions& o) {
  static const std::vector<TpePreset> kPresets = {TpePreset::kOptuna50, TpePreset::kOptuna49};
  TUNE_ASSIGN_OR_RETURN(std::string preset,
                        r.String("preset", TpePresetName(TpePreset::kOptuna50)));
  if (preset == "tuned") {
    return r.ChildError("preset",
                        "the 'tuned' preset was withdrawn: it did not beat Optuna 4.9 in the "
                        "quality benchmark (docs/tpe.md#presets); valid: optuna-5.0, optuna-4.9. "
                        "Its options can still be set one by one: \"min_bandwidth_factor\": "
                        "0.025, \"prior_weight\": 1.5");
  }
  if (preset == "optuna") {  // its name before Optuna 5.0: 4.9's rules
    spdlog::info("TPE preset 'optuna' is Optuna 4.9's TPESampler, now named 'optuna-4.9'");
    preset = TpePresetName(TpePreset::kOptuna49);
  }
  std::vector<std::string> names;
  for (TpePreset p : kPresets) {
    if (preset == TpePresetName(p)) {
      o = TpePresetOptions(p);
      return Status::Ok();
    }
    names.emplace_back(TpePresetName(p));
  }
  return r.ChildError("preset", fmt::format("unknown preset '{}'{}; valid: {}", preset,
                                            DidYouMean(preset, names), JoinNames(names)));
}

// "gamma": "default" (min(ceil(0.1 n), 25)), "hyperopt", a ratio in (0, 1] or {"sqrt": beta}.
Status ParseGamma(const JsonReader& r, TpeOptions& o) {
  if (!r.Has("gamma") || r.json().at("gamma").is_null()) return Status::Ok();
  const Json& g = r.json().at("gamma");
  const TpeOptions defaults;
  o.gamma_ratio = defaults.gamma_ratio;
  // A gamma the config names applies to several objectives too, with its cap (as Optuna's
  // `gamma` argument); "default" keeps the preset's rule for them.
  if (!(g.is_string() && g == "default")) o.gamma_uncapped_multi_objective = false;
  o.gamma_hyperopt = false;
  o.gamma_sqrt_beta = defaults.gamma_sqrt_beta;
  if (g.is_string() && g == "default") return Status::Ok();
  if (g.is_string() && g == "hyperopt") {
    o.gamma_hyperopt = true;
    return Status::Ok();
  }
  if (g.is_number() && g.get<double>() > 0.0 && g.get<double>() <= 1.0) {
    o.gamma_ratio = g.get<double>();
    return Status::Ok();
  }
  if (g.is_object() && g.size() == 1 && g.contains("sqrt") && g.at("sqrt").is_number() &&
      g.at("sqrt").get<double>() > 0.0 && g.at("sqrt").get<double>() <= 25.0) {
    o.gamma_hyperopt = true;
    o.gamma_sqrt_beta = g.at("sqrt").get<double>();
    return Status::Ok();
  }
  return r.ChildError("gamma",
                      "expected \"default\" (min(ceil(0.1 n), 25)), \"hyperopt\" "
                      "(min(ceil(0.25 sqrt(n)), 25)), a ratio r in (0, 1] "
                      "(min(ceil(r n), 25)) or {\"sqrt\": beta}, beta in (0, 25] "
                      "(min(ceil(beta sqrt(n)), 25)), got " +
                          JsonReader::Describe(g));
}

// "weights": "default" (Optuna's), "uniform" or "expected_improvement".
Status ParseWeights(const JsonReader& r, TpeOptions& o) {
  static const std::vector<std::pair<std::string, WeightRule>> kRules = {
      {"default", WeightRule::kOptuna},
      {"uniform", WeightRule::kUniform},
      {"expected_improvement", WeightRule::kExpectedImprovement}};
  TUNE_ASSIGN_OR_RETURN(auto weights, r.OptString("weights"));
  if (!weights) return Status::Ok();
  std::vector<std::string> names;
  for (const auto& [name, rule] : kRules) {
    if (name == *weights) {
      o.weights = rule;
      return Status::Ok();
    }
    names.push_back(name);
  }
  return r.ChildError("weights", fmt::format("unknown weights '{}'{}; valid: {}", *weights,
                                             DidYouMean(*weights, names), JoinNames(names)));
}

// The counts and the shape of the weights and the prior.
Status ParseTpeModel(const JsonReader& r, TpeOptions& o) {
  TUNE_ASSIGN_OR_RETURN(auto startup, r.OptInt("n_startup_trials"));
  if (startup) {
    if (*startup < 0) return r.ChildError("n_startup_trials", "must be >= 0");
    o.n_startup_trials = static_cast<int>(std::min<int64_t>(*startup, 1'000'000'000));
  }
  TUNE_ASSIGN_OR_RETURN(auto candidates, r.OptInt("n_ei_candidates"));
  if (candidates) {
    if (*candidates < 1 || *candidates > 100000) {
      return r.ChildError("n_ei_candidates", "must be between 1 and 100000");
    }
    o.n_ei_candidates = static_cast<int>(*candidates);
  }
  TUNE_RETURN_IF_ERROR(ParseGamma(r, o));
  TUNE_RETURN_IF_ERROR(ParseWeights(r, o));
  TUNE_ASSIGN_OR_RETURN(auto prior, r.OptNumber("prior_weight"));
  if (prior) {
    if (!(*prior >= 0.0) || std::isinf(*prior)) {
      return r.ChildError("prior_weight", "must be a finite number >= 0");
    }
    o.prior_weight = *prior;
  }
  return Status::Ok();
}

// The kernels: bandwidth rule and its clip, and the categorical kernel.
Status ParseTpeKernels(const JsonReader& r, TpeOptions& o) {
  TUNE_ASSIGN_OR_RETURN(o.consider_magic_clip,
                        r.Bool("consider_magic_clip", o.consider_magic_clip));
  TUNE_ASSIGN_OR_RETURN(o.consider_endpoints, r.Bool("consider_endpoints", o.consider_endpoints));
  TUNE_ASSIGN_OR_RETURN(auto factor, r.OptNumber("min_bandwidth_factor"));
  if (factor) {
    if (!(*factor > 0.0 && *factor <= 1.0)) {
      return r.ChildError("min_bandwidth_factor", "must be in (0, 1]");
    }
    o.min_bandwidth_factor = *factor;
  }
  TUNE_ASSIGN_OR_RETURN(auto exponent, r.OptNumber("magic_clip_exponent"));
  if (exponent) {
    if (!(*exponent > 0.0)) return r.ChildError("magic_clip_exponent", "must be > 0");
    o.magic_clip_exponent = *exponent;
  }
  static const std::vector<std::pair<std::string, BandwidthRule>> kRules = {
      {"optuna", BandwidthRule::kOptuna},
      {"hyperopt", BandwidthRule::kHyperopt},
      {"scott", BandwidthRule::kScott}};
  TUNE_ASSIGN_OR_RETURN(auto bandwidth, r.OptString("bandwidth"));
  if (bandwidth) {
    std::vector<std::string> names;
    for (const auto& [name, rule] : kRules) names.push_back(name);
    auto it = std::find(names.begin(), names.end(), *bandwidth);
    if (it == names.end()) {
      return r.ChildError("bandwidth",
                          fmt::format("unknown bandwidth rule '{}'{}; valid: {}", *bandwidth,
                                      DidYouMean(*bandwidth, names), JoinNames(names)));
    }
    o.bandwidth = kRules[static_cast<size_t>(it - names.begin())].second;
  }
  if (r.Has("categorical_prior_weight")) {
    TUNE_ASSIGN_OR_RETURN(auto b, r.OptNumber("categorical_prior_weight"));
    if (b && !(*b >= 0.0 && *b <= 1.0)) {
      return r.ChildError("categorical_prior_weight",
                          "must be null (Optuna's kernel) or in [0, 1]");
    }
    o.categorical_prior_weight = b;
  }
  return Status::Ok();
}

// Multivariate mode, groups, constant liar, constraints and tune's OOM feasibility.
Status ParseTpeModes(const JsonReader& r, TpeOptions& o) {
  if (r.Has("multivariate")) {
    const Json& m = r.json().at("multivariate");
    if (m.is_null() || m == "auto") {
      o.multivariate.reset();
    } else if (m.is_boolean()) {
      o.multivariate = m.get<bool>();
    } else {
      return r.ChildError("multivariate",
                          "expected true, false or \"auto\" (null: joint for one objective, "
                          "independent for several, as Optuna 5.0), got " +
                              JsonReader::Describe(m));
    }
  }
  TUNE_ASSIGN_OR_RETURN(auto bandwidth, r.OptString("multivariate_bandwidth"));
  if (bandwidth == "scott") {
    o.multivariate_bandwidth = MultivariateBandwidth::kScott;
  } else if (bandwidth == "per_dimension") {
    o.multivariate_bandwidth = MultivariateBandwidth::kPerDimension;
  } else if (bandwidth) {
    return r.ChildError(
        "multivariate_bandwidth",
        fmt::format("unknown bandwidth rule '{}'{}; valid: scott (Optuna "
                    "3.1-4.9), per_dimension (Optuna 5.0)",
                    *bandwidth, DidYouMean(*bandwidth, {"per_dimension", "scott"})));
  }
  TUNE_ASSIGN_OR_RETURN(o.group, r.Bool("group", o.group));
  if (o.group && o.multivariate == false) {
    return r.ChildError("group",
                        "group=true requires \"multivariate\": true or \"auto\" (as in Optuna)");
  }
  TUNE_ASSIGN_OR_RETURN(o.constant_liar, r.Bool("constant_liar", o.constant_liar));
  TUNE_ASSIGN_OR_RETURN(o.constraints, r.Bool("constraints", o.constraints));
  TUNE_ASSIGN_OR_RETURN(o.warn_independent_sampling,
                        r.Bool("warn_independent_sampling", o.warn_independent_sampling));
  TUNE_ASSIGN_OR_RETURN(o.oom_feasibility, r.Bool("oom_feasibility", o.oom_feasibility));
  return Status::Ok();
}

Result<std::unique_ptr<Sampler>> MakeTpe(const JsonReader& r) {
  TpeOptions o;
  TUNE_RETURN_IF_ERROR(ParsePreset(r, o));
  TUNE_RETURN_IF_ERROR(ParseTpeModel(r, o));
  TUNE_RETURN_IF_ERROR(ParseTpeKernels(r, o));
  TUNE_RETURN_IF_ERROR(ParseTpeModes(r, o));
  return std::unique_ptr<Sampler>(std::make_unique<TpeSampler>(o));
}

// A probability option: unset keeps the default; else a number in [low, high] (or (0, high] with
// `open_low`).
Status ParseProbability(const JsonReader& r, const std::string& key, double& out,
                        bool open_low = false) {
  TUNE_ASSIGN_OR_RETURN(auto p, r.OptNumber(key));
  if (!p) return Status::Ok();
  if (!(open_low ? *p > 0.0 : *p >= 0.0) || !(*p <= 1.0)) {
    return r.ChildError(key, open_low ? "must be in (0, 1]" : "must be in [0, 1]");
  }
  out = *p;
  return Status::Ok();
}

// The crossovers' own options, each allowed only with its crossover (Optuna's constructor
// arguments).
const std::vector<std::pair<NsgaIICrossover, std::vector<OptionKey>>>& CrossoverKeys() {
  static const NsgaIIOptions d;
  static const std::vector<std::pair<NsgaIICrossover, std::vector<OptionKey>>> kKeys = {
      {NsgaIICrossover::kUniform, {}},
      {NsgaIICrossover::kBlxAlpha, {{"alpha", d.alpha}}},
      {NsgaIICrossover::kSbx,
       {{"eta", nullptr},
        {"uniform_crossover_prob", d.uniform_crossover_prob},
        {"use_child_gene_prob", d.use_child_gene_prob}}},
      {NsgaIICrossover::kVsbx,
       {{"eta", nullptr},
        {"uniform_crossover_prob", d.uniform_crossover_prob},
        {"use_child_gene_prob", d.use_child_gene_prob}}},
      {NsgaIICrossover::kSpx, {{"epsilon", nullptr}}},
      {NsgaIICrossover::kUndx, {{"sigma_xi", d.sigma_xi}, {"sigma_eta", nullptr}}}};
  return kKeys;
}

// A crossover option that is a number > 0 (>= 0 with `zero_ok`), or null for Optuna's default.
Status ParseCrossoverNumber(const JsonReader& c, const std::string& key, std::optional<double>& out,
                            bool zero_ok) {
  TUNE_ASSIGN_OR_RETURN(auto v, c.OptNumber(key));
  if (!v) return Status::Ok();
  if (!(zero_ok ? *v >= 0.0 : *v > 0.0) || std::isinf(*v)) {
    return c.ChildError(key, zero_ok ? "must be a finite number >= 0 (null: Optuna's default)"
                                     : "must be a finite number > 0 (null: Optuna's default)");
  }
  out = v;
  return Status::Ok();
}

Status ParseCrossoverOptions(const JsonReader& c, NsgaIIOptions& o) {
  TUNE_RETURN_IF_ERROR(ParseCrossoverNumber(c, "eta", o.eta, true));
  TUNE_RETURN_IF_ERROR(ParseCrossoverNumber(c, "epsilon", o.epsilon, false));
  TUNE_RETURN_IF_ERROR(ParseCrossoverNumber(c, "sigma_eta", o.sigma_eta, false));
  std::optional<double> alpha;
  TUNE_RETURN_IF_ERROR(ParseCrossoverNumber(c, "alpha", alpha, true));
  o.alpha = alpha.value_or(o.alpha);
  std::optional<double> sigma_xi;
  TUNE_RETURN_IF_ERROR(ParseCrossoverNumber(c, "sigma_xi", sigma_xi, false));
  o.sigma_xi = sigma_xi.value_or(o.sigma_xi);
  TUNE_RETURN_IF_ERROR(ParseProbability(c, "uniform_crossover_prob", o.uniform_crossover_prob));
  return ParseProbability(c, "use_child_gene_prob", o.use_child_gene_prob, true);
}

// "crossover": a name ("uniform", ...) or {"name": ..., its options}.
Status ParseCrossover(const JsonReader& r, NsgaIIOptions& o) {
  if (!r.Has("crossover") || r.json().at("crossover").is_null()) return Status::Ok();
  const Json& j = r.json().at("crossover");
  JsonReader c = r.Child("crossover");
  std::string name;
  if (j.is_string()) {
    name = j.get<std::string>();
  } else if (j.is_object()) {
    TUNE_ASSIGN_OR_RETURN(name, c.RequiredString("name"));
  } else {
    return r.ChildError("crossover", "expected a crossover name or {\"name\": ..., options}, got " +
                                         JsonReader::Describe(j));
  }
  std::vector<std::string> names;
  for (const auto& [kind, keys] : CrossoverKeys()) {
    names.push_back(CrossoverName(kind));
    if (name != CrossoverName(kind)) continue;
    o.crossover = kind;
    if (!j.is_object()) return Status::Ok();
    std::vector<std::string> allowed = {"name"};
    for (const auto& k : keys) allowed.push_back(k.name);
    TUNE_RETURN_IF_ERROR(c.CheckKeys(allowed));
    return ParseCrossoverOptions(c, o);
  }
  std::string message = fmt::format("unknown crossover '{}'{}; valid: {}", name,
                                    DidYouMean(name, names), JoinNames(names));
  return j.is_object() ? c.ChildError("name", message) : r.ChildError("crossover", message);
}

Result<std::unique_ptr<Sampler>> MakeNsgaII(const JsonReader& r) {
  NsgaIIOptions o;
  TUNE_ASSIGN_OR_RETURN(auto size, r.OptInt("population_size"));
  if (size) {
    if (*size < 2 || *size > 1'000'000) {
      return r.ChildError("population_size", "must be between 2 and 1000000");
    }
    o.population_size = static_cast<int>(*size);
  }
  if (r.Has("mutation_prob") && !r.json().at("mutation_prob").is_null()) {
    double p = 0.0;
    TUNE_RETURN_IF_ERROR(ParseProbability(r, "mutation_prob", p));
    o.mutation_prob = p;
  }
  TUNE_RETURN_IF_ERROR(ParseCrossover(r, o));
  TUNE_RETURN_IF_ERROR(ParseProbability(r, "crossover_prob", o.crossover_prob));
  TUNE_RETURN_IF_ERROR(ParseProbability(r, "swapping_prob", o.swapping_prob));
  if (r.Has("constraints")) {
    const Json& c = r.json().at("constraints");
    if (c.is_boolean()) {
      o.constraints = c.get<bool>();
    } else if (!(c.is_null() || c == "auto")) {
      return r.ChildError("constraints",
                          "expected true (Optuna 4.9's constraints_func), false or \"auto\" "
                          "(null: Optuna 5.0's rule), got " +
                              JsonReader::Describe(c));
    }
  }
  if (o.population_size < CrossoverParents(o.crossover)) {
    return r.ChildError("population_size",
                        fmt::format("must be at least {} with the {} crossover (its parents)",
                                    CrossoverParents(o.crossover), CrossoverName(o.crossover)));
  }
  return std::unique_ptr<Sampler>(std::make_unique<NsgaIISampler>(o));
}

const std::vector<SamplerRow>& SamplerTable() {
  static const TpeOptions tpe;
  static const NsgaIIOptions nsgaii;
  static const std::vector<SamplerRow> kRows = {
      {"random", {}, MakeRandom},
      {"tpe",
       {{"preset", TpePresetName(TpePreset::kOptuna50)},
        {"n_startup_trials", tpe.n_startup_trials},
        {"n_ei_candidates", tpe.n_ei_candidates},
        {"gamma", "default"},
        {"weights", "default"},
        {"prior_weight", tpe.prior_weight},
        {"consider_magic_clip", tpe.consider_magic_clip},
        {"consider_endpoints", tpe.consider_endpoints},
        {"min_bandwidth_factor", tpe.min_bandwidth_factor},
        {"magic_clip_exponent", tpe.magic_clip_exponent},
        {"bandwidth", "optuna"},
        {"categorical_prior_weight", nullptr},
        {"multivariate", "auto"},
        {"multivariate_bandwidth", "per_dimension"},
        {"group", tpe.group},
        {"constant_liar", tpe.constant_liar},
        {"constraints", tpe.constraints},
        {"warn_independent_sampling", tpe.warn_independent_sampling},
        {"oom_feasibility", tpe.oom_feasibility}},
       MakeTpe},
      {"nsgaii",
       {{"population_size", nsgaii.population_size},
        {"mutation_prob", nullptr},
        {"crossover", "uniform"},
        {"crossover_prob", nsgaii.crossover_prob},
        {"swapping_prob", nsgaii.swapping_prob},
        {"constraints", "auto"}},
       MakeNsgaII},
  };
  return kRows;
}

}  // namespace

std::vector<std::string> SamplerNames() { return internal::RowNames(SamplerTable()); }

std::vector<std::pair<std::string, Json>> SamplerOptionKeys(const std::string& name) {
  return internal::OptionKeysOf(SamplerTable(), name);
}

Result<std::unique_ptr<Sampler>> MakeSampler(const SamplerConfig& config) {
  const SamplerRow* row = internal::FindRow(SamplerTable(), config.name);
  if (row == nullptr) {
    return InvalidArgumentError(
        fmt::format("{}: /sampler/name: {}", config.source,
                    internal::UnknownNameMessage(SamplerTable(), "sampler", config.name)));
  }
  JsonReader r(config.options, config.source, "/sampler");
  TUNE_RETURN_IF_ERROR(r.CheckKeys(internal::KeyNames(row->keys)));
  return row->make(r);
}

}  // namespace tune

// The sampler family's table (registry.h): one row per sampler a config can name.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "samplers/registry.h"
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
  static const std::vector<std::pair<std::string, TpePreset>> kPresets = {
      {"optuna", TpePreset::kOptuna}};
  TUNE_ASSIGN_OR_RETURN(std::string preset, r.String("preset", "optuna"));
  if (preset == "tuned") {
    return r.ChildError("preset",
                        "the 'tuned' preset was withdrawn: it did not beat Optuna 4.9 in the "
                        "quality benchmark (docs/tpe.md#presets); valid: optuna. Its options can "
                        "still be set one by one: \"min_bandwidth_factor\": 0.025, "
                        "\"prior_weight\": 1.5");
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : kPresets) {
    if (name == preset) {
      o = TpePresetOptions(value);
      return Status::Ok();
    }
    names.push_back(name);
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
  return r.ChildError("gamma", "expected \"default\" (min(ceil(0.1 n), 25)), \"hyperopt\" "
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
  TUNE_ASSIGN_OR_RETURN(o.multivariate, r.Bool("multivariate", o.multivariate));
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
  if (o.group && !o.multivariate) {
    return r.ChildError("group", "group=true requires \"multivariate\": true (as in Optuna)");
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

const std::vector<SamplerRow>& SamplerTable() {
  static const TpeOptions tpe;
  static const std::vector<SamplerRow> kRows = {
      {"random", {}, MakeRandom},
      {"tpe",
       {{"preset", "optuna"},
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
        {"multivariate", tpe.multivariate},
        {"multivariate_bandwidth", "scott"},
        {"group", tpe.group},
        {"constant_liar", tpe.constant_liar},
        {"constraints", tpe.constraints},
        {"warn_independent_sampling", tpe.warn_independent_sampling},
        {"oom_feasibility", tpe.oom_feasibility}},
       MakeTpe},
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
    return InvalidArgumentError(fmt::format(
        "{}: /sampler/name: {}", config.source,
        internal::UnknownNameMessage(SamplerTable(), "sampler", config.name)));
  }
  JsonReader r(config.options, config.source, "/sampler");
  TUNE_RETURN_IF_ERROR(r.CheckKeys(internal::KeyNames(row->keys)));
  return row->make(r);
}

}  // namespace tune

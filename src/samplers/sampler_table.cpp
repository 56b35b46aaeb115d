// The sampler family's table (registry.h): one row per sampler a config can name.
#include "tune/samplers/registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "family_table.h"
#include "json_reader.h"
#include "tune/samplers/random.h"
#include "tune/samplers/tpe.h"

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

// "gamma": "default" (min(ceil(0.1 n), 25)), "hyperopt" or a ratio in (0, 1].
Status ParseGamma(const JsonReader& r, TpeOptions& o) {
  if (!r.Has("gamma") || r.json().at("gamma").is_null()) return Status::Ok();
  const Json& g = r.json().at("gamma");
  if (g.is_string() && g == "default") return Status::Ok();
  if (g.is_string() && g == "hyperopt") {
    o.gamma_hyperopt = true;
    return Status::Ok();
  }
  if (g.is_number() && g.get<double>() > 0.0 && g.get<double>() <= 1.0) {
    o.gamma_ratio = g.get<double>();
    return Status::Ok();
  }
  return r.ChildError("gamma", "expected \"default\" (min(ceil(0.1 n), 25)), \"hyperopt\" "
                               "(min(ceil(0.25 sqrt(n)), 25)) or a ratio in (0, 1], got " +
                                   JsonReader::Describe(g));
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
  TUNE_ASSIGN_OR_RETURN(std::string weights, r.String("weights", "default"));
  if (weights != "default" && weights != "uniform") {
    return r.ChildError("weights", fmt::format("unknown weights '{}'{}; valid: default, uniform",
                                               weights,
                                               DidYouMean(weights, {"default", "uniform"})));
  }
  o.uniform_weights = weights == "uniform";
  TUNE_ASSIGN_OR_RETURN(auto prior, r.OptNumber("prior_weight"));
  if (prior) {
    if (!(*prior >= 0.0) || std::isinf(*prior)) {
      return r.ChildError("prior_weight", "must be a finite number >= 0");
    }
    o.prior_weight = *prior;
  }
  TUNE_ASSIGN_OR_RETURN(o.consider_magic_clip, r.Bool("consider_magic_clip", o.consider_magic_clip));
  TUNE_ASSIGN_OR_RETURN(o.consider_endpoints, r.Bool("consider_endpoints", o.consider_endpoints));
  return Status::Ok();
}

// Multivariate mode, groups, constant liar, constraints and tune's OOM feasibility.
Status ParseTpeModes(const JsonReader& r, TpeOptions& o) {
  TUNE_ASSIGN_OR_RETURN(o.multivariate, r.Bool("multivariate", o.multivariate));
  TUNE_ASSIGN_OR_RETURN(std::string bandwidth,
                        r.String("multivariate_bandwidth", "per_dimension"));
  if (bandwidth == "scott") {
    o.multivariate_bandwidth = MultivariateBandwidth::kScott;
  } else if (bandwidth != "per_dimension") {
    return r.ChildError("multivariate_bandwidth",
                        fmt::format("unknown bandwidth rule '{}'{}; valid: per_dimension (Optuna "
                                    "5.0), scott (Optuna 3.1-4.9)",
                                    bandwidth, DidYouMean(bandwidth, {"per_dimension", "scott"})));
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
  TUNE_RETURN_IF_ERROR(ParseTpeModel(r, o));
  TUNE_RETURN_IF_ERROR(ParseTpeModes(r, o));
  return std::unique_ptr<Sampler>(std::make_unique<TpeSampler>(o));
}

const std::vector<SamplerRow>& SamplerTable() {
  static const TpeOptions tpe;
  static const std::vector<SamplerRow> kRows = {
      {"random", {}, MakeRandom},
      {"tpe",
       {{"n_startup_trials", tpe.n_startup_trials},
        {"n_ei_candidates", tpe.n_ei_candidates},
        {"gamma", "default"},
        {"weights", "default"},
        {"prior_weight", tpe.prior_weight},
        {"consider_magic_clip", tpe.consider_magic_clip},
        {"consider_endpoints", tpe.consider_endpoints},
        {"multivariate", tpe.multivariate},
        {"multivariate_bandwidth", "per_dimension"},
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

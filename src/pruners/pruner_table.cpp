// The pruner family's table (registry.h): one row per pruner a config can name.
#include <fmt/format.h>

#include "pruners/registry.h"
#include "tune/pruners/hyperband.h"
#include "tune/pruners/patient.h"
#include "tune/pruners/percentile.h"
#include "tune/pruners/successive_halving.h"
#include "tune/pruners/threshold.h"
#include "util/family_table.h"
#include "util/json_reader.h"
#include "util/py_json.h"

namespace tune {
namespace {

using internal::JsonReader;
using internal::OptionKey;

struct PrunerRow {
  const char* name;
  std::vector<OptionKey> keys;  // besides "name"
  // Parses the options (their keys already checked) and makes the pruner.
  Result<std::unique_ptr<Pruner>> (*make)(const JsonReader& options);
};

// An integer option >= `min`; `fallback` when absent or null.
Result<int64_t> IntAtLeast(const JsonReader& r, const std::string& key, int64_t fallback,
                           int64_t min) {
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.OptInt(key));
  if (!v) return fallback;
  if (*v < min) return r.ChildError(key, fmt::format("must be an integer >= {}, got {}", min, *v));
  return *v;
}

// "auto" (nullopt; also when absent or null) or an integer >= `min` (`min_text` names it).
Result<std::optional<int64_t>> AutoOrIntAtLeast(const JsonReader& r, const std::string& key,
                                                int64_t min, const std::string& min_text) {
  if (!r.Has(key) || r.json().at(key).is_null()) return std::optional<int64_t>();
  const Json& v = r.json().at(key);
  if (v.is_string() && v.get<std::string>() == "auto") return std::optional<int64_t>();
  const std::string expected = fmt::format("must be \"auto\" or an integer >= {}", min_text);
  if (!v.is_string()) {
    Result<std::optional<int64_t>> i = r.OptInt(key);
    if (i.ok() && **i >= min) return *i;
    if (i.ok()) return r.ChildError(key, fmt::format("{}, got {}", expected, **i));
  }
  return r.ChildError(key, expected + ", got " + JsonReader::Describe(v));
}

// A number option >= 0; `fallback` when absent or null.
Result<double> NonNegativeNumber(const JsonReader& r, const std::string& key, double fallback) {
  TUNE_ASSIGN_OR_RETURN(std::optional<double> v, r.OptNumber(key));
  if (!v) return fallback;
  if (!(*v >= 0)) {
    return r.ChildError(key, fmt::format("must be a number >= 0, got {}", PyFloatRepr(*v)));
  }
  return *v;
}

// bootstrap_count > 0 needs the resource it counts from (`resource`, "auto" = unset).
Status CheckBootstrap(const JsonReader& r, int64_t bootstrap_count,
                      const std::optional<int64_t>& resource, const char* resource_key) {
  if (bootstrap_count == 0 || resource) return Status::Ok();
  return r.ChildError("bootstrap_count",
                      fmt::format("must be 0 when {0} is \"auto\" (they are incompatible, as in "
                                  "Optuna); set {0} to an integer",
                                  resource_key));
}

template <typename P, typename O>
Result<std::unique_ptr<Pruner>> Made(Result<O> options) {
  if (!options.ok()) return options.status();
  return std::unique_ptr<Pruner>(std::make_unique<P>(*options));
}

Result<std::unique_ptr<Pruner>> MakeNop(const JsonReader&) {
  return std::unique_ptr<Pruner>(std::make_unique<NopPruner>());
}

// The keys "median" and "percentile" share ("median" has no "percentile").
Result<PercentileOptions> ParseCommonPercentile(const JsonReader& r, PercentileOptions o) {
  TUNE_ASSIGN_OR_RETURN(o.n_startup_trials,
                        IntAtLeast(r, "n_startup_trials", o.n_startup_trials, 0));
  TUNE_ASSIGN_OR_RETURN(o.n_warmup_steps, IntAtLeast(r, "n_warmup_steps", o.n_warmup_steps, 0));
  TUNE_ASSIGN_OR_RETURN(o.interval_steps, IntAtLeast(r, "interval_steps", o.interval_steps, 1));
  TUNE_ASSIGN_OR_RETURN(o.n_min_trials, IntAtLeast(r, "n_min_trials", o.n_min_trials, 1));
  return o;
}

Result<std::unique_ptr<Pruner>> MakeMedian(const JsonReader& r) {
  return Made<MedianPruner>(ParseCommonPercentile(r, PercentileOptions{}));
}

Result<std::unique_ptr<Pruner>> MakePercentile(const JsonReader& r) {
  TUNE_ASSIGN_OR_RETURN(std::optional<double> p, r.OptNumber("percentile"));
  if (!p) {
    return r.Error(
        "missing required key 'percentile' (a number in [0, 100]; the \"median\" pruner is "
        "percentile 50)");
  }
  if (!(*p >= 0 && *p <= 100)) {
    return r.ChildError(
        "percentile", fmt::format("must be between 0 and 100 inclusive, got {}", PyFloatRepr(*p)));
  }
  PercentileOptions o;
  o.percentile = *p;
  return Made<PercentilePruner>(ParseCommonPercentile(r, o));
}

Result<std::unique_ptr<Pruner>> MakeSuccessiveHalving(const JsonReader& r) {
  SuccessiveHalvingOptions o;
  TUNE_ASSIGN_OR_RETURN(o.min_resource, AutoOrIntAtLeast(r, "min_resource", 1, "1"));
  TUNE_ASSIGN_OR_RETURN(o.reduction_factor,
                        IntAtLeast(r, "reduction_factor", o.reduction_factor, 2));
  TUNE_ASSIGN_OR_RETURN(o.min_early_stopping_rate,
                        IntAtLeast(r, "min_early_stopping_rate", o.min_early_stopping_rate, 0));
  TUNE_ASSIGN_OR_RETURN(o.bootstrap_count, IntAtLeast(r, "bootstrap_count", o.bootstrap_count, 0));
  TUNE_RETURN_IF_ERROR(CheckBootstrap(r, o.bootstrap_count, o.min_resource, "min_resource"));
  return std::unique_ptr<Pruner>(std::make_unique<SuccessiveHalvingPruner>(o));
}

Result<std::unique_ptr<Pruner>> MakeHyperband(const JsonReader& r) {
  HyperbandOptions o;
  TUNE_ASSIGN_OR_RETURN(o.min_resource, IntAtLeast(r, "min_resource", o.min_resource, 1));
  TUNE_ASSIGN_OR_RETURN(o.max_resource,
                        AutoOrIntAtLeast(r, "max_resource", o.min_resource,
                                         fmt::format("min_resource ({})", o.min_resource)));
  TUNE_ASSIGN_OR_RETURN(o.reduction_factor,
                        IntAtLeast(r, "reduction_factor", o.reduction_factor, 2));
  TUNE_ASSIGN_OR_RETURN(o.bootstrap_count, IntAtLeast(r, "bootstrap_count", o.bootstrap_count, 0));
  TUNE_RETURN_IF_ERROR(CheckBootstrap(r, o.bootstrap_count, o.max_resource, "max_resource"));
  return std::unique_ptr<Pruner>(std::make_unique<HyperbandPruner>(o));
}

Result<std::unique_ptr<Pruner>> MakeThreshold(const JsonReader& r) {
  ThresholdOptions o;
  TUNE_ASSIGN_OR_RETURN(o.lower, r.OptNumber("lower"));
  TUNE_ASSIGN_OR_RETURN(o.upper, r.OptNumber("upper"));
  if (!o.lower && !o.upper) {
    return r.Error("needs 'lower', 'upper' or both: the bounds outside which a trial is pruned");
  }
  if (o.lower && o.upper && *o.lower > *o.upper) {
    return r.ChildError("lower", fmt::format("must be <= upper ({}), got {}", PyFloatRepr(*o.upper),
                                             PyFloatRepr(*o.lower)));
  }
  TUNE_ASSIGN_OR_RETURN(o.n_warmup_steps, IntAtLeast(r, "n_warmup_steps", o.n_warmup_steps, 0));
  TUNE_ASSIGN_OR_RETURN(o.interval_steps, IntAtLeast(r, "interval_steps", o.interval_steps, 1));
  return std::unique_ptr<Pruner>(std::make_unique<ThresholdPruner>(o));
}

Result<std::unique_ptr<Pruner>> MakePrunerAt(const std::string& name, const JsonReader& r);

Result<std::unique_ptr<Pruner>> MakePatient(const JsonReader& r) {
  PatientOptions o;
  if (!r.Has("patience") || r.json().at("patience").is_null()) {
    return r.Error("missing required key 'patience' (an integer >= 0)");
  }
  TUNE_ASSIGN_OR_RETURN(o.patience, IntAtLeast(r, "patience", o.patience, 0));
  TUNE_ASSIGN_OR_RETURN(o.min_delta, NonNegativeNumber(r, "min_delta", o.min_delta));
  std::unique_ptr<Pruner> wrapped;
  if (r.Has("wrapped") && !r.json().at("wrapped").is_null()) {
    JsonReader w = r.Child("wrapped");
    TUNE_RETURN_IF_ERROR(w.ExpectObject());
    TUNE_ASSIGN_OR_RETURN(std::string wrapped_name, w.RequiredString("name"));
    Json wrapped_options = w.json();
    wrapped_options.erase("name");
    TUNE_ASSIGN_OR_RETURN(
        wrapped, MakePrunerAt(wrapped_name, JsonReader(wrapped_options, r.file(), w.path())));
  }
  return std::unique_ptr<Pruner>(std::make_unique<PatientPruner>(std::move(wrapped), o));
}

const std::vector<PrunerRow>& PrunerTable() {
  static const PercentileOptions percentile;
  static const SuccessiveHalvingOptions halving;
  static const HyperbandOptions hyperband;
  static const ThresholdOptions threshold;
  static const PatientOptions patient;
  static const std::vector<OptionKey> kPercentileKeys = {
      {"n_startup_trials", percentile.n_startup_trials},
      {"n_warmup_steps", percentile.n_warmup_steps},
      {"interval_steps", percentile.interval_steps},
      {"n_min_trials", percentile.n_min_trials}};
  static const std::vector<PrunerRow> kRows = {
      {"nop", {}, MakeNop},
      {"median", kPercentileKeys, MakeMedian},
      {"percentile",
       [] {
         std::vector<OptionKey> keys = {{"percentile", nullptr}};
         keys.insert(keys.end(), kPercentileKeys.begin(), kPercentileKeys.end());
         return keys;
       }(),
       MakePercentile},
      {"successive_halving",
       {{"min_resource", "auto"},
        {"reduction_factor", halving.reduction_factor},
        {"min_early_stopping_rate", halving.min_early_stopping_rate},
        {"bootstrap_count", halving.bootstrap_count}},
       MakeSuccessiveHalving},
      {"hyperband",
       {{"min_resource", hyperband.min_resource},
        {"max_resource", "auto"},
        {"reduction_factor", hyperband.reduction_factor},
        {"bootstrap_count", hyperband.bootstrap_count}},
       MakeHyperband},
      {"threshold",
       {{"lower", nullptr},
        {"upper", nullptr},
        {"n_warmup_steps", threshold.n_warmup_steps},
        {"interval_steps", threshold.interval_steps}},
       MakeThreshold},
      {"patient",
       {{"wrapped", nullptr}, {"patience", nullptr}, {"min_delta", patient.min_delta}},
       MakePatient},
  };
  return kRows;
}

// The pruner `name` with options `r` (without "name"), found at r.path() ("/pruner", or
// "/pruner/wrapped" for the patient pruner's wrapped pruner).
Result<std::unique_ptr<Pruner>> MakePrunerAt(const std::string& name, const JsonReader& r) {
  const PrunerRow* row = internal::FindRow(PrunerTable(), name);
  if (row == nullptr) {
    return InvalidArgumentError(
        fmt::format("{}: {}/name: {}", r.file(), r.path(),
                    internal::UnknownNameMessage(PrunerTable(), "pruner", name)));
  }
  TUNE_RETURN_IF_ERROR(r.CheckKeys(internal::KeyNames(row->keys)));
  return row->make(r);
}

}  // namespace

std::vector<std::string> PrunerNames() { return internal::RowNames(PrunerTable()); }

std::vector<std::pair<std::string, Json>> PrunerOptionKeys(const std::string& name) {
  return internal::OptionKeysOf(PrunerTable(), name);
}

Result<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& config) {
  return MakePrunerAt(config.name, JsonReader(config.options, config.source, "/pruner"));
}

}  // namespace tune

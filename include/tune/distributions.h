// Parameter distributions with Optuna's semantics.
//
// A parameter value has two representations, as in Optuna:
//  - external: what the objective sees (a JSON scalar: number, string, bool or null);
//  - internal: a double stored in the database (`trial_params.param_value`). Float -> the value
//    itself (not its log), Int -> the value as a double, Categorical -> the index of the choice.
// The JSON form is byte-identical to Optuna's `distribution_json`
// (`{"name": "FloatDistribution", "attributes": {...}}`), so tune and Optuna read each other's
// databases. All functions here are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tune/json.h"
#include "tune/status.h"

namespace tune {

// Optuna: FloatDistribution(low, high, log=False, step=None).
struct FloatDistribution {
  double low = 0.0;
  double high = 0.0;
  bool log = false;
  std::optional<double> step;  // set: values are low + k*step

  friend bool operator==(const FloatDistribution&, const FloatDistribution&) = default;
};

// Optuna: IntDistribution(low, high, log=False, step=1).
struct IntDistribution {
  int64_t low = 0;
  int64_t high = 0;
  bool log = false;
  int64_t step = 1;

  friend bool operator==(const IntDistribution&, const IntDistribution&) = default;
};

// Optuna: CategoricalDistribution(choices). Choices are JSON scalars: null, bool, int, float,
// string.
struct CategoricalDistribution {
  std::vector<Json> choices;

  friend bool operator==(const CategoricalDistribution& a, const CategoricalDistribution& b);
};

using Distribution = std::variant<FloatDistribution, IntDistribution, CategoricalDistribution>;

// Validating constructors with Optuna's rules. For step distributions `high` is normalised to
// low + floor((high - low) / step) * step, as Optuna does (Optuna warns; so do we, via spdlog).
Result<FloatDistribution> MakeFloatDistribution(double low, double high, bool log = false,
                                                std::optional<double> step = std::nullopt);
Result<IntDistribution> MakeIntDistribution(int64_t low, int64_t high, bool log = false,
                                            int64_t step = 1);
Result<CategoricalDistribution> MakeCategoricalDistribution(std::vector<Json> choices);

// True if `step` divides `high - low` exactly (decimal arithmetic, like Optuna's check).
bool StepDividesRange(double low, double high, double step);

// Optuna's class name: "FloatDistribution", "IntDistribution", "CategoricalDistribution".
std::string DistributionClassName(const Distribution& d);

// Optuna's distribution_to_json, byte for byte (key order, ", " and ": " separators, Python float
// repr, ASCII escapes).
std::string DistributionToJson(const Distribution& d);
// Optuna's json_to_distribution, including the legacy names (UniformDistribution,
// LogUniformDistribution, DiscreteUniformDistribution, IntUniformDistribution,
// IntLogUniformDistribution).
Result<Distribution> DistributionFromJson(std::string_view text);

// External -> internal representation. Errors name the distribution when the value is not
// representable (wrong type, unknown choice, NaN).
Result<double> ToInternal(const Distribution& d, const Json& external);
// Internal -> external representation. REQUIRES: Contains(d, internal).
Json ToExternal(const Distribution& d, double internal);
// Optuna's _contains: the internal value lies in the distribution (on the step grid).
bool Contains(const Distribution& d, double internal);
// Optuna's single(): only one value is possible.
bool IsSingle(const Distribution& d);

// Optuna's check_distribution_compatibility: same class, same `log`, identical categorical
// choices. Numeric bounds may differ.
Status CheckCompatibility(const Distribution& old_dist, const Distribution& new_dist);

// Equality of JSON scalars as choices compare: bools never equal numbers, NaN equals NaN,
// 1 == 1.0. Used for categorical choices and for conditions on sampled values.
bool ScalarEqual(const Json& a, const Json& b);

}  // namespace tune

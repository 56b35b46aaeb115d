// Column <-> value mapping of Optuna's RDB schema, shared by the RDB backends (no database
// headers): non-finite numbers as NULL + a type column, attributes as Python's json.dumps text,
// distribution_json parsed once per distinct text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tune/distributions.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune::internal::rdb {

// A number as stored: `value` is NULL unless `type` is "FINITE".
struct StoredNumber {
  std::optional<double> value;
  const char* type;  // FINITE, INF_POS, INF_NEG, NAN
};

// trial_values (Optuna's TrialValueType: FINITE, INF_POS, INF_NEG). NaN has no representation:
// InvalidArgument.
Result<StoredNumber> EncodeTrialValue(double v);
// trial_intermediate_values (TrialIntermediateValueType: FINITE, INF_POS, INF_NEG, NAN).
StoredNumber EncodeIntermediateValue(double v);
// Either column pair back to a double. InvalidArgument for an unknown type or a FINITE NULL.
Result<double> DecodeNumber(const std::optional<double>& value, std::string_view type);

// value_json: Python's json.dumps (", " and ": " separators, NaN/Infinity tokens).
std::string EncodeJson(const Json& value);
// json.loads: standard JSON plus Python's NaN, Infinity and -Infinity tokens.
Result<Json> DecodeJson(std::string_view text);

// trial_heartbeats.heartbeat as tune writes it: naive UTC "YYYY-MM-DD HH:MM:SS.ffffff" (the
// column holds the database's clock; SQLite's CURRENT_TIMESTAMP is naive UTC too).
std::string FormatUtcTimestamp(TimePoint t);
// A timestamp read from the database: "YYYY-MM-DD HH:MM:SS[.fraction]" ("T" also accepted as
// the separator), naive = UTC, or with a UTC offset ("Z", "+HH", "+HH:MM", "-HHMM").
Result<TimePoint> ParseUtcTimestamp(std::string_view text);

// distribution_json -> Distribution, memoised: a study repeats the same few texts in every
// trial. Not thread-safe (owned by a storage under its mutex).
class DistributionCache {
 public:
  Result<Distribution> Get(const std::string& json);

 private:
  std::unordered_map<std::string, Distribution> parsed_;
};

}  // namespace tune::internal::rdb

// Python's json.dumps of doubles and JSON values, byte for byte: what Optuna writes into its
// databases (distribution_json) and shows, so that tune's bytes and messages are the same.
#pragma once

#include <string>

#include "tune/json.h"

namespace tune {

// Python's json.dumps of a double ("1e-06", "0.001", "1.0", "Infinity", "NaN").
std::string PyFloatRepr(double v);
// Python's json.dumps of a JSON scalar or array of scalars (", " separators, ASCII escapes).
std::string PyJsonDumps(const Json& v);

}  // namespace tune

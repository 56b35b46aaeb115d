// The JSON value type of tune's interfaces: params, attributes, configs (nlohmann::json).
#pragma once

#include <nlohmann/json.hpp>

namespace tune {

using Json = nlohmann::json;

}  // namespace tune

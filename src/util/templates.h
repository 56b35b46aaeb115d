// Templates over a trial's params: "{name}" placeholders, "{{" and "}}" for literal braces. The
// command objective expands its argv, environment and files with them; the command objective's
// memory guard maps params to an estimator request with them. [tune_core, private]
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tune/json.h"
#include "tune/status.h"

namespace tune {

// The placeholder names used in a template; InvalidArgument for an unbalanced brace.
Result<std::vector<std::string>> TemplateNames(const std::string& text);

// A param's value as templates write it: a string as is, a float as Python prints it, others as
// JSON ("3", "true").
std::string TemplateValueText(const Json& value);
// The param a template names when it is exactly one placeholder, "{name}" (which a memory lever
// or an out-of-memory retry may then change); nullopt for any other text.
std::optional<std::string> SingleParam(const std::string& text);
// Expands "{name}" placeholders ("{{" and "}}" are literal braces); nullopt when one names a
// value that `values` lacks (an inactive parameter).
std::optional<std::string> ExpandTemplate(const std::string& text,
                                          const std::map<std::string, std::string>& values);

}  // namespace tune

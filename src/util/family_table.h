// A family of named choices (samplers, pruners, objective types, subcommands) kept as one table
// of rows, the way ninja keeps its tools: the same rows drive dispatch, the option keys a choice
// accepts, the list of valid names and "did you mean". A new member of a family is one row.
// Private to tune.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune/json.h"
#include "tune/status.h"
#include "util/text.h"

namespace tune::internal {

// One option key of a row and its default, as a config would write it (null: no default, the
// key is required or unset means "off").
struct OptionKey {
  std::string name;
  Json default_value;
};

inline std::vector<std::string> KeyNames(const std::vector<OptionKey>& keys) {
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const OptionKey& k : keys) names.push_back(k.name);
  return names;
}

// REQUIRES: Row has a `name` member convertible to std::string_view.
template <typename Row>
const Row* FindRow(const std::vector<Row>& rows, std::string_view name) {
  for (const Row& row : rows) {
    if (std::string_view(row.name) == name) return &row;
  }
  return nullptr;
}

template <typename Row>
std::vector<std::string> RowNames(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  names.reserve(rows.size());
  for (const Row& row : rows) names.emplace_back(row.name);
  return names;
}

// "unknown pruner 'medain' (did you mean 'median'?); valid: nop, median, ..." (`kind` = "pruner").
template <typename Row>
std::string UnknownNameMessage(const std::vector<Row>& rows, std::string_view kind,
                               const std::string& name) {
  const std::vector<std::string> names = RowNames(rows);
  return fmt::format("unknown {} '{}'{}; valid: {}", kind, name, DidYouMean(name, names),
                     JoinNames(names));
}

// The option keys of the row named `name` with their defaults; empty for an unknown name.
template <typename Row>
std::vector<std::pair<std::string, Json>> OptionKeysOf(const std::vector<Row>& rows,
                                                       std::string_view name) {
  std::vector<std::pair<std::string, Json>> keys;
  if (const Row* row = FindRow(rows, name)) {
    for (const OptionKey& k : row->keys) keys.emplace_back(k.name, k.default_value);
  }
  return keys;
}

}  // namespace tune::internal

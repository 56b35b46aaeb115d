// `tune trials --filter KEY OP VALUE --sort KEY[:desc] --limit N`: picking and ordering stored
// trials by their fields, params and user attributes (docs/cli.md, "tune trials").
//
// A KEY names one field of a trial:
//   number, state, value, values_I (I from 0), duration (seconds), datetime_start,
//   datetime_complete;
//   params_NAME or params.NAME: a parameter (its external value);
//   system_attrs.NAME: a system attribute;
//   user_attrs.NAME, user_attrs_NAME or NAME: a user attribute; dots reach into JSON objects
//   (memory.peak).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune::app {

// The value of `key` in `t`; nullopt when the trial has none (an inactive parameter, an unset
// attribute, the duration of a running trial).
std::optional<Json> TrialField(const FrozenTrial& t, const std::string& key);

struct TrialFilter {
  std::string key;
  std::string op;  // =, !=, <, <=, >, >=
  std::string operand;
};
// "KEY=VALUE", "KEY!=VALUE", "KEY<VALUE", ...; InvalidArgument naming the text otherwise.
Result<TrialFilter> ParseTrialFilter(const std::string& text);
// True when `t` has the key and its value compares as asked: numbers numerically, states
// case-insensitively, anything else as text (a string's own text, else its JSON). A trial
// without the key matches only "!=".
bool Matches(const FrozenTrial& t, const TrialFilter& filter);

struct TrialSort {
  std::string key;
  bool descending = false;
};
// "KEY", "KEY:asc" or "KEY:desc".
Result<TrialSort> ParseTrialSort(const std::string& text);

// The trials that match every filter, ordered by `sort` (trials without the key last, ties by
// number), at most `limit` of them. InvalidArgument when a filter's or the sort's key is on
// no trial at all, with the closest key the trials have.
Result<std::vector<FrozenTrial>> QueryTrials(std::vector<FrozenTrial> trials,
                                             const std::vector<TrialFilter>& filters,
                                             const std::optional<TrialSort>& sort,
                                             std::optional<int64_t> limit);

}  // namespace tune::app

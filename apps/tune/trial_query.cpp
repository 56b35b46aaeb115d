#include "trial_query.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "util/nonfinite.h"
#include "util/text.h"

namespace tune::app {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string UpperText(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// `obj[path]` where `path` may be a key with dots, or dots may step into nested objects.
std::optional<Json> AttrPath(const Json& obj, const std::string& path) {
  if (!obj.is_object()) return std::nullopt;
  if (auto it = obj.find(path); it != obj.end()) return std::make_optional(*it);
  const size_t dot = path.find('.');
  if (dot == std::string::npos) return std::nullopt;
  auto it = obj.find(path.substr(0, dot));
  if (it == obj.end()) return std::nullopt;
  return AttrPath(*it, path.substr(dot + 1));
}

std::optional<Json> Param(const FrozenTrial& t, const std::string& name) {
  if (t.params.find(name) == t.params.end()) return std::nullopt;
  return t.param(name);
}

std::optional<Json> BuiltinField(const FrozenTrial& t, const std::string& key) {
  if (key == "number") return Json(t.number);
  if (key == "state") return Json(TrialStateName(t.state));
  if (key == "value") {
    if (t.values.size() != 1) return std::nullopt;
    return Json(t.values[0]);
  }
  if (key == "duration") {
    auto d = t.duration_seconds();
    return d ? std::optional<Json>(*d) : std::nullopt;
  }
  if (key == "datetime_start" && t.datetime_start) return Json(FormatDatetime(*t.datetime_start));
  if (key == "datetime_complete" && t.datetime_complete) {
    return Json(FormatDatetime(*t.datetime_complete));
  }
  if (StartsWith(key, "values_")) {
    try {
      const size_t i = std::stoul(key.substr(7));
      if (i < t.values.size()) return Json(t.values[i]);
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

// -1, 0, 1: numbers numerically, then text; numbers sort before text.
int CompareJson(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return NanLastLess(x, y) ? -1 : (NanLastLess(y, x) ? 1 : 0);  // NaN after every number
  }
  if (a.is_number() != b.is_number()) return a.is_number() ? -1 : 1;
  const std::string x = a.is_string() ? a.get<std::string>() : a.dump();
  const std::string y = b.is_string() ? b.get<std::string>() : b.dump();
  return x.compare(y) < 0 ? -1 : (x == y ? 0 : 1);
}

std::optional<double> NumberText(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// The keys the trials have, for "did you mean".
std::vector<std::string> KnownKeys(const std::vector<FrozenTrial>& trials) {
  std::set<std::string> keys = {"number",   "state",          "value",
                                "duration", "datetime_start", "datetime_complete"};
  for (const FrozenTrial& t : trials) {
    for (const auto& [name, v] : t.params) keys.insert("params_" + name);
    for (const auto& [name, v] : t.user_attrs.items()) keys.insert(name);
    for (size_t i = 0; i < t.values.size() && t.values.size() > 1; ++i) {
      keys.insert(fmt::format("values_{}", i));
    }
  }
  return {keys.begin(), keys.end()};
}

Status CheckKey(const std::vector<FrozenTrial>& trials, const std::string& key,
                const std::string& flag) {
  if (trials.empty()) return Status::Ok();
  for (const FrozenTrial& t : trials) {
    if (TrialField(t, key)) return Status::Ok();
  }
  const std::vector<std::string> known = KnownKeys(trials);
  return InvalidArgumentError(fmt::format("{}: no trial has '{}'{}; keys: {}", flag, key,
                                          DidYouMean(key, known), JoinNames(known)));
}

}  // namespace

std::optional<Json> TrialField(const FrozenTrial& t, const std::string& key) {
  if (auto v = BuiltinField(t, key)) return v;
  if (StartsWith(key, "params_")) return Param(t, key.substr(7));
  if (StartsWith(key, "params.")) return Param(t, key.substr(7));
  if (StartsWith(key, "system_attrs.")) return AttrPath(t.system_attrs, key.substr(13));
  if (StartsWith(key, "user_attrs.")) return AttrPath(t.user_attrs, key.substr(11));
  if (StartsWith(key, "user_attrs_")) return AttrPath(t.user_attrs, key.substr(11));
  return AttrPath(t.user_attrs, key);
}

Result<TrialFilter> ParseTrialFilter(const std::string& text) {
  for (const char* op : {"!=", "<=", ">=", "=", "<", ">"}) {
    const size_t at = text.find(op);
    if (at == std::string::npos || at == 0) continue;
    return TrialFilter{text.substr(0, at), op, text.substr(at + std::string(op).size())};
  }
  return InvalidArgumentError(fmt::format(
      "--filter '{}': expected KEY=VALUE (or !=, <, <=, >, >=), e.g. state=PRUNED, reason=oom, "
      "value<0.3",
      text));
}

bool Matches(const FrozenTrial& t, const TrialFilter& f) {
  const std::optional<Json> v = TrialField(t, f.key);
  if (!v) return f.op == "!=";
  int c = 0;
  if (auto n = NumberText(f.operand); n && v->is_number()) {
    c = CompareJson(*v, Json(*n));
  } else if (f.key == "state") {
    c = UpperText(v->get<std::string>()).compare(UpperText(f.operand));
  } else {
    c = CompareJson(*v, Json(f.operand));
  }
  if (f.op == "=") return c == 0;
  if (f.op == "!=") return c != 0;
  if (f.op == "<") return c < 0;
  if (f.op == "<=") return c <= 0;
  if (f.op == ">") return c > 0;
  return c >= 0;
}

Result<TrialSort> ParseTrialSort(const std::string& text) {
  TrialSort sort{text, false};
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    const std::string order = text.substr(colon + 1);
    if (order != "asc" && order != "desc") {
      return InvalidArgumentError(fmt::format("--sort '{}': the order after ':' is asc or desc{}",
                                              text, DidYouMean(order, {"asc", "desc"})));
    }
    sort.key = text.substr(0, colon);
    sort.descending = order == "desc";
  }
  if (sort.key.empty()) return InvalidArgumentError("--sort: empty key");
  return sort;
}

Result<std::vector<FrozenTrial>> QueryTrials(std::vector<FrozenTrial> trials,
                                             const std::vector<TrialFilter>& filters,
                                             const std::optional<TrialSort>& sort,
                                             std::optional<int64_t> limit) {
  for (const TrialFilter& f : filters) TUNE_RETURN_IF_ERROR(CheckKey(trials, f.key, "--filter"));
  if (sort) TUNE_RETURN_IF_ERROR(CheckKey(trials, sort->key, "--sort"));
  trials.erase(std::remove_if(trials.begin(), trials.end(),
                              [&](const FrozenTrial& t) {
                                return !std::all_of(
                                    filters.begin(), filters.end(),
                                    [&](const TrialFilter& f) { return Matches(t, f); });
                              }),
               trials.end());
  if (sort) {
    // Each trial's key read once, then the trials in the keys' order.
    std::vector<std::pair<std::optional<Json>, size_t>> keyed;
    keyed.reserve(trials.size());
    for (size_t i = 0; i < trials.size(); ++i)
      keyed.emplace_back(TrialField(trials[i], sort->key), i);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      const std::optional<Json>& x = a.first;
      const std::optional<Json>& y = b.first;
      if (!x || !y) return x && !y;  // trials without the key last
      const int c = CompareJson(*x, *y);
      return sort->descending ? c > 0 : c < 0;
    });
    std::vector<FrozenTrial> sorted;
    sorted.reserve(trials.size());
    for (const auto& entry : keyed) sorted.push_back(std::move(trials[entry.second]));
    trials = std::move(sorted);
  }
  if (limit && static_cast<int64_t>(trials.size()) > *limit) trials.resize(*limit);
  return trials;
}

}  // namespace tune::app

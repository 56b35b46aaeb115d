// The search space of a study config ("search_space" and "conditional"; docs/config.md):
// parameters, their distributions, and the blocks whose parameters exist only when a condition
// on earlier parameters (or on a model parameter's catalog attributes) holds.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "config/config.h"
#include "util/json_reader.h"
#include "util/py_json.h"
#include "util/text.h"

namespace tune {

using internal::JsonReader;

namespace {

const std::vector<std::string> kParamTypes = {"float", "int", "categorical", "model"};
const std::vector<std::string> kConditionOps = {"==", "!=", "in", "not_in", "<", "<=", ">", ">="};

std::string RangeHint(double low, double high, double step) {
  double n = std::floor((high - low) / step);
  return fmt::format("use high = {} or {}", PyFloatRepr(low + n * step),
                     PyFloatRepr(low + (n + 1) * step));
}

Status ParseFloatParam(const JsonReader& r, bool log, ParamSpec& spec) {
  TUNE_ASSIGN_OR_RETURN(std::optional<double> low, r.OptNumber("low"));
  TUNE_ASSIGN_OR_RETURN(std::optional<double> high, r.OptNumber("high"));
  TUNE_ASSIGN_OR_RETURN(std::optional<double> step, r.OptNumber("step"));
  if (*low > *high) {
    return r.Error(
        fmt::format("low ({}) must be <= high ({})", PyFloatRepr(*low), PyFloatRepr(*high)));
  }
  if (log && *low <= 0) {
    return r.ChildError("low",
                        fmt::format("log=true needs low > 0, got low={}", PyFloatRepr(*low)));
  }
  if (log && step) return r.ChildError("step", "step cannot be combined with log=true");
  if (step && *step <= 0) return r.ChildError("step", "step must be > 0");
  if (step && !StepDividesRange(*low, *high, *step)) {
    return r.ChildError(
        "step", fmt::format("step {} does not divide the range [{}, {}] ({})", PyFloatRepr(*step),
                            PyFloatRepr(*low), PyFloatRepr(*high), RangeHint(*low, *high, *step)));
  }
  auto d = MakeFloatDistribution(*low, *high, log, step);
  if (!d.ok()) return r.Error(d.status().message());
  spec.distribution = *d;
  return Status::Ok();
}

Status ParseIntParam(const JsonReader& r, bool log, ParamSpec& spec) {
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> low, r.OptInt("low"));
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> high, r.OptInt("high"));
  TUNE_ASSIGN_OR_RETURN(std::optional<int64_t> step, r.OptInt("step"));
  if (!low) return r.ChildError("low", "expected an integer, got null");
  if (!high) return r.ChildError("high", "expected an integer, got null");
  if (*low > *high) {
    return r.Error(fmt::format("low ({}) must be <= high ({})", *low, *high));
  }
  if (log && *low <= 0) {
    return r.ChildError("low", fmt::format("log=true needs low >= 1, got low={}", *low));
  }
  if (log && step && *step != 1) return r.ChildError("step", "log=true needs step = 1");
  if (step && *step <= 0) return r.ChildError("step", "step must be > 0");
  if (step && (*high - *low) % *step != 0) {
    int64_t n = (*high - *low) / *step;
    return r.ChildError("step",
                        fmt::format("step {} does not divide the range [{}, {}] (use high = "
                                    "{} or {})",
                                    *step, *low, *high, *low + n * *step, *low + (n + 1) * *step));
  }
  auto d = MakeIntDistribution(*low, *high, log, step.value_or(1));
  if (!d.ok()) return r.Error(d.status().message());
  spec.distribution = *d;
  return Status::Ok();
}

// "categorical" with its "choices", or "model": catalog names (all of them without "choices").
Status ParseChoiceParam(const JsonReader& r, const std::string& type, const ModelCatalog& catalog,
                        ParamSpec& spec) {
  TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "choices"}));
  std::vector<Json> choices;
  if (!r.Has("choices")) {
    if (type == "categorical") return r.Error("missing required key 'choices'");
    for (const auto& n : catalog.names()) choices.push_back(n);
  } else {
    const Json& c = r.json().at("choices");
    if (!c.is_array()) {
      return r.ChildError("choices", "expected an array, got " + JsonReader::Describe(c));
    }
    if (c.empty()) return r.ChildError("choices", "choices must not be empty");
    choices = c.get<std::vector<Json>>();
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    const Json& c = choices[i];
    if (type == "model") {
      if (!c.is_string()) {
        return r.ChildError(
            fmt::format("choices/{}", i),
            "a model choice must be a catalog name, got " + JsonReader::Describe(c));
      }
      auto m = catalog.Find(c.get<std::string>());
      if (!m.ok()) return r.ChildError(fmt::format("choices/{}", i), m.status().message());
    }
    for (size_t k = 0; k < i; ++k) {
      if (ScalarEqual(choices[k], c)) {
        return r.ChildError(fmt::format("choices/{}", i), "duplicate choice " + c.dump());
      }
    }
  }
  auto d = MakeCategoricalDistribution(choices);
  if (!d.ok()) return r.ChildError("choices", d.status().message());
  spec.distribution = *d;
  spec.is_model = type == "model";
  return Status::Ok();
}

Result<ParamSpec> ParseParam(const JsonReader& r, const std::string& name,
                             const ModelCatalog& catalog) {
  ParamSpec spec;
  spec.name = name;
  if (r.json().is_array()) {  // shorthand: "batch_size": [8, 16, 32]
    if (r.json().empty()) return r.Error("choices must not be empty");
    auto d = MakeCategoricalDistribution(r.json().get<std::vector<Json>>());
    if (!d.ok()) return r.Error(d.status().message());
    spec.distribution = *d;
    return spec;
  }
  TUNE_RETURN_IF_ERROR(r.ExpectObject());
  TUNE_ASSIGN_OR_RETURN(std::string type, r.RequiredString("type"));
  if (type == "float" || type == "int") {
    TUNE_RETURN_IF_ERROR(r.CheckKeys({"type", "low", "high", "log", "step"}));
    if (!r.Has("low")) return r.Error("missing required key 'low'");
    if (!r.Has("high")) return r.Error("missing required key 'high'");
    TUNE_ASSIGN_OR_RETURN(bool log, r.Bool("log", false));
    TUNE_RETURN_IF_ERROR(type == "float" ? ParseFloatParam(r, log, spec)
                                         : ParseIntParam(r, log, spec));
    return spec;
  }
  if (type == "categorical" || type == "model") {
    TUNE_RETURN_IF_ERROR(ParseChoiceParam(r, type, catalog, spec));
    return spec;
  }
  return r.ChildError("type", fmt::format("unknown parameter type '{}'{}; valid types: {}", type,
                                          DidYouMean(type, kParamTypes), JoinNames(kParamTypes)));
}

struct SpaceParser {
  const ModelCatalog& catalog;
  std::string source;
  const SpaceKeyOrder& key_order;
  std::vector<ParamSpec> declared;  // in sampling order

  // The parameter names of a search_space object in sampling order: the file's order when
  // `key_order` has it for this object (and it names the same keys), else name order.
  std::vector<std::string> KeysInOrder(const JsonReader& space) const {
    std::vector<std::string> keys;
    for (const auto& [name, value] : space.json().items()) keys.push_back(name);
    auto it = key_order.find(space.path());
    if (it == key_order.end() || it->second.size() != keys.size()) return keys;
    std::vector<std::string> sorted = it->second;
    std::sort(sorted.begin(), sorted.end());
    return sorted == keys ? it->second : keys;  // `keys` come sorted from Json
  }

  std::vector<std::string> DeclaredNames() const {
    std::vector<std::string> names;
    for (const auto& p : declared) names.push_back(p.name);
    return names;
  }

  const ParamSpec* FindDeclared(const std::string& name) const {
    for (const auto& p : declared) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }

  // The parameter (and model attribute) a condition key names: a declared parameter, or
  // "<model parameter>.<catalog attribute>".
  Status ResolveConditionKey(const JsonReader& when, const std::string& key, Condition& c) const {
    if (const ParamSpec* p = FindDeclared(key)) {
      c.param = p->name;
      return Status::Ok();
    }
    auto dot = key.rfind('.');
    const ParamSpec* model = dot == std::string::npos ? nullptr : FindDeclared(key.substr(0, dot));
    if (model && model->is_model) {
      c.param = model->name;
      c.attribute = key.substr(dot + 1);
      return CheckModelAttribute(when, key, c.attribute);
    }
    if (model) {
      return when.ChildError(key, fmt::format("'{}' is not a parameter of type \"model\", so "
                                              "'{}' is not a catalog attribute",
                                              model->name, key));
    }
    std::vector<std::string> names = DeclaredNames();
    for (const auto& d : declared) {
      if (d.is_model) names.push_back(d.name + ".heavy");
    }
    return when.ChildError(
        key,
        fmt::format("condition on unknown parameter '{}'{}; a condition may read "
                    "parameters declared before it: {}",
                    key, DidYouMean(key, names), names.empty() ? "(none yet)" : JoinNames(names)));
  }

  Status CheckModelAttribute(const JsonReader& when, const std::string& key,
                             const std::string& attribute) const {
    std::vector<std::string> attrs;
    const Json base_attrs = ModelSpec().Attributes();
    for (const auto& [k, v] : base_attrs.items()) attrs.push_back(k);
    bool known = false;
    for (const auto& n : catalog.names()) {
      Json a = catalog.Find(n).value()->Attributes();
      known = known || a.contains(attribute);
      for (const auto& [k, v] : a.items()) {
        if (std::find(attrs.begin(), attrs.end(), k) == attrs.end()) attrs.push_back(k);
      }
    }
    if (known) return Status::Ok();
    return when.ChildError(key,
                           fmt::format("unknown model attribute '{}'{}; catalog "
                                       "attributes: {}",
                                       attribute, DidYouMean(attribute, attrs), JoinNames(attrs)));
  }

  // The operator and operand: {"<op>": operand}, a list (in) or a value (==).
  static Status ParseOperator(const JsonReader& when, const std::string& key, Condition& c) {
    const Json& v = when.json().at(key);
    if (v.is_array()) {
      c.op = Condition::Op::kIn;
      c.operand = v;
      return Status::Ok();
    }
    if (!v.is_object()) {
      c.op = Condition::Op::kEq;
      c.operand = v;
      return Status::Ok();
    }
    if (v.size() != 1) {
      return when.ChildError(key,
                             "an operator object has exactly one operator, e.g. "
                             "{\">=\": 1}");
    }
    const std::string op = v.begin().key();
    c.operand = v.begin().value();
    static const std::map<std::string, Condition::Op> kOps = {
        {"==", Condition::Op::kEq},        {"!=", Condition::Op::kNe}, {"in", Condition::Op::kIn},
        {"not_in", Condition::Op::kNotIn}, {"<", Condition::Op::kLt},  {"<=", Condition::Op::kLe},
        {">", Condition::Op::kGt},         {">=", Condition::Op::kGe}};
    auto it = kOps.find(op);
    if (it == kOps.end()) {
      return when.ChildError(
          key, fmt::format("unknown operator '{}'{}; valid: {}", op, DidYouMean(op, kConditionOps),
                           JoinNames(kConditionOps)));
    }
    c.op = it->second;
    if ((c.op == Condition::Op::kIn || c.op == Condition::Op::kNotIn) != c.operand.is_array()) {
      return when.ChildError(key + "/" + op, c.operand.is_array()
                                                 ? "a list needs 'in' or 'not_in'"
                                                 : "'in' and 'not_in' need a list");
    }
    return Status::Ok();
  }

  // A condition on a categorical parameter must be able to hold.
  Status CheckConditionCanHold(const JsonReader& when, const std::string& key,
                               const Condition& c) const {
    if (!c.attribute.empty() || (c.op != Condition::Op::kEq && c.op != Condition::Op::kIn)) {
      return Status::Ok();
    }
    const ParamSpec* p = FindDeclared(c.param);
    const auto* cat = std::get_if<CategoricalDistribution>(&p->distribution);
    if (cat == nullptr) return Status::Ok();
    std::vector<Json> wanted = c.op == Condition::Op::kEq ? std::vector<Json>{c.operand}
                                                          : c.operand.get<std::vector<Json>>();
    for (const Json& w : wanted) {
      if (ToInternal(p->distribution, w).ok()) continue;
      std::vector<std::string> names;
      for (const auto& ch : cat->choices) {
        names.push_back(ch.is_string() ? ch.get<std::string>() : ch.dump());
      }
      return when.ChildError(
          key, fmt::format("{} is not a choice of '{}'{}; choices: {}", w.dump(), c.param,
                           w.is_string() ? DidYouMean(w.get<std::string>(), names) : "",
                           JoinNames(names)));
    }
    return Status::Ok();
  }

  Result<Condition> ParseCondition(const JsonReader& when, const std::string& key) {
    Condition c;
    c.key = key;
    TUNE_RETURN_IF_ERROR(ResolveConditionKey(when, key, c));
    TUNE_RETURN_IF_ERROR(ParseOperator(when, key, c));
    TUNE_RETURN_IF_ERROR(CheckConditionCanHold(when, key, c));
    return c;
  }

  Status ParseBlock(const JsonReader* space, const JsonReader* conditional, SpaceBlock& block) {
    if (space) {
      TUNE_RETURN_IF_ERROR(space->ExpectObject());
      for (const std::string& name : KeysInOrder(*space)) {
        if (name.empty()) return space->Error("a parameter name must not be empty");
        TUNE_ASSIGN_OR_RETURN(ParamSpec p, ParseParam(space->Child(name), name, catalog));
        if (const ParamSpec* prev = FindDeclared(name)) {
          if (prev->distribution.index() != p.distribution.index() ||
              prev->is_model != p.is_model) {
            return space->ChildError(
                name, fmt::format("'{}' was declared before as a {}; a parameter keeps its type "
                                  "across conditional blocks",
                                  name, DistributionClassName(prev->distribution)));
          }
        }
        declared.push_back(p);
        block.params.push_back(std::move(p));
      }
    }
    if (conditional) {
      if (!conditional->json().is_array()) {
        return conditional->Error(
            "expected an array of {\"when\": ..., \"search_space\": ...} "
            "blocks, got " +
            JsonReader::Describe(conditional->json()));
      }
      for (size_t i = 0; i < conditional->json().size(); ++i) {
        JsonReader b = conditional->Index(i);
        TUNE_RETURN_IF_ERROR(b.CheckKeys({"when", "search_space", "conditional"}));
        if (!b.Has("when")) return b.Error("missing required key 'when'");
        SpaceBlock child;
        JsonReader when = b.Child("when");
        TUNE_RETURN_IF_ERROR(when.ExpectObject());
        if (when.json().empty()) return when.Error("'when' needs at least one condition");
        for (const auto& [key, v] : when.json().items()) {
          TUNE_ASSIGN_OR_RETURN(Condition c, ParseCondition(when, key));
          child.when.push_back(std::move(c));
        }
        std::optional<JsonReader> s, nested;
        if (b.Has("search_space")) s.emplace(b.Child("search_space"));
        if (b.Has("conditional")) nested.emplace(b.Child("conditional"));
        TUNE_RETURN_IF_ERROR(ParseBlock(s ? &*s : nullptr, nested ? &*nested : nullptr, child));
        block.children.push_back(std::move(child));
      }
    }
    return Status::Ok();
  }
};

}  // namespace

Result<ConditionalSpace> ParseSearchSpace(const Json& search_space, const Json& conditional,
                                          ModelCatalog catalog, const std::string& source,
                                          const SpaceKeyOrder& key_order) {
  SpaceParser parser{catalog, source, key_order, {}};
  SpaceBlock root;
  std::optional<JsonReader> s, c;
  if (!search_space.is_null()) s.emplace(search_space, source, "/search_space");
  if (!conditional.is_null()) c.emplace(conditional, source, "/conditional");
  TUNE_RETURN_IF_ERROR(parser.ParseBlock(s ? &*s : nullptr, c ? &*c : nullptr, root));
  return ConditionalSpace(std::move(root), std::move(catalog));
}

}  // namespace tune

#include "tune/search_space.h"

#include <algorithm>
#include <functional>

namespace tune {
namespace {

// Python-like ordering of JSON scalars: numbers compare numerically, strings lexically; other
// pairs are unordered (the comparison is false).
std::optional<int> Compare(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number() && !a.is_boolean() && !b.is_boolean()) {
    double x = a.get<double>(), y = b.get<double>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    return a.get<std::string>().compare(b.get<std::string>()) < 0
               ? -1
               : (a.get<std::string>() == b.get<std::string>() ? 0 : 1);
  }
  return std::nullopt;
}

}  // namespace

bool ConditionalSpace::Holds(const std::vector<Condition>& when, const Json& values) const {
  for (const Condition& c : when) {
    auto it = values.find(c.param);
    if (it == values.end()) return false;  // the parameter is not active in this trial
    Json actual = *it;
    if (!c.attribute.empty()) {
      if (!it->is_string()) return false;
      auto spec = catalog_.Find(it->get<std::string>());
      if (!spec.ok()) return false;
      Json attrs = (*spec)->Attributes();
      if (!attrs.contains(c.attribute)) return false;
      actual = attrs.at(c.attribute);
    }
    bool ok = false;
    switch (c.op) {
      case Condition::Op::kEq:
        ok = ScalarEqual(actual, c.operand);
        break;
      case Condition::Op::kNe:
        ok = !ScalarEqual(actual, c.operand);
        break;
      case Condition::Op::kIn:
      case Condition::Op::kNotIn: {
        bool found = std::any_of(c.operand.begin(), c.operand.end(),
                                 [&](const Json& x) { return ScalarEqual(actual, x); });
        ok = (c.op == Condition::Op::kIn) == found;
        break;
      }
      default: {
        auto cmp = Compare(actual, c.operand);
        if (!cmp) return false;
        ok = (c.op == Condition::Op::kLt && *cmp < 0) ||
             (c.op == Condition::Op::kLe && *cmp <= 0) ||
             (c.op == Condition::Op::kGt && *cmp > 0) || (c.op == Condition::Op::kGe && *cmp >= 0);
      }
    }
    if (!ok) return false;
  }
  return true;
}

namespace {

// Visits the parameters of every block whose condition holds for `values`, in sampling order.
// `visit` may add to `values` (sampling does), and later conditions see the additions.
Status WalkActive(const ConditionalSpace& space, const SpaceBlock& block, const Json& values,
                  const std::function<Status(const ParamSpec&)>& visit) {
  if (!space.Holds(block.when, values)) return Status::Ok();
  for (const ParamSpec& p : block.params) TUNE_RETURN_IF_ERROR(visit(p));
  for (const SpaceBlock& child : block.children) {
    TUNE_RETURN_IF_ERROR(WalkActive(space, child, values, visit));
  }
  return Status::Ok();
}

// Visits every parameter declaration, active or not, in declaration order.
void WalkAll(const SpaceBlock& block, const std::function<void(const ParamSpec&)>& visit) {
  for (const ParamSpec& p : block.params) visit(p);
  for (const SpaceBlock& child : block.children) WalkAll(child, visit);
}

}  // namespace

Result<Json> ConditionalSpace::Sample(Trial& trial) const {
  Json values = Json::object();
  TUNE_RETURN_IF_ERROR(WalkActive(*this, root_, values, [&](const ParamSpec& p) -> Status {
    TUNE_ASSIGN_OR_RETURN(values[p.name], trial.Suggest(p.name, p.distribution));
    return Status::Ok();
  }));
  return values;
}

std::vector<const ParamSpec*> ConditionalSpace::ActiveParams(const Json& values) const {
  std::vector<const ParamSpec*> out;
  (void)WalkActive(*this, root_, values, [&](const ParamSpec& p) {
    out.push_back(&p);
    return Status::Ok();
  });
  return out;
}

std::vector<std::string> ConditionalSpace::ParamNames() const {
  std::vector<std::string> out;
  WalkAll(root_, [&](const ParamSpec& p) {
    if (std::find(out.begin(), out.end(), p.name) == out.end()) out.push_back(p.name);
  });
  return out;
}

const ParamSpec* ConditionalSpace::FindParam(const std::string& name) const {
  const ParamSpec* found = nullptr;
  WalkAll(root_, [&](const ParamSpec& p) {
    if (!found && p.name == name) found = &p;
  });
  return found;
}

}  // namespace tune

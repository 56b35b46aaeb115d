// Model-aware, conditional search spaces (the "search_space" and "conditional" keys of a config):
// a tree of blocks, each with a condition ("when"), parameters and child blocks.
#pragma once

#include <string>
#include <vector>

#include "tune/distributions.h"
#include "tune/model_catalog.h"
#include "tune/status.h"
#include "tune/study.h"

namespace tune {

// Conditions read sampled values ("optimizer": "sgd") or attributes of a catalog model chosen by a
// parameter of type "model" ("model.heavy": true).
struct Condition {
  enum class Op { kEq, kNe, kIn, kNotIn, kLt, kLe, kGt, kGe };
  std::string key;        // a parameter name, or "<model param>.<catalog attribute>"
  std::string param;      // the parameter the key reads
  std::string attribute;  // catalog attribute, empty when the key is a parameter
  Op op = Op::kEq;
  Json operand;
};

struct ParamSpec {
  std::string name;
  Distribution distribution;
  bool is_model = false;  // a categorical of catalog model names
};

struct SpaceBlock {
  std::vector<Condition> when;  // all must hold
  std::vector<ParamSpec> params;
  std::vector<SpaceBlock> children;
};

// The same parameter name may appear in mutually exclusive blocks with different distributions
// (batch_size in {8,12,16} for heavy models, {8,...,64} for base models). Samplers model each
// distribution separately.
class ConditionalSpace {
 public:
  ConditionalSpace() = default;
  ConditionalSpace(SpaceBlock root, ModelCatalog catalog)
      : root_(std::move(root)), catalog_(std::move(catalog)) {}

  // Suggests every active parameter of `trial`; returns the external values (a JSON object).
  // Walks the tree define-by-run, like Optuna's suggest_* calls: within one block the parameters
  // in the order the config file writes them (SpaceKeyOrder in config.h; name order for a space
  // built from a Json object alone), then the child blocks in order; a block's parameters are
  // suggested only when its condition holds for the values sampled so far. Errors:
  // Trial::Suggest's.
  Result<Json> Sample(Trial& trial) const;
  // True if `when` holds for `values` (external values sampled so far). A condition on a
  // parameter not in `values`, on an attribute of a name not in the catalog or without that
  // attribute, or comparing values that do not order, does not hold.
  bool Holds(const std::vector<Condition>& when, const Json& values) const;

  // Every parameter name that can appear, in declaration order, without repeats.
  std::vector<std::string> ParamNames() const;
  // The parameters a trial with these values activates (for validation of enqueued params).
  std::vector<const ParamSpec*> ActiveParams(const Json& values) const;
  // The first declaration of `name` (nullptr if none).
  const ParamSpec* FindParam(const std::string& name) const;

  const SpaceBlock& root() const { return root_; }
  const ModelCatalog& catalog() const { return catalog_; }

 private:
  SpaceBlock root_;
  ModelCatalog catalog_;
};

}  // namespace tune

// Hyperparameter importances by PED-ANOVA (Watanabe, Bansal and Hutter, "PED-ANOVA: Efficiently
// Quantifying Hyperparameter Importance in Arbitrary Subspaces", IJCAI 2023), computed the way
// Optuna's PedAnovaImportanceEvaluator does with its defaults: the COMPLETE trials in the top 10%
// (at least 2) against all COMPLETE trials, each parameter discretised on at most 50 grid points,
// a 1-D Parzen estimator with Scott's bandwidth over each set, and the Pearson divergence between
// the two, scaled by the quantile squared. Optuna's default evaluator (fANOVA over a random
// forest) is not implemented; docs/benchmarks.md compares the two rankings on real studies.
#pragma once

#include <string>
#include <vector>

#include "tune/trial.h"

namespace tune {

struct ParamImportance {
  std::string name;
  double importance = 0;
};

// The parameters every COMPLETE trial has (with the same distribution), most important first,
// normalised to sum to 1 as optuna.importance.get_param_importances does. Empty when fewer than
// three COMPLETE trials have a finite value. Single objective only: `direction` is its direction.
std::vector<ParamImportance> PedAnovaImportances(const std::vector<FrozenTrial>& trials,
                                                 StudyDirection direction,
                                                 double target_quantile = 0.1);

}  // namespace tune

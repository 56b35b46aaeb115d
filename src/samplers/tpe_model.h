// TpeModel [tune_core, private]: what TPE builds to sample a set of parameters jointly (one
// parameter: independent sampling): the split and the estimators l (of the below trials) and g
// (of the above ones), whose dimensions are the parameters in name order. For tests and
// diagnostics (the differential test against Optuna, tests/differential/).
#pragma once

#include <string>
#include <vector>

#include "samplers/parzen_estimator.h"
#include "tune/samplers/tpe.h"

namespace tune {

struct TpeModel {
  TpeSplit split;
  std::vector<std::string> names;
  ParzenEstimator below;  // l
  ParzenEstimator above;  // g
};

}  // namespace tune

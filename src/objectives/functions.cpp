#include "tune/objectives/functions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "objectives/mo_functions.h"
#include "util/text.h"

namespace tune {
namespace {

Json FloatParam(double low, double high, bool log = false) {
  return Json{{"type", "float"}, {"low", low}, {"high", high}, {"log", log}};
}

Result<double> Number(const Json& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end())
    return InvalidArgumentError("the function needs parameter '" + name + "'");
  if (!it->is_number()) return InvalidArgumentError("parameter '" + name + "' is not a number");
  return it->get<double>();
}

double NumberOr(const Json& params, const std::string& name, double fallback) {
  auto it = params.find(name);
  return it != params.end() && it->is_number() ? it->get<double>() : fallback;
}

Result<std::vector<double>> Vector(const Json& params, int64_t dims) {
  std::vector<double> x;
  for (int64_t i = 0; i < dims; ++i) {
    TUNE_ASSIGN_OR_RETURN(double v, Number(params, fmt::format("x{}", i)));
    x.push_back(v);
  }
  return x;
}

double Branin(double x1, double x2) {
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

double Hartmann6(const std::vector<double>& x) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double p[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += a[i][j] * std::pow(x[j] - p[i][j], 2);
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

const ModelSpec* LookupModel(const ModelCatalog& catalog, const Json& params) {
  auto it = params.find("model");
  if (it == params.end() || !it->is_string()) return nullptr;
  auto spec = catalog.Find(it->get<std::string>());
  return spec.ok() ? *spec : nullptr;
}

// A plausible fine-tuning error surface: bigger and newer encoders do better, each has a learning
// rate optimum (lower for large models), an effective batch size optimum around 32, short
// sequences truncate the text, and weight decay, warmup, dropout and head depth matter a little.
double Mixed(const ModelCatalog& catalog, const Json& params) {
  const ModelSpec* m = LookupModel(catalog, params);
  double n_params = m ? static_cast<double>(m->num_parameters) : 110e6;
  double quality = 0.80 + 0.03 * std::log2(std::max(n_params, 1e6) / 110e6);
  if (m && m->model_type == "deberta-v2") quality += 0.03;
  if (m && m->model_type == "roberta") quality += 0.015;
  if (m && m->model_type == "xlm-roberta") quality -= 0.03;
  quality = std::min(quality, 0.90);
  const bool large = m && m->heavy;
  const double lr_opt = large ? 1e-5 : 3e-5;
  const double lr = NumberOr(params, "lr", lr_opt);
  const double eff = NumberOr(params, "batch_size", 16) * NumberOr(params, "grad_accum", 2);
  const double len = NumberOr(params, "max_length", 256);
  double err = 1.0 - quality;
  err += 0.06 * std::pow(std::log10(lr) - std::log10(lr_opt), 2);
  err += 0.01 * std::pow(std::log2(eff / 32.0), 2);
  err += 0.08 * std::pow(std::max(0.0, (256.0 - len) / 128.0), 2);
  err += 0.5 * std::pow(NumberOr(params, "weight_decay", 0.01) - 0.01, 2);
  err += 0.2 * std::pow(NumberOr(params, "warmup_ratio", 0.06) - 0.06, 2);
  err += 0.3 * std::pow(NumberOr(params, "dropout", 0.1) - 0.1, 2);
  err += 0.004 * std::fabs(NumberOr(params, "classifier_layers", 1) - 1);
  return err;
}

class FunctionObjective : public Objective {
 public:
  FunctionObjective(FunctionOptions options, ModelCatalog catalog)
      : options_(std::move(options)), catalog_(std::move(catalog)) {}

  std::string name() const override { return "function:" + options_.name; }

  Result<TrialOutcome> Run(TrialHandle& trial, const Json& params) override {
    Result<std::vector<double>> values = EvaluateFunctionValues(options_, catalog_, params);
    if (!values.ok() && values.status().code() == StatusCode::kResourceExhausted) {
      return RecordOom(trial, params, {{"memory_proxy", MixedMemoryProxy(catalog_, params)}},
                       values.status().message());
    }
    if (!values.ok()) return values.status();
    if (values->size() > 1) return TrialOutcome{TrialState::kComplete, *values, ""};
    const double final_value = values->front();
    for (int64_t step = 0; step < options_.n_steps; ++step) {
      double left = 1.0 - static_cast<double>(step + 1) / static_cast<double>(options_.n_steps);
      double v = final_value + (1.0 + std::fabs(final_value)) * left * left;
      TUNE_RETURN_IF_ERROR(trial.Report(v, step));
      TUNE_ASSIGN_OR_RETURN(bool prune, trial.ShouldPrune());
      if (prune)
        return TrialOutcome{TrialState::kPruned, {}, fmt::format("pruned at step {}", step)};
    }
    return TrialOutcome{TrialState::kComplete, {final_value}, ""};
  }

 private:
  FunctionOptions options_;
  ModelCatalog catalog_;
};

}  // namespace

std::vector<std::string> FunctionNames() {
  std::vector<std::string> names{"sphere", "rosenbrock", "branin", "hartmann6", "mixed"};
  for (const std::string& n : MultiObjectiveProblemNames()) names.push_back(n);
  names.push_back("mixed_memory");
  return names;
}

int FunctionObjectives(const std::string& name) {
  if (name == "mixed_memory") return 2;
  return std::max(1, MultiObjectiveProblemObjectives(name));
}

Json FunctionDefaultSpace(const FunctionOptions& options) {
  Json space = Json::object();
  if (options.name == "sphere" || options.name == "rosenbrock") {
    for (int64_t i = 0; i < options.dims; ++i) {
      space[fmt::format("x{}", i)] =
          options.name == "sphere" ? FloatParam(-5, 5) : FloatParam(-5, 10);
    }
  } else if (options.name == "branin") {
    space["x1"] = FloatParam(-5, 10);
    space["x2"] = FloatParam(0, 15);
  } else if (options.name == "hartmann6") {
    for (int i = 0; i < 6; ++i) space[fmt::format("x{}", i)] = FloatParam(0, 1);
  } else if (const int n = MultiObjectiveProblemVariables(options.name); n > 0) {
    for (int i = 0; i < n; ++i) {
      auto [low, high] = MultiObjectiveProblemBounds(options.name, i);
      space[fmt::format("x{}", i)] = FloatParam(low, high);
    }
  } else if (options.name == "mixed" || options.name == "mixed_memory") {
    space = Json::parse(R"({
      "model": {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased",
                "roberta-base", "roberta-large", "microsoft/deberta-v3-base",
                "microsoft/deberta-v3-large", "xlm-roberta-base"]},
      "batch_size": {"type": "categorical", "choices": [8, 12, 16, 24, 32, 48, 64]},
      "grad_accum": {"type": "categorical", "choices": [1, 2, 3, 4, 6, 8]},
      "max_length": {"type": "int", "low": 128, "high": 512, "step": 32},
      "lr": {"type": "float", "low": 1e-6, "high": 1e-3, "log": true},
      "weight_decay": {"type": "float", "low": 0.0, "high": 0.1}
    })");
  }
  return space;
}

double MixedMemoryProxy(const ModelCatalog& catalog, const Json& params) {
  const ModelSpec* m = LookupModel(catalog, params);
  double scale =
      m ? static_cast<double>(m->num_hidden_layers * m->hidden_size) / (12.0 * 768.0) : 1.0;
  return NumberOr(params, "batch_size", 16) * NumberOr(params, "max_length", 256) * scale;
}

Result<double> EvaluateFunction(const FunctionOptions& options, const ModelCatalog& catalog,
                                const Json& params) {
  const std::string& n = options.name;
  if (n == "sphere" || n == "rosenbrock") {
    TUNE_ASSIGN_OR_RETURN(std::vector<double> x, Vector(params, options.dims));
    double f = 0;
    if (n == "sphere") {
      for (double v : x) f += v * v;
    } else {
      for (size_t i = 0; i + 1 < x.size(); ++i) {
        f += 100 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1 - x[i], 2);
      }
    }
    return f;
  }
  if (n == "branin") {
    TUNE_ASSIGN_OR_RETURN(double x1, Number(params, "x1"));
    TUNE_ASSIGN_OR_RETURN(double x2, Number(params, "x2"));
    return Branin(x1, x2);
  }
  if (n == "hartmann6") {
    TUNE_ASSIGN_OR_RETURN(std::vector<double> x, Vector(params, 6));
    return Hartmann6(x);
  }
  if (n == "mixed" || n == "mixed_memory") {
    if (options.oom_threshold) {
      double proxy = MixedMemoryProxy(catalog, params);
      if (proxy > *options.oom_threshold) {
        return ResourceExhaustedError(
            fmt::format("simulated out of memory: memory proxy {:.0f} > oom_threshold {:.0f}",
                        proxy, *options.oom_threshold));
      }
    }
    return Mixed(catalog, params);
  }
  if (FunctionObjectives(n) > 1) {
    return InvalidArgumentError(
        fmt::format("function '{}' has {} objectives", n, FunctionObjectives(n)));
  }
  return InvalidArgumentError(fmt::format("unknown function '{}'{}; valid: {}", n,
                                          DidYouMean(n, FunctionNames()),
                                          JoinNames(FunctionNames())));
}

Result<std::vector<double>> EvaluateFunctionValues(const FunctionOptions& options,
                                                   const ModelCatalog& catalog,
                                                   const Json& params) {
  if (const int n = MultiObjectiveProblemVariables(options.name); n > 0) {
    TUNE_ASSIGN_OR_RETURN(std::vector<double> x, Vector(params, n));
    return EvaluateMultiObjectiveProblem(options.name, x);
  }
  if (options.name == "mixed_memory") {
    FunctionOptions mixed = options;
    mixed.name = "mixed";
    TUNE_ASSIGN_OR_RETURN(double error, EvaluateFunction(mixed, catalog, params));
    return std::vector<double>{error, MixedMemoryProxy(catalog, params)};
  }
  TUNE_ASSIGN_OR_RETURN(double value, EvaluateFunction(options, catalog, params));
  return std::vector<double>{value};
}

std::unique_ptr<Objective> NewFunctionObjective(FunctionOptions options, ModelCatalog catalog) {
  return std::make_unique<FunctionObjective>(std::move(options), std::move(catalog));
}

}  // namespace tune

// TPE suggest latency on the user reports' 6-parameter space (issue 3). The Optuna side is
// bench/tpe_speed.py, which runs this program and Optuna's TPESampler with the same method.
//
// For each mode (independent, multivariate) and history size N, `--reps` times: a fresh
// in-memory study gets N COMPLETE trials with uniformly random params and a synthetic value,
// then `--timed` full trials are timed, each Ask + 6 suggests + Tell. All timed trials of one
// (mode, N) are pooled; one JSON line per (mode, N) goes to stdout. The first timed trial of a
// repetition also ingests the N pre-filled trials into the sampler's index, so it is reported
// separately as well ("first_ms").
//
// Usage: tune_bench_tpe_speed [--sizes 100,1000,3000,5000] [--timed 20] [--reps 10]
//                             [--modes independent,multivariate] [--seed 42]
//                             [--preset optuna-5.0|optuna-4.9]  (TPE's preset; the default 5.0)

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tune/distributions.h"
#include "tune/pruners/pruner.h"
#include "tune/samplers/tpe.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune::bench {
namespace {

const std::vector<Json> kModels = {
    "bert-base-uncased",         "bert-large-uncased",         "roberta-base",    "roberta-large",
    "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"};
const std::vector<Json> kBatchSizes = {8, 12, 16, 24, 32, 48, 64};
const std::vector<Json> kGradAccums = {1, 2, 3, 4, 6, 8};

// One point of the space, external values (model and the two categoricals as indices).
struct Point {
  int model = 0;
  int64_t batch_size = 0;
  int64_t grad_accum = 0;
  int64_t max_length = 0;
  double lr = 0;
  double weight_decay = 0;
};

// The synthetic objective; bench/tpe_speed.py has the same formula.
double SyntheticValue(const Point& p) {
  return std::pow(std::log10(p.lr) + 4.5, 2) + 10 * std::pow(p.weight_decay - 0.01, 2) +
         0.1 * std::fabs(std::log2(static_cast<double>(p.batch_size * p.grad_accum) / 32.0)) +
         std::pow((static_cast<double>(p.max_length) - 256.0) / 256.0, 2) + 0.01 * p.model;
}

struct Space {
  CategoricalDistribution model, batch_size, grad_accum;
  IntDistribution max_length;
  FloatDistribution lr, weight_decay;
};

Space MakeSpace() {
  return Space{Take(MakeCategoricalDistribution(kModels), "model"),
               Take(MakeCategoricalDistribution(kBatchSizes), "batch_size"),
               Take(MakeCategoricalDistribution(kGradAccums), "grad_accum"),
               Take(MakeIntDistribution(128, 512, false, 32), "max_length"),
               Take(MakeFloatDistribution(1e-6, 1e-3, true), "lr"),
               Take(MakeFloatDistribution(0.0, 0.1), "weight_decay")};
}

// N COMPLETE trials with params drawn uniformly (log-uniform for lr), stored directly.
void Prefill(Storage& storage, int64_t study_id, const Space& space, int64_t n,
             std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick_model(0, 6), pick_bs(0, 6), pick_ga(0, 5),
      pick_len(0, 12);
  std::uniform_real_distribution<double> log_lr(std::log(1e-6), std::log(1e-3)), wd(0.0, 0.1);
  for (int64_t i = 0; i < n; ++i) {
    int bs_index = pick_bs(rng), ga_index = pick_ga(rng);
    Point p;
    p.model = pick_model(rng);
    p.batch_size = kBatchSizes[bs_index].get<int64_t>();
    p.grad_accum = kGradAccums[ga_index].get<int64_t>();
    p.max_length = 128 + 32 * pick_len(rng);
    p.lr = std::exp(log_lr(rng));
    p.weight_decay = wd(rng);
    FrozenTrial t;
    t.state = TrialState::kComplete;
    t.values = {SyntheticValue(p)};
    t.params = {{"model", p.model},
                {"batch_size", bs_index},
                {"grad_accum", ga_index},
                {"max_length", static_cast<double>(p.max_length)},
                {"lr", p.lr},
                {"weight_decay", p.weight_decay}};
    t.distributions = {{"model", space.model},
                       {"batch_size", space.batch_size},
                       {"grad_accum", space.grad_accum},
                       {"max_length", space.max_length},
                       {"lr", space.lr},
                       {"weight_decay", space.weight_decay}};
    Take(storage.CreateTrial(study_id, &t), "prefill");
  }
}

// One full trial: Ask + the 6 suggests (in the order) + Tell.
void RunTrial(Study& study) {
  auto trial = Take(study.Ask(), "ask");
  Point p;
  Json model = Take(trial->SuggestCategorical("model", kModels), "model");
  p.model = static_cast<int>(std::find(kModels.begin(), kModels.end(), model) - kModels.begin());
  p.batch_size = Take(trial->SuggestCategorical("batch_size", kBatchSizes), "bs").get<int64_t>();
  p.grad_accum = Take(trial->SuggestCategorical("grad_accum", kGradAccums), "ga").get<int64_t>();
  p.max_length = Take(trial->SuggestInt("max_length", 128, 512, false, 32), "max_length");
  p.lr = Take(trial->SuggestFloat("lr", 1e-6, 1e-3, true), "lr");
  p.weight_decay = Take(trial->SuggestFloat("weight_decay", 0.0, 0.1), "weight_decay");
  Take(study.Tell(*trial, TrialState::kComplete, {SyntheticValue(p)}), "tell");
}

// CPU time of this thread in ms: insensitive to other processes sharing the cores.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  std::vector<int64_t> sizes;
  for (const auto& s : SplitList(flags.Get("sizes", "100,1000,3000,5000"))) {
    sizes.push_back(std::stoll(s));
  }
  const int64_t timed = flags.GetInt("timed", 20);
  const int64_t reps = flags.GetInt("reps", 10);
  const uint64_t seed = static_cast<uint64_t>(flags.GetInt("seed", 42));
  const std::vector<std::string> modes = SplitList(flags.Get("modes", "independent,multivariate"));
  const std::string preset_name = flags.Get("preset", "optuna-5.0");
  if (preset_name != "optuna-5.0" && preset_name != "optuna-4.9")
    Die("unknown preset " + preset_name);
  const TpePreset preset =
      preset_name == "optuna-4.9" ? TpePreset::kOptuna49 : TpePreset::kOptuna50;
  const Space space = MakeSpace();

  for (const std::string& mode : modes) {
    if (mode != "independent" && mode != "multivariate") Die("unknown mode " + mode);
    for (int64_t n : sizes) {
      std::vector<double> ms, cpu_ms, first_ms;
      double prefill_s = 0;
      for (int64_t rep = 0; rep < reps; ++rep) {
        std::shared_ptr<Storage> storage = NewInMemoryStorage();
        TpeOptions options = TpePresetOptions(preset);
        options.multivariate = mode == "multivariate";
        const uint64_t run_seed = seed + 1000 * static_cast<uint64_t>(rep);
        auto study = Take(Study::CreateOrLoad(storage, "speed", {StudyDirection::kMinimize},
                                              std::make_unique<TpeSampler>(options),
                                              std::make_unique<NopPruner>(), run_seed),
                          "create study");
        std::mt19937_64 rng(run_seed);
        auto p0 = std::chrono::steady_clock::now();
        Prefill(*storage, study->study_id(), space, n, rng);
        prefill_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
        for (int64_t k = 0; k < timed; ++k) {
          auto t0 = std::chrono::steady_clock::now();
          const double c0 = ThreadCpuMs();
          RunTrial(*study);
          cpu_ms.push_back(ThreadCpuMs() - c0);
          double elapsed =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          ms.push_back(elapsed);
          if (k == 0) first_ms.push_back(elapsed);
        }
      }
      double mean = 0;
      for (double v : ms) mean += v;
      mean /= static_cast<double>(ms.size());
      Json line = {{"tool", "tune"},
                   {"mode", mode},
                   {"n_history", n},
                   {"timed_trials", ms.size()},
                   {"reps", reps},
                   {"median_ms", Quantile(ms, 0.5)},
                   {"mean_ms", mean},
                   {"q1_ms", Quantile(ms, 0.25)},
                   {"q3_ms", Quantile(ms, 0.75)},
                   {"min_ms", *std::min_element(ms.begin(), ms.end())},
                   {"max_ms", *std::max_element(ms.begin(), ms.end())},
                   {"first_median_ms", Quantile(first_ms, 0.5)},
                   {"cpu_median_ms", Quantile(cpu_ms, 0.5)},
                   {"prefill_s", prefill_s / static_cast<double>(reps)}};
      fmt::print("{}\n", line.dump());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

// NSGA-II per-trial time at 1,000 trials (issue 34). The Optuna side is bench/nsgaii_speed.py,
// which runs this program and Optuna 4.9's NSGAIISampler with the same method.
//
// Per repetition a fresh in-memory study with two objectives runs `--trials` full trials (Ask +
// the 6 suggests of bench/tpe_speed.cpp's space + Tell) with NSGA-II at its defaults
// (population 50, uniform crossover); every trial is timed and the last `--window` trials (those
// around the 1,000th) are pooled over the repetitions. One JSON line per run goes to stdout.
//
// Usage: tune_bench_nsgaii_speed [--trials 1000] [--window 100] [--reps 5] [--seed 42]

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tune/pruners/pruner.h"
#include "tune/samplers/nsgaii.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune::bench {
namespace {

const std::vector<Json> kModels = {
    "bert-base-uncased",         "bert-large-uncased",         "roberta-base",    "roberta-large",
    "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"};
const std::vector<Json> kBatchSizes = {8, 12, 16, 24, 32, 48, 64};
const std::vector<Json> kGradAccums = {1, 2, 3, 4, 6, 8};

// The two objectives; bench/nsgaii_speed.py has the same formulas: tpe_speed's error surface
// and a memory-like cost.
std::vector<double> Objectives(int model, int64_t bs, int64_t ga, int64_t len, double lr,
                               double wd) {
  double error = std::pow(std::log10(lr) + 4.5, 2) + 10 * std::pow(wd - 0.01, 2) +
                 0.1 * std::fabs(std::log2(static_cast<double>(bs * ga) / 32.0)) +
                 std::pow((static_cast<double>(len) - 256.0) / 256.0, 2) + 0.01 * model;
  double memory = static_cast<double>(bs * len) * (1.0 + 0.5 * model) / 1000.0;
  return {error, memory};
}

void RunTrial(Study& study) {
  auto trial = Take(study.Ask(), "ask");
  Json model = Take(trial->SuggestCategorical("model", kModels), "model");
  int m = static_cast<int>(std::find(kModels.begin(), kModels.end(), model) - kModels.begin());
  int64_t bs = Take(trial->SuggestCategorical("batch_size", kBatchSizes), "bs").get<int64_t>();
  int64_t ga = Take(trial->SuggestCategorical("grad_accum", kGradAccums), "ga").get<int64_t>();
  int64_t len = Take(trial->SuggestInt("max_length", 128, 512, false, 32), "max_length");
  double lr = Take(trial->SuggestFloat("lr", 1e-6, 1e-3, true), "lr");
  double wd = Take(trial->SuggestFloat("weight_decay", 0.0, 0.1), "weight_decay");
  Take(study.Tell(*trial, TrialState::kComplete, Objectives(m, bs, ga, len, lr, wd)), "tell");
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  const int64_t trials = flags.GetInt("trials", 1000);
  const int64_t window = std::min(flags.GetInt("window", 100), trials);
  const int64_t reps = flags.GetInt("reps", 5);
  const auto seed = static_cast<uint64_t>(flags.GetInt("seed", 42));
  std::vector<double> ms, cpu_ms;
  double total_s = 0;
  for (int64_t rep = 0; rep < reps; ++rep) {
    auto study = Take(Study::CreateOrLoad(NewInMemoryStorage(), "speed",
                                          {StudyDirection::kMinimize, StudyDirection::kMinimize},
                                          std::make_unique<NsgaIISampler>(),
                                          std::make_unique<NopPruner>(), seed + 1000 * rep),
                      "create study");
    auto s0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < trials; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      const double c0 = ThreadCpuMs();
      RunTrial(*study);
      if (k < trials - window) continue;
      cpu_ms.push_back(ThreadCpuMs() - c0);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  }
  double mean = 0;
  double cpu_mean = 0;
  for (double v : ms) mean += v / static_cast<double>(ms.size());
  for (double v : cpu_ms) cpu_mean += v / static_cast<double>(cpu_ms.size());
  Json line = {{"tool", "tune"},
               {"trials", trials},
               {"window", window},
               {"reps", reps},
               {"median_ms", Quantile(ms, 0.5)},
               {"q1_ms", Quantile(ms, 0.25)},
               {"q3_ms", Quantile(ms, 0.75)},
               {"mean_ms", mean},
               {"max_ms", *std::max_element(ms.begin(), ms.end())},
               {"cpu_median_ms", Quantile(cpu_ms, 0.5)},
               {"cpu_mean_ms", cpu_mean},
               {"study_s", total_s / static_cast<double>(reps)}};
  fmt::print("{}\n", line.dump());
  return 0;
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

// The memory estimator's latency (issue 6: under 50 us per estimate). For a spread of catalog
// models and configurations (BERT/RoBERTa and DeBERTa-v3 encoders, an MLP, a GPT-2-sized decoder;
// fp32, bf16 autocast, pure bf16; gradient checkpointing and accumulation; AdamW and SGD), each on
// the CPU and the CUDA device model, it times EstimateMemory call by call and reports the mean,
// p50 and p99 in microseconds; then it times MaxBatchSize (the binary search `tune estimate
// --max-batch` and the guard run) for a 24 GiB CUDA budget. One JSON line per row on stdout;
// bench/run_estimator_speed.sh writes them into docs/benchmarks.md.
//
// Usage: tune_bench_estimator_speed [--calls 20000] [--searches 2000]

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "memory/estimator.h"
#include "memory/memory_model.h"
#include "tune/model_catalog.h"

namespace tune::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  MemoryRequest request;
};

// A GPT-2 (124M)-sized decoder; the catalog lists encoders only.
ModelSpec Gpt2Small() {
  ModelSpec m;
  m.name = "gpt2-small (decoder)";
  m.model_type = "gpt2";
  m.num_hidden_layers = 12;
  m.hidden_size = 768;
  m.num_attention_heads = 12;
  m.intermediate_size = 3072;
  m.vocab_size = 50257;
  m.max_position_embeddings = 1024;
  return m;
}

std::vector<Case> MakeCases(const ModelCatalog& catalog) {
  auto model = [&](const std::string& name) {
    return *Take(catalog.Find(name), "catalog model " + name);
  };
  auto encoder = [&](const std::string& name, int64_t batch, int64_t length) {
    MemoryRequest r;
    r.model = model(name);
    r.batch_size = batch;
    r.max_length = length;
    return r;
  };
  std::vector<Case> cases;
  cases.push_back({"bert-base-uncased b32 T128 fp32", encoder("bert-base-uncased", 32, 128)});
  {
    MemoryRequest r = encoder("bert-base-uncased", 32, 128);
    r.precision = Precision::kBf16;
    r.gradient_checkpointing = true;
    cases.push_back({"bert-base-uncased b32 T128 bf16 checkpointing", r});
  }
  {
    MemoryRequest r = encoder("roberta-large", 16, 512);
    r.grad_accum = 4;
    r.head_hidden = {512, 512};
    cases.push_back({"roberta-large b16 T512 fp32 accum 4, 2-layer head", r});
  }
  {
    MemoryRequest r = encoder("xlm-roberta-base", 32, 128);
    r.optimizer = OptimizerKind::kSgd;
    cases.push_back({"xlm-roberta-base b32 T128 fp32 SGD", r});
  }
  cases.push_back(
      {"microsoft/deberta-v3-base b16 T256 fp32", encoder("microsoft/deberta-v3-base", 16, 256)});
  {
    MemoryRequest r = encoder("microsoft/deberta-v3-large", 8, 512);
    r.precision = Precision::kBf16;
    r.gradient_checkpointing = true;
    cases.push_back({"microsoft/deberta-v3-large b8 T512 bf16 checkpointing", r});
  }
  {
    MemoryRequest r = encoder("microsoft/deberta-v3-base", 16, 256);
    r.precision = Precision::kPureBf16;
    cases.push_back({"microsoft/deberta-v3-base b16 T256 pure_bf16", r});
  }
  {
    MemoryRequest r;
    r.architecture = Architecture::kMlp;
    r.num_features = 100;
    r.mlp_hidden = {256, 256, 256};
    r.batch_size = 1024;
    cases.push_back({"mlp 100-256x3 b1024 fp32", r});
  }
  {
    MemoryRequest r;
    r.architecture = Architecture::kDecoder;
    r.model = Gpt2Small();
    r.batch_size = 8;
    r.max_length = 1024;
    r.precision = Precision::kBf16;
    cases.push_back({"gpt2-small decoder b8 T1024 bf16", r});
  }
  return cases;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[k];
}

int Main(int argc, char** argv) {
  const Flags flags(argc, argv);
  const int64_t calls = flags.GetInt("calls", 20000);
  const int64_t searches = flags.GetInt("searches", 2000);
  const ModelCatalog catalog = Take(ModelCatalog::Builtin(), "built-in catalog");
  const std::vector<Case> cases = MakeCases(catalog);
  const std::vector<std::pair<std::string, DeviceMemoryModel>> devices = {
      {"cpu", DeviceMemoryModel::Cpu()}, {"cuda", DeviceMemoryModel::Cuda()}};
  int64_t sink = 0;  // keeps the results observable

  std::vector<double> all;
  for (const auto& [device_name, device] : devices) {
    for (const Case& c : cases) {
      for (int k = 0; k < 200; ++k)
        sink += Take(EstimateMemory(c.request, device), c.name).device_peak;
      std::vector<double> us;
      us.reserve(static_cast<size_t>(calls));
      int64_t peak = 0;
      const auto start = Clock::now();
      for (int64_t k = 0; k < calls; ++k) {
        const auto t0 = Clock::now();
        Result<MemoryEstimate> e = EstimateMemory(c.request, device);
        const auto t1 = Clock::now();
        if (!e.ok()) Die(fmt::format("{}: {}", c.name, e.status().ToString()));
        peak = e->device_peak;
        sink += peak;
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      const double total_us =
          std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      all.insert(all.end(), us.begin(), us.end());
      const Json row = {{"kind", "estimate"},
                        {"case", c.name},
                        {"device", device_name},
                        {"calls", calls},
                        {"mean_us", total_us / static_cast<double>(calls)},
                        {"p50_us", Quantile(us, 0.50)},
                        {"p99_us", Quantile(us, 0.99)},
                        {"max_us", Quantile(us, 1.0)},
                        {"device_peak", peak}};
      std::printf("%s\n", row.dump().c_str());
    }
  }
  const Json overall = {{"kind", "overall"},
                        {"calls", static_cast<int64_t>(all.size())},
                        {"p50_us", Quantile(all, 0.50)},
                        {"p99_us", Quantile(all, 0.99)},
                        {"max_us", Quantile(all, 1.0)}};
  std::printf("%s\n", overall.dump().c_str());

  // MaxBatchSize over [1, 4096] for a 24 GiB CUDA device with a 10% margin.
  const int64_t budget = static_cast<int64_t>(24.0 * 1024 * 1024 * 1024 * 0.9);
  const DeviceMemoryModel cuda = DeviceMemoryModel::Cuda();
  for (const Case& c : cases) {
    int64_t best = 0;
    std::vector<double> us;
    us.reserve(static_cast<size_t>(searches));
    for (int64_t k = 0; k < searches; ++k) {
      const auto t0 = Clock::now();
      best = Take(MaxBatchSize(FormulaMemoryModel(cuda), c.request, budget), c.name);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      sink += best;
    }
    double mean = 0;
    for (double u : us) mean += u;
    mean /= static_cast<double>(us.size());
    const Json row = {
        {"kind", "max_batch"},          {"case", c.name},        {"device", "cuda 24 GiB"},
        {"searches", searches},         {"mean_us", mean},       {"p50_us", Quantile(us, 0.50)},
        {"p99_us", Quantile(us, 0.99)}, {"max_batch_size", best}};
    std::printf("%s\n", row.dump().c_str());
  }
  std::fprintf(stderr, "(checksum %lld)\n", static_cast<long long>(sink));
  return 0;
}

}  // namespace
}  // namespace tune::bench

int main(int argc, char** argv) { return tune::bench::Main(argc, argv); }

#include "torch/torch_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <mutex>

namespace tune::internal {
namespace {

// Pairs of elements per chunk of at::parallel_for.
constexpr int64_t kGrain = 1 << 14;

template <typename T>
void FillNoise(T* __restrict out, int64_t n, uint64_t seed, uint64_t threshold, T keep) {
  const T zero = static_cast<T>(0.0f);
  const int64_t pairs = (n + 1) / 2;
  at::parallel_for(0, pairs, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t r = DropoutBits(seed, static_cast<uint64_t>(j));
      const int64_t i = 2 * j;
      out[i] = (r & 0xFFFFFFFFULL) < threshold ? keep : zero;
      if (i + 1 < n) out[i + 1] = (r >> 32) < threshold ? keep : zero;
    }
  });
}

}  // namespace

uint64_t DrawDropoutSeed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

uint64_t DropoutKeepThreshold(double p) {
  // keep iff u < threshold, u uniform on [0, 2^32): P(keep) = threshold / 2^32.
  return static_cast<uint64_t>(std::llround((1.0 - p) * 4294967296.0));
}

torch::Tensor Dropout(const torch::Tensor& x, double p, bool train) {
  const bool fast = x.device().is_cpu() && !x.is_sparse() &&
                    (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16);
  if (!train || p <= 0 || !fast) return torch::dropout(x, p, train);
  TORCH_CHECK(p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  torch::Tensor noise = torch::empty(x.sizes(), x.options().requires_grad(false));
  const int64_t n = noise.numel();
  if (n > 0) {
    const double keep_probability = 1.0 - p;
    const uint64_t threshold = DropoutKeepThreshold(p);
    const double keep = keep_probability > 0 ? 1.0 / keep_probability : 0.0;
    const uint64_t seed = DrawDropoutSeed();
    if (x.scalar_type() == torch::kFloat) {
      FillNoise(noise.data_ptr<float>(), n, seed, threshold, static_cast<float>(keep));
    } else {
      FillNoise(noise.data_ptr<at::BFloat16>(), n, seed, threshold,
                static_cast<at::BFloat16>(static_cast<float>(keep)));
    }
  }
  return x * noise;
}

FastDropoutImpl::FastDropoutImpl(double p) : p_(p) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
}

}  // namespace tune::internal

// Dropout for CPU training with a fast counter-based random mask [tune_torch, private].
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace tune::internal {

// The counter-based generator of the CPU dropout masks: SplitMix64's output function of the
// state seed + (i + 1) * golden gamma (64 random bits per counter `i`).
inline uint64_t DropoutBits(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// An element is kept when a 32-bit uniform draw is below this (P(keep) = 1 - p).
uint64_t DropoutKeepThreshold(double p);

// A mask's seed: one 64-bit draw from LibTorch's default CPU generator (so torch::manual_seed
// and restoring the generator's state reproduce the mask).
uint64_t DrawDropoutSeed();

// torch::dropout(x, p, train), with the same result distribution, the same autograd graph and
// the same memory: like LibTorch's CPU dropout it builds a noise tensor of x's dtype holding 0 or
// 1 / (1 - p) and returns x * noise (the multiplication saves the noise for backward). What
// differs is how the noise is drawn. LibTorch fills it with bernoulli_ (one draw of its mt19937
// per element) and then divides it by 1 - p in a second pass; here one pass hashes (seed,
// element index) with SplitMix64, two 32-bit uniforms per hash, and an element is kept when its
// uniform is below (1 - p) * 2^32. The seed is one 64-bit draw from the default CPU generator,
// so torch::manual_seed makes runs reproducible and restoring the generator's state (gradient
// checkpointing's recomputation) reproduces the mask. The mask does not depend on the number of
// threads.
//
// Measured with PyTorch 1.13's profiler on bench/train_throughput.py (small encoder, 1 thread):
// bernoulli_ was 10% of the training step, ~15 ns per element.
//
// CPU float and bfloat16 tensors take this path; anything else (CUDA, whose dropout is a fused
// kernel already; other dtypes) calls torch::dropout.
torch::Tensor Dropout(const torch::Tensor& x, double p, bool train);

// A drop-in for torch::nn::Dropout (no parameters or buffers, so module names and checkpoints
// are unaffected).
class FastDropoutImpl : public torch::nn::Cloneable<FastDropoutImpl> {
 public:
  explicit FastDropoutImpl(double p = 0.5);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x) { return Dropout(x, p_, is_training()); }
  double p() const { return p_; }

 private:
  double p_;
};
TORCH_MODULE(FastDropout);

}  // namespace tune::internal

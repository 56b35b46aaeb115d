// Dropout for CPU training with a fast counter-based random mask [tune_torch, private].
#pragma once

#include <torch/torch.h>

namespace tune::internal {

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

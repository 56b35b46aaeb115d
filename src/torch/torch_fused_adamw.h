// AdamW with a fused single-pass CPU step, and gradient-norm clipping folded into it
// [tune_torch, private].
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tune::internal {

// torch.optim.AdamW's update (decoupled weight decay; the same formula and float arithmetic as
// LibTorch's torch::optim::AdamW without amsgrad), with one difference in how it runs: for a
// dense, contiguous fp32 parameter on the CPU the whole update (decay, both moments, bias
// corrections, the step) is one pass over the parameter, its gradient and its two moments, split
// over the intra-op threads, instead of ~10 tensor ops, each a pass over memory, two of them
// allocating temporaries of the parameter's size. CUDA parameters take PyTorch's fused AdamW
// kernel (at::_fused_adamw_, LibTorch >= 2.0: one launch per parameter group and dtype instead of
// ~10 per parameter, what torch.optim.AdamW(fused=True) and Hugging Face's Trainer run); other
// parameters (other dtypes on the CPU, CUDA with LibTorch 1.13) take those tensor ops, exactly as
// torch::optim::AdamW.
//
// Measured with PyTorch 1.13's profiler on bench/train_throughput.py: AdamW's step is 12% of a
// small encoder's training step and 16% of a bert-base-sized one's on one CPU thread (1 s per
// step for 110 M parameters). Param groups take torch::optim::AdamWOptions (lr, betas, eps,
// weight_decay; amsgrad is rejected).
class FusedAdamW : public torch::optim::Optimizer {
 public:
  explicit FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                      torch::optim::AdamWOptions defaults = torch::optim::AdamWOptions());

  // The next step() multiplies every gradient by `scale` (gradient clipping's coefficient): as
  // it reads it on the fused path, without a pass that rewrites the gradients; in place on the
  // other. Reset to 1 after the step.
  void set_grad_scale(double scale) { grad_scale_ = scale; }

  // The same with the coefficient a one-element float tensor on the parameters' device
  // (ClipCoefficientOnDevice's): the fused device kernel divides each gradient by its reciprocal
  // as it reads it (its grad_scale), with no pass of its own and no host wait; the other paths
  // multiply in place. Reset after the step.
  void set_clip_coefficient(torch::Tensor coefficient) { clip_ = std::move(coefficient); }

  // The next step() leaves every parameter and its state as they are when `found_inf` (fp16
  // loss scaling's flag: a one-element float tensor on the parameters' device, non-zero when a
  // gradient was inf or NaN) is set, as GradScaler.step skips the optimizer. The fused device
  // kernel reads the flag on the device (no host wait; its step count is taken back there); the
  // other paths read it once. Reset after the step.
  void set_found_inf(torch::Tensor found_inf) { found_inf_ = std::move(found_inf); }

  // From now on, every group's learning rate is this one-element float tensor on the
  // parameters' device, which the fused device kernel reads there (a step captured in a CUDA
  // graph then takes each replay's rate; the groups' lr options are ignored on that path).
  // LibTorch >= 2.4 (the kernel's tensor_lr form): FusedDeviceLrTensor().
  void set_lr_tensor(torch::Tensor lr) { lr_tensor_ = std::move(lr); }

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Tests: CPU parameters take the fused device kernel too (at::_fused_adamw_ has a CPU kernel
  // from LibTorch 2.4), so that its call is checked without a card. Call before the first step.
  void set_device_kernel_on_cpu(bool on) { device_kernel_on_cpu_ = on; }

  // The number of steps taken for `param` (0 before its first).
  int64_t steps(const torch::Tensor& param) const;

 private:
  struct State {
    int64_t step = 0;
    torch::Tensor exp_avg, exp_avg_sq;
    torch::Tensor step_count;  // the fused CUDA kernel's step, a float scalar on the device
  };
  // The fused CUDA kernel over `params` of one group (one device and dtype each call).
  void FusedDeviceStep(const std::vector<torch::Tensor>& params, double lr, double beta1,
                       double beta2, double weight_decay, double eps,
                       const torch::Tensor& found_inf, const torch::Tensor& clip);
  std::unordered_map<const void*, State> states_;
  double grad_scale_ = 1.0;
  torch::Tensor clip_;       // set_clip_coefficient's, for one step
  torch::Tensor found_inf_;  // set_found_inf's, for one step
  torch::Tensor lr_tensor_;  // set_lr_tensor's
  bool device_kernel_on_cpu_ = false;
};

// The global 2-norm of the parameters' gradients (those defined), accumulated in double in one
// read pass per gradient; what torch::nn::utils::clip_grad_norm_ computes, without rewriting the
// gradients.
double GradientNorm(const std::vector<torch::Tensor>& params);

// clip_grad_norm_'s coefficient: max_norm / (norm + 1e-6), at most 1.
double ClipCoefficient(double norm, double max_norm);

// clip_grad_norm_'s coefficient for gradients on a device, without reading anything back to the
// host: the global norm from _foreach_norm, then min(1, max_norm / (norm + 1e-6)), a float scalar
// tensor on the device.
torch::Tensor ClipCoefficientOnDevice(const std::vector<torch::Tensor>& grads, double max_norm);

// torch.nn.utils.clip_grad_norm_(foreach=True) on a device: every gradient multiplied by
// ClipCoefficientOnDevice (by 1 when the norm is within bounds).
void ClipGradientsOnDevice(const std::vector<torch::Tensor>& grads, double max_norm);

// Whether the CUDA parameters' step runs the fused kernel (LibTorch >= 2.0).
bool FusedDeviceAdamW();
// Whether that kernel takes the learning rate as a tensor (set_lr_tensor; LibTorch >= 2.4).
bool FusedDeviceLrTensor();

}  // namespace tune::internal

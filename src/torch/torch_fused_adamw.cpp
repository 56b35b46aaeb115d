#include "torch/torch_fused_adamw.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "torch/torch_version.h"

namespace tune::internal {
namespace {

// Elements per chunk of at::parallel_for: a chunk's 4 streams (parameter, gradient, moments) stay
// well inside L2, and a small parameter (a bias, a LayerNorm) runs on the calling thread.
constexpr int64_t kGrain = 1 << 15;

bool Fusable(const torch::Tensor& p, const torch::Tensor& g) {
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_contiguous() &&
         !g.is_sparse() && g.scalar_type() == torch::kFloat && g.is_contiguous() &&
         g.numel() == p.numel();
}

// The constants of one step, each rounded to float as LibTorch rounds a double Scalar for a float
// tensor op.
struct Coefficients {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bias2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
  float grad_scale;
  bool decays, scales;
};

// One pass: p *= decay; m = m * b1 + (1 - b1) g; v = v * b2 + (1 - b2) g g;
// p += -step_size * m / (sqrt(v) / sqrt(bc2) + eps), in the order torch::optim::AdamW applies
// them.
void FusedUpdate(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, const Coefficients& c) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float grad = c.scales ? g[i] * c.grad_scale : g[i];
      float param = c.decays ? p[i] * c.decay : p[i];
      const float mi = m[i] * c.beta1 + c.one_minus_beta1 * grad;
      const float vi = v[i] * c.beta2 + c.one_minus_beta2 * grad * grad;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / c.bias2_sqrt + c.eps;
      param += c.neg_step_size * (mi / denom);
      p[i] = param;
    }
  });
}

}  // namespace

FusedAdamW::FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                       torch::optim::AdamWOptions defaults)
    : torch::optim::Optimizer(std::move(groups),
                              std::make_unique<torch::optim::AdamWOptions>(defaults)) {
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "FusedAdamW: amsgrad is not supported");
  }
}

int64_t FusedAdamW::steps(const torch::Tensor& param) const {
  auto it = states_.find(param.unsafeGetTensorImpl());
  return it == states_.end() ? 0 : it->second.step;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const double grad_scale = std::exchange(grad_scale_, 1.0);
  const torch::Tensor found_inf = std::exchange(found_inf_, torch::Tensor());
  const torch::Tensor clip = std::exchange(clip_, torch::Tensor());
  // Read back only when a parameter takes a path that cannot read it on the device.
  std::optional<bool> skip_on_host;
  auto skip = [&] {
    if (!skip_on_host) skip_on_host = found_inf.defined() && found_inf.item<float>() != 0.0f;
    return *skip_on_host;
  };
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const double lr = o.lr(), wd = o.weight_decay(), eps = o.eps();
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    // CUDA parameters with a gradient, by dtype, for the fused kernel.
    std::map<c10::ScalarType, std::vector<torch::Tensor>> fused;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (FusedDeviceAdamW() && (p.is_cuda() || device_kernel_on_cpu_) && !p.grad().is_sparse() &&
          at::isFloatingType(p.scalar_type())) {
        if (grad_scale != 1.0) p.mutable_grad().mul_(grad_scale);
        fused[p.scalar_type()].push_back(p);
        continue;
      }
      const torch::Tensor& grad = p.grad();
      TORCH_CHECK(!grad.is_sparse(), "FusedAdamW does not support sparse gradients");
      if (skip()) continue;
      if (clip.defined()) p.mutable_grad().mul_(clip);
      State& s = states_[p.unsafeGetTensorImpl()];
      if (s.step == 0) {
        s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
        s.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      }
      ++s.step;
      const double bias1 = 1 - std::pow(beta1, static_cast<double>(s.step));
      const double bias2 = 1 - std::pow(beta2, static_cast<double>(s.step));
      const double step_size = lr / bias1;
      if (Fusable(p, grad) && s.exp_avg.is_contiguous() && s.exp_avg_sq.is_contiguous()) {
        Coefficients c;
        c.decay = static_cast<float>(1 - lr * wd);
        c.decays = wd != 0;
        c.beta1 = static_cast<float>(beta1);
        c.one_minus_beta1 = static_cast<float>(1 - beta1);
        c.beta2 = static_cast<float>(beta2);
        c.one_minus_beta2 = static_cast<float>(1 - beta2);
        c.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
        c.eps = static_cast<float>(eps);
        c.neg_step_size = static_cast<float>(-step_size);
        c.grad_scale = static_cast<float>(grad_scale);
        c.scales = grad_scale != 1.0;
        FusedUpdate(p.data_ptr<float>(), grad.data_ptr<float>(), s.exp_avg.data_ptr<float>(),
                    s.exp_avg_sq.data_ptr<float>(), p.numel(), c);
        continue;
      }
      // torch::optim::AdamW's tensor ops; the clipping scale in place, as clip_grad_norm_ does
      // (no temporary).
      if (grad_scale != 1.0) p.mutable_grad().mul_(grad_scale);
      const torch::Tensor& g = p.grad();
      if (wd != 0) p.mul_(1 - lr * wd);
      s.exp_avg.mul_(beta1).add_(g, 1 - beta1);
      s.exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2);
      const torch::Tensor denom = (s.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(eps);
      p.addcdiv_(s.exp_avg, denom, -step_size);
    }
    for (const auto& [dtype, params] : fused) {
      FusedDeviceStep(params, lr, beta1, beta2, wd, eps, found_inf, clip);
    }
  }
  return loss;
}

bool FusedDeviceAdamW() { return TUNE_TORCH_AT_LEAST(2, 0); }

bool FusedDeviceLrTensor() { return TUNE_TORCH_AT_LEAST(2, 4); }

void FusedAdamW::FusedDeviceStep(const std::vector<torch::Tensor>& params, double lr, double beta1,
                                 double beta2, double weight_decay, double eps,
                                 const torch::Tensor& found_inf, const torch::Tensor& clip) {
#if TUNE_TORCH_AT_LEAST(2, 0)
  std::vector<torch::Tensor> grads, exp_avgs, exp_avg_sqs, steps;
  for (const torch::Tensor& p : params) {
    State& s = states_[p.unsafeGetTensorImpl()];
    if (s.step == 0) {
      s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      s.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      s.step_count = torch::zeros({}, p.options().dtype(torch::kFloat));
    }
    ++s.step;  // the host's copy; step_count, the kernel's, is counted on the device below
    grads.push_back(p.grad());
    exp_avgs.push_back(s.exp_avg);
    exp_avg_sqs.push_back(s.exp_avg_sq);
    steps.push_back(s.step_count);
  }
  // The kernel reads the step count (its bias corrections) but does not advance it: as
  // torch.optim.AdamW(fused=True), count first. At 0, 1 - beta^0 = 0 divides: NaN weights.
  at::_foreach_add_(steps, 1);
  const c10::optional<at::Tensor> flag =
      found_inf.defined() ? c10::optional<at::Tensor>(found_inf) : c10::nullopt;
  // The kernel divides each gradient by grad_scale as it reads it (and stores the quotient).
  const c10::optional<at::Tensor> divisor =
      clip.defined() ? c10::optional<at::Tensor>(clip.to(torch::kFloat).reciprocal())
                     : c10::nullopt;
#if TUNE_TORCH_AT_LEAST(2, 4)
  if (lr_tensor_.defined()) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps,
                      lr_tensor_, beta1, beta2, weight_decay, eps, /*amsgrad=*/false,
                      /*maximize=*/false, divisor, flag);
  } else
#endif
  {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr,
                      beta1, beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false,
                      divisor, flag);
  }
  // A skipped step (found_inf 1) takes its count back, on the device, as
  // torch.optim.AdamW(fused=True) does; the host's count (steps()) counts calls.
  if (found_inf.defined()) {
    at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), found_inf.reshape({})));
  }
#else
  (void)params, (void)lr, (void)beta1, (void)beta2, (void)weight_decay, (void)eps, (void)found_inf,
      (void)clip;
  TORCH_CHECK(false, "the fused CUDA AdamW needs LibTorch >= 2.0");
#endif
}

torch::Tensor ClipCoefficientOnDevice(const std::vector<torch::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  for (torch::Tensor& n : norms) n = n.to(torch::kFloat);
  return (torch::stack(norms).norm() + 1e-6).reciprocal_().mul_(max_norm).clamp_max_(1.0);
}

void ClipGradientsOnDevice(const std::vector<torch::Tensor>& grads, double max_norm) {
  if (grads.empty()) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor coefficient = ClipCoefficientOnDevice(grads, max_norm);
#if TUNE_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(grads, coefficient);
#else
  for (const torch::Tensor& g : grads) g.mul_(coefficient);
#endif
}

double GradientNorm(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  std::vector<torch::Tensor> others;
  for (const auto& p : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cpu() && g.scalar_type() == torch::kFloat && g.is_contiguous() &&
        !g.is_sparse()) {
      const float* data = g.data_ptr<float>();
      sum += at::parallel_reduce(
          int64_t{0}, g.numel(), kGrain, 0.0,
          [&](int64_t begin, int64_t end, double acc) {
            // Four independent sums, so that the loop is not one serial chain of additions.
            double s[4] = {0, 0, 0, 0};
            int64_t i = begin;
            for (; i + 4 <= end; i += 4) {
              for (int k = 0; k < 4; ++k) {
                const double x = data[i + k];
                s[k] += x * x;
              }
            }
            for (; i < end; ++i) s[0] += static_cast<double>(data[i]) * data[i];
            return acc + ((s[0] + s[1]) + (s[2] + s[3]));
          },
          std::plus<double>());
    } else {
      others.push_back(g.norm().to(torch::kDouble));
    }
  }
  // Other devices' norms are reduced there and read back once (one synchronisation).
  if (!others.empty()) sum += torch::stack(others).square().sum().item<double>();
  return std::sqrt(sum);
}

double ClipCoefficient(double norm, double max_norm) {
  return std::min(1.0, max_norm / (norm + 1e-6));
}

}  // namespace tune::internal

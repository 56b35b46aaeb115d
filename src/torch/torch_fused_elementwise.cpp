#include "torch/torch_fused_elementwise.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "torch/torch_dropout.h"
#include "torch/torch_version.h"

#if defined(TUNE_WITH_FUSED_KERNELS) && TUNE_TORCH_AT_LEAST(2, 4)
#define TUNE_FUSED_KERNELS_ON 1
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <mutex>

#include "torch/torch_fused_kernels.h"
#endif

namespace tune::internal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per chunk of the CPU column sums (as the CUDA kernel's kColumnSumRows).
constexpr int64_t kCpuColumnSumRows = 64;

// --- The CPU implementation: the kernels' arithmetic, a row per iteration ---------------------

template <typename T>
void CpuLayerNormForward(const T* x, const float* bias, const float* residual, const float* gamma,
                         const float* beta, int64_t rows, int64_t cols, double p, double eps,
                         bool drop, float* out, float* v, float* mean, float* rstd, uint8_t* mask) {
  const uint64_t seed = drop ? DrawDropoutSeed() : 0;
  const uint64_t threshold = DropoutKeepThreshold(p);
  const float keep_scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * cols;
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) {
        float a = static_cast<float>(x[base + j]) + bias[j];
        if (drop) {
          const uint64_t bits = DropoutBits(seed, static_cast<uint64_t>(base + j)) & 0xFFFFFFFFULL;
          const bool keep = bits < threshold;
          mask[base + j] = keep ? 1 : 0;
          a = keep ? a * keep_scale : 0.0f;
        }
        v[base + j] = a + residual[base + j];
        sum += v[base + j];
      }
      const double m = sum / static_cast<double>(cols);
      double squares = 0;
      for (int64_t j = 0; j < cols; ++j) squares += (v[base + j] - m) * (v[base + j] - m);
      const auto rs =
          static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(cols) + eps));
      mean[r] = static_cast<float>(m);
      rstd[r] = rs;
      for (int64_t j = 0; j < cols; ++j) {
        out[base + j] = (v[base + j] - mean[r]) * rs * gamma[j] + beta[j];
      }
    }
  });
}

template <typename T>
void CpuLayerNormBackward(const float* d_out, const float* v, const float* mean, const float* rstd,
                          const float* gamma, const uint8_t* mask, int64_t rows, int64_t cols,
                          double p, float* d_residual, T* d_x, float* partial) {
  const float keep_scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  const int64_t chunks = (rows + kCpuColumnSumRows - 1) / kCpuColumnSumRows;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      float* d_gamma = partial + (c * 3 + 0) * cols;
      float* d_beta = partial + (c * 3 + 1) * cols;
      float* d_bias = partial + (c * 3 + 2) * cols;
      std::fill(d_gamma, d_gamma + 3 * cols, 0.0f);
      for (int64_t r = c * kCpuColumnSumRows; r < std::min(rows, (c + 1) * kCpuColumnSumRows);
           ++r) {
        const int64_t base = r * cols;
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < cols; ++j) {
          const float g = d_out[base + j] * gamma[j];
          sum_g += g;
          sum_gx += g * (v[base + j] - mean[r]) * rstd[r];
        }
        const auto mean_g = static_cast<float>(sum_g / static_cast<double>(cols));
        const auto mean_gx = static_cast<float>(sum_gx / static_cast<double>(cols));
        for (int64_t j = 0; j < cols; ++j) {
          const float xhat = (v[base + j] - mean[r]) * rstd[r];
          const float dv = rstd[r] * (d_out[base + j] * gamma[j] - mean_g - xhat * mean_gx);
          const float dx = mask == nullptr ? dv : (mask[base + j] != 0 ? dv * keep_scale : 0.0f);
          d_residual[base + j] = dv;
          d_x[base + j] = static_cast<T>(dx);
          d_gamma[j] += d_out[base + j] * xhat;
          d_beta[j] += d_out[base + j];
          d_bias[j] += dx;
        }
      }
    }
  });
}

float Gelu(float a) { return 0.5f * a * (1.0f + std::erf(a * static_cast<float>(M_SQRT1_2))); }

float GeluDerivative(float a) {
  const float cdf = 0.5f * (1.0f + std::erf(a * static_cast<float>(M_SQRT1_2)));
  const float pdf = std::exp(-0.5f * a * a) * static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
  return cdf + a * pdf;
}

template <typename F>
void CpuRowsElementwise(int64_t rows, int64_t cols, F&& f) {
  at::parallel_for(0, rows * cols, 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i, i % cols);
  });
}

// --- CUDA ------------------------------------------------------------------------------------

#ifdef TUNE_FUSED_KERNELS_ON
cuda_kernels::DType KernelType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return cuda_kernels::DType::kFloat;
    case at::kBFloat16:
      return cuda_kernels::DType::kBFloat16;
    case at::kHalf:
      return cuda_kernels::DType::kHalf;
    default:
      TORCH_CHECK(false, "tune's fused CUDA kernels take fp32, bf16 or fp16, not ", t);
  }
}

// The default CUDA generator's next Philox state for `increment` draws per thread: graph-safe
// (inside a capture the kernel reads the seed and offset on the device).
cuda_kernels::PhiloxArgs NextPhilox(const torch::Device& device, uint64_t increment) {
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::PhiloxCudaState s =
      at::check_generator<at::CUDAGeneratorImpl>(gen)->philox_cuda_state(increment);
  cuda_kernels::PhiloxArgs a;
  if (s.captured_) {
    a.seed_ptr = s.seed_.ptr;
    a.offset_ptr = s.offset_.ptr;
    a.offset_intragraph = s.offset_intragraph_;
    a.captured = true;
  } else {
    a.seed = s.seed_.val;
    a.offset = s.offset_.val;
  }
  return a;
}

void CheckLaunch(cudaError_t e, const char* what) {
  TORCH_CHECK(e == cudaSuccess, "tune's fused CUDA kernel (", what,
              ") failed to launch: ", cudaGetErrorString(e));
}
#endif

void CheckDevice(const torch::Tensor& x) {
  TORCH_CHECK(FusedElementwiseRunsOn(x.device()), "tune's fused elementwise functions run on ",
              x.device().str(), " only when tune_torch was built with its CUDA kernels",
              " (nvcc and a LibTorch with CUDA, 2.4 or newer, at build time)");
}

// --- Autograd functions ------------------------------------------------------------------------

class BiasDropoutAddLayerNormFunction
    : public torch::autograd::Function<BiasDropoutAddLayerNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& bias, const torch::Tensor& residual_in,
                               const torch::Tensor& gamma, const torch::Tensor& beta, double p,
                               double eps, bool drop) {
    const int64_t cols = x_in.size(-1);
    const int64_t rows = cols > 0 ? x_in.numel() / cols : 0;
    const torch::Tensor x = x_in.contiguous();
    const torch::Tensor residual = residual_in.to(torch::kFloat).contiguous();
    const auto f32 = x.options().dtype(torch::kFloat);
    torch::Tensor out = torch::empty(x.sizes(), f32), v = torch::empty(x.sizes(), f32);
    torch::Tensor mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    torch::Tensor mask = torch::empty(drop ? x.sizes().vec() : std::vector<int64_t>{0},
                                      x.options().dtype(torch::kUInt8));
    uint8_t* mask_ptr = drop ? mask.data_ptr<uint8_t>() : nullptr;
    if (x.device().is_cpu()) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fused_ln", [&] {
        CpuLayerNormForward(x.data_ptr<scalar_t>(), bias.data_ptr<float>(),
                            residual.data_ptr<float>(), gamma.data_ptr<float>(),
                            beta.data_ptr<float>(), rows, cols, p, eps, drop, out.data_ptr<float>(),
                            v.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                            mask_ptr);
      });
    } else {
#ifdef TUNE_FUSED_KERNELS_ON
      const c10::cuda::CUDAGuard guard(x.device());
      const cuda_kernels::PhiloxArgs rng =
          drop ? NextPhilox(x.device(), cuda_kernels::DropoutPhiloxIncrement(cols))
               : cuda_kernels::PhiloxArgs{};
      CheckLaunch(cuda_kernels::LaunchBiasDropoutAddLayerNorm(
                      KernelType(x.scalar_type()), x.data_ptr(), bias.data_ptr<float>(),
                      residual.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                      rows, cols, static_cast<float>(p), static_cast<float>(eps), rng,
                      out.data_ptr<float>(), v.data_ptr<float>(), mean.data_ptr<float>(),
                      rstd.data_ptr<float>(), mask_ptr, at::cuda::getCurrentCUDAStream().stream()),
                  "bias, dropout, residual and LayerNorm");
#endif
    }
    ctx->save_for_backward({v, mean, rstd, gamma, mask});
    ctx->saved_data["p"] = p;
    ctx->saved_data["drop"] = drop;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["residual_dtype"] = static_cast<int64_t>(residual_in.scalar_type());
    ctx->mark_non_differentiable({mask});
    return {out, mask};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &v = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3];
    const bool drop = ctx->saved_data["drop"].toBool();
    const double p = ctx->saved_data["p"].toDouble();
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto residual_dtype =
        static_cast<at::ScalarType>(ctx->saved_data["residual_dtype"].toInt());
    const int64_t cols = v.size(-1);
    const int64_t rows = cols > 0 ? v.numel() / cols : 0;
    const torch::Tensor d_out = grads[0].to(torch::kFloat).contiguous();
    const uint8_t* mask = drop ? saved[4].data_ptr<uint8_t>() : nullptr;
    torch::Tensor d_residual = torch::empty_like(v);
    torch::Tensor d_x = torch::empty(v.sizes(), v.options().dtype(x_dtype));
    const int64_t chunks = (rows + kCpuColumnSumRows - 1) / kCpuColumnSumRows;
    torch::Tensor partial = torch::empty({std::max<int64_t>(chunks, 1), 3, cols}, v.options());
    if (rows == 0) partial.zero_();
    if (v.device().is_cpu()) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x_dtype, "fused_ln_backward", [&] {
        CpuLayerNormBackward(d_out.data_ptr<float>(), v.data_ptr<float>(), mean.data_ptr<float>(),
                             rstd.data_ptr<float>(), gamma.data_ptr<float>(), mask, rows, cols, p,
                             d_residual.data_ptr<float>(), d_x.data_ptr<scalar_t>(),
                             partial.data_ptr<float>());
      });
    } else {
#ifdef TUNE_FUSED_KERNELS_ON
      static_assert(cuda_kernels::kColumnSumRows == kCpuColumnSumRows);
      const c10::cuda::CUDAGuard guard(v.device());
      CheckLaunch(
          cuda_kernels::LaunchBiasDropoutAddLayerNormBackward(
              KernelType(x_dtype), d_out.data_ptr<float>(), v.data_ptr<float>(),
              mean.data_ptr<float>(), rstd.data_ptr<float>(), gamma.data_ptr<float>(), mask, rows,
              cols, static_cast<float>(p), d_residual.data_ptr<float>(), d_x.data_ptr(),
              partial.data_ptr<float>(), at::cuda::getCurrentCUDAStream().stream()),
          "the backward of bias, dropout, residual and LayerNorm");
#endif
    }
    const torch::Tensor sums = partial.sum(0);  // [3, cols]: gamma's, beta's, bias's gradients
    return {d_x,
            sums[2],
            d_residual.to(residual_dtype),
            sums[0],
            sums[1],
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& bias) {
    const torch::Tensor x = x_in.contiguous();
    const int64_t cols = x.size(-1);
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    torch::Tensor out = torch::empty_like(x);
    if (x.device().is_cpu()) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "bias_gelu", [&] {
        const scalar_t* in = x.data_ptr<scalar_t>();
        const float* b = bias.data_ptr<float>();
        scalar_t* o = out.data_ptr<scalar_t>();
        CpuRowsElementwise(rows, cols, [&](int64_t i, int64_t j) {
          o[i] = static_cast<scalar_t>(Gelu(static_cast<float>(in[i]) + b[j]));
        });
      });
    } else {
#ifdef TUNE_FUSED_KERNELS_ON
      const c10::cuda::CUDAGuard guard(x.device());
      CheckLaunch(cuda_kernels::LaunchBiasGelu(KernelType(x.scalar_type()), x.data_ptr(),
                                               bias.data_ptr<float>(), rows, cols, out.data_ptr(),
                                               at::cuda::getCurrentCUDAStream().stream()),
                  "bias and GELU");
#endif
    }
    ctx->save_for_backward({x, bias});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &bias = saved[1];
    const int64_t cols = x.size(-1);
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    const torch::Tensor d_out = grads[0].to(x.scalar_type()).contiguous();
    torch::Tensor d_x = torch::empty_like(x);
    if (x.device().is_cpu()) {
      AT_DISPATCH_FLOATING_TYPES_AND2(
          at::kBFloat16, at::kHalf, x.scalar_type(), "bias_gelu_bw", [&] {
            const scalar_t* in = x.data_ptr<scalar_t>();
            const scalar_t* g = d_out.data_ptr<scalar_t>();
            const float* b = bias.data_ptr<float>();
            scalar_t* dx = d_x.data_ptr<scalar_t>();
            CpuRowsElementwise(rows, cols, [&](int64_t i, int64_t j) {
              dx[i] = static_cast<scalar_t>(static_cast<float>(g[i]) *
                                            GeluDerivative(static_cast<float>(in[i]) + b[j]));
            });
          });
    } else {
#ifdef TUNE_FUSED_KERNELS_ON
      const c10::cuda::CUDAGuard guard(x.device());
      CheckLaunch(
          cuda_kernels::LaunchBiasGeluBackward(
              KernelType(x.scalar_type()), d_out.data_ptr(), x.data_ptr(), bias.data_ptr<float>(),
              rows, cols, d_x.data_ptr(), at::cuda::getCurrentCUDAStream().stream()),
          "the backward of bias and GELU");
#endif
    }
    // The bias's gradient: the rows' sum, accumulated in fp32.
    torch::Tensor d_bias = at::sum(d_x.reshape({rows, cols}), {0}, false, torch::kFloat);
    return {d_x, d_bias};
  }
};

void CheckParameters(const torch::Tensor& x, std::initializer_list<torch::Tensor> params) {
  for (const torch::Tensor& t : params) {
    TORCH_CHECK(t.scalar_type() == torch::kFloat && t.dim() == 1 && t.size(0) == x.size(-1) &&
                    t.device() == x.device() && t.is_contiguous(),
                "tune's fused elementwise functions take fp32 parameters of shape [", x.size(-1),
                "] on ", x.device().str(), ", not ", t.scalar_type(), " ", t.sizes(), " on ",
                t.device().str());
  }
}

}  // namespace

bool FusedElementwiseKernelsBuilt() {
#ifdef TUNE_FUSED_KERNELS_ON
  return true;
#else
  return false;
#endif
}

bool FusedElementwiseRunsOn(const torch::Device& device) {
  return device.is_cpu() || (device.is_cuda() && FusedElementwiseKernelsBuilt());
}

std::pair<torch::Tensor, torch::Tensor> BiasDropoutAddLayerNormWithMask(
    const torch::Tensor& x, const torch::Tensor& bias, const torch::Tensor& residual,
    const torch::Tensor& gamma, const torch::Tensor& beta, double p, double eps, bool train) {
  CheckDevice(x);
  CheckParameters(x, {bias, gamma, beta});
  TORCH_CHECK(residual.sizes() == x.sizes() && residual.device() == x.device(),
              "the residual's shape ", residual.sizes(), " is not x's ", x.sizes());
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const bool drop = train && p > 0;
  variable_list out =
      BiasDropoutAddLayerNormFunction::apply(x, bias, residual, gamma, beta, p, eps, drop);
  return {out[0], drop ? out[1] : torch::Tensor()};
}

torch::Tensor BiasDropoutAddLayerNorm(const torch::Tensor& x, const torch::Tensor& bias,
                                      const torch::Tensor& residual, const torch::Tensor& gamma,
                                      const torch::Tensor& beta, double p, double eps, bool train) {
  return BiasDropoutAddLayerNormWithMask(x, bias, residual, gamma, beta, p, eps, train).first;
}

torch::Tensor BiasDropoutAddLayerNormReference(const torch::Tensor& x, const torch::Tensor& bias,
                                               const torch::Tensor& residual,
                                               const torch::Tensor& mask,
                                               const torch::Tensor& gamma,
                                               const torch::Tensor& beta, double p, double eps) {
  torch::Tensor a = x.to(torch::kFloat) + bias;
  if (mask.defined()) a = a * mask.to(torch::kFloat) * (p < 1 ? 1.0 / (1.0 - p) : 0.0);
  return torch::layer_norm(a + residual.to(torch::kFloat), {x.size(-1)}, gamma, beta, eps);
}

torch::Tensor BiasGelu(const torch::Tensor& x, const torch::Tensor& bias) {
  CheckDevice(x);
  CheckParameters(x, {bias});
  return BiasGeluFunction::apply(x, bias);
}

torch::Tensor BiasGeluReference(const torch::Tensor& x, const torch::Tensor& bias) {
  return torch::gelu(x.to(torch::kFloat) + bias).to(x.scalar_type());
}

}  // namespace tune::internal

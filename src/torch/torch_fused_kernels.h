// tune's own CUDA kernels for the encoder's elementwise work [tune_torch, private]: launchers over
// raw device pointers, compiled by nvcc from torch_fused_kernels.cu without LibTorch's headers
// (torch_fused_elementwise.cpp wraps them as autograd functions). Every row is `cols` contiguous
// elements; parameters (bias, gamma, beta) and the float tensors are fp32, `x` is the input's
// dtype. Each launcher queues its kernels on `stream` (a cudaStream_t) and returns what
// cudaGetLastError says after the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tune::internal::cuda_kernels {

enum class DType { kFloat, kBFloat16, kHalf };

// Where a kernel's Philox random numbers start: at::PhiloxCudaState's fields. Outside a CUDA
// graph capture, seed and offset are values; inside one they are read on the device from
// seed_ptr and offset_ptr (+ offset_intragraph), so that every replay draws new numbers.
struct PhiloxArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const int64_t* seed_ptr = nullptr;
  const int64_t* offset_ptr = nullptr;
  uint64_t offset_intragraph = 0;
  bool captured = false;
};

// The Philox offset increment (32-bit draws per thread, a multiple of 4) one call of
// LaunchBiasDropoutAddLayerNorm with `cols` takes.
uint64_t DropoutPhiloxIncrement(int64_t cols);

// out = LayerNorm(dropout(x + bias) + residual) * gamma + beta, per row. Writes v (LayerNorm's
// input), mean and rstd (1 / sqrt(var + eps)) per row for backward, and, when `mask` is not null,
// the dropout keep mask (1 kept, 0 dropped; kept elements scaled by 1 / (1 - p)). mask null:
// no dropout.
cudaError_t LaunchBiasDropoutAddLayerNorm(DType x_type, const void* x, const float* bias,
                                          const float* residual, const float* gamma,
                                          const float* beta, int64_t rows, int64_t cols, float p,
                                          float eps, const PhiloxArgs& rng, float* out, float* v,
                                          float* mean, float* rstd, uint8_t* mask,
                                          cudaStream_t stream);

// The rows a block of LaunchBiasDropoutAddLayerNormBackward's column sums covers: `partial`
// holds ceil(rows / kColumnSumRows) x 3 x cols floats.
constexpr int64_t kColumnSumRows = 64;

// Backward of the above: d_residual (LayerNorm's input gradient), d_x (d_residual * mask /
// (1 - p), or d_residual without a mask), and per block of kColumnSumRows rows the partial sums
// over rows of d_out * xhat (gamma's gradient), d_out (beta's) and d_x (bias's) into `partial`.
cudaError_t LaunchBiasDropoutAddLayerNormBackward(DType x_type, const float* d_out, const float* v,
                                                  const float* mean, const float* rstd,
                                                  const float* gamma, const uint8_t* mask,
                                                  int64_t rows, int64_t cols, float p,
                                                  float* d_residual, void* d_x, float* partial,
                                                  cudaStream_t stream);

// out = gelu(x + bias) (the exact, erf GELU), out in x's dtype.
cudaError_t LaunchBiasGelu(DType x_type, const void* x, const float* bias, int64_t rows,
                           int64_t cols, void* out, cudaStream_t stream);

// d_x = d_out * gelu'(x + bias), in x's dtype (d_out too).
cudaError_t LaunchBiasGeluBackward(DType x_type, const void* d_out, const void* x,
                                   const float* bias, int64_t rows, int64_t cols, void* d_x,
                                   cudaStream_t stream);

}  // namespace tune::internal::cuda_kernels

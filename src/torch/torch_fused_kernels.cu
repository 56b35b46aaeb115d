// tune's CUDA kernels for the encoder's elementwise work (torch_fused_kernels.h). Compiled by
// nvcc without LibTorch's headers; every kernel computes in fp32 whatever its input's dtype.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include <algorithm>
#include <type_traits>

#include "torch/torch_fused_kernels.h"

namespace tune::internal::cuda_kernels {
namespace {

constexpr int kThreads = 256;     // threads per row of the row kernels
constexpr int kSumTileCols = 32;  // the column sums' block: 32 columns x kSumTileRows threads
constexpr int kSumTileRows = 8;
constexpr int kElementwiseBlocksMax = 65536;
constexpr float kSqrtHalf = 0.70710678118654752440f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half(v);
}

// at::cuda::philox::unpack: inside a graph the seed and base offset are read on the device.
__device__ __forceinline__ void Unpack(const PhiloxArgs& a, uint64_t& seed, uint64_t& offset) {
  if (a.captured) {
    seed = static_cast<uint64_t>(*a.seed_ptr);
    offset = static_cast<uint64_t>(*a.offset_ptr) + a.offset_intragraph;
  } else {
    seed = a.seed;
    offset = a.offset;
  }
}

// The sum of `v` over the block (every thread gets it). `shared`: blockDim.x / 32 floats.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call's readers are done with `shared`
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total += shared[w];
  return total;
}

// One block per row.
template <typename T>
__global__ void BiasDropoutAddLayerNormKernel(
    const T* __restrict__ x, const float* __restrict__ bias, const float* __restrict__ residual,
    const float* __restrict__ gamma, const float* __restrict__ beta, int64_t cols, float p,
    float eps, PhiloxArgs rng, float* __restrict__ out, float* __restrict__ v,
    float* __restrict__ mean, float* __restrict__ rstd, uint8_t* __restrict__ mask) {
  __shared__ float shared[kThreads / 32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  const bool drop = mask != nullptr;
  const float keep_probability = 1.0f - p;
  const float keep_scale = keep_probability > 0.0f ? 1.0f / keep_probability : 0.0f;
  curandStatePhilox4_32_10_t state;
  float4 draws = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  int used = 4;
  if (drop) {
    uint64_t seed = 0, offset = 0;
    Unpack(rng, seed, offset);
    curand_init(seed, static_cast<uint64_t>(row) * blockDim.x + threadIdx.x, offset, &state);
  }
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float a = ToFloat(x[base + j]) + bias[j];
    if (drop) {
      if (used == 4) {
        draws = curand_uniform4(&state);  // (0, 1]
        used = 0;
      }
      const float u = used == 0 ? draws.x : used == 1 ? draws.y : used == 2 ? draws.z : draws.w;
      ++used;
      const bool keep = u <= keep_probability;
      mask[base + j] = keep ? 1 : 0;
      a = keep ? a * keep_scale : 0.0f;
    }
    const float val = a + residual[base + j];
    v[base + j] = val;
    sum += val;
  }
  const float m = BlockSum(sum, shared) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = v[base + j] - m;
    squares += d * d;
  }
  const float rs = rsqrtf(BlockSum(squares, shared) / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    out[base + j] = (v[base + j] - m) * rs * gamma[j] + beta[j];
  }
}

// One block per row: LayerNorm's input gradient, then through the dropout.
template <typename T>
__global__ void BiasDropoutAddLayerNormBackwardKernel(
    const float* __restrict__ d_out, const float* __restrict__ v, const float* __restrict__ mean,
    const float* __restrict__ rstd, const float* __restrict__ gamma,
    const uint8_t* __restrict__ mask, int64_t cols, float keep_scale,
    float* __restrict__ d_residual, T* __restrict__ d_x) {
  __shared__ float shared[kThreads / 32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  const float m = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = d_out[base + j] * gamma[j];
    sum_g += g;
    sum_gx += g * (v[base + j] - m) * rs;
  }
  const float mean_g = BlockSum(sum_g, shared) / static_cast<float>(cols);
  const float mean_gx = BlockSum(sum_gx, shared) / static_cast<float>(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = d_out[base + j] * gamma[j];
    const float xhat = (v[base + j] - m) * rs;
    const float dv = rs * (g - mean_g - xhat * mean_gx);
    d_residual[base + j] = dv;
    const float dx = mask == nullptr ? dv : (mask[base + j] != 0 ? dv * keep_scale : 0.0f);
    d_x[base + j] = FromFloat<T>(dx);
  }
}

// Block (kSumTileCols, kSumTileRows) over 32 columns of kColumnSumRows rows: their sums of
// d_out * xhat, d_out and d_x into partial[blockIdx.y][0..2][col].
__global__ void ColumnSumsKernel(const float* __restrict__ d_out, const float* __restrict__ v,
                                 const float* __restrict__ mean, const float* __restrict__ rstd,
                                 const float* __restrict__ d_residual,
                                 const uint8_t* __restrict__ mask, int64_t rows, int64_t cols,
                                 float keep_scale, float* __restrict__ partial) {
  __shared__ float sums[3][kSumTileRows][kSumTileCols + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kSumTileCols + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kColumnSumRows;
  const int64_t last = first + kColumnSumRows < rows ? first + kColumnSumRows : rows;
  float d_gamma = 0.0f, d_beta = 0.0f, d_bias = 0.0f;
  if (col < cols) {
    for (int64_t r = first + threadIdx.y; r < last; r += kSumTileRows) {
      const int64_t i = r * cols + col;
      const float g = d_out[i];
      d_gamma += g * (v[i] - mean[r]) * rstd[r];
      d_beta += g;
      const float dv = d_residual[i];
      d_bias += mask == nullptr ? dv : (mask[i] != 0 ? dv * keep_scale : 0.0f);
    }
  }
  sums[0][threadIdx.y][threadIdx.x] = d_gamma;
  sums[1][threadIdx.y][threadIdx.x] = d_beta;
  sums[2][threadIdx.y][threadIdx.x] = d_bias;
  __syncthreads();
  if (threadIdx.y < 3 && col < cols) {
    float total = 0.0f;
    for (int r = 0; r < kSumTileRows; ++r) total += sums[threadIdx.y][r][threadIdx.x];
    partial[(static_cast<int64_t>(blockIdx.y) * 3 + threadIdx.y) * cols + col] = total;
  }
}

template <typename T>
__global__ void BiasGeluKernel(const T* __restrict__ x, const float* __restrict__ bias, int64_t n,
                               int64_t cols, T* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float a = ToFloat(x[i]) + bias[i % cols];
    out[i] = FromFloat<T>(0.5f * a * (1.0f + erff(a * kSqrtHalf)));
  }
}

template <typename T>
__global__ void BiasGeluBackwardKernel(const T* __restrict__ d_out, const T* __restrict__ x,
                                       const float* __restrict__ bias, int64_t n, int64_t cols,
                                       T* __restrict__ d_x) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float a = ToFloat(x[i]) + bias[i % cols];
    const float cdf = 0.5f * (1.0f + erff(a * kSqrtHalf));
    const float pdf = expf(-0.5f * a * a) * kInvSqrt2Pi;
    d_x[i] = FromFloat<T>(ToFloat(d_out[i]) * (cdf + a * pdf));
  }
}

unsigned ElementwiseBlocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, kElementwiseBlocksMax)));
}

// Calls f with a null pointer of the C++ type of `type`.
template <typename F>
void WithType(DType type, F&& f) {
  switch (type) {
    case DType::kFloat:
      f(static_cast<float*>(nullptr));
      return;
    case DType::kBFloat16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return;
    case DType::kHalf:
      f(static_cast<__half*>(nullptr));
      return;
  }
}

}  // namespace

uint64_t DropoutPhiloxIncrement(int64_t cols) {
  const int64_t per_thread = (cols + kThreads - 1) / kThreads;
  return static_cast<uint64_t>((per_thread + 3) / 4 * 4);
}

cudaError_t LaunchBiasDropoutAddLayerNorm(DType x_type, const void* x, const float* bias,
                                          const float* residual, const float* gamma,
                                          const float* beta, int64_t rows, int64_t cols, float p,
                                          float eps, const PhiloxArgs& rng, float* out, float* v,
                                          float* mean, float* rstd, uint8_t* mask,
                                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  WithType(x_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BiasDropoutAddLayerNormKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), bias, residual, gamma, beta, cols, p, eps, rng, out, v, mean,
        rstd, mask);
  });
  return cudaGetLastError();
}

cudaError_t LaunchBiasDropoutAddLayerNormBackward(DType x_type, const float* d_out, const float* v,
                                                  const float* mean, const float* rstd,
                                                  const float* gamma, const uint8_t* mask,
                                                  int64_t rows, int64_t cols, float p,
                                                  float* d_residual, void* d_x, float* partial,
                                                  cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  WithType(x_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BiasDropoutAddLayerNormBackwardKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        d_out, v, mean, rstd, gamma, mask, cols, keep_scale, d_residual, static_cast<T*>(d_x));
  });
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((cols + kSumTileCols - 1) / kSumTileCols),
                  static_cast<unsigned>((rows + kColumnSumRows - 1) / kColumnSumRows));
  ColumnSumsKernel<<<grid, dim3(kSumTileCols, kSumTileRows), 0, stream>>>(
      d_out, v, mean, rstd, d_residual, mask, rows, cols, keep_scale, partial);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGelu(DType x_type, const void* x, const float* bias, int64_t rows,
                           int64_t cols, void* out, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  WithType(x_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BiasGeluKernel<T><<<ElementwiseBlocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), bias,
                                                                     n, cols, static_cast<T*>(out));
  });
  return cudaGetLastError();
}

cudaError_t LaunchBiasGeluBackward(DType x_type, const void* d_out, const void* x,
                                   const float* bias, int64_t rows, int64_t cols, void* d_x,
                                   cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  WithType(x_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BiasGeluBackwardKernel<T><<<ElementwiseBlocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(d_out), static_cast<const T*>(x), bias, n, cols,
        static_cast<T*>(d_x));
  });
  return cudaGetLastError();
}

}  // namespace tune::internal::cuda_kernels

// The encoder's elementwise work as fused autograd functions [tune_torch, private]: what follows
// each of a layer's output projections (bias, dropout, residual, LayerNorm) and the feed-forward
// block's bias and GELU, one kernel each way instead of four to six. On CUDA they run tune's own
// kernels (torch_fused_kernels.cu, when tune_torch was built with them); on the CPU the same
// arithmetic in loops (one pass over each row; the masks from torch_dropout.h's generator), which
// the tests compare with the references below, the unfused ATen ops, and the trainer does not use
// (ATen's vectorised kernels are faster on the CPU: TextTask turns fused_elementwise off there).
#pragma once

#include <torch/torch.h>

#include <utility>

namespace tune::internal {

// Whether tune_torch has its CUDA kernels (built with nvcc against a LibTorch with CUDA).
bool FusedElementwiseKernelsBuilt();

// Whether the fused functions run on `device`: the CPU always, CUDA with the kernels built.
bool FusedElementwiseRunsOn(const torch::Device& device);

// LayerNorm(dropout(x + bias, p) + residual) with weight `gamma` and bias `beta` over the last
// dimension: BertSelfOutput's and BertOutput's work after their dense layer (whose bias is
// `bias` here, the GEMM run without it). x: [..., H] of fp32, bf16 or fp16 (autocast's output);
// residual [..., H] and the result fp32, as under autocast (LayerNorm runs in fp32 there);
// bias, gamma, beta: [H] fp32. Dropout only when `train` and p > 0. Saves for backward what the
// unfused ops save: LayerNorm's fp32 input, its mean and 1/std per row, the uint8 keep mask.
torch::Tensor BiasDropoutAddLayerNorm(const torch::Tensor& x, const torch::Tensor& bias,
                                      const torch::Tensor& residual, const torch::Tensor& gamma,
                                      const torch::Tensor& beta, double p, double eps, bool train);

// The same, returning the keep mask too (uint8, x's shape: 1 kept, 0 dropped; undefined without
// dropout), for the tests.
std::pair<torch::Tensor, torch::Tensor> BiasDropoutAddLayerNormWithMask(
    const torch::Tensor& x, const torch::Tensor& bias, const torch::Tensor& residual,
    const torch::Tensor& gamma, const torch::Tensor& beta, double p, double eps, bool train);

// The unfused ATen ops of BiasDropoutAddLayerNorm given its keep mask (undefined: no dropout):
// layer_norm((x + bias) * mask / (1 - p) + residual), in fp32.
torch::Tensor BiasDropoutAddLayerNormReference(const torch::Tensor& x, const torch::Tensor& bias,
                                               const torch::Tensor& residual,
                                               const torch::Tensor& mask,
                                               const torch::Tensor& gamma,
                                               const torch::Tensor& beta, double p, double eps);

// gelu(x + bias), the exact (erf) GELU of BERT's intermediate layer, in x's dtype; the sum in
// fp32. x: [..., H]; bias: [H] fp32. Saves x for backward (the unfused GELU saves its input).
torch::Tensor BiasGelu(const torch::Tensor& x, const torch::Tensor& bias);

// The unfused ATen ops: gelu(x.float() + bias).to(x's dtype).
torch::Tensor BiasGeluReference(const torch::Tensor& x, const torch::Tensor& bias);

}  // namespace tune::internal

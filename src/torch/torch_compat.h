// LibTorch API differences between Debian's 1.13 and 2.x (docs/memory.md#libtorch-versions),
// private to tune_torch, chosen with TORCH_VERSION_MAJOR/MINOR at compile time (torch_version.h).
//
// Guarded:
// - Autocast, here: 1.13 has per-device setters (set_enabled for CUDA, set_cpu_enabled,
//   set_autocast_gpu_dtype, set_autocast_cpu_dtype); 2.4 (PR #124359) made them device-generic
//   (is_autocast_enabled / set_autocast_enabled(DeviceType, ...), get_/set_autocast_dtype) and
//   deprecated the old names. increment_nesting, decrement_nesting, clear_cache and the cache
//   flag are the same in both.
// - Allocator, in torch_counting_allocator.cpp: allocate() const in 1.13, non-const from
//   2.3 (PR #120969); copy_data() pure virtual in 2.x (declared `override` from 2.3).
// Reviewed, the same in 1.13 and 2.x, so not guarded:
// - Module::zero_grad(bool set_to_none): the default changed (false -> true); the trainer
//   always passes true and never calls Optimizer::zero_grad.
// - c10::OutOfMemoryError and TORCH_CHECK_WITH(OutOfMemoryError, ...), c10::Error::
//   what_without_backtrace, c10::SetCPUAllocator, c10::alloc_cpu/free_cpu.
// - at::_amp_foreach_non_finite_check_and_unscale_ and at::_amp_update_scale_ (same schemas).
// - torch::autograd::Function / AutogradContext (saved_data, save_for_backward), Generator
//   get_state/set_state/mutex, at::globalContext().defaultGenerator(device).
// - CUDA caching allocator calls in torch_cuda_memory.cpp (docs/memory.md#cuda-allocator-calls).
//
// AutocastGuard mirrors torch.autocast's __enter__/__exit__: it saves and restores the enabled
// flag, the dtype and the cache flag, and nests; the outermost exit clears the cast cache.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "torch/torch_version.h"

namespace tune::internal {

inline bool AutocastEnabled(c10::DeviceType device) {
#if TUNE_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

inline void SetAutocastEnabled(c10::DeviceType device, bool enabled) {
#if TUNE_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline at::ScalarType AutocastDtype(c10::DeviceType device) {
#if TUNE_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void SetAutocastDtype(c10::DeviceType device, at::ScalarType dtype) {
#if TUNE_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// Runs the enclosed forward pass under autocast to `dtype` on `device` (CPU or CUDA). Run
// backward outside it. Not copyable; one thread (autocast state is thread-local).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype)
      : device_(device),
        prev_enabled_(AutocastEnabled(device)),
        prev_dtype_(AutocastDtype(device)),
        prev_cache_(at::autocast::is_autocast_cache_enabled()) {
    SetAutocastEnabled(device, true);
    SetAutocastDtype(device, dtype);
    at::autocast::increment_nesting();
    at::autocast::set_autocast_cache_enabled(true);
  }
  ~AutocastGuard() {
    // The outermost exit drops the cached low-precision copies of the weights.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    SetAutocastEnabled(device_, prev_enabled_);
    SetAutocastDtype(device_, prev_dtype_);
    at::autocast::set_autocast_cache_enabled(prev_cache_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool prev_enabled_;
  at::ScalarType prev_dtype_;
  bool prev_cache_;
};

}  // namespace tune::internal

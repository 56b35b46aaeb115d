// LibTorch API differences between Debian's 1.13 and 2.x [tune_torch, private], chosen with
// TORCH_VERSION_MAJOR/MINOR at compile time (torch_version.h). What is guarded (here, and the
// allocator in torch_counting_allocator.cpp) and what was reviewed and is the same in both:
// docs/memory.md#libtorch-versions (also the same: at::globalContext().defaultGenerator(device)).
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "torch/torch_version.h"

namespace tune::internal {

// Autocast's state per device: 1.13 has per-device setters (set_enabled for CUDA,
// set_cpu_enabled, set_autocast_gpu_dtype, set_autocast_cpu_dtype); 2.4 (PR #124359) made them
// device-generic and deprecated the old names.
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
// backward outside it. Not copyable; one thread (autocast state is thread-local). As
// torch.autocast's __enter__/__exit__: it saves and restores the enabled flag, the dtype and the
// cache flag, and nests; the outermost exit clears the cast cache. `cache` false: no cache of
// the weights' low-precision copies (what a CUDA graph capture needs: torch.autocast's
// cache_enabled=False).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool cache = true)
      : device_(device),
        prev_enabled_(AutocastEnabled(device)),
        prev_dtype_(AutocastDtype(device)),
        prev_cache_(at::autocast::is_autocast_cache_enabled()) {
    SetAutocastEnabled(device, true);
    SetAutocastDtype(device, dtype);
    at::autocast::increment_nesting();
    at::autocast::set_autocast_cache_enabled(cache);
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

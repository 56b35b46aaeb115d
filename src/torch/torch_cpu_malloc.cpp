// glibc malloc settings for CPU training (torch_cpu_malloc.h).
#include "torch/torch_cpu_malloc.h"

#include <cstdlib>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tune::internal {

void ConfigureCpuMalloc() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
        std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {
      return;
    }
    constexpr int kMiB = 1024 * 1024;
    // glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the most mallopt accepts.
    mallopt(M_MMAP_THRESHOLD, 32 * kMiB);
    mallopt(M_TRIM_THRESHOLD, 64 * kMiB);
  });
#endif
}

void ReleaseFreeCpuMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace tune::internal

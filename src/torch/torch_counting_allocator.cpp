// The counting CPU allocator (torch_counting_allocator.h). Only c10 headers: cheap to compile.
#include "torch/torch_counting_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "memory/simulated_card.h"
#include "torch/torch_version.h"

// LibTorch >= 2.3 made Allocator::allocate non-const (PR #120969) and has copy_data() as a pure
// virtual (copy-on-write storage); 1.13 has neither.
#if TUNE_TORCH_AT_LEAST(2, 3)
#define TUNE_ALLOCATE_CONST
#define TUNE_COPY_DATA_OVERRIDE override
#else
#define TUNE_ALLOCATE_CONST const
#define TUNE_COPY_DATA_OVERRIDE
#endif

namespace tune {
namespace {

struct State {
  std::mutex mu;
  std::unordered_map<void*, size_t> sizes;  // guarded by mu
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> ooms{0};
  std::atomic<int64_t> limit{-1};  // device_memory; -1: none
};

// Never destroyed: tensors may be freed during static destruction.
State& GetState() {
  static State* state = new State();
  return *state;
}

std::string Bytes(int64_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  return buf;
}

// The DataPtr context is the data pointer itself and raw_deleter() is overridden: kernels that
// call raw_allocate() (GELU does) assert dptr.get() == dptr.get_context().
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) TUNE_ALLOCATE_CONST override {
    State& s = GetState();
    const auto bytes = static_cast<int64_t>(n);
    const int64_t limit = s.limit.load(std::memory_order_relaxed);
    if (limit >= 0) {
      const int64_t live = s.live.load(std::memory_order_relaxed);
      if (live + bytes > limit) {
        s.ooms.fetch_add(1, std::memory_order_relaxed);
        TORCH_CHECK_WITH(OutOfMemoryError, false,
                         "CPU out of memory (tune memory budget): tried to allocate ", Bytes(bytes),
                         "; ", Bytes(live), " of the ", Bytes(limit), " budget in use");
      }
    }
    if (SimulatedCard* card = ProcessSimulatedCard(); card != nullptr && bytes > 0) {
      const Status charged = card->Charge(bytes);
      if (!charged.ok()) {
        s.ooms.fetch_add(1, std::memory_order_relaxed);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory (", charged.message(), ")");
      }
    }
    void* data = c10::alloc_cpu(n);  // throws c10::Error when malloc fails
    if (data != nullptr) {
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.sizes[data] = n;
      }
      const int64_t live = s.live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      int64_t peak = s.peak.load(std::memory_order_relaxed);
      while (live > peak && !s.peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
      }
      s.allocations.fetch_add(1, std::memory_order_relaxed);
    }
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  // Pure virtual in 2.x (copy-on-write tensors); absent in 1.13, where it is an unused member.
  // Whether 2.2 already declares it is unverified: without `override` the definition still
  // overrides it there.
  void copy_data(void* dest, const void* src, std::size_t count) const TUNE_COPY_DATA_OVERRIDE {
    std::memcpy(dest, src, count);
  }

  static void Delete(void* data) {
    if (data == nullptr) return;
    State& s = GetState();
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.sizes.find(data);
      if (it != s.sizes.end()) {
        n = it->second;
        s.sizes.erase(it);
      }
    }
    s.live.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
    if (SimulatedCard* card = ProcessSimulatedCard(); card != nullptr && n > 0) {
      (void)card->Charge(-static_cast<int64_t>(n));
    }
    c10::free_cpu(data);
  }
};

std::atomic<bool> g_installed{false};

}  // namespace

void InstallCountingCpuAllocator() {
  static CountingCpuAllocator* allocator = new CountingCpuAllocator();
  if (g_installed.exchange(true)) return;
  c10::SetCPUAllocator(allocator, /*priority=*/100);
}

bool CountingCpuAllocatorInstalled() { return g_installed.load(); }

CpuMemoryStats GetCpuMemoryStats() {
  State& s = GetState();
  CpuMemoryStats stats;
  stats.live_bytes = s.live.load();
  stats.peak_bytes = s.peak.load();
  stats.allocations = s.allocations.load();
  stats.oom_count = s.ooms.load();
  if (const int64_t limit = s.limit.load(); limit >= 0) stats.device_memory = limit;
  return stats;
}

void SetCpuDeviceMemory(std::optional<int64_t> bytes) {
  GetState().limit.store(bytes ? std::max<int64_t>(*bytes, 0) : -1);
}

void ResetCpuPeakMemory() {
  State& s = GetState();
  s.peak.store(s.live.load());
}

}  // namespace tune

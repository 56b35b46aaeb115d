// A stand-in for NVML (libnvidia-ml.so.1) for tests on machines without an NVIDIA driver: one
// device of $TUNE_FAKE_NVML_TOTAL bytes (default 24 GiB), $TUNE_FAKE_NVML_UTIL percent utilised
// (default 0), no compute processes. Only the entry
// points tune's GpuProcessMemory opens, with NVML's C types.
#include <cstdlib>
#include <cstring>

namespace {
struct Memory {
  unsigned long long total, free, used;  // NOLINT(runtime/int): NVML's nvmlMemory_t
};
unsigned long long Total() {  // NOLINT(runtime/int)
  const char* env = std::getenv("TUNE_FAKE_NVML_TOTAL");
  return env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 10) : 24ULL << 30;
}
struct Utilization {
  unsigned int gpu, memory;  // nvmlUtilization_t
};
int g_device = 0;
}  // namespace

extern "C" {
__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 1;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                         void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &g_device;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    void*, unsigned int* count, void*) {
  *count = 0;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void*, Memory* m) {
  m->total = Total();
  m->used = 0;
  m->free = m->total;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  const char* env = std::getenv("TUNE_FAKE_NVML_UTIL");
  u->gpu = env != nullptr && *env != '\0'
               ? static_cast<unsigned int>(std::strtoul(env, nullptr, 10))
               : 0;
  u->memory = 0;
  return 0;
}
}

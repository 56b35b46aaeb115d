// A stand-in for NVML (libnvidia-ml.so.1) for tests on machines without an NVIDIA driver: one
// device of $TUNE_FAKE_NVML_TOTAL bytes (default 24 GiB), $TUNE_FAKE_NVML_UTIL percent utilised
// (default 0), and the compute processes $TUNE_FAKE_NVML_PROCESSES lists ("PID:BYTES,PID:BYTES",
// or "@FILE" for a file holding that list, read at each call so that a test can change it; none
// by default), the compute capability $TUNE_FAKE_NVML_CC ("MAJOR.MINOR", default 8.0) and the
// name $TUNE_FAKE_NVML_NAME (default "Fake NVML device"). Only the entry points tune's
// GpuProcessMemory opens, with NVML's C types.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// nvmlProcessInfo_v2_t.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(runtime/int)
  unsigned int gpu_instance_id, compute_instance_id;
};

std::vector<std::pair<unsigned int, unsigned long long>> Processes() {  // NOLINT(runtime/int)
  const char* env = std::getenv("TUNE_FAKE_NVML_PROCESSES");
  std::string list = env != nullptr ? env : "";
  if (!list.empty() && list[0] == '@') {
    std::ifstream file(list.substr(1));
    std::getline(file, list);
  }
  std::vector<std::pair<unsigned int, unsigned long long>> out;  // NOLINT(runtime/int)
  std::istringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) continue;
    out.emplace_back(static_cast<unsigned int>(std::strtoul(item.c_str(), nullptr, 10)),
                     std::strtoull(item.c_str() + colon + 1, nullptr, 10));
  }
  return out;
}
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
    void*, unsigned int* count, ProcessInfo* infos) {
  const auto processes = Processes();
  if (*count < processes.size()) {
    *count = static_cast<unsigned int>(processes.size());
    return processes.empty() ? 0 : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = static_cast<unsigned int>(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    infos[i] = ProcessInfo{processes[i].first, processes[i].second, 0, 0};
  }
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void*, Memory* m) {
  m->total = Total();
  m->used = 0;
  for (const auto& p : Processes()) m->used += p.second;
  m->free = m->total - m->used;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCudaComputeCapability(void*, int* major,
                                                                              int* minor) {
  const char* env = std::getenv("TUNE_FAKE_NVML_CC");
  const std::string cc = env != nullptr && *env != '\0' ? env : "8.0";
  *major = std::atoi(cc.c_str());
  const size_t dot = cc.find('.');
  *minor = dot == std::string::npos ? 0 : std::atoi(cc.c_str() + dot + 1);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void*, char* name,
                                                             unsigned int length) {
  const char* env = std::getenv("TUNE_FAKE_NVML_NAME");
  const std::string value = env != nullptr && *env != '\0' ? env : "Fake NVML device";
  if (length <= value.size()) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(name, value.c_str(), value.size() + 1);
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

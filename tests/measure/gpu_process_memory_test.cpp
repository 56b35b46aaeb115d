// GpuProcessMemory without a GPU: NVML's absence (and a library that is not NVML) is a reason,
// not a crash; InProcessGroup tells a real program's process group, children included.
#include "measure/gpu_process_memory.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/subprocess.h"

namespace tune {
namespace {

TEST(GpuProcessMemory, AMissingLibraryIsAReason) {
  std::string why;
  EXPECT_EQ(GpuProcessMemory::Open(&why, "/nonexistent/libnvidia-ml.so.1"), nullptr);
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
}

TEST(GpuProcessMemory, ALibraryWithoutNvmlsEntryPointsIsRefused) {
  std::string why;
  EXPECT_EQ(GpuProcessMemory::Open(&why, "libm.so.6"), nullptr);
  EXPECT_NE(why.find("not NVML"), std::string::npos) << why;
}

// Through a stand-in NVML (tests/testing/fake_nvml.cpp): one device, its total memory, and no
// process on it.
TEST(GpuProcessMemory, ReadsTheDevicesTotalMemoryAndItsProcesses) {
  std::string why;
  setenv("TUNE_FAKE_NVML_TOTAL", "17179869184", 1);  // 16 GiB
  auto gpu = GpuProcessMemory::Open(&why, TUNE_FAKE_NVML);
  ASSERT_NE(gpu, nullptr) << why;
  EXPECT_EQ(gpu->TotalMemory(0), int64_t{16} << 30);
  EXPECT_EQ(gpu->TotalMemory(1), std::nullopt);  // no second device
  EXPECT_EQ(gpu->UsedBy({getpid()}), int64_t{0});
  unsetenv("TUNE_FAKE_NVML_TOTAL");
  setenv("TUNE_FAKE_NVML_UTIL", "37", 1);
  EXPECT_DOUBLE_EQ(gpu->Utilization(0).value_or(-1), 0.37);
  EXPECT_EQ(gpu->Utilization(1), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_UTIL");
  EXPECT_EQ(gpu->ComputeCapability(0), std::make_pair(8, 0));  // the stand-in's default
  setenv("TUNE_FAKE_NVML_CC", "7.5", 1);
  EXPECT_EQ(gpu->ComputeCapability(0), std::make_pair(7, 5));
  EXPECT_EQ(gpu->ComputeCapability(1), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_CC");
}

// CUDA numbers the devices CUDA_VISIBLE_DEVICES lists; NVML numbers all of them.
TEST(NvmlIndexOf, FollowsCudaVisibleDevices) {
  EXPECT_EQ(NvmlIndexOf(1, nullptr), 1u);
  EXPECT_EQ(NvmlIndexOf(0, "2,3"), 2u);
  EXPECT_EQ(NvmlIndexOf(1, " 2 , 3"), 3u);
  EXPECT_EQ(NvmlIndexOf(2, "2,3"), std::nullopt);  // no third visible device
  EXPECT_EQ(NvmlIndexOf(0, "GPU-8a4f7c1e-0000-0000-0000-000000000000"), std::nullopt);
  EXPECT_EQ(NvmlIndexOf(-1, nullptr), std::nullopt);
}

// The status line's reading: from the library $TUNE_NVML_LIBRARY names, for CUDA devices only.
TEST(DeviceNvml, ReadsCudaDevicesOnly) {
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_UTIL", "81", 1);
  EXPECT_DOUBLE_EQ(DeviceNvml("cuda").Utilization().value_or(-1), 0.81);
  EXPECT_DOUBLE_EQ(DeviceNvml("cuda:0").Utilization().value_or(-1), 0.81);
  EXPECT_EQ(DeviceNvml("cuda:1").Utilization(), std::nullopt);  // the fake has one device
  EXPECT_EQ(DeviceNvml("cpu").Utilization(), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_UTIL");
  setenv("TUNE_FAKE_NVML_CC", "7.5", 1);  // what precision "auto" and the bf16 check read
  EXPECT_EQ(DeviceNvml("cuda").ComputeMajor(), 7);
  EXPECT_EQ(DeviceNvml("cuda").ComputeCapability(), std::make_pair(7, 5));
  EXPECT_EQ(DeviceNvml("cpu").ComputeMajor(), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_CC");
  setenv("TUNE_FAKE_NVML_NAME", "Tesla T4", 1);  // the card's name, for messages
  EXPECT_EQ(DeviceNvml("cuda:0").Name(), "Tesla T4");
  EXPECT_EQ(DeviceNvml("cpu").Name(), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_NAME");
  unsetenv("TUNE_NVML_LIBRARY");
}

TEST(GpuProcessMemory, TheDriversLibraryOpensOnlyWhereItIsInstalled) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  std::string why;
  auto gpu = GpuProcessMemory::Open(&why);
  if (lib == nullptr) {
    EXPECT_EQ(gpu, nullptr);
    EXPECT_NE(why.find("libnvidia-ml.so.1"), std::string::npos) << why;
    GTEST_SKIP() << "no NVIDIA driver here: " << why;
  }
  dlclose(lib);
  if (gpu == nullptr) GTEST_SKIP() << "NVML present but not initialised: " << why;
  auto mine = gpu->UsedBy({getpid()});
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(*mine, 0);  // this test process never touches a GPU
  const std::optional<double> busy = gpu->Utilization(0);
  ASSERT_TRUE(busy.has_value());
  EXPECT_GE(*busy, 0.0);
  EXPECT_LE(*busy, 1.0);
}

// What the command objective counts as a trial's program: the process it started and that
// process's children, which share its process group; nothing else, and nothing once they ended.
TEST(InProcessGroup, AProgramAndItsChildrenButNotOthers) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 30 & echo $!; sleep 30 & echo $!; wait"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const pid_t pgid = (*p)->pid();
  std::vector<pid_t> children;
  auto collect = [&](Stream stream, const std::string& line) {
    if (stream == Stream::kStdout) children.push_back(static_cast<pid_t>(std::stol(line)));
    return Status::Ok();
  };
  for (int i = 0; i < 100 && children.size() < 2; ++i) {
    ASSERT_TRUE((*p)->Poll(std::chrono::milliseconds(20), collect).ok());
  }
  ASSERT_EQ(children.size(), 2u);
  EXPECT_TRUE(InProcessGroup(pgid, pgid));
  for (pid_t child : children) EXPECT_TRUE(InProcessGroup(child, pgid)) << child;
  EXPECT_FALSE(InProcessGroup(getpid(), pgid));
  EXPECT_FALSE(InProcessGroup(0, pgid));
  (*p)->Stop();
  while (!(*p)->finished()) {
    ASSERT_TRUE((*p)->Poll(std::chrono::milliseconds(50), collect).ok());
  }
  // The sleeps die with the group; orphans are reaped by init a moment later.
  auto gone = [&] {
    return std::none_of(children.begin(), children.end(),
                        [&](pid_t c) { return InProcessGroup(c, pgid); });
  };
  for (int i = 0; i < 100 && !gone(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(gone());
  EXPECT_FALSE(InProcessGroup(pgid, pgid));
}

}  // namespace
}  // namespace tune

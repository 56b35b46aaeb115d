// GpuProcessMemory without a GPU: NVML's absence (and a library that is not NVML) is a reason,
// not a crash; ProcessGroupMembers finds a real program's process group, children included.
#include "tune/memory/gpu_process_memory.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tune/subprocess.h"

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
}

TEST(ProcessGroupMembers, FindsAProgramAndItsChildren) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30 & wait"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const pid_t pgid = (*p)->pid();
  std::vector<pid_t> members;
  for (int i = 0; i < 100 && members.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    members = ProcessGroupMembers(pgid);
  }
  EXPECT_EQ(members.size(), 3u);  // the shell and its two sleeps
  EXPECT_NE(std::find(members.begin(), members.end(), pgid), members.end());
  EXPECT_TRUE(ProcessGroupMembers(getpgrp()).size() >= 1);
  (*p)->Stop();
  while (!(*p)->finished()) {
    ASSERT_TRUE((*p)->Poll(std::chrono::milliseconds(50), [](Stream, const std::string&) {
                      return Status::Ok();
                    }).ok());
  }
  // The sleeps die with the group; orphans are reaped by init a moment later (zombies don't count).
  for (int i = 0; i < 100 && !ProcessGroupMembers(pgid).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessGroupMembers(pgid).empty());
}

}  // namespace
}  // namespace tune

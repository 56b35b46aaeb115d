// Other processes on the trials' card (memory/card_others.h): real processes charging a
// simulated card, and a stand-in NVML listing processes.
#include "memory/card_others.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "memory/train_guard.h"
#include "testing/temp_dir.h"

namespace tune {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A process that charges `bytes` on card `name` and holds them until killed; its pid.
pid_t Ballast(const std::string& name, int64_t capacity, int64_t bytes) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    auto card = SimulatedCard::Open(name, capacity);
    const bool ok = card.ok() && (*card)->Charge(bytes).ok();
    (void)!write(ready[1], ok ? "y" : "n", 1);
    pause();
    _exit(0);
  }
  char c = 0;
  const bool ok = read(ready[0], &c, 1) == 1 && c == 'y';
  close(ready[0]);
  close(ready[1]);
  return ok ? child : -1;
}

void Stop(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

class CardOthersTest : public ::testing::Test {
 protected:
  void TearDown() override { (void)SimulatedCard::Remove(name_); }
  // At most 64 characters.
  std::string name_ =
      "others-" + std::to_string(getpid()) + "-" +
      std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()).substr(0, 40);
};

TEST(OthersGrowthMargin, IsAnEighthOfWhatTheyHoldAndAtLeastASixtyFourthOfTheCard) {
  EXPECT_EQ(OthersGrowthMargin(0, 1024 * kMiB), 0);
  EXPECT_EQ(OthersGrowthMargin(8 * kMiB, 1024 * kMiB), 16 * kMiB);  // the card's 1/64
  EXPECT_EQ(OthersGrowthMargin(800 * kMiB, 1024 * kMiB), 100 * kMiB);
}

TEST(SelfOrDescendant, CountsThisProcessAndItsChildrenOnly) {
  EXPECT_TRUE(SelfOrDescendant(getpid()));
  EXPECT_FALSE(SelfOrDescendant(getppid()));
  EXPECT_FALSE(SelfOrDescendant(1));
  EXPECT_FALSE(SelfOrDescendant(0));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_TRUE(SelfOrDescendant(child));
  Stop(child);
  EXPECT_FALSE(SelfOrDescendant(child));  // gone
}

// The budget leaves another process what it holds and a margin to grow, is re-read at each call,
// keeps the largest holding of the window after it fell, and never counts this run's processes.
TEST_F(CardOthersTest, TheBudgetLeavesOtherProcessesTheirMemoryAndRoomToGrow) {
  const int64_t capacity = 1024 * kMiB;
  auto mine = SimulatedCard::Open(name_, capacity);
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE((*mine)->Charge(100 * kMiB).ok());  // this process: ours, not counted
  CardOthers others("cpu", std::make_pair(name_, capacity),
                    [](pid_t pid) { return pid == getpid(); });
  EXPECT_EQ(others.Budget(capacity), capacity);  // nobody else on the card
  EXPECT_EQ(others.last_others(), 0);

  const pid_t a = Ballast(name_, capacity, 200 * kMiB);
  ASSERT_GT(a, 0);
  auto reading = others.Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->card_total, capacity);
  EXPECT_EQ(reading->others, 200 * kMiB);
  ASSERT_EQ(reading->processes.size(), 1u);
  EXPECT_EQ(reading->processes[0].first, a);
  // 1024 - 200 - max(200/8, 1024/64) = 799 MiB.
  EXPECT_EQ(others.Budget(capacity), 799 * kMiB);
  EXPECT_EQ(others.last_others(), 200 * kMiB);
  EXPECT_EQ(others.Budget(512 * kMiB), 512 * kMiB);  // never above device_memory

  const pid_t b = Ballast(name_, capacity, 300 * kMiB);  // a second one comes: re-read
  ASSERT_GT(b, 0);
  EXPECT_EQ(others.Budget(capacity), 1024 * kMiB - 500 * kMiB - 500 * kMiB / 8);
  Stop(b);
  EXPECT_EQ(others.Read()->others, 200 * kMiB);
  // The window keeps the 500 MiB they held a moment ago.
  EXPECT_EQ(others.Budget(capacity), 1024 * kMiB - 500 * kMiB - 500 * kMiB / 8);
  EXPECT_EQ(others.last_others(), 200 * kMiB);
  Stop(a);
  // A fresh reader (a new run) sees the card empty again.
  CardOthers fresh("cpu", std::make_pair(name_, capacity),
                   [](pid_t pid) { return pid == getpid(); });
  EXPECT_EQ(fresh.Budget(capacity), capacity);
}

// By default this process's children are this run's (--jobs trials, a command's programs).
TEST_F(CardOthersTest, ThisRunsChildProcessesAreNotOthers) {
  const int64_t capacity = 512 * kMiB;
  const pid_t child = Ballast(name_, capacity, 200 * kMiB);
  ASSERT_GT(child, 0);
  CardOthers others("cpu", std::make_pair(name_, capacity));
  EXPECT_EQ(others.Read()->others, 0);
  EXPECT_EQ(others.Budget(capacity), capacity);
  Stop(child);
}

// A CUDA device through a stand-in NVML listing this process, another process and (later) a pid
// of no process here, which makes the others unknown rather than wrong.
TEST(CardOthersNvml, CountsTheProcessesNvmlListsButThisRun) {
  testing::TempDir dir;
  const std::string list = (dir.path() / "processes").string();
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_TOTAL", std::to_string(16 * 1024 * kMiB).c_str(), 1);
  setenv("TUNE_FAKE_NVML_PROCESSES", ("@" + list).c_str(), 1);
  const pid_t other = getppid();  // alive, and not ours
  std::ofstream(list) << getpid() << ":" << 3000 * kMiB << "," << other << ":" << 1024 * kMiB;
  CardOthers others("cuda", std::nullopt);
  auto reading = others.Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->card_total, 16 * 1024 * kMiB);
  EXPECT_EQ(reading->others, 1024 * kMiB);
  EXPECT_EQ(others.Budget(16 * 1024 * kMiB), (16 * 1024 - 1024 - 256) * kMiB);
  EXPECT_NE(DescribeOthers(*reading).find("pid " + std::to_string(other) + " 1.00 GiB"),
            std::string::npos)
      << DescribeOthers(*reading);

  std::ofstream(list) << getpid() << ":" << 3000 * kMiB << ",4194000:" << 1024 * kMiB;
  std::string why;
  EXPECT_FALSE(others.Read(&why).has_value());
  EXPECT_NE(why.find("pid 4194000, which is no process here"), std::string::npos) << why;
  EXPECT_EQ(others.Budget(8 * 1024 * kMiB), 8 * 1024 * kMiB);  // unknown: device_memory
  // Not a CUDA device, no simulated card: nothing to read.
  EXPECT_FALSE(CardOthers("cpu", std::nullopt).Read().has_value());
  unsetenv("TUNE_FAKE_NVML_PROCESSES");
  unsetenv("TUNE_FAKE_NVML_TOTAL");
  unsetenv("TUNE_NVML_LIBRARY");
}

// A --jobs parent on a CUDA device without device_memory has no trainer (no CUDA context): it
// takes the card's total from the driver, so that trials reserve against the card less what
// other processes hold (found on an H100: the parent reserved nothing and ignored the others).
TEST(CardOthersNvml, AJobsParentWithoutDeviceMemoryAdmitsAgainstTheCardLessTheOthers) {
  testing::TempDir dir;
  const std::string list = (dir.path() / "processes").string();
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_TOTAL", std::to_string(16 * 1024 * kMiB).c_str(), 1);
  setenv("TUNE_FAKE_NVML_PROCESSES", ("@" + list).c_str(), 1);
  std::ofstream(list) << getppid() << ":" << 1024 * kMiB;
  TrainGuard parent(GuardOptions{}, "cuda", /*trainer=*/nullptr, std::nullopt);
  EXPECT_EQ(parent.DeviceMemory(), 16 * 1024 * kMiB);
  EXPECT_EQ(parent.Budget(), (16 * 1024 - 1024 - 256) * kMiB);
  GuardOptions capped;
  capped.device_memory = 8 * 1024 * kMiB;
  EXPECT_EQ(TrainGuard(capped, "cuda", nullptr, std::nullopt).DeviceMemory(), 8 * 1024 * kMiB);
  EXPECT_EQ(TrainGuard(GuardOptions{}, "cpu", nullptr, std::nullopt).DeviceMemory(), std::nullopt);
  unsetenv("TUNE_FAKE_NVML_PROCESSES");
  unsetenv("TUNE_FAKE_NVML_TOTAL");
  unsetenv("TUNE_NVML_LIBRARY");
}

}  // namespace
}  // namespace tune

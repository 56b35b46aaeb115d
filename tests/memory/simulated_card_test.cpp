// The simulated card shared by processes: real processes (fork) charging one /dev/shm counter.
#include "memory/simulated_card.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "memory/guard_planner.h"
#include "memory/simulated_trial.h"

namespace tune {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A card name of its own per test, removed afterwards.
class SimulatedCardTest : public ::testing::Test {
 protected:
  void TearDown() override { (void)SimulatedCard::Remove(name_); }
  std::string name_ = "test-" + std::to_string(getpid()) + "-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

TEST_F(SimulatedCardTest, AnAllocationThatDoesNotFitFailsWithWhatIsInUse) {
  auto card = SimulatedCard::Open(name_, 100 * kMiB);
  ASSERT_TRUE(card.ok()) << card.status().ToString();
  EXPECT_TRUE((*card)->Charge(60 * kMiB).ok());
  Status s = (*card)->Charge(50 * kMiB);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("60.0 MiB of 100.0 MiB in use"), std::string::npos) << s.message();
  EXPECT_TRUE((*card)->Charge(-30 * kMiB).ok());
  EXPECT_TRUE((*card)->Charge(50 * kMiB).ok());
  EXPECT_EQ((*card)->used(), 80 * kMiB);
  EXPECT_EQ((*card)->mine(), 80 * kMiB);
}

// Two processes share the card: the second one's allocation fails because of the first's; when
// the first is killed its bytes come back.
TEST_F(SimulatedCardTest, ProcessesShareTheCardAndADeadProcessGivesItsBytesBack) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto card = SimulatedCard::Open(name_, 100 * kMiB);
    const bool ok = card.ok() && (*card)->Charge(70 * kMiB).ok();
    (void)!write(ready[1], ok ? "y" : "n", 1);
    pause();  // holds its 70 MiB until killed
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto card = SimulatedCard::Open(name_, 100 * kMiB);
  ASSERT_TRUE(card.ok());
  EXPECT_EQ((*card)->used(), 70 * kMiB);
  EXPECT_EQ((*card)->Charge(40 * kMiB).code(), StatusCode::kResourceExhausted);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE((*card)->Charge(40 * kMiB).ok());
  EXPECT_EQ((*card)->used(), 40 * kMiB);
}

TEST_F(SimulatedCardTest, TheCEntryPointChargesTheSameCard) {
  EXPECT_EQ(tune_simulated_card_charge(name_.c_str(), 10 * kMiB, 8 * kMiB), 0);
  EXPECT_EQ(tune_simulated_card_charge(name_.c_str(), 10 * kMiB, 4 * kMiB), 1);  // out of memory
  EXPECT_EQ(tune_simulated_card_used(name_.c_str(), 10 * kMiB), 8 * kMiB);
  EXPECT_EQ(tune_simulated_card_charge(name_.c_str(), 10 * kMiB, -8 * kMiB), 0);
}

TEST_F(SimulatedCardTest, BadNamesAndAnotherCapacityAreErrors) {
  EXPECT_EQ(SimulatedCard::Open("no/slash", kMiB).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulatedCard::Open(name_, 0).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(SimulatedCard::Open(name_, 10 * kMiB).ok());
  auto other = SimulatedCard::Open(name_, 20 * kMiB);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("exists with 10.0 MiB"), std::string::npos);
}

TEST(GpuStretchTest, InterleavedBelowSaturationSharedAbove) {
  const CardCompute c;  // slicing 0.11, interleave 0.44 per co-runner
  EXPECT_DOUBLE_EQ(GpuStretch(0, 0.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(GpuStretch(1, 0.6, 0.6), 1.0);  // alone: as measured
  // Two small trials (u = 0.3): each waits for the other's kernels.
  EXPECT_DOUBLE_EQ(GpuStretch(2, 0.6, 0.3), 1.11 * 1.44);
  // Two busy ones (u = 0.75): the card is shared, the step (g + h) x 1.5 x 1.11.
  EXPECT_DOUBLE_EQ(GpuStretch(2, 1.5, 0.75), (1.5 * 1.11 - 0.25) / 0.75);
  EXPECT_DOUBLE_EQ(GpuStretch(3, 0.9, 0.3, c), 1.11 * (1 + 2 * 0.44));  // two co-runners
  // The H200's 32 x 256 trials (u = 0.945, step 25.2 ms alone): four at once 4.20x measured.
  const double u = 0.945, alone = 0.0252, g = u * alone, h = alone - g;
  EXPECT_NEAR((h + g * GpuStretch(4, 4 * u, u)) / alone, 4.20, 0.05);
}

// Runs `steps` on the card in a child process once `go` can be read; writes the simulated
// seconds and the real ones to `out`.
pid_t StepsInChild(const std::string& name, const MicroSteps& steps, double scale, int go,
                   int out) {
  const pid_t child = fork();
  if (child != 0) return child;
  char c = 0;
  (void)!read(go, &c, 1);
  auto card = SimulatedCard::Open(name, 100 * kMiB);
  const auto start = std::chrono::steady_clock::now();
  Result<double> simulated = card.ok() ? (*card)->RunSteps(steps, scale) : Result<double>(-1.0);
  const double times[2] = {
      simulated.ok() ? *simulated : -1.0,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  (void)!write(out, times, sizeof times);
  _exit(0);
}

// Two trials of known busy share u = 0.75 (g = 30 ms, h = 10 ms per micro-step) computing at
// once: each micro-step takes h + g x GpuStretch(2, 1.5, 0.75) = (g + h) x 1.5 x 1.11 = 66.6 ms
// instead of 40 ms alone, in simulated and in real time.
TEST_F(SimulatedCardTest, TwoCoRunningTrialsStretchAsTheModelSays) {
  const MicroSteps steps{20, 0.030, 0.010};
  ASSERT_DOUBLE_EQ(steps.busy_share(), 0.75);
  const double scale = 0.5;  // a simulated second takes half a real one
  const double alone = 20 * 0.040;
  const double together = 20 * (0.010 + 0.030 * GpuStretch(2, 1.5, 0.75));
  ASSERT_NEAR(together / 20, 0.0666, 1e-9);
  int go[2], out[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(out), 0);
  for (int n : {1, 2}) {
    std::vector<pid_t> children;
    for (int i = 0; i < n; ++i)
      children.push_back(StepsInChild(name_, steps, scale, go[0], out[1]));
    ASSERT_EQ(write(go[1], "gg", n), n);
    for (int i = 0; i < n; ++i) {
      double times[2] = {0, 0};
      ASSERT_EQ(read(out[0], times, sizeof times), static_cast<ssize_t>(sizeof times));
      const double expected = n == 1 ? alone : together;
      EXPECT_NEAR(times[0], expected, 0.05 * expected) << n << " at once";
      EXPECT_NEAR(times[1], expected * scale, 0.15 * expected * scale) << n << " at once, real";
    }
    for (pid_t c : children) waitpid(c, nullptr, 0);
  }
  auto card = SimulatedCard::Open(name_, 100 * kMiB);
  ASSERT_TRUE(card.ok());
  EXPECT_EQ((*card)->load().busy, 0);  // both set themselves idle (or died) afterwards
}

// A neighbour holds 70 of 100 MiB. A trial that starts up with 20 MiB and needs 50 MiB at its
// first step runs out of memory there: after its whole start-up, which it has paid. Its memory
// comes back when its process exits, as a crashed one's does.
TEST_F(SimulatedCardTest, AnOomAfterStartUpCostsTheStartUp) {
  auto card = SimulatedCard::Open(name_, 100 * kMiB);
  ASSERT_TRUE(card.ok());
  ASSERT_TRUE((*card)->Charge(70 * kMiB).ok());
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = SimulatedCard::Open(name_, 100 * kMiB);
    SimulatedTrialSpec spec;
    spec.static_bytes = 20 * kMiB;
    spec.peak_bytes = 50 * kMiB;
    spec.startup_seconds = 3.0;
    spec.steps = {100, 0.1, 0.1};
    spec.time_scale = 0.1;  // 3 simulated seconds: 0.3 real ones
    auto run =
        mine.ok() ? RunSimulatedTrial(**mine, spec) : Result<SimulatedTrialRun>(mine.status());
    const double result[2] = {run.ok() && run->oom ? 1.0 : 0.0, run.ok() ? run->seconds : -1.0};
    (void)!write(out[1], result, sizeof result);
    _exit(0);  // exits holding its 20 MiB
  }
  double result[2] = {0, 0};
  ASSERT_EQ(read(out[0], result, sizeof result), static_cast<ssize_t>(sizeof result));
  const double real =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result[0], 1.0) << "out of memory at the first step";
  EXPECT_DOUBLE_EQ(result[1], 3.0) << "the start-up, paid";
  EXPECT_GE(real, 0.3);
  EXPECT_LT(real, 0.3 + 0.5) << "no micro-step ran (100 x 0.2 s would take 2 s more real time)";
  waitpid(child, nullptr, 0);
  EXPECT_EQ((*card)->used(), 70 * kMiB);
}

}  // namespace
}  // namespace tune

// The simulated card shared by processes: real processes (fork) charging one /dev/shm counter.
#include "memory/simulated_card.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "memory/guard_planner.h"

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

TEST(EmpiricalPeak, ScalesOnePointAndFitsAQuadraticThroughThree) {
  EXPECT_FALSE(EmpiricalPeak({}, 100).has_value());
  // One point: proportional to tokens per batch, times 1.1.
  EXPECT_EQ(*EmpiricalPeak({{1000, 2000}}, 2000), 4400);
  // Exact quadratic data: the fit reproduces it (times 1.1).
  auto f = [](double x) { return 5e6 + 300.0 * x + 0.02 * x * x; };
  const std::vector<std::pair<double, double>> points = {
      {1024, f(1024)}, {4096, f(4096)}, {16384, f(16384)}, {8192, f(8192)}};
  const int64_t predicted = *EmpiricalPeak(points, 12288);
  EXPECT_NEAR(static_cast<double>(predicted), 1.1 * f(12288), 1.1 * f(12288) * 1e-6);
}

}  // namespace
}  // namespace tune

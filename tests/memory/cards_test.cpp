// Which cards a run's trials share (memory/cards.h): Cards::Resolve over simulated, CPU and
// CUDA devices, the lists it refuses, and what the scheduler reads of them.
#include "memory/cards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace tune {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Sets CUDA_VISIBLE_DEVICES for one test (unset: nullopt) and restores it after.
class VisibleDevices {
 public:
  explicit VisibleDevices(const std::optional<std::string>& value) {
    if (const char* was = std::getenv("CUDA_VISIBLE_DEVICES")) was_ = was;
    if (value) {
      setenv("CUDA_VISIBLE_DEVICES", value->c_str(), 1);
    } else {
      unsetenv("CUDA_VISIBLE_DEVICES");
    }
  }
  ~VisibleDevices() {
    if (was_) {
      setenv("CUDA_VISIBLE_DEVICES", was_->c_str(), 1);
    } else {
      unsetenv("CUDA_VISIBLE_DEVICES");
    }
  }

 private:
  std::optional<std::string> was_;
};

TEST(ResolveCards, OneCardIsTheDeviceItself) {
  GuardOptions guard;
  guard.device_memory = 8 * kGiB;
  auto cards = Cards::Resolve("cpu", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ(cards->name(0), "cpu");
  EXPECT_EQ(cards->device(0), "cpu");
  EXPECT_EQ(cards->GuardFor(0, guard).device_memory, std::optional<int64_t>(8 * kGiB));
  EXPECT_FALSE(cards->GuardFor(0, guard).simulate);
  EXPECT_TRUE(cards->Environment(0).empty());  // no CUDA_VISIBLE_DEVICES, no simulated card
  // Nobody else holds a CPU's memory: the budget is the device_memory, and the scheduler sees
  // one unnamed card with that budget less the margin.
  EXPECT_EQ(cards->Budget(0), std::optional<int64_t>(8 * kGiB));
  const std::vector<Card> now = cards->Now(0.25);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].name, "");
  EXPECT_EQ(now[0].budget, std::optional<int64_t>(UsableMemory(8 * kGiB, 0.25)));
  EXPECT_EQ(cards->LargestNow().card, 0u);
  EXPECT_EQ(cards->LargestNow().budget, std::optional<int64_t>(8 * kGiB));
  // Without device_memory nothing is tracked on a CPU.
  auto untracked = Cards::Resolve("cpu", GuardOptions{});
  ASSERT_TRUE(untracked.ok());
  EXPECT_FALSE(untracked->Now(0.25)[0].budget);
  EXPECT_FALSE(untracked->LargestNow().budget);
}

TEST(ResolveCards, ATrialsProcessHasOneCardWhateverTheLists) {
  GuardOptions guard;
  guard.device_memory = 6 * kGiB;
  guard.card_memory = {4 * kGiB, 6 * kGiB};
  guard.devices = {0, 1};
  auto cards = Cards::Device("cuda:0", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ(cards->name(0), "cuda:0");
  EXPECT_EQ(cards->GuardFor(0, guard).device_memory, std::optional<int64_t>(6 * kGiB));
  EXPECT_TRUE(cards->GuardFor(0, guard).card_memory.empty());
  EXPECT_TRUE(cards->GuardFor(0, guard).devices.empty());
}

TEST(ResolveCards, ASimulatedListGivesOneCardPerEntry) {
  GuardOptions guard;
  guard.simulate = "sim";
  guard.card_memory = {4 * kGiB, 10 * kGiB, 6 * kGiB};
  guard.device_memory = 10 * kGiB;
  auto cards = Cards::Resolve("cpu", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 3u);
  EXPECT_EQ(cards->name(1), "card 1");
  EXPECT_EQ(cards->device(1), "cpu");
  EXPECT_EQ(cards->GuardFor(1, guard).simulate, std::optional<std::string>("sim-1"));
  EXPECT_EQ(cards->GuardFor(2, guard).device_memory, std::optional<int64_t>(6 * kGiB));
  EXPECT_TRUE(cards->GuardFor(2, guard).card_memory.empty());
  const std::vector<std::string> env = cards->Environment(2);
  EXPECT_NE(std::find(env.begin(), env.end(), "TUNE_SIMULATED_CARD=sim-2"), env.end());
  EXPECT_NE(
      std::find(env.begin(), env.end(), "TUNE_SIMULATED_CARD_BYTES=" + std::to_string(6 * kGiB)),
      env.end());
  // Without a list: one simulated card, named as the simulation.
  guard.card_memory.clear();
  cards = Cards::Resolve("cpu", guard);
  ASSERT_TRUE(cards.ok());
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ(cards->name(0), "sim");
  EXPECT_EQ(cards->GuardFor(0, guard).simulate, std::optional<std::string>("sim"));
}

TEST(ResolveCards, NamedCudaCardsAreNarrowedThroughTheVisibleList) {
  const VisibleDevices visible("5,7,9");
  GuardOptions guard;
  guard.devices = {2, 0};
  guard.card_memory = {12 * kGiB, 20 * kGiB};
  auto cards = Cards::Resolve("cuda", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 2u);
  EXPECT_EQ(cards->name(0), "cuda:2");
  EXPECT_EQ(cards->device(0), "cuda:2");
  EXPECT_EQ(cards->Environment(0), std::vector<std::string>{"CUDA_VISIBLE_DEVICES=9"});  // CUDA's 2
  EXPECT_EQ(cards->Environment(1), std::vector<std::string>{"CUDA_VISIBLE_DEVICES=5"});
  EXPECT_EQ(cards->GuardFor(1, guard).device_memory, std::optional<int64_t>(20 * kGiB));
  if (!cards->DeviceMemory(0) || *cards->DeviceMemory(0) == 12 * kGiB) {  // no NVML caps them
    // Several cards are named in the scheduler's view; the largest budget is card 1's.
    const std::vector<Card> now = cards->Now(0.0);
    EXPECT_EQ(now[0].name, "cuda:2");
    EXPECT_EQ(now[1].name, "cuda:0");
    EXPECT_EQ(cards->LargestNow().card, 1u);
    EXPECT_EQ(LargestCard(now), 1u);
  }
  guard.devices = {3};
  guard.card_memory.clear();
  EXPECT_EQ(Cards::Resolve("cuda", guard).status().code(), StatusCode::kInvalidArgument);
}

TEST(ResolveCards, ListsThatCannotBeHonouredAreInvalidArguments) {
  const VisibleDevices visible("0,1");
  GuardOptions guard;
  guard.devices = {1, 1};
  EXPECT_EQ(Cards::Resolve("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {-1};
  EXPECT_EQ(Cards::Resolve("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {0};
  EXPECT_EQ(Cards::Resolve("cpu", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {0, 1};
  guard.card_memory = {kGiB};  // one size for two cards
  EXPECT_EQ(Cards::Resolve("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices.clear();
  guard.card_memory = {kGiB, 2 * kGiB};  // several cards on a CPU, not simulated
  EXPECT_EQ(Cards::Resolve("cpu", guard).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tune

// Which cards a run's trials share (memory/cards.h): ResolveCards over simulated, CPU and CUDA
// devices, the lists it refuses, and LargestCard.
#include "memory/cards.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

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
  auto cards = ResolveCards("cpu", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ((*cards)[0].name, "cpu");
  EXPECT_EQ((*cards)[0].device, "cpu");
  EXPECT_EQ((*cards)[0].device_memory, std::optional<int64_t>(8 * kGiB));
  EXPECT_FALSE((*cards)[0].visible);
  EXPECT_FALSE((*cards)[0].simulate);
  EXPECT_EQ(LargestCard(*cards), 0u);
}

TEST(ResolveCards, ASimulatedListGivesOneCardPerEntry) {
  GuardOptions guard;
  guard.simulate = "sim";
  guard.card_memory = {4 * kGiB, 10 * kGiB, 6 * kGiB};
  guard.device_memory = 10 * kGiB;
  auto cards = ResolveCards("cpu", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 3u);
  EXPECT_EQ((*cards)[1].name, "card 1");
  EXPECT_EQ((*cards)[1].device, "cpu");
  EXPECT_EQ((*cards)[1].simulate, std::optional<std::string>("sim-1"));
  EXPECT_EQ((*cards)[2].device_memory, std::optional<int64_t>(6 * kGiB));
  EXPECT_EQ(LargestCard(*cards), 1u);  // the most device_memory
  // Without a list: one simulated card, named as the simulation.
  guard.card_memory.clear();
  cards = ResolveCards("cpu", guard);
  ASSERT_TRUE(cards.ok());
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ((*cards)[0].name, "sim");
  EXPECT_EQ((*cards)[0].simulate, std::optional<std::string>("sim"));
}

TEST(ResolveCards, NamedCudaCardsAreNarrowedThroughTheVisibleList) {
  const VisibleDevices visible("5,7,9");
  GuardOptions guard;
  guard.devices = {2, 0};
  guard.card_memory = {12 * kGiB, 20 * kGiB};
  auto cards = ResolveCards("cuda", guard);
  ASSERT_TRUE(cards.ok()) << cards.status().message();
  ASSERT_EQ(cards->size(), 2u);
  EXPECT_EQ((*cards)[0].name, "cuda:2");
  EXPECT_EQ((*cards)[0].device, "cuda:2");
  EXPECT_EQ((*cards)[0].visible, std::optional<std::string>("9"));  // CUDA's card 2 here
  EXPECT_EQ((*cards)[1].visible, std::optional<std::string>("5"));
  EXPECT_EQ((*cards)[1].device_memory, std::optional<int64_t>(20 * kGiB));
  EXPECT_EQ(LargestCard(*cards), 1u);
  guard.devices = {3};
  guard.card_memory.clear();
  EXPECT_EQ(ResolveCards("cuda", guard).status().code(), StatusCode::kInvalidArgument);
}

TEST(ResolveCards, ListsThatCannotBeHonouredAreInvalidArguments) {
  const VisibleDevices visible("0,1");
  GuardOptions guard;
  guard.devices = {1, 1};
  EXPECT_EQ(ResolveCards("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {-1};
  EXPECT_EQ(ResolveCards("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {0};
  EXPECT_EQ(ResolveCards("cpu", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices = {0, 1};
  guard.card_memory = {kGiB};  // one size for two cards
  EXPECT_EQ(ResolveCards("cuda", guard).status().code(), StatusCode::kInvalidArgument);
  guard.devices.clear();
  guard.card_memory = {kGiB, 2 * kGiB};  // several cards on a CPU, not simulated
  EXPECT_EQ(ResolveCards("cpu", guard).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tune

// The cards several trials share (cards.h).
#include "memory/cards.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "util/device.h"
#include "util/text.h"

namespace tune {
namespace {

// CUDA_VISIBLE_DEVICES' entries, when it is set and not empty.
std::vector<std::string> VisibleEntries() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> entries;
  if (visible == nullptr) return entries;
  std::istringstream list(visible);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    std::erase_if(entry, [](unsigned char c) { return std::isspace(c) != 0; });
    if (entry.empty()) break;
    entries.push_back(entry);
  }
  return entries;
}

// How many cards CUDA shows this process: CUDA_VISIBLE_DEVICES' entries, else the driver's count.
int VisibleCardCount() {
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) {
    return static_cast<int>(VisibleEntries().size());
  }
  std::shared_ptr<GpuProcessMemory> nvml = GpuProcessMemory::Open();
  const std::optional<unsigned int> count = nvml ? nvml->DeviceCount() : std::nullopt;
  return count ? static_cast<int>(*count) : 1;
}

Status CheckLengths(const GuardOptions& guard, size_t cards) {
  if (!guard.card_memory.empty() && guard.card_memory.size() != cards) {
    return InvalidArgumentError(fmt::format(
        "memory.device_memory lists {} card(s) but devices names {}: give one size per device",
        guard.card_memory.size(), cards));
  }
  return Status::Ok();
}

// Simulated cards: one per entry of the device_memory list (or of devices), else one.
Result<std::vector<CardSpec>> SimulatedCards(const GuardOptions& guard) {
  const size_t n = std::max({guard.card_memory.size(), guard.devices.size(), size_t{1}});
  if (!guard.devices.empty()) TUNE_RETURN_IF_ERROR(CheckLengths(guard, n));
  std::vector<CardSpec> cards;
  for (size_t k = 0; k < n; ++k) {
    CardSpec c;
    c.name = n == 1 ? *guard.simulate : fmt::format("card {}", k);
    c.device = "cpu";
    c.simulate = n == 1 ? *guard.simulate : fmt::format("{}-{}", *guard.simulate, k);
    c.device_memory = guard.card_memory.empty() ? guard.device_memory : guard.card_memory[k];
    cards.push_back(std::move(c));
  }
  return cards;
}

// The CUDA indices of the cards: those named, the device's own (cuda:N), else every visible one.
std::vector<int> CudaIndices(const Device& device, const GuardOptions& guard) {
  if (!guard.devices.empty()) return guard.devices;
  if (device.index) return {*device.index};
  const int n = guard.card_memory.size() > 1 ? static_cast<int>(guard.card_memory.size())
                                             : VisibleCardCount();
  std::vector<int> indices;
  for (int i = 0; i < std::max(n, 1); ++i) indices.push_back(i);
  return indices;
}

Result<std::vector<CardSpec>> CudaCards(const std::string& device, const Device& parsed,
                                        const GuardOptions& guard) {
  const std::vector<int> indices = CudaIndices(parsed, guard);
  TUNE_RETURN_IF_ERROR(CheckLengths(guard, indices.size()));
  if (indices.size() == 1 && guard.devices.empty()) {  // the device itself, as with one card
    return std::vector<CardSpec>{
        CardSpec{device, device, std::nullopt, std::nullopt,
                 guard.card_memory.empty() ? guard.device_memory : guard.card_memory[0]}};
  }
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> visible = VisibleEntries();
  std::vector<CardSpec> cards;
  for (size_t k = 0; k < indices.size(); ++k) {
    const int i = indices[k];
    if (env != nullptr && static_cast<size_t>(i) >= visible.size()) {
      return InvalidArgumentError(
          fmt::format("devices: card {} is not visible (CUDA_VISIBLE_DEVICES={} shows {} card(s))",
                      i, env, visible.size()));
    }
    CardSpec c;
    c.name = fmt::format("cuda:{}", i);
    c.device = c.name;
    c.visible = visible.empty() ? std::to_string(i) : visible[static_cast<size_t>(i)];
    c.device_memory = guard.card_memory.empty() ? guard.device_memory : guard.card_memory[k];
    cards.push_back(std::move(c));
  }
  return cards;
}

}  // namespace

Result<std::vector<CardSpec>> ResolveCards(const std::string& device, const GuardOptions& guard) {
  TUNE_ASSIGN_OR_RETURN(Device parsed, ParseDevice(device));
  std::set<int> seen;
  for (int d : guard.devices) {
    if (d < 0) return InvalidArgumentError(fmt::format("devices: {} is not a card index", d));
    if (!seen.insert(d).second) {
      return InvalidArgumentError(fmt::format("devices: card {} is named twice", d));
    }
  }
  if (guard.simulate) return SimulatedCards(guard);
  if (parsed.is_cuda()) return CudaCards(device, parsed, guard);
  if (!guard.devices.empty()) {
    return InvalidArgumentError(
        "devices names CUDA cards but the device is cpu: use \"device\": \"cuda\" (or "
        "memory.simulate for simulated cards)");
  }
  if (guard.card_memory.size() > 1) {
    return InvalidArgumentError(
        "memory.device_memory lists several cards but the device is cpu: add "
        "\"simulate\": true for simulated cards, or use \"device\": \"cuda\"");
  }
  return std::vector<CardSpec>{
      CardSpec{device, device, std::nullopt, std::nullopt, guard.device_memory}};
}

size_t LargestCard(const std::vector<CardSpec>& cards) {
  size_t largest = 0;
  for (size_t k = 1; k < cards.size(); ++k) {
    if (cards[k].device_memory.value_or(0) > cards[largest].device_memory.value_or(0)) largest = k;
  }
  return largest;
}

CardView::CardView(CardSpec spec, std::function<bool(pid_t)> ours)
    : spec_(std::move(spec)),
      nvml_(spec_.simulate ? "cpu" : spec_.device),
      others_(spec_.device,
              spec_.simulate && spec_.device_memory
                  ? std::make_optional(std::make_pair(*spec_.simulate, *spec_.device_memory))
                  : std::nullopt,
              std::move(ours)) {}

std::optional<int64_t> CardView::DeviceMemory() const {
  std::optional<int64_t> d = spec_.device_memory;
  if (spec_.simulate) return d;
  if (const std::optional<int64_t> total = nvml_.TotalMemory()) {
    d = d ? std::min(*d, *total) : *total;
  }
  return d;
}

std::optional<int64_t> CardView::Budget() const {
  const std::optional<int64_t> d = DeviceMemory();
  if (!d) return d;
  return others_.Budget(*d);
}

std::optional<DeviceBusy> CardView::Busy() const {
  if (!spec_.simulate || !spec_.device_memory) return std::nullopt;
  if (!card_) {
    auto card = SimulatedCard::Open(*spec_.simulate, *spec_.device_memory);
    if (!card.ok()) return std::nullopt;
    card_ = std::move(card).value();
  }
  const CardLoad load = card_->load();
  return DeviceBusy{load.busy, load.sum_busy};
}

std::vector<std::string> CardView::Environment() const {
  std::vector<std::string> env;
  if (spec_.visible) env.push_back("CUDA_VISIBLE_DEVICES=" + *spec_.visible);
  if (spec_.simulate && spec_.device_memory) {
    env.push_back("TUNE_SIMULATED_CARD=" + *spec_.simulate);
    env.push_back(fmt::format("TUNE_SIMULATED_CARD_BYTES={}", *spec_.device_memory));
  }
  return env;
}

}  // namespace tune

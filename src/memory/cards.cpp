// The cards several trials share (cards.h).
#include "memory/cards.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "measure/gpu_process_memory.h"
#include "memory/simulated_card.h"
#include "util/device.h"
#include "util/text.h"

namespace tune {
namespace {

// A card as configured.
struct Spec {
  std::string name;
  std::string device;
  std::optional<std::string> visible;    // CUDA_VISIBLE_DEVICES for its trials' processes
  std::optional<std::string> simulate;   // its simulated card, when simulated
  std::optional<int64_t> device_memory;  // its device_memory (the config's, per card)
};

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

// One card, the device itself (or the simulated card) with the guard's device_memory.
Spec DeviceItself(const std::string& device, const GuardOptions& guard) {
  if (guard.simulate)
    return Spec{*guard.simulate, "cpu", std::nullopt, guard.simulate, guard.device_memory};
  return Spec{device, device, std::nullopt, std::nullopt, guard.device_memory};
}

// Simulated cards: one per entry of the device_memory list (or of devices), else one.
Result<std::vector<Spec>> SimulatedCards(const GuardOptions& guard) {
  const size_t n = std::max({guard.card_memory.size(), guard.devices.size(), size_t{1}});
  if (!guard.devices.empty()) TUNE_RETURN_IF_ERROR(CheckLengths(guard, n));
  std::vector<Spec> cards;
  for (size_t k = 0; k < n; ++k) {
    Spec c;
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

Result<std::vector<Spec>> CudaCards(const std::string& device, const Device& parsed,
                                    const GuardOptions& guard) {
  const std::vector<int> indices = CudaIndices(parsed, guard);
  TUNE_RETURN_IF_ERROR(CheckLengths(guard, indices.size()));
  if (indices.size() == 1 && guard.devices.empty()) {  // the device itself, as with one card
    return std::vector<Spec>{
        Spec{device, device, std::nullopt, std::nullopt,
             guard.card_memory.empty() ? guard.device_memory : guard.card_memory[0]}};
  }
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> visible = VisibleEntries();
  std::vector<Spec> cards;
  for (size_t k = 0; k < indices.size(); ++k) {
    const int i = indices[k];
    if (env != nullptr && static_cast<size_t>(i) >= visible.size()) {
      return InvalidArgumentError(
          fmt::format("devices: card {} is not visible (CUDA_VISIBLE_DEVICES={} shows {} card(s))",
                      i, env, visible.size()));
    }
    Spec c;
    c.name = fmt::format("cuda:{}", i);
    c.device = c.name;
    c.visible = visible.empty() ? std::to_string(i) : visible[static_cast<size_t>(i)];
    c.device_memory = guard.card_memory.empty() ? guard.device_memory : guard.card_memory[k];
    cards.push_back(std::move(c));
  }
  return cards;
}

Result<std::vector<Spec>> ResolveSpecs(const std::string& device, const GuardOptions& guard) {
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
  return std::vector<Spec>{DeviceItself(device, guard)};
}

}  // namespace

// One card: what it is, and its readers.
struct Cards::One {
  One(Spec spec, std::function<bool(pid_t)> ours)
      : spec(std::move(spec)),
        nvml(this->spec.simulate ? "cpu" : this->spec.device),
        others(this->spec.device,
               this->spec.simulate && this->spec.device_memory
                   ? std::make_optional(
                         std::make_pair(*this->spec.simulate, *this->spec.device_memory))
                   : std::nullopt,
               std::move(ours)) {}

  Spec spec;
  DeviceNvml nvml;
  CardOthers others;
  std::unique_ptr<SimulatedCard> simulated;  // Busy()'s view of a simulated card, once opened
};

Result<Cards> Cards::Resolve(const std::string& device, const GuardOptions& guard,
                             std::function<bool(pid_t)> ours) {
  TUNE_ASSIGN_OR_RETURN(std::vector<Spec> specs, ResolveSpecs(device, guard));
  std::vector<std::unique_ptr<One>> cards;
  for (Spec& spec : specs) cards.push_back(std::make_unique<One>(std::move(spec), ours));
  return Cards(std::move(cards));
}

Result<Cards> Cards::Device(const std::string& device, const GuardOptions& guard) {
  std::vector<std::unique_ptr<One>> cards;
  cards.push_back(std::make_unique<One>(DeviceItself(device, guard), SelfOrDescendant));
  return Cards(std::move(cards));
}

Cards::Cards(std::vector<std::unique_ptr<One>> cards) : cards_(std::move(cards)) {}
Cards::Cards(Cards&&) noexcept = default;
Cards& Cards::operator=(Cards&&) noexcept = default;
Cards::~Cards() = default;

const std::string& Cards::name(size_t k) const { return cards_.at(k)->spec.name; }
const std::string& Cards::device(size_t k) const { return cards_.at(k)->spec.device; }

GuardOptions Cards::GuardFor(size_t k, GuardOptions guard) const {
  const Spec& spec = cards_.at(k)->spec;
  guard.device_memory = spec.device_memory;
  guard.simulate = spec.simulate;
  guard.card_memory.clear();
  guard.devices.clear();
  return guard;
}

std::optional<int64_t> Cards::DeviceMemory(size_t k) const {
  const One& card = *cards_.at(k);
  std::optional<int64_t> d = card.spec.device_memory;
  if (card.spec.simulate) return d;
  if (const std::optional<int64_t> total = card.nvml.TotalMemory()) {
    d = d ? std::min(*d, *total) : *total;
  }
  return d;
}

std::optional<int64_t> Cards::Budget(size_t k) const {
  const std::optional<int64_t> d = DeviceMemory(k);
  if (!d) return d;
  return cards_.at(k)->others.Budget(*d);
}

std::optional<DeviceBusy> Cards::Busy(size_t k) const {
  One& card = *cards_.at(k);
  if (!card.spec.simulate || !card.spec.device_memory) return std::nullopt;
  if (!card.simulated) {
    auto opened = SimulatedCard::Open(*card.spec.simulate, *card.spec.device_memory);
    if (!opened.ok()) return std::nullopt;
    card.simulated = std::move(opened).value();
  }
  const CardLoad load = card.simulated->load();
  return DeviceBusy{load.busy, load.sum_busy};
}

std::optional<double> Cards::Utilization(size_t k) const {
  return cards_.at(k)->nvml.Utilization();
}

int64_t Cards::LastOthers(size_t k) const { return cards_.at(k)->others.last_others(); }

std::vector<Card> Cards::Now(double margin) const {
  std::vector<Card> now(cards_.size());
  for (size_t k = 0; k < cards_.size(); ++k) {
    if (cards_.size() > 1) now[k].name = name(k);
    if (const std::optional<int64_t> budget = Budget(k))
      now[k].budget = UsableMemory(*budget, margin);
    now[k].busy = Busy(k);
    now[k].utilization = Utilization(k);
  }
  return now;
}

Cards::Largest Cards::LargestNow() const {
  std::vector<Card> read(cards_.size());
  for (size_t k = 0; k < cards_.size(); ++k) read[k].budget = Budget(k);
  const size_t card = LargestCard(read);
  return {card, read[card].budget};
}

std::vector<std::string> Cards::Environment(size_t k) const {
  const Spec& spec = cards_.at(k)->spec;
  std::vector<std::string> env;
  if (spec.visible) env.push_back("CUDA_VISIBLE_DEVICES=" + *spec.visible);
  if (spec.simulate && spec.device_memory) {
    env.push_back("TUNE_SIMULATED_CARD=" + *spec.simulate);
    env.push_back(fmt::format("TUNE_SIMULATED_CARD_BYTES={}", *spec.device_memory));
  }
  return env;
}

}  // namespace tune

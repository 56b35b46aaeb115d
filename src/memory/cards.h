// The cards several trials share (--jobs over every card of a machine) [tune_train]: which they
// are, and each one as the run's parent process sees it (its budget beside other processes, its
// busy share, its utilisation) and as a trial's process is narrowed to it.
//
// Which cards:
//   - simulated (memory.simulate): one per entry of a device_memory list (cards of different
//     sizes; one card without a list), named "card K", each its own simulated card "NAME-K";
//   - CUDA: those `devices` names (CUDA's numbering in this process), else with the device "cuda"
//     every visible card (CUDA_VISIBLE_DEVICES' entries, else the driver's count), named
//     "cuda:N"; a trial's process sees only its card (CUDA_VISIBLE_DEVICES set to it, so its
//     device is cuda:0 there). A device_memory list gives each card its own cap;
//   - otherwise one card, the device.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/gpu_process_memory.h"
#include "memory/card_others.h"
#include "memory/guard.h"
#include "memory/simulated_card.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

struct CardSpec {
  std::string name;                      // "cuda:2", "card 1"; the device itself with one card
  std::string device;                    // as this process names it: "cuda:2", "cpu"
  std::optional<std::string> visible;    // CUDA_VISIBLE_DEVICES for its trials' processes
  std::optional<std::string> simulate;   // its simulated card, when simulated
  std::optional<int64_t> device_memory;  // its device_memory (the config's, per card)
};

// The cards of a run whose trials use `device` ("cpu", "cuda", "cuda:N") under `guard`
// (devices, card_memory, device_memory, simulate). InvalidArgument for a list that cannot be
// honoured: a device_memory list without simulate or CUDA, devices on a CPU, a device_memory
// list and devices of different lengths, a device index named twice.
Result<std::vector<CardSpec>> ResolveCards(const std::string& device, const GuardOptions& guard);

// The index of the card with the most device_memory (the first of them); 0 when none is known.
size_t LargestCard(const std::vector<CardSpec>& cards);

// One card as the run's parent sees it.
class CardView {
 public:
  // `ours`: which processes are this run's (card_others.h).
  explicit CardView(CardSpec spec, std::function<bool(pid_t)> ours = SelfOrDescendant);
  CardView(const CardView&) = delete;
  CardView& operator=(const CardView&) = delete;

  const CardSpec& spec() const { return spec_; }
  // Its device_memory, at most the card's total (NVML) on CUDA.
  std::optional<int64_t> DeviceMemory() const;
  // DeviceMemory() less what other processes hold on it now (CardOthers::Budget).
  std::optional<int64_t> Budget() const;
  // What computes on a simulated card now.
  std::optional<DeviceBusy> Busy() const;
  std::optional<double> Utilization() const { return nvml_.Utilization(); }
  // Variables for a trial's process on this card: CUDA_VISIBLE_DEVICES, or the simulated card's
  // TUNE_SIMULATED_CARD and TUNE_SIMULATED_CARD_BYTES.
  std::vector<std::string> Environment() const;

 private:
  CardSpec spec_;
  DeviceNvml nvml_;
  mutable CardOthers others_;
  mutable std::unique_ptr<SimulatedCard> card_;  // Busy()'s view of a simulated card
};

}  // namespace tune

// The cards several trials share (--jobs over every card of a machine) [tune_train]: which they
// are, and each one read as the run's parent process sees it (its budget beside other processes,
// its busy share, its utilisation) and as a trial's process is narrowed to it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/card_others.h"
#include "memory/guard.h"
#include "tune/cards.h"
#include "tune/status.h"

namespace tune {

class Cards {
 public:
  // The cards of a run whose trials use `device` ("cpu", "cuda", "cuda:N") under `guard`
  // (devices, card_memory, device_memory, simulate); always at least one:
  //   - simulated (guard.simulate): one per entry of a device_memory list (cards of different
  //     sizes), named "card K", each its own simulated card "NAME-K"; without a list one card,
  //     named as the simulated card;
  //   - CUDA: those `devices` names (CUDA's numbering in this process), else with the device
  //     "cuda" every visible card (CUDA_VISIBLE_DEVICES' entries, else the driver's count),
  //     named "cuda:N"; one card is the device itself. A device_memory list gives each card its
  //     own cap;
  //   - otherwise one card, the device.
  // `ours` says which processes are this run's (card_others.h). InvalidArgument for a list that
  // cannot be honoured: a device_memory list without simulate or CUDA, devices on a CPU, a
  // device_memory list and devices of different lengths, a device index named twice or not
  // visible.
  static Result<Cards> Resolve(const std::string& device, const GuardOptions& guard,
                               std::function<bool(pid_t)> ours = SelfOrDescendant);

  // One card, the device itself as `guard` gives it (its device_memory and simulated card; the
  // lists are not read): a trial's process, which runs on one card.
  static Result<Cards> Device(const std::string& device, const GuardOptions& guard);

  Cards(Cards&&) noexcept;
  Cards& operator=(Cards&&) noexcept;
  ~Cards();

  size_t size() const { return cards_.size(); }

  // Card k as configured: its name ("cuda:2", "card 1"; with one card the device, or the
  // simulated card's name), the device as this process names it ("cuda:2", "cpu"), and its
  // guard options: `guard` narrowed to that card (its device_memory and simulated card, no
  // list). REQUIRES: k < size() for these and the readings below.
  const std::string& name(size_t k) const;
  const std::string& device(size_t k) const;
  GuardOptions GuardFor(size_t k, GuardOptions guard) const;

  // Card k read now. DeviceMemory: its device_memory, at most the card's total (NVML) on CUDA;
  // Budget: that less what other processes hold on it now (CardOthers::Budget, which logs when
  // it shrinks or grows back); Busy: what computes on a simulated card; Utilization: the
  // driver's reading (NVML). Nullopt: unknown (no device_memory, no NVML, not simulated).
  std::optional<int64_t> DeviceMemory(size_t k) const;
  std::optional<int64_t> Budget(size_t k) const;
  std::optional<DeviceBusy> Busy(size_t k) const;
  std::optional<double> Utilization(size_t k) const;
  // What other processes held on card k at its last Budget() (0: none or unknown).
  int64_t LastOthers(size_t k) const;

  // Every card read now, as the scheduler takes them (Objective::CardsNow): its name ("" with
  // one card), its budget times (1 - margin), its busy share and utilisation.
  std::vector<Card> Now(double margin) const;
  // The card with the largest budget now (tune/cards.h's one meaning of "largest") and that
  // budget, without the margin: budget nullopt (and card 0) when no card's is known.
  struct Largest {
    size_t card = 0;
    std::optional<int64_t> budget;
  };
  Largest LargestNow() const;

  // Variables for a trial's process on card k: CUDA_VISIBLE_DEVICES (several CUDA cards), or the
  // simulated card's TUNE_SIMULATED_CARD and TUNE_SIMULATED_CARD_BYTES.
  std::vector<std::string> Environment(size_t k) const;

 private:
  struct One;
  explicit Cards(std::vector<std::unique_ptr<One>> cards);
  std::vector<std::unique_ptr<One>> cards_;
};

}  // namespace tune

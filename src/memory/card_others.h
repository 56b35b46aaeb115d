// Other processes on the trials' card [tune_train]: a workstation's card also drives the desktop,
// a browser, a notebook (0.5-3 GiB, changing). The guard's budget at each admission is the
// smaller of device_memory and what the others leave (CardOthers::Budget), re-read every time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "measure/gpu_process_memory.h"
#include "memory/simulated_card.h"

namespace tune {

// One reading: what the other processes hold on the card, and the card's total memory.
struct OthersReading {
  int64_t card_total = 0;
  int64_t others = 0;                                // bytes, summed over `processes`
  std::vector<std::pair<pid_t, int64_t>> processes;  // (pid, bytes) of each other process
};

// "python3 pid 123 1.50 GiB, Xorg pid 45 300.00 MiB": the other processes, largest first, at most
// four named.
std::string DescribeOthers(const OthersReading& reading);

// Whether `pid` is `ancestor` or one of its descendants (its children's children, ...).
bool DescendantOf(pid_t pid, pid_t ancestor);
// DescendantOf(pid, this process).
bool SelfOrDescendant(pid_t pid);

// The growth margin left for others holding `others` bytes on a card of `card_total` bytes:
// max(others / 8, card_total / 64), 0 when they hold nothing (a browser tab or a notebook cell
// grows by hundreds of MiB between two admissions).
int64_t OthersGrowthMargin(int64_t others, int64_t card_total);

class CardOthers {
 public:
  // Budget leaves the others their largest reading over this window: it keeps a neighbour that
  // frees memory for a moment from handing it to a trial it will need back.
  static constexpr std::chrono::minutes kWindow{10};

  // `device`: the trials' ("cpu", "cuda", "cuda:N"); `simulate`: the simulated card's name and
  // capacity, when trials charge one; `ours`: which processes are this run's (tests inject it).
  // Every process holding memory on the card that is not `ours` is an other: by default all but
  // this process and its descendants (the trial processes of --jobs, a command objective's
  // programs), which the guard already counts. Independent `tune worker`s on the same card are
  // others: their trials are not in this process's ledger.
  CardOthers(std::string device, std::optional<std::pair<std::string, int64_t>> simulate,
             std::function<bool(pid_t)> ours = SelfOrDescendant);
  CardOthers(const CardOthers&) = delete;
  CardOthers& operator=(const CardOthers&) = delete;

  // What the others hold now: on a simulated card (memory.simulate) the processes charging it, as
  // the card records them; on a CUDA device the compute and graphics processes NVML lists on it,
  // with their memory. Nullopt when it cannot be told (no simulated card and no NVML, a CPU
  // device, or NVML listing processes of another PID namespace: a container), with why in `why`.
  std::optional<OthersReading> Read(std::string* why = nullptr) const;

  // The memory the trials may use now: card total - (others' largest reading over the last
  // kWindow) - OthersGrowthMargin of that reading, clamped to [0, device_memory]; device_memory
  // when Read cannot tell. Logs when the budget shrinks below, or grows back to, what it last
  // said.
  int64_t Budget(int64_t device_memory);

  // What the others held at the last Budget() (0: none or unknown), for the trial's record.
  int64_t last_others() const { return last_others_; }

 private:
  std::string device_;
  std::optional<std::pair<std::string, int64_t>> simulate_;
  std::function<bool(pid_t)> ours_;
  std::optional<unsigned int> nvml_index_;  // a CUDA device NVML can name
  mutable bool nvml_opened_ = false;
  mutable std::shared_ptr<GpuProcessMemory> nvml_;
  mutable std::unique_ptr<SimulatedCard> card_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> seen_;  // (when, others)
  int64_t last_others_ = 0;
  std::optional<int64_t> said_budget_;  // the budget last logged
  bool said_unknown_ = false;
};

}  // namespace tune

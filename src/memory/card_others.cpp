// Other processes on the trials' card (card_others.h).
#include "memory/card_others.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "util/device.h"
#include "util/text.h"

namespace tune {

std::string DescribeOthers(const OthersReading& reading) {
  std::vector<std::pair<pid_t, int64_t>> processes = reading.processes;
  std::sort(processes.begin(), processes.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (size_t i = 0; i < processes.size() && i < 4; ++i) {
    std::string name;
    std::ifstream comm("/proc/" + std::to_string(processes[i].first) + "/comm");
    std::getline(comm, name);
    parts.push_back(fmt::format("{}pid {} {}", name.empty() ? "" : name + " ", processes[i].first,
                                FormatBytes(processes[i].second)));
  }
  if (processes.size() > 4) parts.push_back(fmt::format("{} more", processes.size() - 4));
  return JoinNames(parts);
}

bool SelfOrDescendant(pid_t pid) { return DescendantOf(pid, getpid()); }

bool DescendantOf(pid_t pid, pid_t ancestor) {
  // A chain of parents ends at the namespace's first process (its parent is 0); 64 steps bound a
  // chain that changes while it is walked.
  for (int step = 0; step < 64 && pid > 0; ++step) {
    if (pid == ancestor) return true;
    const std::optional<pid_t> parent = ParentProcess(pid);
    if (!parent) return false;
    pid = *parent;
  }
  return false;
}

int64_t OthersGrowthMargin(int64_t others, int64_t card_total) {
  if (others <= 0) return 0;
  return std::max(others / 8, card_total / 64);
}

CardOthers::CardOthers(std::string device, std::optional<std::pair<std::string, int64_t>> simulate,
                       std::function<bool(pid_t)> ours)
    : device_(std::move(device)), simulate_(std::move(simulate)), ours_(std::move(ours)) {
  const Result<Device> parsed = ParseDevice(device_);
  if (!simulate_ && parsed.ok() && parsed->is_cuda()) {
    nvml_index_ = NvmlIndexOf(parsed->index.value_or(0), std::getenv("CUDA_VISIBLE_DEVICES"));
  }
}

std::optional<OthersReading> CardOthers::Read(std::string* why) const {
  auto fail = [&](std::string reason) -> std::optional<OthersReading> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  OthersReading out;
  std::vector<std::pair<pid_t, int64_t>> holders;
  if (simulate_) {
    // The process's own card when it has one (a --jobs child, whose device_memory is its
    // reservation, not the card's capacity).
    const SimulatedCard* card = ProcessSimulatedCard();
    if (card == nullptr || card->name() != simulate_->first) {
      if (!card_) {
        auto opened = SimulatedCard::Open(simulate_->first, simulate_->second);
        if (!opened.ok()) return fail(opened.status().message());
        card_ = std::move(opened).value();
      }
      card = card_.get();
    }
    out.card_total = card->capacity();
    holders = card->holders();
  } else {
    if (!nvml_index_) return fail("not a CUDA device NVML can name, and no simulated card");
    if (!nvml_opened_) {
      nvml_opened_ = true;
      std::string reason;
      nvml_ = GpuProcessMemory::Open(&reason);
      if (!nvml_) return fail("NVML: " + reason);
    }
    if (!nvml_) return fail("no NVML");
    const std::optional<int64_t> total = nvml_->TotalMemory(*nvml_index_);
    auto listed = nvml_->Processes(*nvml_index_);
    if (!total || !listed) return fail("NVML cannot list the device's processes");
    out.card_total = *total;
    holders = std::move(*listed);
    for (const auto& [pid, bytes] : holders) {
      if (!ParentProcess(pid)) {
        return fail(fmt::format(
            "NVML lists pid {}, which is no process here (a container without the host's PID "
            "namespace?): the memory of other processes cannot be told from this run's",
            pid));
      }
    }
  }
  for (const auto& [pid, bytes] : holders) {
    if (ours_(pid)) continue;
    out.others += bytes;
    out.processes.emplace_back(pid, bytes);
  }
  return out;
}

int64_t CardOthers::Budget(int64_t device_memory) {
  std::string why;
  const std::optional<OthersReading> reading = Read(&why);
  if (!reading) {
    if (nvml_index_ && !said_unknown_) {
      spdlog::warn("Other processes on {} are not counted: {}", device_, why);
      said_unknown_ = true;
    }
    last_others_ = 0;
    return device_memory;
  }
  const auto now = std::chrono::steady_clock::now();
  seen_.emplace_back(now, reading->others);
  while (!seen_.empty() && now - seen_.front().first > kWindow) seen_.pop_front();
  int64_t high = 0;
  for (const auto& [when, bytes] : seen_) high = std::max(high, bytes);
  last_others_ = reading->others;
  const int64_t growth = OthersGrowthMargin(high, reading->card_total);
  const int64_t budget = std::clamp<int64_t>(reading->card_total - high - growth, 0, device_memory);
  const int64_t said = said_budget_.value_or(device_memory);
  const int64_t step = std::max<int64_t>(reading->card_total / 64, 1);
  if (budget < said && (said - budget >= step || !said_budget_)) {
    spdlog::info(
        "Device memory budget {} (device_memory {}): other processes hold {} of the card's {} "
        "({}); the guard leaves them {} (the most they held in the last {} min) and {} to grow",
        FormatBytes(budget), FormatBytes(device_memory), FormatBytes(reading->others),
        FormatBytes(reading->card_total), DescribeOthers(*reading), FormatBytes(high),
        kWindow.count(), FormatBytes(growth));
    said_budget_ = budget;
  } else if (said_budget_ && budget > said && (budget - said >= step || budget == device_memory)) {
    spdlog::info("Device memory budget back up to {} (device_memory {}): other processes hold {}",
                 FormatBytes(budget), FormatBytes(device_memory), FormatBytes(reading->others));
    said_budget_ = budget;
  }
  return budget;
}

}  // namespace tune

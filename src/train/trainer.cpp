// The plain helpers of trainer.h: outcome names, process memory, the device memory's text.
#include "train/trainer.h"

#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <fstream>

#include "util/text.h"

namespace tune {

int64_t ExampleLength(const TextTrainData& data, bool train, size_t i, int64_t max_length) {
  if (data.pairs) {
    const auto& counts = train ? data.pairs->train_counts : data.pairs->validation_counts;
    return PairSequenceLength(counts[i], max_length, data.pairs->layout);
  }
  return SequenceLength((train ? data.train_ids : data.validation_ids)[i].size(), max_length);
}

std::optional<PairSplit> PairSplitOf(const TextTrainData& data, bool train, bool token_types) {
  if (!data.pairs) return std::nullopt;
  const auto& p = *data.pairs;
  return PairSplit{train ? &p.train_ids : &p.validation_ids,
                   train ? &p.train_counts : &p.validation_counts, p.layout, token_types};
}

const char* TrainEndName(TrainResult::End end) {
  switch (end) {
    case TrainResult::End::kCompleted:
      return "completed";
    case TrainResult::End::kStopped:
      return "stopped";
    case TrainResult::End::kOutOfMemory:
      return "out_of_memory";
    case TrainResult::End::kFailed:
      return "failed";
    case TrainResult::End::kNonFinite:
      return "nonfinite";
    case TrainResult::End::kInterrupted:
      return "interrupted";
    case TrainResult::End::kDeviceLost:
      return "device_lost";
  }
  return "?";
}

int64_t ProcessResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(statm >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t ProcessHeapInUseBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

std::string DeviceMemoryStatusText(const DeviceMemoryStatus& m) {
  std::vector<std::string> parts;
  if (m.allocated >= 0) parts.push_back("allocated " + FormatBytes(m.allocated));
  if (m.reserved >= 0) parts.push_back("reserved " + FormatBytes(m.reserved));
  if (m.free >= 0 && m.total > 0) {
    parts.push_back(fmt::format("free {} of {}", FormatBytes(m.free), FormatBytes(m.total)));
  }
  if (m.device_memory) parts.push_back("device_memory " + FormatBytes(*m.device_memory));
  return parts.empty() ? "not measured" : JoinNames(parts);
}

}  // namespace tune

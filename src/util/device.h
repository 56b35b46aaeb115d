// Device names as users write them: "cpu", "cuda" (the current CUDA device) or "cuda:N". One
// parser for the config's "device", --device and the trainer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tune/status.h"

namespace tune {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  std::optional<int> index;  // cuda:N

  bool is_cuda() const { return kind == Kind::kCuda; }
  // "cpu", "cuda", "cuda:1".
  std::string ToString() const;
};

// InvalidArgument "unknown device 'gpu'; valid: cpu, cuda, cuda:N" for anything else.
Result<Device> ParseDevice(std::string_view text);

}  // namespace tune

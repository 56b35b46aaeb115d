#include "util/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace tune {

std::string Device::ToString() const {
  if (!is_cuda()) return "cpu";
  return index ? fmt::format("cuda:{}", *index) : "cuda";
}

Result<Device> ParseDevice(std::string_view text) {
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{Device::Kind::kCuda, std::nullopt};
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) == kPrefix && text.size() > kPrefix.size() &&
      text.size() <= kPrefix.size() + 4) {
    const std::string_view digits = text.substr(kPrefix.size());
    if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      int index = 0;
      std::from_chars(digits.data(), digits.data() + digits.size(), index);
      return Device{Device::Kind::kCuda, index};
    }
  }
  return InvalidArgumentError(fmt::format("unknown device '{}'; valid: cpu, cuda, cuda:N", text));
}

}  // namespace tune

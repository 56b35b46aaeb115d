#include "tracking/event_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "util/coding.h"

namespace tune {
namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
// Protocol buffer field keys: (number << 3) | wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
void PutKey(std::string& out, int field, int wire_type) {
  PutVarint(out, static_cast<uint64_t>((field << 3) | wire_type));
}
void PutBytes(std::string& out, int field, std::string_view bytes) {
  PutKey(out, field, 2);
  PutVarint(out, bytes.size());
  out.append(bytes);
}
void PutDouble(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(out, field, 1);
  PutFixed64(out, bits);
}

// Event.wall_time and Event.step, the start of every event.
std::string EventHead(double wall_time, int64_t step) {
  std::string event;
  PutDouble(event, 1, wall_time);
  if (step != 0) {
    PutKey(event, 2, 0);
    PutVarint(event, static_cast<uint64_t>(step));  // int64: two's complement, 10 bytes if < 0
  }
  return event;
}

std::atomic<int> g_file_counter{0};

}  // namespace

uint32_t Crc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : data) crc = kCrcTable[(crc ^ byte) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string FrameRecord(std::string_view data) {
  std::string header;
  PutFixed64(header, data.size());
  std::string out = header;
  PutFixed32(out, MaskCrc32c(Crc32c(header)));
  out.append(data);
  PutFixed32(out, MaskCrc32c(Crc32c(data)));
  return out;
}

std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  PutBytes(summary_value, 1, tag);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  PutKey(summary_value, 2, 5);
  PutFixed32(summary_value, bits);
  std::string summary;
  PutBytes(summary, 1, summary_value);
  std::string event = EventHead(wall_time, step);
  PutBytes(event, 5, summary);
  return event;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHead(wall_time, 0);
  PutBytes(event, 3, "brain.Event:2");
  return event;
}

// The host's name, read once (a process's host does not change; its pid may, after a fork).
const std::string& HostName() {
  static const std::string name = [] {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    return std::string(host);
  }();
  return name;
}

Result<EventFileWriter> EventFileWriter::Open(const std::string& dir) {
  // One mkdir where the parent exists (a trial's directory in the study's): the walk up the
  // path only when it does not.
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return InvalidArgumentError(
          fmt::format("TensorBoard: cannot make the directory '{}': {}", dir, ec.message()));
    }
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string path =
      fmt::format("{}/events.out.tfevents.{}.{}.{}.{}", dir, static_cast<int64_t>(now), HostName(),
                  getpid(), g_file_counter.fetch_add(1));
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return InvalidArgumentError(
        fmt::format("TensorBoard: cannot write '{}': {}", path, std::strerror(errno)));
  }
  EventFileWriter writer(file, path);
  TUNE_RETURN_IF_ERROR(writer.Write(FileVersionEvent(now)));
  return writer;
}

EventFileWriter::EventFileWriter(EventFileWriter&& other) noexcept
    : file_(other.file_), path_(std::move(other.path_)) {
  other.file_ = nullptr;
}

EventFileWriter& EventFileWriter::operator=(EventFileWriter&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = other.file_;
    path_ = std::move(other.path_);
    other.file_ = nullptr;
  }
  return *this;
}

EventFileWriter::~EventFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status EventFileWriter::Write(const std::string& event) {
  const std::string record = FrameRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return InvalidArgumentError(
        fmt::format("TensorBoard: writing '{}' failed: {}", path_, std::strerror(errno)));
  }
  return Status::Ok();
}

Status EventFileWriter::AddScalar(std::string_view tag, int64_t step, float value,
                                  double wall_time) {
  return Write(ScalarEvent(wall_time, step, tag, value));
}

Status EventFileWriter::Flush() {
  if (std::fflush(file_) != 0) {
    return InvalidArgumentError(
        fmt::format("TensorBoard: writing '{}' failed: {}", path_, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace tune

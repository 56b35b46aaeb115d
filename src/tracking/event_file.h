// TensorBoard's event files, written by hand: TFRecord framing (length, masked CRC-32C of the
// length, data, masked CRC-32C of the data; little-endian) around Event protocol buffers
// (tensorflow/core/util/event.proto: wall_time = 1, step = 2, file_version = 3, summary = 5;
// Summary.value = 1; Summary.Value: tag = 1, simple_value = 2), the fields TensorBoard's
// EventAccumulator reads for scalars. Not thread-safe: one writer per file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "tune/status.h"

namespace tune {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`.
uint32_t Crc32c(std::string_view data);
// TFRecord's mask: rotate right by 15 bits, add 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);

// One record as TFRecord frames it.
std::string FrameRecord(std::string_view data);
// The Event protocol buffer of one scalar (simple_value: a float, as TensorBoard's
// SummaryWriter.add_scalar writes it), and of the file's first event ("brain.Event:2").
std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag, float value);
std::string FileVersionEvent(double wall_time);

// An events file in `dir` (created with its parents), named as TensorFlow names them:
// events.out.tfevents.<seconds>.<host>.<pid>.<n>, so several writers of one directory (workers)
// never share a file.
class EventFileWriter {
 public:
  // InvalidArgument naming the directory when it cannot be made or the file cannot be opened.
  static Result<EventFileWriter> Open(const std::string& dir);
  EventFileWriter(EventFileWriter&& other) noexcept;
  EventFileWriter& operator=(EventFileWriter&& other) noexcept;
  ~EventFileWriter();

  // Appends one scalar; InvalidArgument naming the file when the write fails.
  Status AddScalar(std::string_view tag, int64_t step, float value, double wall_time);
  // Writes what is buffered to the file.
  Status Flush();
  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  Status Write(const std::string& event);
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace tune

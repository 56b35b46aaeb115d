// Reading and writing safetensors files (plain C++, no LibTorch): the weights format of Hugging
// Face checkpoints (model.safetensors).
//
// Layout: 8 bytes, little-endian u64 N; N bytes of JSON, {"name": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}; then the data, each
// tensor's raw little-endian bytes at [begin, end) relative to the end of the header.
//
// SafetensorsFile::Open checks the whole header against the file (lengths, offsets inside the
// data, byte counts matching dtype x shape, known dtypes) and reads no tensor data; ReadFloats
// then reads one tensor and converts F32, F16 and BF16 to float. Every error names the file, and
// the tensor where there is one. Thread safety: a SafetensorsFile is not shared between threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoints/tensor_data.h"
#include "tune/status.h"

namespace tune {

struct SafetensorsTensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute offset in the file
  uint64_t bytes = 0;
  int64_t numel() const;
  // The same tensor for ReadTensorFloats (contiguous, file 0).
  CheckpointTensor ToCheckpointTensor() const;
};

class SafetensorsFile {
 public:
  // InvalidArgument for a file that is not valid safetensors; NotFound when it cannot be opened.
  static Result<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::map<std::string, SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsTensorInfo* Find(const std::string& name) const;

  // The tensor's values as float (row-major). InvalidArgument for a dtype other than F32, F16 or
  // BF16, or a read that fails (the file changed since Open).
  Result<std::vector<float>> ReadFloats(const SafetensorsTensorInfo& tensor) const;

 private:
  std::string path_;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: float values, stored as `dtype` (kF32, kF16 or kBF16; round to nearest even).
struct SafetensorsWriteTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  TensorDtype dtype = TensorDtype::kF32;
};

// Writes a safetensors file (tensors in the order given). InvalidArgument when a tensor's values
// do not match its shape or its dtype is not a float type; Internal when the file cannot be
// written.
Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace tune

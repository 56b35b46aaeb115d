// Tensors inside checkpoint files [tune_train, private] (plain C++, no LibTorch): their dtypes,
// where their elements lie in a file, and reading them as float. Shared by both weights formats
// (safetensors.h, pytorch_bin.h) so that one reader serves model.safetensors and
// pytorch_model.bin alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

// The dtypes a checkpoint tensor may have, by safetensors' names ("F32", "BF16", ...). Only kF32,
// kF16 and kBF16 convert to float.
enum class TensorDtype { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "BF16", ...
const char* TensorDtypeName(TensorDtype dtype);
// Bytes per element.
int64_t TensorDtypeSize(TensorDtype dtype);
bool IsFloatDtype(TensorDtype dtype);  // F32, F16 or BF16

// "[2, 3]".
std::string ShapeString(const std::vector<int64_t>& shape);

// One tensor of a checkpoint and where its elements are: element (i0, i1, ...) is at byte
// storage_begin + (storage_offset + sum(ik * strides[k])) * TensorDtypeSize(dtype) of the file,
// little-endian. A safetensors tensor is contiguous at offset 0 of its own bytes; a PyTorch tensor
// may be a view (an offset, strides) of a storage that other tensors share.
struct CheckpointTensor {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty: contiguous
  size_t file = 0;               // which of the checkpoint's files (CheckpointWeights::files())
  uint64_t storage_begin = 0;    // absolute byte offset of the storage's element 0
  uint64_t storage_bytes = 0;    // the storage's size in bytes
  int64_t storage_offset = 0;    // in elements
  int64_t numel() const;
};

// The strides of a contiguous (row-major) tensor of `shape`. A stride past int64 (only where
// another dimension is 0, so that the tensor has no element) is INT64_MAX.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);

// The most elements a tensor may have beyond its storage's: a view that repeats its storage
// (stride 0, PyTorch's expand()) is read as floats only up to this size (64 MiB of floats).
inline constexpr int64_t kMaxRepeatedViewElements = int64_t{1} << 24;

// Ok when every element of `t` lies inside its storage (and strides are non-negative and as many
// as the dimensions) and its element count fits int64 and is at most its storage's or
// kMaxRepeatedViewElements; else InvalidArgument naming `what` (the file) and the tensor.
// Holds, t.numel() does not overflow.
Status CheckTensorBounds(const CheckpointTensor& t, const std::string& what);

// The tensor's values as float, row-major, read from `path`. InvalidArgument for a dtype other
// than F32, F16 or BF16, or a read that fails (the file changed since it was opened).
Result<std::vector<float>> ReadTensorFloats(const std::string& path, const CheckpointTensor& t);

// IEEE half and bfloat16 <-> float.
float HalfToFloat(uint16_t h);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToHalf(float f);
uint16_t FloatToBfloat16(float f);

}  // namespace tune

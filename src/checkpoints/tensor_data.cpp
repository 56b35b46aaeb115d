#include "checkpoints/tensor_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "util/coding.h"

namespace tune {
namespace {

struct DtypeName {
  TensorDtype dtype;
  const char* name;
  int64_t size;
};
constexpr DtypeName kDtypes[] = {{TensorDtype::kF32, "F32", 4},   {TensorDtype::kF16, "F16", 2},
                                 {TensorDtype::kBF16, "BF16", 2}, {TensorDtype::kF64, "F64", 8},
                                 {TensorDtype::kI64, "I64", 8},   {TensorDtype::kI32, "I32", 4},
                                 {TensorDtype::kI16, "I16", 2},   {TensorDtype::kI8, "I8", 1},
                                 {TensorDtype::kU8, "U8", 1},     {TensorDtype::kBool, "BOOL", 1}};

}  // namespace

const char* TensorDtypeName(TensorDtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

int64_t TensorDtypeSize(TensorDtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

bool IsFloatDtype(TensorDtype d) {
  return d == TensorDtype::kF32 || d == TensorDtype::kF16 || d == TensorDtype::kBF16;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t CheckpointTensor::numel() const {
  // 0 for any dimension of 0, before a product of the others could overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) {
    if (__builtin_mul_overflow(strides[i], shape[i], &strides[i - 1])) {
      strides[i - 1] = std::numeric_limits<int64_t>::max();
    }
  }
  return strides;
}

Status CheckTensorBounds(const CheckpointTensor& t, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(fmt::format("{}: tensor '{}': {}", what, t.name, why));
  };
  const std::vector<int64_t> strides = t.strides.empty() ? ContiguousStrides(t.shape) : t.strides;
  if (strides.size() != t.shape.size()) {
    return bad(
        fmt::format("{} strides for a shape of {} dimensions", strides.size(), t.shape.size()));
  }
  if (t.storage_offset < 0) return bad(fmt::format("storage offset {}", t.storage_offset));
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0 || strides[i] < 0) {
      return bad(
          fmt::format("shape {} with strides {}", ShapeString(t.shape), ShapeString(strides)));
    }
  }
  // No element: nothing to lie outside the storage.
  if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) return Status::Ok();
  // The last element's index and the element count, checked for overflow on the way.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 16;
  int64_t last = t.storage_offset;
  int64_t numel = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if ((t.shape[i] - 1) > (kMax - last) / std::max<int64_t>(strides[i], 1) ||
        __builtin_mul_overflow(numel, t.shape[i], &numel) || numel > kMax) {
      return bad(fmt::format("shape {} is too large", ShapeString(t.shape)));
    }
    last += (t.shape[i] - 1) * strides[i];
  }
  const auto size = static_cast<uint64_t>(TensorDtypeSize(t.dtype));
  const uint64_t end = (static_cast<uint64_t>(last) + 1) * size;
  if (end > t.storage_bytes) {
    return bad(fmt::format(
        "{} {} at storage offset {} needs {} bytes of its storage, which holds {}; the file is "
        "truncated or corrupt",
        TensorDtypeName(t.dtype), ShapeString(t.shape), t.storage_offset, end, t.storage_bytes));
  }
  // A view that repeats its storage (stride 0): reading it as floats allocates every element.
  const auto stored = static_cast<int64_t>(t.storage_bytes / size);
  if (numel > stored && numel > kMaxRepeatedViewElements) {
    return bad(fmt::format(
        "{} {} with strides {} is a view of {} elements over a storage of {}; tune reads a view "
        "that repeats its storage only up to {} elements",
        TensorDtypeName(t.dtype), ShapeString(t.shape), ShapeString(strides), numel, stored,
        kMaxRepeatedViewElements));
  }
  return Status::Ok();
}

Result<std::vector<float>> ReadTensorFloats(const std::string& path, const CheckpointTensor& t) {
  if (!IsFloatDtype(t.dtype)) {
    return InvalidArgumentError(
        fmt::format("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16", path, t.name,
                    TensorDtypeName(t.dtype)));
  }
  TUNE_RETURN_IF_ERROR(CheckTensorBounds(t, path));
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  if (n == 0) return out;
  const std::vector<int64_t> strides = t.strides.empty() ? ContiguousStrides(t.shape) : t.strides;
  // The span of the storage the tensor touches: [first, last] elements.
  int64_t last = t.storage_offset;
  for (size_t i = 0; i < t.shape.size(); ++i) last += (t.shape[i] - 1) * strides[i];
  const auto size = static_cast<size_t>(TensorDtypeSize(t.dtype));
  const auto span = static_cast<size_t>(last - t.storage_offset + 1);
  std::vector<unsigned char> raw(span * size);
  const uint64_t at = t.storage_begin + static_cast<uint64_t>(t.storage_offset) * size;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(at));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!in) {
    return InvalidArgumentError(
        fmt::format("{}: tensor '{}': cannot read {} bytes at offset {} (did the file change?)",
                    path, t.name, raw.size(), at));
  }
  auto value = [&](size_t element) {
    const unsigned char* p = raw.data() + element * size;
    if (t.dtype == TensorDtype::kF32) {
      const uint32_t bits = DecodeFixed32(p);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    const uint16_t bits = DecodeFixed16(p);
    return t.dtype == TensorDtype::kF16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
  };
  // Walk the elements in row-major order with an index counter (views: transposes, slices).
  std::vector<int64_t> index(t.shape.size(), 0);
  size_t offset = 0;  // of the current element, relative to storage_offset
  for (size_t i = 0; i < n; ++i) {
    out[i] = value(offset);
    for (size_t d = t.shape.size(); d-- > 0;) {
      if (++index[d] < t.shape[d]) {
        offset += static_cast<size_t>(strides[d]);
        break;
      }
      offset -= static_cast<size_t>((t.shape[d] - 1) * strides[d]);
      index[d] = 0;
    }
  }
  return out;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float Bfloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToBfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // nan
  bits += 0x7fffu + ((bits >> 16) & 1u);                 // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // nan
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                               // subnormal half (or zero)
    if (abs < 0x33000000u) return sign;
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + (112 - exp) ... half subnormal scale
    uint32_t v = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1u))) ++v;
    return static_cast<uint16_t>(sign | v);
  }
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);  // round to nearest even
  return static_cast<uint16_t>(sign | (v >> 13));
}

}  // namespace tune

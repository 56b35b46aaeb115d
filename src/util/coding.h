#pragma once
// Fixed-width integers in a byte string: the one home of byte order for the readers of weights
// files (pickle, pytorch_model.bin, safetensors, tensor data) and the writer of TensorBoard's
// event files. Every function reads exactly the
// bytes it names from `p`, which the caller has checked are there; none depends on the host's
// own byte order or alignment.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tune {

// The unsigned integer of the `n` bytes at `p`, least significant first; 0 <= n <= 8.
inline uint64_t DecodeLittleEndian(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

// The two's-complement integer of the `n` bytes at `p`, least significant first (the sign is
// the top bit of the last byte); 0 <= n <= 8, where 0 bytes are 0, as Python's
// int.from_bytes(b"", "little", signed=True).
inline int64_t DecodeLittleEndianSigned(const void* p, size_t n) {
  uint64_t v = DecodeLittleEndian(p, n);
  if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
  return static_cast<int64_t>(v);
}

// The unsigned integer of the `n` bytes at `p`, most significant first; 0 <= n <= 8.
inline uint64_t DecodeBigEndian(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | b[i];
  return v;
}

inline uint16_t DecodeFixed16(const void* p) {
  return static_cast<uint16_t>(DecodeLittleEndian(p, 2));
}
inline uint32_t DecodeFixed32(const void* p) {
  return static_cast<uint32_t>(DecodeLittleEndian(p, 4));
}
inline uint64_t DecodeFixed64(const void* p) { return DecodeLittleEndian(p, 8); }

// Appends the `n` low bytes of `v` to `out`, least significant first; 0 <= n <= 8.
inline void PutLittleEndian(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void PutFixed32(std::string& out, uint32_t v) { PutLittleEndian(out, v, 4); }
inline void PutFixed64(std::string& out, uint64_t v) { PutLittleEndian(out, v, 8); }

}  // namespace tune

// SHA-256 (FIPS 180-4, section 6.2), one block of 64 bytes at a time.
#include "util/sha256.h"

#include <array>
#include <cstdint>

#include "util/json_file.h"

namespace tune {
namespace {

constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Compress(std::array<uint32_t, 8>& h, const unsigned char* block) {
  std::array<uint32_t, 64> w{};
  for (int t = 0; t < 16; ++t) {
    w[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 |
           uint32_t{block[4 * t + 2]} << 8 | uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = Rotr(w[t - 15], 7) ^ Rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = Rotr(w[t - 2], 17) ^ Rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  std::array<uint32_t, 8> v = h;
  for (int t = 0; t < 64; ++t) {
    const uint32_t s1 = Rotr(v[4], 6) ^ Rotr(v[4], 11) ^ Rotr(v[4], 25);
    const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
    const uint32_t t1 = v[7] + s1 + ch + kRound[t] + w[t];
    const uint32_t s0 = Rotr(v[0], 2) ^ Rotr(v[0], 13) ^ Rotr(v[0], 22);
    const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    for (int k = 7; k > 0; --k) v[k] = v[k - 1];
    v[4] += t1;
    v[0] = t1 + s0 + maj;
  }
  for (int k = 0; k < 8; ++k) h[k] += v[k];
}

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t full = bytes.size() / 64 * 64;
  for (size_t i = 0; i < full; i += 64) {
    Compress(h, reinterpret_cast<const unsigned char*>(bytes.data() + i));
  }
  // The tail, a 1 bit, zeros and the length in bits (big-endian): one or two blocks.
  std::string tail(bytes.substr(full));
  tail.push_back(static_cast<char>(0x80));
  while (tail.size() % 64 != 56) tail.push_back('\0');
  const uint64_t bits = static_cast<uint64_t>(bytes.size()) * 8;
  for (int k = 7; k >= 0; --k) tail.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));
  for (size_t i = 0; i < tail.size(); i += 64) {
    Compress(h, reinterpret_cast<const unsigned char*>(tail.data() + i));
  }
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (uint32_t word : h) {
    for (int k = 28; k >= 0; k -= 4) hex.push_back(kHex[(word >> k) & 0xf]);
  }
  return hex;
}

Result<std::string> FileContentHash(const std::string& path) {
  TUNE_ASSIGN_OR_RETURN(std::string bytes, ReadTextFile(path));
  return "sha256:" + Sha256Hex(bytes);
}

}  // namespace tune

#include "util/coding.h"

#include <gtest/gtest.h>

#include <string>

namespace tune {
namespace {

// The bytes of a literal, without its terminating NUL.
std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

TEST(Coding, LittleEndianReadsLeastSignificantFirst) {
  const std::string b = Bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88});
  EXPECT_EQ(DecodeLittleEndian(b.data(), 0), 0u);
  EXPECT_EQ(DecodeLittleEndian(b.data(), 1), 0x01u);
  EXPECT_EQ(DecodeLittleEndian(b.data(), 3), 0x030201u);
  EXPECT_EQ(DecodeFixed16(b.data()), 0x0201u);
  EXPECT_EQ(DecodeFixed32(b.data()), 0x04030201u);
  EXPECT_EQ(DecodeFixed64(b.data()), 0x8807060504030201ull);
}

TEST(Coding, BigEndianReadsMostSignificantFirst) {
  const std::string b = Bytes({0x3f, 0xf0, 0, 0, 0, 0, 0, 0});  // 1.0 as a big-endian double
  EXPECT_EQ(DecodeBigEndian(b.data(), 8), 0x3ff0000000000000ull);
  EXPECT_EQ(DecodeBigEndian(b.data(), 2), 0x3ff0u);
  EXPECT_EQ(DecodeBigEndian(b.data(), 0), 0u);
}

TEST(Coding, PutLittleEndianIsTheInverseOfDecoding) {
  std::string out;
  PutFixed32(out, 0x04030201u);
  PutFixed64(out, 0x8807060504030201ull);
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out.substr(0, 4), Bytes({0x01, 0x02, 0x03, 0x04}));
  EXPECT_EQ(DecodeFixed32(out.data()), 0x04030201u);
  EXPECT_EQ(DecodeFixed64(out.data() + 4), 0x8807060504030201ull);
}

// As Python's int.from_bytes(b, "little", signed=True), which pickle's LONG1 and LONG4 follow.
TEST(Coding, SignedLittleEndianExtendsTheTopBitOfTheLastByte) {
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({}).data(), 0), 0);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0xff}).data(), 1), -1);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0x7f}).data(), 1), 127);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0x80}).data(), 1), -128);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0x00, 0x80}).data(), 2), -32768);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0xff, 0x00}).data(), 2), 255);
  EXPECT_EQ(DecodeLittleEndianSigned(Bytes({0, 0, 0, 0, 0, 0, 0, 0x80}).data(), 8), INT64_MIN);
  EXPECT_EQ(
      DecodeLittleEndianSigned(Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}).data(), 8),
      INT64_MAX);
}

}  // namespace
}  // namespace tune

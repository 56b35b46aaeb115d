#include "checkpoints/safetensors.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"

namespace tune {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file from a header string and raw data, the way the format lays it out.
std::string Raw(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(Safetensors, HalfAndBfloat16Conversions) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);            // largest half
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);            // rounds to inf
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // a tie rounds to even
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604645e-8f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.33325195f);
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(3.0f), 0x4040);
  EXPECT_EQ(Bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(0.1f)), 0.10009765625f);
  for (float v : {0.5f, -1.25f, 1024.0f, 3.140625f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v);
    EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(v)), v);
  }
}

TEST(Safetensors, WritesAndReadsF32F16Bf16) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "w.safetensors").string();
  std::vector<SafetensorsWriteTensor> tensors = {
      {"a.weight", {2, 3}, {1, 2, 3, 4, 5, 6.5f}, TensorDtype::kF32},
      {"b", {3}, {0.5f, -1.0f, 0.1f}, TensorDtype::kF16},
      {"c.bias", {2, 1}, {3.0f, 0.1f}, TensorDtype::kBF16},
      {"empty", {0}, {}, TensorDtype::kF32}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), 4u);
  const SafetensorsTensorInfo* a = file->Find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->dtype, TensorDtype::kF32);
  EXPECT_EQ(*file->ReadFloats(*a), tensors[0].values);
  auto b = file->ReadFloats(*file->Find("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0], 0.5f);
  EXPECT_EQ((*b)[1], -1.0f);
  EXPECT_NEAR((*b)[2], 0.1f, 1e-4);
  EXPECT_NE((*b)[2], 0.1f);  // really stored as half
  auto c = file->ReadFloats(*file->Find("c.bias"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<float>{3.0f, 0.10009765625f}));
  EXPECT_TRUE(file->ReadFloats(*file->Find("empty"))->empty());
  EXPECT_EQ(file->Find("missing"), nullptr);
  // The data (6 * 4 + 3 * 2 + 2 * 2 = 34 bytes) starts 8-byte aligned, as the reference writer
  // makes it.
  const std::string bytes = Slurp(path);
  EXPECT_EQ((bytes.size() - 34) % 8, 0u);
}

TEST(Safetensors, WriteRejectsValuesThatDoNotFitTheShape) {
  testing::TempDir dir;
  Status st = WriteSafetensors((dir.path() / "x").string(), {{"t", {2, 2}, {1, 2, 3}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("shape [2, 2] needs 4 values, got 3"), std::string::npos);
}

class SafetensorsBadFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    Spit(path_, bytes);
    return path_;
  }
  Status OpenStatus(const std::string& bytes) {
    return SafetensorsFile::Open(Write(bytes)).status();
  }
  testing::TempDir dir_;
  std::string path_ = (dir_.path() / "model.safetensors").string();
};

TEST_F(SafetensorsBadFileTest, MissingFile) {
  Status st = SafetensorsFile::Open((dir_.path() / "nope.safetensors").string()).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("nope.safetensors"), std::string::npos);
}

TEST_F(SafetensorsBadFileTest, ShorterThanTheLengthField) {
  Status st = OpenStatus("abc");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(path_), std::string::npos);
  EXPECT_NE(st.message().find("3 bytes, shorter than the 8-byte header length"), std::string::npos)
      << st.message();
}

TEST_F(SafetensorsBadFileTest, HeaderLengthBeyondTheFile) {
  std::string bytes = Raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  bytes[0] = static_cast<char>(0xff);  // the length now claims more than the file holds
  Status st = OpenStatus(bytes);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("goes beyond the end of the file"), std::string::npos)
      << st.message();
  // A huge length (2^63) must not allocate or wrap around.
  bytes = Raw("{}", "");
  bytes[7] = static_cast<char>(0x80);
  EXPECT_NE(OpenStatus(bytes).message().find("goes beyond the end of the file"), std::string::npos);
}

TEST_F(SafetensorsBadFileTest, TruncatedData) {
  testing::TempDir dir;
  const std::string good = (dir.path() / "good.safetensors").string();
  ASSERT_TRUE(
      WriteSafetensors(good, {{"layer.weight", {4, 4}, std::vector<float>(16, 1.0f)}}).ok());
  const std::string bytes = Slurp(good);
  Status st = OpenStatus(bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tensor 'layer.weight'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  // Cut inside the header.
  st = OpenStatus(bytes.substr(0, 20));
  EXPECT_NE(st.message().find("goes beyond the end of the file"), std::string::npos);
}

TEST_F(SafetensorsBadFileTest, UnknownDtype) {
  Status st =
      OpenStatus(Raw(R"({"w":{"dtype":"F8_E9M9","shape":[2],"data_offsets":[0,2]}})", "ab"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tensor 'w': unknown dtype \"F8_E9M9\""), std::string::npos)
      << st.message();
}

TEST_F(SafetensorsBadFileTest, ByteCountNotMatchingTheShape) {
  Status st = OpenStatus(
      Raw(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(12, '\0')));
  EXPECT_NE(st.message().find("F32 [2, 2] needs 16 bytes but data_offsets [0, 12] hold 12"),
            std::string::npos)
      << st.message();
}

TEST_F(SafetensorsBadFileTest, HeaderNotJsonOrMalformedEntries) {
  EXPECT_NE(OpenStatus(Raw("{not json", "")).message().find("the header is not valid JSON"),
            std::string::npos);
  EXPECT_NE(OpenStatus(Raw("[1,2]", "")).message().find("not a JSON object"), std::string::npos);
  EXPECT_NE(OpenStatus(Raw(R"({"w":{"dtype":"F32"}})", ""))
                .message()
                .find("tensor 'w': needs \"dtype\", \"shape\" and \"data_offsets\""),
            std::string::npos);
  EXPECT_NE(OpenStatus(Raw(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""))
                .message()
                .find("bad dimension -1"),
            std::string::npos);
  EXPECT_NE(OpenStatus(Raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"))
                .message()
                .find("lie outside"),
            std::string::npos);
}

TEST_F(SafetensorsBadFileTest, IntegerTensorsParseButDoNotReadAsFloats) {
  auto file = SafetensorsFile::Open(Write(Raw(
      R"({"__metadata__":{"format":"pt"},"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
      std::string(8, '\0'))));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Status st = file->ReadFloats(*file->Find("ids")).status();
  EXPECT_NE(st.message().find("tensor 'ids' has dtype I64; weights must be F32, F16 or BF16"),
            std::string::npos)
      << st.message();
}

// Fuzzing (tests/fuzz/corpus/safetensors/finding-empty-huge-dims.safetensors): an empty tensor
// whose later dimensions multiply past int64 overflowed its strides and element count. (Huge
// dimensions before the 0 are refused by the header check.)
TEST_F(SafetensorsBadFileTest, EmptyTensorsWithHugeDimensionsReadAsEmpty) {
  auto file = SafetensorsFile::Open(
      Write(Raw(R"({"z":{"dtype":"F16","shape":[0,4611686018427387904,4611686018427387904],)"
                R"("data_offsets":[0,0]}})",
                "")));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const SafetensorsTensorInfo& t = *file->Find("z");
  EXPECT_EQ(t.numel(), 0);
  auto values = file->ReadFloats(t);
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_TRUE(values->empty());
  EXPECT_NE(OpenStatus(Raw(R"({"e":{"dtype":"F32","shape":[4611686018427387904,)"
                           R"(4611686018427387904,0],"data_offsets":[0,0]}})",
                           ""))
                .message()
                .find("tensor 'e': shape [4611686018427387904,4611686018427387904,0] is too large"),
            std::string::npos);
}

}  // namespace
}  // namespace tune

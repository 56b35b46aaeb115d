// json_file.h: reading JSON files with errors that name the file, the line and the column.
#include "util/json_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"

namespace tune {
namespace {

TEST(JsonFile, ReadsADocument) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "a.json").string();
  std::ofstream(path) << R"({"x": [1, 2], "y": "z"})";
  Result<Json> doc = ReadJsonObjectFile(path);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["x"], Json({1, 2}));
  EXPECT_EQ((*doc)["y"], "z");
}

TEST(JsonFile, AMissingFileIsNotFoundNamingItAndWhy) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "missing.json").string();
  Result<Json> doc = ReadJsonFile(path);
  EXPECT_EQ(doc.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(doc.status().message(), path + ": cannot read (No such file or directory)");
}

TEST(JsonFile, ASyntaxErrorNamesTheLineAndColumn) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "bad.json").string();
  std::ofstream(path) << "{\n  \"a\": 1,\n  \"b\": tru\n}\n";
  Result<Json> doc = ReadJsonFile(path);
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.status().message().rfind(path + ":3:11: invalid JSON: syntax error", 0), 0u)
      << doc.status().message();
  EXPECT_EQ(ParseJsonText("[1,", "stdin").status().message().rfind("stdin:1:4: invalid JSON", 0),
            0u);
}

// Fuzzing (tests/fuzz/corpus/config/finding-number-overflow.json): nlohmann throws out_of_range,
// not parse_error, for a number past double's range, and it ended tune.
TEST(JsonFile, ANumberOutOfRangeIsAnErrorNamingIt) {
  Result<Json> doc = ParseJsonText("{\"a\": 1e400}", "study.json");
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.status().message(), "study.json: invalid JSON: number overflow parsing '1e400'");
}

TEST(JsonFile, AnObjectIsRequiredWhereOneIsExpected) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "list.json").string();
  std::ofstream(path) << "[1, 2]";
  EXPECT_TRUE(ReadJsonFile(path).ok());
  Result<Json> doc = ReadJsonObjectFile(path);
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.status().message(), path + ": not a JSON object");
}

}  // namespace
}  // namespace tune

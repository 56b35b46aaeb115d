// ReportReader (objectives/report_reader.h): a command objective's stdout and result file, read
// into a real trial of an in-memory study; any bytes are read or ignored, never thrown on.
#include "objectives/report_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <vector>

#include "testing/memory_study.h"
#include "testing/temp_dir.h"
#include "util/text.h"

namespace tune {
namespace {

class ReportReaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_.path() / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  testing::TempDir dir_;
  testing::MemoryStudy memory_{"r"};
  std::set<int64_t> earlier_;
};

TEST_F(ReportReaderTest, ReadsReportsAndTheFinalValue) {
  ReportReader reader(*memory_.trial, dir_.path() / "pruner.jsonl", earlier_);
  ASSERT_TRUE(reader.OnStdoutLine(R"({"step": 0, "value": 0.5})").ok());
  ASSERT_TRUE(reader.OnStdoutLine("not a protocol line").ok());
  ASSERT_TRUE(reader.OnStdoutLine(R"({"value": NaN})").ok());
  ASSERT_TRUE(reader.final_values.has_value());
  EXPECT_TRUE(std::isnan((*reader.final_values)[0]));
  EXPECT_EQ(earlier_, (std::set<int64_t>{0}));
}

// Fuzzing (tests/fuzz/corpus/command_lines/finding-invalid-utf8-result.txt): a result file that
// is not a number and not valid UTF-8 made nlohmann's dump() throw while the error message was
// written, which ended tune.
TEST_F(ReportReaderTest, AResultFileOfInvalidUtf8HoldsNoValue) {
  ReportReader reader(*memory_.trial, dir_.path() / "pruner.jsonl", earlier_);
  EXPECT_TRUE(reader.ReadResultFile(Write("result.json", "1<g\xfen\xfc\x7f")).ok());
  EXPECT_FALSE(reader.final_values.has_value());
  EXPECT_TRUE(reader.ReadResultFile(Write("result2.json", "0.25\n")).ok());
  EXPECT_EQ(reader.final_values, (std::vector<double>{0.25}));
}

// Fuzzing (tests/fuzz/corpus/command_lines/finding-values-not-an-array.txt): {"values": 1}, a
// report whose "values" is not an array and which has no "value", threw nlohmann's out_of_range
// from the reader and ended tune. Now it is a report ignored with a warning.
TEST_F(ReportReaderTest, ValuesThatAreNotAnArrayAreIgnored) {
  ReportReader reader(*memory_.trial, dir_.path() / "pruner.jsonl", earlier_);
  for (const char* line : {R"({"values": 1})", R"({"step": 2, "values": "x"})",
                           R"({"values": {"a": 1}})", R"({"values": null})"}) {
    EXPECT_TRUE(reader.OnStdoutLine(line).ok()) << line;
  }
  EXPECT_FALSE(reader.final_values.has_value());
  EXPECT_TRUE(earlier_.empty());
  ASSERT_TRUE(reader.OnStdoutLine(R"({"values": 3, "value": 0.5})").ok());  // "value" is read
  EXPECT_EQ(reader.final_values, (std::vector<double>{0.5}));
  ASSERT_TRUE(reader.OnStdoutLine(R"({"values": [1, 2]})").ok());
  EXPECT_EQ(reader.final_values, (std::vector<double>{1, 2}));
}

// An out-of-memory message is cut at 500 bytes and stays valid UTF-8 (it is stored in the
// trial's attributes, as JSON), even where the cut splits a character.
TEST_F(ReportReaderTest, AnOutOfMemoryMessageIsCutAsValidUtf8) {
  ReportReader reader(*memory_.trial, dir_.path() / "pruner.jsonl", earlier_);
  std::string message = "x";
  for (int i = 0; i < 300; ++i) message += "\xc3\xa9";  // é: the cut at 500 splits one
  ASSERT_TRUE(reader.OnStdoutLine(R"({"out_of_memory": ")" + message + "\"}").ok());
  ASSERT_TRUE(reader.out_of_memory.has_value());
  EXPECT_EQ(ValidUtf8(*reader.out_of_memory), *reader.out_of_memory);
  EXPECT_EQ(reader.out_of_memory->substr(0, 3), "x\xc3\xa9");
}

}  // namespace
}  // namespace tune

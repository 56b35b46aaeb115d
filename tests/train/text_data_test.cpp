#include "train/text_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "testing/temp_dir.h"

namespace tune {
namespace {

class TextDataTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = (dir_.path() / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  // The error message of loading (expects a failure).
  std::string Error(const TextDataOptions& o) {
    auto d = LoadTextDataset(o);
    EXPECT_FALSE(d.ok());
    return d.ok() ? "" : d.status().message();
  }
  TextDataOptions Jsonl(const std::string& train, const std::string& val = "") {
    TextDataOptions o;
    o.train = Write("train.jsonl", train);
    if (!val.empty()) o.validation = Write("val.jsonl", val);
    return o;
  }

  testing::TempDir dir_;
};

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST_F(TextDataTest, ReadsJsonlWithLabelsSorted) {
  auto d = LoadTextDataset(Jsonl(R"({"text": "a b", "label": "pos"}

{"text": "c", "label": "neg", "extra": 1}
)",
                                 R"({"text": "d", "label": "pos"})"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->labels, (std::vector<std::string>{"neg", "pos"}));
  ASSERT_EQ(d->train.size(), 2u);
  EXPECT_EQ(d->train[0].text, "a b");
  EXPECT_EQ(d->train[0].label, 1);
  EXPECT_EQ(d->train[1].label, 0);
  ASSERT_EQ(d->validation.size(), 1u);
  EXPECT_EQ(d->validation[0].label, 1);
}

TEST_F(TextDataTest, IntegerLabelsSortNumericallyAndConfiguredLabelsKeepTheirOrder) {
  auto o = Jsonl("{\"text\": \"a\", \"label\": 10}\n{\"text\": \"b\", \"label\": 2}\n",
                 "{\"text\": \"c\", \"label\": \"2\"}\n");
  auto d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->labels, (std::vector<std::string>{"2", "10"}));
  o.labels = {"10", "2", "7"};
  d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->train[0].label, 0);
  EXPECT_EQ(d->validation[0].label, 1);
}

TEST_F(TextDataTest, ReadsCsvAndTsvWithQuotes) {
  TextDataOptions o;
  o.train = Write("train.csv",
                  "id,sentence,y\r\n1,\"hello, world\",a\r\n2,\"say \"\"hi\"\"\nnext line\",b\r\n"
                  "3,plain,a");
  o.text_column = "sentence";
  o.label_column = "y";
  o.validation = Write("val.tsv", "sentence\ty\n\"tab\there\"\tb\n");
  auto d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->train.size(), 3u);
  EXPECT_EQ(d->train[0].text, "hello, world");
  EXPECT_EQ(d->train[1].text, "say \"hi\"\nnext line");
  EXPECT_EQ(d->train[2].text, "plain");
  EXPECT_EQ(d->validation[0].text, "tab\there");
  EXPECT_EQ(d->validation[0].label, 1);
  auto table = ReadDataTable(o.train);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->rows[2].line, 5);  // the quoted newline counts
}

TEST_F(TextDataTest, HoldsOutAValidationShareDeterministically) {
  std::string lines;
  for (int i = 0; i < 100; ++i)
    lines +=
        "{\"text\": \"t" + std::to_string(i) + "\", \"label\": " + std::to_string(i % 3) + "}\n";
  auto o = Jsonl(lines);
  o.validation_fraction = 0.25;
  auto a = LoadTextDataset(o);
  auto b = LoadTextDataset(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->train.size(), 75u);
  EXPECT_EQ(a->validation.size(), 25u);
  for (size_t i = 0; i < 25; ++i) EXPECT_EQ(a->validation[i].text, b->validation[i].text);
  o.split_seed = 1;
  auto c = LoadTextDataset(o);
  ASSERT_TRUE(c.ok());
  bool differs = false;
  for (size_t i = 0; i < 25; ++i)
    differs = differs || a->validation[i].text != c->validation[i].text;
  EXPECT_TRUE(differs);
}

TEST_F(TextDataTest, FileErrors) {
  TextDataOptions o;
  o.train = (dir_.path() / "missing.jsonl").string();
  auto d = LoadTextDataset(o);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(d.status().message(), "missing.jsonl: no such file");

  o.train = Write("empty.jsonl", "\n  \n");
  EXPECT_HAS(Error(o), "empty.jsonl: the file is empty");
  o.train = Write("only_header.csv", "text,label\n");
  EXPECT_HAS(Error(o), "only_header.csv: no records (only the header row 'text,label')");
  o.train = Write("data.txt", "x");
  EXPECT_HAS(Error(o), "cannot tell the format from the extension '.txt'");
}

TEST_F(TextDataTest, InvalidUtf8NamesLineAndColumn) {
  auto o =
      Jsonl("{\"text\": \"fine\", \"label\": \"a\"}\n{\"text\": \"bad \xff\", \"label\": \"b\"}\n");
  EXPECT_HAS(Error(o), "train.jsonl:2:15: invalid UTF-8 (byte 0xff)");
  TextDataOptions c;
  c.train = Write("t.csv", "text,label\nok,a\nnot \xC3(,b\n");
  EXPECT_HAS(Error(c), "t.csv:3:5: invalid UTF-8 (byte 0xc3)");
}

TEST_F(TextDataTest, JsonErrors) {
  EXPECT_HAS(
      Error(Jsonl("{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\" \"label\": \"y\"}\n")),
      "train.jsonl:2:20: invalid JSON: syntax error");
  EXPECT_HAS(Error(Jsonl("[\"a\", \"x\"]\n")),
             "train.jsonl:1: expected a JSON object per line, got an array");
  // Fuzzing (tests/fuzz/corpus/data_jsonl/finding-number-overflow.jsonl): a number past
  // double's range threw nlohmann's out_of_range, which nothing caught.
  EXPECT_HAS(Error(Jsonl("{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": 1e400}\n")),
             "train.jsonl:2: invalid JSON: number overflow parsing '1e400'");
}

TEST_F(TextDataTest, ColumnErrorsSuggestTheClosestName) {
  auto o = Jsonl("{\"txt\": \"a\", \"label\": \"x\"}\n");
  EXPECT_HAS(Error(o), "train.jsonl:1: no key 'text' (did you mean 'txt'?); keys: label, txt");
  TextDataOptions c;
  c.train = Write("t.csv", "sentence,labels\na,x\n");
  c.text_column = "sentence";
  EXPECT_HAS(Error(c), "t.csv: no column 'label' in the header (did you mean 'labels'?)");
}

TEST_F(TextDataTest, FieldErrors) {
  EXPECT_HAS(Error(Jsonl("{\"text\": 5, \"label\": \"x\"}\n")),
             "train.jsonl:1: 'text' must be a string, got 5");
  EXPECT_HAS(Error(Jsonl("{\"text\": \"a\", \"label\": null}\n")),
             "train.jsonl:1: the label 'label' is null");
  EXPECT_HAS(Error(Jsonl("{\"text\": \"a\", \"label\": 1.5}\n")), "must be a string or an integer");
  auto o = Jsonl("{\"text\": \"" + std::string(100, 'x') + "\", \"label\": \"a\"}\n");
  o.max_text_bytes = 50;
  EXPECT_HAS(Error(o), "train.jsonl:1: 'text' is 100 bytes long, more than max_text_bytes (50)");
  EXPECT_HAS(
      Error(Jsonl("{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"x\"}\n")),
      "only one label ('x'); a classifier needs at least two");
}

TEST_F(TextDataTest, UnknownLabels) {
  auto o =
      Jsonl("{\"text\": \"a\", \"label\": \"sports\"}\n{\"text\": \"b\", \"label\": \"art\"}\n",
            "{\"text\": \"c\", \"label\": \"art\"}\n{\"text\": \"d\", \"label\": \"sport\"}\n");
  EXPECT_HAS(
      Error(o),
      "val.jsonl:2: unknown label 'sport' (did you mean 'sports'?); it does not occur in the "
      "training data, whose labels are: art, sports");
  o.labels = {"art", "law"};
  EXPECT_HAS(Error(o), "train.jsonl:1: unknown label 'sports'");
  EXPECT_HAS(Error(o), "the configured labels are: art, law");
}

// Multi-label rows list their labels (a JSON array, or a string split at label_separator; none
// at all is an example too); the training data's labels are every one listed, sorted; the
// trainer reads a row of 0/1 per example.
TEST_F(TextDataTest, MultiLabelRowsListTheirLabels) {
  TextDataOptions o = Jsonl(R"({"text": "a", "tags": ["sports", "food"]}
{"text": "b", "tags": []}
{"text": "c", "tags": "food | weather"}
{"text": "d", "tags": ["food", "food"]}
)",
                            R"({"text": "e", "tags": "weather"})");
  o.problem_type = ProblemType::kMultiLabel;
  o.label_column = "tags";
  o.label_separator = "|";
  auto d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->labels, (std::vector<std::string>{"food", "sports", "weather"}));
  EXPECT_EQ(d->train[0].label_set, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(d->train[1].label_set.empty());
  EXPECT_EQ(d->train[2].label_set, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(d->train[3].label_set, (std::vector<int64_t>{0}));  // listed twice, counted once
  EXPECT_EQ(d->validation[0].label_set, (std::vector<int64_t>{2}));
  const Tokenizer tokenizer = Tokenizer::Build({"a b c d e"}, TokenizerOptions{});
  const TextTrainData data = TokenizeTextDataset(*d, tokenizer, 16);
  EXPECT_EQ(data.problem_type, ProblemType::kMultiLabel);
  EXPECT_EQ(data.num_labels, 3);
  EXPECT_TRUE(data.train_labels.empty());
  EXPECT_EQ(data.train_targets, (std::vector<float>{1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(data.validation_targets, (std::vector<float>{0, 0, 1}));

  // Bad rows name the file, the line and the column.
  o = Jsonl("{\"text\": \"a\", \"tags\": [\"x\"]}\n{\"text\": \"b\", \"tags\": 3}\n");
  o.problem_type = ProblemType::kMultiLabel;
  o.label_column = "tags";
  EXPECT_HAS(Error(o),
             "train.jsonl:2: 'tags' must be a list of labels (a JSON array, or a string "
             "of labels separated by ','), got 3");
  o = Jsonl("{\"text\": \"a\", \"tags\": [\"x\", null]}\n");
  o.problem_type = ProblemType::kMultiLabel;
  o.label_column = "tags";
  EXPECT_HAS(Error(o), "train.jsonl:1: 'tags' holds null; a multi-label example's labels are");
  o = Jsonl("{\"text\": \"a\", \"tags\": [\"sports\"]}\n",
            "{\"text\": \"b\", \"tags\": [\"sport\"]}\n");
  o.problem_type = ProblemType::kMultiLabel;
  o.label_column = "tags";
  EXPECT_HAS(Error(o), "val.jsonl:1: unknown label 'sport' (did you mean 'sports'?)");
  o = Jsonl("{\"text\": \"a\", \"tags\": []}\n{\"text\": \"b\", \"tags\": \"\"}\n");
  o.problem_type = ProblemType::kMultiLabel;
  o.label_column = "tags";
  EXPECT_HAS(Error(o), "train.jsonl: no example has a label");
}

// Regression targets are numbers (or strings that are one whole); the model has one output.
TEST_F(TextDataTest, RegressionTargetsAreNumbers) {
  TextDataOptions o;
  o.train = Write("train.csv", "text,score\na,1.5\nb,-2\nc,3e1\n");
  o.validation = Write("val.csv", "text,score\nd,0.25\n");
  o.problem_type = ProblemType::kRegression;
  o.label_column = "score";
  auto d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->labels.empty());
  EXPECT_DOUBLE_EQ(d->train[2].target, 30.0);
  const Tokenizer tokenizer = Tokenizer::Build({"a b c d"}, TokenizerOptions{});
  const TextTrainData data = TokenizeTextDataset(*d, tokenizer, 16);
  EXPECT_EQ(data.num_labels, 1);
  EXPECT_EQ(data.train_targets, (std::vector<float>{1.5f, -2.0f, 30.0f}));
  EXPECT_EQ(data.validation_targets, (std::vector<float>{0.25f}));
  for (const char* bad : {"n/a", "1.5x", "inf", ""}) {
    o.train = Write("train.csv", std::string("text,score\na,1\nb,") + bad + "\n");
    EXPECT_HAS(Error(o),
               "train.csv:3: the target 'score' must be a finite number (problem_type "
               "regression), got \"" +
                   std::string(bad) + "\"");
  }
  o.train = Write("train.jsonl", "{\"text\": \"a\", \"score\": true}\n");
  EXPECT_HAS(Error(o), "train.jsonl:1: the target 'score' must be a finite number");
  o.labels = {"a", "b"};
  EXPECT_HAS(Error(o), "'labels' does not apply to problem_type regression");
}

// "balanced" weights from the training split (scikit-learn's compute_class_weight; PyTorch's
// pos_weight for multi-label); a list is checked against the labels.
TEST_F(TextDataTest, ClassWeightsComeFromTheTrainingSplit) {
  TextDataOptions o = Jsonl(
      "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"x\"}\n"
      "{\"text\": \"c\", \"label\": \"x\"}\n{\"text\": \"d\", \"label\": \"y\"}\n",
      "{\"text\": \"e\", \"label\": \"y\"}\n");
  o.class_weights.balanced = true;
  auto d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // 4 examples / (2 labels x count): x 4/6, y 4/2.
  EXPECT_EQ(d->class_weights, (std::vector<float>{4.0f / 6.0f, 2.0f}));
  o.class_weights = {false, {1.0, 3.0}};
  d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->class_weights, (std::vector<float>{1.0f, 3.0f}));
  o.class_weights = {false, {1.0}};
  EXPECT_HAS(Error(o), "class_weights: 1 weight for 2 labels (x, y); give one per label");
  o = Jsonl(
      "{\"text\": \"a\", \"label\": [\"p\"]}\n{\"text\": \"b\", \"label\": []}\n"
      "{\"text\": \"c\", \"label\": [\"p\", \"q\"]}\n{\"text\": \"d\", \"label\": []}\n",
      "{\"text\": \"e\", \"label\": []}\n");
  o.problem_type = ProblemType::kMultiLabel;
  o.class_weights.balanced = true;
  d = LoadTextDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->class_weights, (std::vector<float>{1.0f, 3.0f}));  // negatives / positives
  o.labels = {"p", "q", "r"};
  EXPECT_HAS(Error(o), "class_weights \"balanced\": label 'r' is on 0 training examples");
}

TEST_F(TextDataTest, CsvStructureErrors) {
  TextDataOptions o;
  o.train = Write("t.csv", "text,label\na,x\nb,y,extra\n");
  EXPECT_HAS(Error(o), "t.csv:3: 3 fields, but the header has 2 columns");
  o.train = Write("q.csv", "text,label\n\"open,x\nb,y\n");
  EXPECT_HAS(Error(o), "q.csv:2: unterminated quoted field");
  o.train = Write("d.csv", "text,text\na,b\n");
  EXPECT_HAS(Error(o), "d.csv:1: the header names column 'text' twice");
}

TEST_F(TextDataTest, TabularFeaturesAreStandardizedWithTrainingStatistics) {
  TabularDataOptions o;
  o.train = Write("t.csv", "a,b,label,c\n1,10,x,5\n3,10,y,5\n5,10,x,5\n");
  o.validation = Write("v.jsonl", "{\"a\": 3, \"b\": 12, \"c\": 5, \"label\": \"y\"}\n");
  auto d = LoadTabularDataset(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->features, (std::vector<std::string>{"a", "b", "c"}));  // every column but the label
  EXPECT_EQ(d->labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(d->train_y, (std::vector<int64_t>{0, 1, 0}));
  // a: mean 3, population sd sqrt(8/3); b and c are constant: centred only.
  const float sd = std::sqrt(8.0f / 3.0f);
  ASSERT_EQ(d->train_x.size(), 9u);
  EXPECT_FLOAT_EQ(d->train_x[0], -2.0f / sd);
  EXPECT_FLOAT_EQ(d->train_x[1], 0.0f);
  EXPECT_FLOAT_EQ(d->train_x[3], 0.0f);
  EXPECT_FLOAT_EQ(d->train_x[6], 2.0f / sd);
  EXPECT_EQ(d->validation_x, (std::vector<float>{0.0f, 2.0f, 0.0f}));
  o.feature_columns = {"c", "a"};
  d = LoadTabularDataset(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->features, (std::vector<std::string>{"c", "a"}));
  EXPECT_FLOAT_EQ(d->validation_x[1], 0.0f);
}

TEST_F(TextDataTest, TabularErrors) {
  TabularDataOptions o;
  o.train = Write("t.csv", "a,label\n1,x\nn/a,y\n");
  auto d = LoadTabularDataset(o);
  ASSERT_FALSE(d.ok());
  EXPECT_HAS(d.status().message(), "t.csv:3: feature 'a' must be a finite number, got \"n/a\"");
  o.train = Write("t2.csv", "a,label\n1,x\n2,y\n");
  o.feature_columns = {"b"};
  d = LoadTabularDataset(o);
  EXPECT_HAS(d.status().message(), "t2.csv: no column 'b' in the header");
  o.train = Write("t3.csv", "label\nx\ny\n");
  o.feature_columns = {};
  d = LoadTabularDataset(o);
  EXPECT_HAS(d.status().message(), "t3.csv: no feature columns besides the label 'label'");
}

}  // namespace
}  // namespace tune

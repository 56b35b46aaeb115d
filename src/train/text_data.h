// Training data for the train objective [tune_train]: JSONL / CSV / TSV tables, and the text and
// tabular classification data sets read from them (plain C++, no LibTorch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"
#include "train/targets.h"
#include "train/trainer.h"
#include "tune/json.h"
#include "tune/status.h"

namespace tune {

// One record of a table: its fields (JSON scalars; CSV fields are strings) and its first line.
struct DataRow {
  int64_t line = 0;
  Json fields = Json::object();
};

struct DataTable {
  std::string path;
  std::string format;                // "jsonl", "csv" or "tsv"
  std::vector<std::string> columns;  // the CSV header, or the keys of the first JSONL object
  std::vector<DataRow> rows;
};

// A field's number: a JSON number (not a boolean), or a string that is one whole ("3e1"; CSV
// fields are strings); nullopt otherwise. Not necessarily finite ("inf").
std::optional<double> FieldNumber(const Json& value);

// "jsonl", "csv" or "tsv": `format` itself, or for "auto" by the path's extension (.jsonl, .json,
// .ndjson; .csv; .tsv, .tab). InvalidArgument for an unknown format or extension.
Result<std::string> DataFormatFor(const std::string& path, const std::string& format);
// Reads a whole table. `format`: "auto", "jsonl", "csv" or "tsv" (DataFormatFor). JSONL: one JSON
// object per line, blank lines skipped. CSV / TSV: RFC 4180, a header row naming the columns,
// quoted fields may hold the separator, "" and newlines. A UTF-8 byte order mark at the start is
// skipped. NotFound for a missing file; InvalidArgument, naming the file and line (and for bytes
// the column), for an empty file or one without records, invalid UTF-8 ("train.csv:12:40:
// invalid UTF-8 (byte 0xff)"), a line that is not a JSON object, a CSV row with the wrong number
// of fields or an unterminated quote.
Result<DataTable> ReadDataTable(const std::string& path, const std::string& format = "auto");
// The table in `content`, the bytes of the file `path` (which names it in errors): what
// ReadDataTable does once the file is read.
Result<DataTable> ParseDataTable(std::string content, const std::string& path,
                                 const std::string& format = "auto");

struct TextDataOptions {
  std::string train;                      // path of the training data
  std::optional<std::string> validation;  // path; unset: validation_fraction of `train`
  std::string format = "auto";            // "auto" (by extension), "jsonl", "csv" or "tsv"
  std::string text_column = "text";
  // Sentence pairs: the column of each example's second text (Hugging Face's text_pair), joined
  // to the first as its tokenizer's family joins pairs ([CLS] a [SEP] b [SEP]); unset: single
  // texts. An empty text on either side is an error.
  std::optional<std::string> text_pair_column;
  // How a pair is cut to a trial's max_length (batching.h's PairKeep).
  Truncation truncation = Truncation::kLongestFirst;
  std::string label_column = "label";
  // What the label column holds (targets.h): one label (single-label); a list of labels, a JSON
  // array or a string of labels separated by label_separator, possibly empty (multi-label); a
  // number, or a string that is one whole (regression).
  ProblemType problem_type = ProblemType::kSingleLabel;
  std::string label_separator = ",";
  // The labels in class-index order. Empty: the labels found in the training data, sorted
  // (numerically when all are integers). Regression has none.
  std::vector<std::string> labels;
  // The loss's class weights ("balanced" or one per label; targets.h's ClassWeights).
  ClassWeightsOption class_weights;
  // Without a validation file: this share of the training rows, chosen with split_seed, is
  // held out for validation.
  double validation_fraction = 0.2;
  uint64_t split_seed = 0;
  // A longer text is an error (most likely the wrong column or file). Longer token sequences are
  // truncated to max_length later; that is not an error.
  int64_t max_text_bytes = 1 << 20;
};

struct TextExample {
  std::string text;
  int64_t label = 0;               // single-label: index into TextDataset::labels
  std::string text_pair;           // the second text of a pair (TextDataset::pairs)
  std::vector<int64_t> label_set;  // multi-label: indices into TextDataset::labels, ascending
  double target = 0.0;             // regression
};

struct TextDataset {
  ProblemType problem_type = ProblemType::kSingleLabel;
  std::vector<std::string> labels;   // empty for regression
  std::vector<float> class_weights;  // the loss's (TextTrainData::class_weights); empty: none
  // Set for sentence pairs (text_pair_column): how they are cut.
  std::optional<Truncation> pair_truncation;
  std::vector<TextExample> train;
  std::vector<TextExample> validation;
  std::string train_source;       // "train.jsonl"
  std::string validation_source;  // "validation.jsonl" or "20% of train.jsonl (split_seed 0)"
};

// Reads and checks a text classification data set; the class weights are computed from the
// training split. Errors: those of ReadDataTable, and InvalidArgument naming the file and line
// for a missing column (with the closest column name), a text that is not a string or is longer
// than max_text_bytes, a missing label, a label outside `labels`, a validation label that never
// occurs in training, a multi-label list that is not a list of labels, a regression target that
// is not a finite number.
Result<TextDataset> LoadTextDataset(const TextDataOptions& options);

// The label column of `row` read as options.problem_type says (label_column, label_separator),
// into `example`'s label, label_set or target; `labels`: the label names in class order. The
// errors of LoadTextDataset (`tune predict` reads labelled data with it).
Status ReadExampleTarget(const DataTable& table, const DataRow& row, const TextDataOptions& options,
                         const std::vector<std::string>& labels, TextExample& example);

// Every text of `dataset` tokenized by `tokenizer` as the trainer reads it: cut to `max_length`
// tokens with the special tokens; the label names, vocabulary size and special ids from the
// tokenizer. `counts`: the training texts' tokens before the cut (at most one past it). The
// train objective tokenizes its data set with it, and `tune predict` the texts it labels. Pairs:
// both texts, each cut to max_length - 2, with their counts before the cut (TextTrainData::pair),
// joined as the tokenizer's family joins them (Tokenizer::PairSeparators).
struct TrainTokenCounts {
  int64_t tokens = 0;   // in all training texts
  int64_t longest = 0;  // in the longest
};
TextTrainData TokenizeTextDataset(const TextDataset& dataset, const Tokenizer& tokenizer,
                                  int64_t max_length, TrainTokenCounts* counts = nullptr);

// A tabular classification data set: numeric feature columns and a label column.
struct TabularDataOptions {
  std::string train;
  std::optional<std::string> validation;
  std::string format = "auto";
  std::string label_column = "label";
  // The feature columns; empty: every column but the label (the CSV header's order, or the
  // keys of the first JSONL object).
  std::vector<std::string> feature_columns;
  std::vector<std::string> labels;  // as in TextDataOptions
  double validation_fraction = 0.2;
  uint64_t split_seed = 0;
};

struct TabularDataset {
  std::vector<std::string> labels;
  std::vector<std::string> features;
  // Row-major [rows x features], standardized with the training rows' mean and standard
  // deviation (a constant feature is only centred).
  std::vector<float> train_x;
  std::vector<int64_t> train_y;
  std::vector<float> validation_x;
  std::vector<int64_t> validation_y;
  std::vector<float> mean, stddev;  // per feature, of the training rows before standardizing
  std::string train_source, validation_source;
};

// Reads and checks a tabular data set. Features must be finite numbers (JSON numbers, or CSV
// fields that parse as numbers whole): "train.csv:7: feature 'age' must be a finite number, got
// \"n/a\"".
Result<TabularDataset> LoadTabularDataset(const TabularDataOptions& options);

}  // namespace tune

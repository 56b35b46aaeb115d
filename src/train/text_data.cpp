#include "train/text_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "tokenizers/tokenizer.h"
#include "train/batching.h"
#include "util/text.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFoundError(fmt::format("{}: no such file", path));
  if (fs::is_directory(path, ec)) {
    return InvalidArgumentError(fmt::format("{}: is a directory, not a data file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open the file", path));
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// line:column (1-based) of byte `offset`.
std::pair<int64_t, int64_t> LineColumn(const std::string& text, size_t offset) {
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int64_t>(offset - line_start) + 1};
}

Status CheckUtf8(const std::string& path, const std::string& content) {
  size_t bad = internal::FindInvalidUtf8(content);
  if (bad == std::string::npos) return Status::Ok();
  auto [line, col] = LineColumn(content, bad);
  return InvalidArgumentError(
      fmt::format("{}:{}:{}: invalid UTF-8 (byte 0x{:02x}); the data "
                  "must be UTF-8 text",
                  path, line, col, static_cast<unsigned char>(content[bad])));
}

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

Status ReadJsonl(const std::string& content, DataTable& table) {
  size_t start = 0;
  int64_t line_no = 0;
  while (start <= content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    std::string_view line(content.data() + start, end - start);
    start = end + 1;
    if (IsBlank(line)) {
      if (end == content.size()) break;
      continue;
    }
    Json value;
    try {
      value = Json::parse(line);
    } catch (const Json::parse_error& e) {
      return InvalidArgumentError(fmt::format("{}:{}:{}: invalid JSON: {}", table.path, line_no,
                                              LineColumnAt(line, e.byte).column,
                                              JsonSyntaxMessage(e.what())));
    } catch (const Json::exception& e) {  // a number past double's range (1e400)
      return InvalidArgumentError(
          fmt::format("{}:{}: invalid JSON: {}", table.path, line_no, JsonSyntaxMessage(e.what())));
    }
    if (!value.is_object()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: expected a JSON object per line, got {}", table.path, line_no,
                      value.is_array() ? "an array" : "a " + std::string(value.type_name())));
    }
    if (table.rows.empty()) {
      for (const auto& [k, v] : value.items()) table.columns.push_back(k);
    }
    table.rows.push_back(DataRow{line_no, std::move(value)});
    if (end == content.size()) break;
  }
  return Status::Ok();
}

Status ReadDelimited(const std::string& content, char sep, DataTable& table) {
  std::vector<std::string> fields;
  std::string field;
  bool in_quotes = false, row_has_content = false;
  int64_t line = 1, row_line = 1, quote_line = 0;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> row_lines;
  auto end_field = [&] {
    fields.push_back(std::move(field));
    field.clear();
  };
  auto end_row = [&] {
    end_field();
    if (row_has_content) {
      rows.push_back(std::move(fields));
      row_lines.push_back(row_line);
    }
    fields.clear();
    row_has_content = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    char c = content[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < content.size() && content[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (!row_has_content && c != '\n' && c != '\r') {
      row_has_content = true;
      row_line = line;
    }
    if (c == '"' && field.empty()) {
      in_quotes = true;
      quote_line = line;
    } else if (c == sep) {
      end_field();
    } else if (c == '\r') {
      if (i + 1 < content.size() && content[i + 1] == '\n') continue;
      end_row();
      ++line;
    } else if (c == '\n') {
      end_row();
      ++line;
    } else {
      field.push_back(c);
    }
  }
  if (in_quotes) {
    return InvalidArgumentError(
        fmt::format("{}:{}: unterminated quoted field (the quote opened "
                    "on line {} is never closed)",
                    table.path, quote_line, quote_line));
  }
  end_row();
  if (rows.empty()) return Status::Ok();
  table.columns = rows[0];
  std::set<std::string> seen;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    if (!seen.insert(table.columns[c]).second) {
      return InvalidArgumentError(fmt::format("{}:{}: the header names column '{}' twice",
                                              table.path, row_lines[0], table.columns[c]));
    }
  }
  if (rows.size() == 1) {
    return InvalidArgumentError(fmt::format("{}: no records (only the header row '{}')", table.path,
                                            JoinNames(rows[0], ",")));
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != table.columns.size()) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: {} field{}, but the header has {} column{} (quote fields that contain '{}')",
          table.path, row_lines[r], rows[r].size(), rows[r].size() == 1 ? "" : "s",
          table.columns.size(), table.columns.size() == 1 ? "" : "s",
          sep == '\t' ? "\\t" : std::string(1, sep)));
    }
    DataRow row;
    row.line = row_lines[r];
    for (size_t c = 0; c < rows[r].size(); ++c)
      row.fields[table.columns[c]] = std::move(rows[r][c]);
    table.rows.push_back(std::move(row));
  }
  return Status::Ok();
}

// The field `column` of `row`, or an error naming the file, line and the closest column.
Result<const Json*> Field(const DataTable& table, const DataRow& row, const std::string& column) {
  auto it = row.fields.find(column);
  if (it != row.fields.end()) return &*it;
  std::vector<std::string> keys;
  for (const auto& [k, v] : row.fields.items()) keys.push_back(k);
  if (table.format == "jsonl") {
    return InvalidArgumentError(fmt::format("{}:{}: no key '{}'{}; keys: {}", table.path, row.line,
                                            column, DidYouMean(column, keys), JoinNames(keys)));
  }
  return InvalidArgumentError(fmt::format("{}: no column '{}' in the header{}; columns: {}",
                                          table.path, column, DidYouMean(column, keys),
                                          JoinNames(keys)));
}

Result<std::string> TextField(const DataTable& table, const DataRow& row, const std::string& column,
                              int64_t max_bytes) {
  TUNE_ASSIGN_OR_RETURN(const Json* v, Field(table, row, column));
  if (!v->is_string()) {
    std::string text = v->dump();
    text = Abbreviate(text, 40);
    return InvalidArgumentError(
        fmt::format("{}:{}: '{}' must be a string, got {}", table.path, row.line, column, text));
  }
  const auto& s = v->get_ref<const std::string&>();
  if (static_cast<int64_t>(s.size()) > max_bytes) {
    return InvalidArgumentError(fmt::format(
        "{}:{}: '{}' is {} bytes long, more than max_text_bytes ({}); is this the right column?",
        table.path, row.line, column, s.size(), max_bytes));
  }
  return s;
}

Result<std::string> LabelField(const DataTable& table, const DataRow& row,
                               const std::string& column) {
  TUNE_ASSIGN_OR_RETURN(const Json* v, Field(table, row, column));
  std::string label;
  if (v->is_string()) {
    label = v->get<std::string>();
  } else if (v->is_number_integer() || v->is_boolean()) {
    label = v->dump();
  } else if (v->is_null()) {
    return InvalidArgumentError(
        fmt::format("{}:{}: the label '{}' is null", table.path, row.line, column));
  } else {
    return InvalidArgumentError(
        fmt::format("{}:{}: the label '{}' must be a string or an integer, "
                    "got {}",
                    table.path, row.line, column, v->dump()));
  }
  if (label.empty()) {
    return InvalidArgumentError(
        fmt::format("{}:{}: the label '{}' is empty", table.path, row.line, column));
  }
  return label;
}

// A multi-label example's labels: a JSON array of labels, or a string of labels separated by
// `separator` (white space around each trimmed); [] or "" is an example without labels.
Result<std::vector<std::string>> LabelListField(const DataTable& table, const DataRow& row,
                                                const std::string& column,
                                                const std::string& separator) {
  TUNE_ASSIGN_OR_RETURN(const Json* v, Field(table, row, column));
  std::vector<std::string> out;
  if (v->is_array()) {
    for (const Json& e : *v) {
      if (!(e.is_string() || e.is_number_integer()) ||
          (e.is_string() && e.get_ref<const std::string&>().empty())) {
        return InvalidArgumentError(fmt::format(
            "{}:{}: '{}' holds {}; a multi-label example's labels are strings or integers",
            table.path, row.line, column, Abbreviate(e.dump(), 40)));
      }
      out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    }
  } else if (v->is_string()) {
    const std::string& text = v->get_ref<const std::string&>();
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = separator.empty() ? std::string::npos : text.find(separator, start);
      if (end == std::string::npos) end = text.size();
      std::string piece = text.substr(start, end - start);
      const size_t first = piece.find_first_not_of(" \t");
      piece = first == std::string::npos
                  ? std::string()
                  : piece.substr(first, piece.find_last_not_of(" \t") - first + 1);
      if (!piece.empty()) out.push_back(std::move(piece));
      start = end + separator.size();
      if (end == text.size()) break;
    }
  } else {
    return InvalidArgumentError(fmt::format(
        "{}:{}: '{}' must be a list of labels (a JSON array, or a string of labels separated by "
        "'{}'), got {} (problem_type multi_label_classification)",
        table.path, row.line, column, separator, Abbreviate(v->dump(), 40)));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// A regression target: a JSON number, or a string that is one whole; finite.
Result<double> TargetField(const DataTable& table, const DataRow& row, const std::string& column) {
  TUNE_ASSIGN_OR_RETURN(const Json* v, Field(table, row, column));
  const double x = FieldNumber(*v).value_or(NAN);
  if (!std::isfinite(x)) {
    return InvalidArgumentError(
        fmt::format("{}:{}: the target '{}' must be a finite number (problem_type regression), "
                    "got {}",
                    table.path, row.line, column, Abbreviate(v->dump(), 40)));
  }
  return x;
}

bool ParseInteger(const std::string& s, int64_t& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

// The label set: configured, or the training data's labels sorted (numerically when all are
// integers).
struct LabelSet {
  std::vector<std::string> names;
  std::map<std::string, int64_t> ids;
  bool from_train = true;
};

Result<LabelSet> MakeLabelSet(const DataTable& train, const std::string& column,
                              const std::vector<std::string>& configured,
                              ProblemType type = ProblemType::kSingleLabel,
                              const std::string& separator = ",") {
  LabelSet set;
  if (type == ProblemType::kRegression) {
    if (!configured.empty()) {
      return InvalidArgumentError(
          "'labels' does not apply to problem_type regression (its targets are numbers)");
    }
    set.from_train = false;
    return set;
  }
  set.from_train = configured.empty();
  if (!set.from_train) {
    for (const auto& l : configured) {
      if (!set.ids.emplace(l, static_cast<int64_t>(set.ids.size())).second) {
        return InvalidArgumentError(fmt::format("the label '{}' is listed twice", l));
      }
    }
    set.names = configured;
    return set;
  }
  std::set<std::string> seen;
  for (const DataRow& row : train.rows) {
    if (type == ProblemType::kMultiLabel) {
      TUNE_ASSIGN_OR_RETURN(auto labels, LabelListField(train, row, column, separator));
      seen.insert(labels.begin(), labels.end());
      continue;
    }
    TUNE_ASSIGN_OR_RETURN(std::string label, LabelField(train, row, column));
    seen.insert(label);
  }
  set.names.assign(seen.begin(), seen.end());
  bool all_int = true;
  for (const auto& l : set.names) {
    int64_t v;
    all_int = all_int && ParseInteger(l, v);
  }
  if (all_int) {
    std::sort(set.names.begin(), set.names.end(), [](const std::string& a, const std::string& b) {
      int64_t x = 0, y = 0;
      ParseInteger(a, x);
      ParseInteger(b, y);
      return x < y;
    });
  }
  for (const auto& l : set.names) set.ids.emplace(l, static_cast<int64_t>(set.ids.size()));
  return set;
}

// The index of `label`, read from `row`, or an error naming the closest label.
Result<int64_t> IndexOfLabel(const DataTable& table, const DataRow& row, const std::string& label,
                             const LabelSet& set) {
  auto it = set.ids.find(label);
  if (it != set.ids.end()) return it->second;
  const auto& names = set.names;
  std::string shown = JoinNames(std::vector<std::string>(
      names.begin(),
      names.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(names.size(), 20))));
  if (names.size() > 20) shown += ", ...";
  return InvalidArgumentError(fmt::format(
      "{}:{}: unknown label '{}'{}; {}: {}", table.path, row.line, label, DidYouMean(label, names),
      set.from_train ? "it does not occur in the training data, whose labels are"
                     : "the configured labels are",
      shown));
}

Result<int64_t> LabelIndex(const DataTable& table, const DataRow& row, const std::string& column,
                           const LabelSet& set) {
  TUNE_ASSIGN_OR_RETURN(std::string label, LabelField(table, row, column));
  return IndexOfLabel(table, row, label, set);
}

// The label column of `row` read as `o.problem_type` says, into `example`.
Status ReadTarget(const DataTable& table, const DataRow& row, const TextDataOptions& o,
                  const LabelSet& labels, TextExample& example) {
  switch (o.problem_type) {
    case ProblemType::kSingleLabel: {
      TUNE_ASSIGN_OR_RETURN(example.label, LabelIndex(table, row, o.label_column, labels));
      return Status::Ok();
    }
    case ProblemType::kMultiLabel: {
      TUNE_ASSIGN_OR_RETURN(auto names,
                            LabelListField(table, row, o.label_column, o.label_separator));
      example.label_set.clear();
      for (const std::string& name : names) {
        TUNE_ASSIGN_OR_RETURN(int64_t index, IndexOfLabel(table, row, name, labels));
        example.label_set.push_back(index);
      }
      std::sort(example.label_set.begin(), example.label_set.end());
      return Status::Ok();
    }
    case ProblemType::kRegression: {
      TUNE_ASSIGN_OR_RETURN(example.target, TargetField(table, row, o.label_column));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status CheckTwoLabels(const LabelSet& set, const std::string& train,
                      ProblemType type = ProblemType::kSingleLabel) {
  if (type == ProblemType::kRegression) return Status::Ok();
  if (type == ProblemType::kMultiLabel) {
    if (!set.names.empty()) return Status::Ok();
    return InvalidArgumentError(
        fmt::format("{}: no example has a label (problem_type multi_label_classification)", train));
  }
  if (set.names.size() >= 2) return Status::Ok();
  return InvalidArgumentError(
      fmt::format("{}: only one label ('{}'); a classifier needs at least two", train,
                  set.names.empty() ? "" : set.names[0]));
}

// Which of n training rows are held out for validation.
Result<std::vector<bool>> ValidationMask(size_t n, double fraction, uint64_t seed,
                                         const std::string& train) {
  if (n < 2) {
    return InvalidArgumentError(fmt::format(
        "{}: {} record; a validation split needs at least two (or give a validation file)", train,
        n));
  }
  auto n_val = static_cast<size_t>(std::llround(static_cast<double>(n) * fraction));
  n_val = std::clamp<size_t>(n_val, 1, n - 1);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  DeterministicShuffle(order, rng);
  std::vector<bool> is_val(n, false);
  for (size_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(order[i])] = true;
  return is_val;
}

std::string HeldOutSource(size_t n_val, const std::string& train, double fraction, uint64_t seed) {
  return fmt::format("{} of {} held out (validation_fraction {}, split_seed {})", n_val, train,
                     fraction, seed);
}

Result<std::vector<TextExample>> ReadExamples(const DataTable& table, const TextDataOptions& o,
                                              const LabelSet& labels) {
  std::vector<TextExample> out;
  out.reserve(table.rows.size());
  for (const DataRow& row : table.rows) {
    TUNE_ASSIGN_OR_RETURN(std::string text, TextField(table, row, o.text_column, o.max_text_bytes));
    std::string pair;
    if (o.text_pair_column) {
      TUNE_ASSIGN_OR_RETURN(pair, TextField(table, row, *o.text_pair_column, o.max_text_bytes));
      for (const auto* side : {&o.text_column, &*o.text_pair_column}) {
        const std::string& t = side == &o.text_column ? text : pair;
        if (t.find_first_not_of(" \t\r\n") == std::string::npos) {
          return InvalidArgumentError(
              fmt::format("{}:{}: '{}' is {}: each example of a pair ('{}', '{}') needs both texts",
                          table.path, row.line, *side, t.empty() ? "empty" : "only white space",
                          o.text_column, *o.text_pair_column));
        }
      }
    }
    TextExample example{std::move(text), 0, std::move(pair)};
    TUNE_RETURN_IF_ERROR(ReadTarget(table, row, o, labels, example));
    out.push_back(std::move(example));
  }
  return out;
}

// One row's features: numbers, or strings that parse as numbers.
Status ReadFeatures(const DataTable& table, const DataRow& row,
                    const std::vector<std::string>& columns, std::vector<float>& out) {
  for (const auto& column : columns) {
    TUNE_ASSIGN_OR_RETURN(const Json* v, Field(table, row, column));
    const double x = FieldNumber(*v).value_or(NAN);
    if (!std::isfinite(x)) {
      std::string shown = v->dump();
      shown = Abbreviate(shown, 40);
      return InvalidArgumentError(fmt::format("{}:{}: feature '{}' must be a finite number, got {}",
                                              table.path, row.line, column, shown));
    }
    out.push_back(static_cast<float>(x));
  }
  return Status::Ok();
}

}  // namespace

std::optional<double> FieldNumber(const Json& value) {
  if (value.is_number() && !value.is_boolean()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string& s = value.get_ref<const std::string&>();
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != s.size()) return std::nullopt;
  return x;
}

Result<std::string> DataFormatFor(const std::string& path, const std::string& format) {
  if (format == "jsonl" || format == "csv" || format == "tsv") return format;
  if (format != "auto") {
    return InvalidArgumentError(
        fmt::format("unknown data format '{}'{}; valid: auto, jsonl, csv, tsv", format,
                    DidYouMean(format, {"auto", "jsonl", "csv", "tsv"})));
  }
  std::string ext = Lower(fs::path(path).extension().string());
  if (ext == ".jsonl" || ext == ".json" || ext == ".ndjson") return std::string("jsonl");
  if (ext == ".csv") return std::string("csv");
  if (ext == ".tsv" || ext == ".tab") return std::string("tsv");
  return InvalidArgumentError(fmt::format(
      "{}: cannot tell the format from the extension '{}'; name it .jsonl, .csv or .tsv, or set "
      "\"format\"",
      path, ext));
}

Result<DataTable> ReadDataTable(const std::string& path, const std::string& format) {
  TUNE_RETURN_IF_ERROR(DataFormatFor(path, format).status());
  TUNE_ASSIGN_OR_RETURN(std::string content, ReadWholeFile(path));
  return ParseDataTable(std::move(content), path, format);
}

Result<DataTable> ParseDataTable(std::string content, const std::string& path,
                                 const std::string& format) {
  DataTable table;
  table.path = path;
  TUNE_ASSIGN_OR_RETURN(table.format, DataFormatFor(path, format));
  if (content.compare(0, 3, "\xEF\xBB\xBF") == 0) content.erase(0, 3);
  if (std::all_of(content.begin(), content.end(),
                  [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; })) {
    return InvalidArgumentError(fmt::format("{}: the file is empty", path));
  }
  TUNE_RETURN_IF_ERROR(CheckUtf8(path, content));
  if (table.format == "jsonl") {
    TUNE_RETURN_IF_ERROR(ReadJsonl(content, table));
  } else {
    TUNE_RETURN_IF_ERROR(ReadDelimited(content, table.format == "csv" ? ',' : '\t', table));
  }
  if (table.rows.empty()) return InvalidArgumentError(fmt::format("{}: no records", path));
  return table;
}

namespace {

// The training split's class weights (TextDataOptions::class_weights), logged by the caller.
Status AddClassWeights(const TextDataOptions& o, TextDataset& data) {
  std::vector<int64_t> counts(data.labels.size(), 0);
  for (const TextExample& e : data.train) {
    if (o.problem_type == ProblemType::kMultiLabel) {
      for (int64_t c : e.label_set) ++counts[static_cast<size_t>(c)];
    } else if (o.problem_type == ProblemType::kSingleLabel) {
      ++counts[static_cast<size_t>(e.label)];
    }
  }
  auto weights = ClassWeights(o.class_weights, o.problem_type, counts,
                              static_cast<int64_t>(data.train.size()), data.labels);
  if (!weights.ok()) {
    return InvalidArgumentError(fmt::format("{}: {}", o.train, weights.status().message()));
  }
  data.class_weights = std::move(weights).value();
  return Status::Ok();
}

}  // namespace

Status ReadExampleTarget(const DataTable& table, const DataRow& row, const TextDataOptions& options,
                         const std::vector<std::string>& labels, TextExample& example) {
  LabelSet set;
  set.from_train = false;
  set.names = labels;
  for (const auto& l : labels) set.ids.emplace(l, static_cast<int64_t>(set.ids.size()));
  return ReadTarget(table, row, options, set, example);
}

Result<TextDataset> LoadTextDataset(const TextDataOptions& o) {
  TextDataset data;
  data.problem_type = o.problem_type;
  TUNE_ASSIGN_OR_RETURN(DataTable train, ReadDataTable(o.train, o.format));
  data.train_source = o.train;
  TUNE_ASSIGN_OR_RETURN(LabelSet labels, MakeLabelSet(train, o.label_column, o.labels,
                                                      o.problem_type, o.label_separator));
  data.labels = labels.names;
  TUNE_ASSIGN_OR_RETURN(data.train, ReadExamples(train, o, labels));
  TUNE_RETURN_IF_ERROR(CheckTwoLabels(labels, o.train, o.problem_type));
  if (o.text_pair_column) data.pair_truncation = o.truncation;
  if (o.validation) {
    TUNE_ASSIGN_OR_RETURN(DataTable val, ReadDataTable(*o.validation, o.format));
    TUNE_ASSIGN_OR_RETURN(data.validation, ReadExamples(val, o, labels));
    data.validation_source = *o.validation;
    TUNE_RETURN_IF_ERROR(AddClassWeights(o, data));
    return data;
  }
  TUNE_ASSIGN_OR_RETURN(
      std::vector<bool> is_val,
      ValidationMask(data.train.size(), o.validation_fraction, o.split_seed, o.train));
  std::vector<TextExample> train_part, val_part;
  for (size_t i = 0; i < is_val.size(); ++i) {
    (is_val[i] ? val_part : train_part).push_back(std::move(data.train[i]));
  }
  data.train = std::move(train_part);
  data.validation = std::move(val_part);
  data.validation_source =
      HeldOutSource(data.validation.size(), o.train, o.validation_fraction, o.split_seed);
  TUNE_RETURN_IF_ERROR(AddClassWeights(o, data));
  return data;
}

Result<TabularDataset> LoadTabularDataset(const TabularDataOptions& o) {
  TabularDataset data;
  TUNE_ASSIGN_OR_RETURN(DataTable train, ReadDataTable(o.train, o.format));
  data.train_source = o.train;
  data.features = o.feature_columns;
  if (data.features.empty()) {
    for (const auto& c : train.columns) {
      if (c != o.label_column) data.features.push_back(c);
    }
    if (data.features.empty()) {
      return InvalidArgumentError(
          fmt::format("{}: no feature columns besides the label '{}'", o.train, o.label_column));
    }
  }
  TUNE_ASSIGN_OR_RETURN(LabelSet labels, MakeLabelSet(train, o.label_column, o.labels));
  data.labels = labels.names;
  auto read = [&](const DataTable& table, std::vector<float>& x,
                  std::vector<int64_t>& y) -> Status {
    for (const DataRow& row : table.rows) {
      TUNE_RETURN_IF_ERROR(ReadFeatures(table, row, data.features, x));
      TUNE_ASSIGN_OR_RETURN(int64_t label, LabelIndex(table, row, o.label_column, labels));
      y.push_back(label);
    }
    return Status::Ok();
  };
  TUNE_RETURN_IF_ERROR(read(train, data.train_x, data.train_y));
  TUNE_RETURN_IF_ERROR(CheckTwoLabels(labels, o.train));
  const size_t f = data.features.size();
  if (o.validation) {
    TUNE_ASSIGN_OR_RETURN(DataTable val, ReadDataTable(*o.validation, o.format));
    TUNE_RETURN_IF_ERROR(read(val, data.validation_x, data.validation_y));
    data.validation_source = *o.validation;
  } else {
    TUNE_ASSIGN_OR_RETURN(
        std::vector<bool> is_val,
        ValidationMask(data.train_y.size(), o.validation_fraction, o.split_seed, o.train));
    std::vector<float> tx;
    std::vector<int64_t> ty;
    for (size_t i = 0; i < is_val.size(); ++i) {
      auto row = data.train_x.begin() + static_cast<std::ptrdiff_t>(i * f);
      if (is_val[i]) {
        data.validation_x.insert(data.validation_x.end(), row,
                                 row + static_cast<std::ptrdiff_t>(f));
        data.validation_y.push_back(data.train_y[i]);
      } else {
        tx.insert(tx.end(), row, row + static_cast<std::ptrdiff_t>(f));
        ty.push_back(data.train_y[i]);
      }
    }
    data.train_x = std::move(tx);
    data.train_y = std::move(ty);
    data.validation_source =
        HeldOutSource(data.validation_y.size(), o.train, o.validation_fraction, o.split_seed);
  }
  // Standardize with the training statistics (a constant feature is only centred).
  data.mean.assign(f, 0.0f);
  data.stddev.assign(f, 1.0f);
  const size_t n = data.train_y.size();
  for (size_t j = 0; j < f; ++j) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) sum += data.train_x[i * f + j];
    const double mean = sum / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i)
      sq += (data.train_x[i * f + j] - mean) * (data.train_x[i * f + j] - mean);
    const double sd = std::sqrt(sq / static_cast<double>(n));
    data.mean[j] = static_cast<float>(mean);
    data.stddev[j] = sd > 1e-12 ? static_cast<float>(sd) : 1.0f;
  }
  for (auto* x : {&data.train_x, &data.validation_x}) {
    for (size_t k = 0; k < x->size(); ++k)
      (*x)[k] = ((*x)[k] - data.mean[k % f]) / data.stddev[k % f];
  }
  return data;
}

namespace {

// An example's target as the trainer reads it: its class index (single-label), its row of 0/1
// per label (multi-label) or its value (regression).
void AddTarget(const TextExample& e, ProblemType type, size_t num_labels,
               std::vector<int64_t>& labels, std::vector<float>& targets) {
  switch (type) {
    case ProblemType::kSingleLabel:
      labels.push_back(e.label);
      return;
    case ProblemType::kMultiLabel: {
      const size_t start = targets.size();
      targets.resize(start + num_labels, 0.0f);
      for (int64_t c : e.label_set) targets[start + static_cast<size_t>(c)] = 1.0f;
      return;
    }
    case ProblemType::kRegression:
      targets.push_back(static_cast<float>(e.target));
      return;
  }
}

}  // namespace

TextTrainData TokenizeTextDataset(const TextDataset& dataset, const Tokenizer& tokenizer,
                                  int64_t max_length, TrainTokenCounts* counts) {
  TextTrainData data;
  data.problem_type = dataset.problem_type;
  data.class_weights = dataset.class_weights;
  data.num_labels = dataset.problem_type == ProblemType::kRegression
                        ? 1
                        : static_cast<int64_t>(dataset.labels.size());
  data.label_names = dataset.labels;
  data.vocab_size = tokenizer.vocab_size();
  data.pad_id = tokenizer.pad_id();
  data.cls_id = tokenizer.cls_id();
  data.sep_id = tokenizer.sep_id();
  const auto cap = static_cast<size_t>(std::max<int64_t>(max_length - 2, 0));
  const size_t k = dataset.labels.size();
  TrainTokenCounts seen;
  if (dataset.pair_truncation) {
    TextTrainData::Pairs& p = data.pairs.emplace();
    p.layout = PairLayout{tokenizer.PairSeparators(), *dataset.pair_truncation};
    // Both texts whole (the rule that cuts a pair compares their lengths), then cut to the cap.
    auto add = [&](const TextExample& e, std::vector<std::vector<int32_t>>& firsts,
                   std::vector<std::vector<int32_t>>& seconds,
                   std::vector<std::pair<int64_t, int64_t>>& sizes) {
      std::vector<int32_t> a = tokenizer.Encode(e.text), b = tokenizer.Encode(e.text_pair);
      sizes.emplace_back(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()));
      a.resize(std::min(a.size(), cap));
      b.resize(std::min(b.size(), cap));
      firsts.push_back(std::move(a));
      seconds.push_back(std::move(b));
    };
    for (const auto& e : dataset.train) {
      add(e, data.train_ids, p.train_ids, p.train_counts);
      const int64_t n = p.train_counts.back().first + p.train_counts.back().second;
      seen.tokens += n;
      seen.longest = std::max(seen.longest, n);
      AddTarget(e, data.problem_type, k, data.train_labels, data.train_targets);
    }
    for (const auto& e : dataset.validation) {
      add(e, data.validation_ids, p.validation_ids, p.validation_counts);
      AddTarget(e, data.problem_type, k, data.validation_labels, data.validation_targets);
    }
    if (counts != nullptr) *counts = seen;
    return data;
  }
  for (const auto& e : dataset.train) {
    data.train_ids.push_back(tokenizer.Encode(e.text, cap + 1));
    const auto n = static_cast<int64_t>(data.train_ids.back().size());
    seen.tokens += n;
    seen.longest = std::max(seen.longest, n);
    if (data.train_ids.back().size() > cap) data.train_ids.back().resize(cap);
    AddTarget(e, data.problem_type, k, data.train_labels, data.train_targets);
  }
  for (const auto& e : dataset.validation) {
    data.validation_ids.push_back(tokenizer.Encode(e.text, cap));
    AddTarget(e, data.problem_type, k, data.validation_labels, data.validation_targets);
  }
  if (counts != nullptr) *counts = seen;
  return data;
}

}  // namespace tune

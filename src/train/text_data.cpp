#include "tune/train/text_data.h"

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

#include "tune/text.h"
#include "tune/train/batching.h"
#include "tune/train/tokenizer.h"

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
  std::string content = buf.str();
  if (content.compare(0, 3, "\xEF\xBB\xBF") == 0) content.erase(0, 3);
  return content;
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
      std::string what = e.what();
      auto pos = what.find("syntax error");
      return InvalidArgumentError(fmt::format("{}:{}:{}: invalid JSON: {}", table.path, line_no,
                                              std::max<size_t>(e.byte, 1),
                                              pos == std::string::npos ? what : what.substr(pos)));
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
    if (text.size() > 40) text = text.substr(0, 37) + "...";
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

bool ParseInteger(const std::string& s, int64_t& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

Result<std::vector<TextExample>> ReadExamples(const DataTable& table, const TextDataOptions& o,
                                              const std::map<std::string, int64_t>& label_ids,
                                              bool labels_from_train) {
  std::vector<TextExample> out;
  out.reserve(table.rows.size());
  std::vector<std::string> names(label_ids.size());
  for (const auto& [name, id] : label_ids) names[id] = name;
  for (const DataRow& row : table.rows) {
    TUNE_ASSIGN_OR_RETURN(std::string text, TextField(table, row, o.text_column, o.max_text_bytes));
    TUNE_ASSIGN_OR_RETURN(std::string label, LabelField(table, row, o.label_column));
    auto it = label_ids.find(label);
    if (it == label_ids.end()) {
      std::string shown = JoinNames(std::vector<std::string>(
          names.begin(),
          names.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(names.size(), 20))));
      if (names.size() > 20) shown += ", ...";
      return InvalidArgumentError(
          fmt::format("{}:{}: unknown label '{}'{}; {}: {}", table.path, row.line, label,
                      DidYouMean(label, names),
                      labels_from_train ? "it does not occur in the training data, whose labels are"
                                        : "the configured labels are",
                      shown));
    }
    out.push_back(TextExample{std::move(text), it->second});
  }
  return out;
}

}  // namespace

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
  DataTable table;
  table.path = path;
  TUNE_ASSIGN_OR_RETURN(table.format, DataFormatFor(path, format));
  TUNE_ASSIGN_OR_RETURN(std::string content, ReadWholeFile(path));
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

Result<TextDataset> LoadTextDataset(const TextDataOptions& o) {
  TextDataset data;
  TUNE_ASSIGN_OR_RETURN(DataTable train, ReadDataTable(o.train, o.format));
  data.train_source = o.train;

  // The label set.
  std::map<std::string, int64_t> label_ids;
  const bool labels_from_train = o.labels.empty();
  if (!labels_from_train) {
    for (const auto& l : o.labels) {
      if (!label_ids.emplace(l, static_cast<int64_t>(label_ids.size())).second) {
        return InvalidArgumentError(fmt::format("the label '{}' is listed twice", l));
      }
    }
    data.labels = o.labels;
  } else {
    std::set<std::string> seen;
    for (const DataRow& row : train.rows) {
      TUNE_ASSIGN_OR_RETURN(std::string label, LabelField(train, row, o.label_column));
      seen.insert(label);
    }
    data.labels.assign(seen.begin(), seen.end());
    bool all_int = true;
    for (const auto& l : data.labels) {
      int64_t v;
      all_int = all_int && ParseInteger(l, v);
    }
    if (all_int) {
      std::sort(data.labels.begin(), data.labels.end(),
                [](const std::string& a, const std::string& b) {
                  int64_t x = 0, y = 0;
                  ParseInteger(a, x);
                  ParseInteger(b, y);
                  return x < y;
                });
    }
    for (const auto& l : data.labels) label_ids.emplace(l, static_cast<int64_t>(label_ids.size()));
  }
  TUNE_ASSIGN_OR_RETURN(data.train, ReadExamples(train, o, label_ids, labels_from_train));
  if (data.labels.size() < 2) {
    return InvalidArgumentError(
        fmt::format("{}: only one label ('{}'); a classifier needs at least two", o.train,
                    data.labels.empty() ? "" : data.labels[0]));
  }

  if (o.validation) {
    TUNE_ASSIGN_OR_RETURN(DataTable val, ReadDataTable(*o.validation, o.format));
    TUNE_ASSIGN_OR_RETURN(data.validation, ReadExamples(val, o, label_ids, labels_from_train));
    data.validation_source = *o.validation;
    return data;
  }
  // Hold out a share of the training rows.
  const size_t n = data.train.size();
  if (n < 2) {
    return InvalidArgumentError(fmt::format(
        "{}: {} record; a validation split needs at least two (or give a validation file)", o.train,
        n));
  }
  auto n_val = static_cast<size_t>(std::llround(static_cast<double>(n) * o.validation_fraction));
  n_val = std::clamp<size_t>(n_val, 1, n - 1);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(o.split_seed);
  DeterministicShuffle(order, rng);
  std::vector<bool> is_val(n, false);
  for (size_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(order[i])] = true;
  std::vector<TextExample> train_part, val_part;
  for (size_t i = 0; i < n; ++i)
    (is_val[i] ? val_part : train_part).push_back(std::move(data.train[i]));
  data.train = std::move(train_part);
  data.validation = std::move(val_part);
  data.validation_source = fmt::format("{} of {} held out (validation_fraction {}, split_seed {})",
                                       n_val, o.train, o.validation_fraction, o.split_seed);
  return data;
}

}  // namespace tune

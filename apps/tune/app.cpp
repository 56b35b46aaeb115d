#include "app.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>

#include "tune/storages/in_memory.h"
#include "tune/storages/postgres.h"
#include "tune/storages/sqlite.h"
#include "util/text.h"

namespace tune::app {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
      return kExitUsage;
    case StatusCode::kCancelled:
      return kExitInterrupted;
    default:
      return kExitFailure;
  }
}

namespace {
double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<double> g_run_started;  // StartRunClock's
}  // namespace

void StartRunClock() {
  const char* text = std::getenv("TUNE_RUN_STARTED");
  g_run_started = text != nullptr ? std::atof(text) : NowSeconds();
}

double RunElapsedSeconds() {
  return g_run_started ? std::max(0.0, NowSeconds() - *g_run_started) : 0.0;
}

int Restarts() {
  const char* text = std::getenv("TUNE_RESTARTS");
  return text != nullptr ? std::max(0, std::atoi(text)) : 0;
}

int Restart(char** argv) {
  const std::string next = std::to_string(Restarts() + 1);
  spdlog::default_logger()->flush();
  std::cout.flush();
  std::cerr.flush();
  setenv("TUNE_RESTARTS", next.c_str(), 1);
  if (g_run_started) setenv("TUNE_RUN_STARTED", fmt::format("{:.3f}", *g_run_started).c_str(), 1);
  execv("/proc/self/exe", argv);
  spdlog::error(
      "Could not start tune afresh (execv /proc/self/exe): {}; run the same command "
      "again to continue the study",
      std::strerror(errno));
  return kExitFailure;
}

namespace {

// spdlog's pattern formatter, its output made valid UTF-8 (ValidUtf8).
class ValidUtf8Formatter final : public spdlog::formatter {
 public:
  explicit ValidUtf8Formatter(std::string pattern)
      : pattern_(std::move(pattern)),
        inner_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    spdlog::memory_buf_t line;
    inner_->format(msg, line);
    const std::string_view text(line.data(), line.size());
    if (ValidUtf8(text).size() == text.size()) {  // the usual case: copied as it is
      dest.append(line.data(), line.data() + line.size());
      return;
    }
    const std::string fixed = ValidUtf8(text);
    dest.append(fixed.data(), fixed.data() + fixed.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<ValidUtf8Formatter>(pattern_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

}  // namespace

void SetLogPattern(const std::string& pattern) {
  spdlog::set_formatter(std::make_unique<ValidUtf8Formatter>(pattern));
}

int Fail(const Status& status) {
  spdlog::error("{}", status.message());
  return ExitCodeFor(status);
}

Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url, StorageAccess access) {
  if (url == "memory" || url == ":memory:") {
    return std::shared_ptr<Storage>(NewInMemoryStorage());
  }
  auto colon = url.find(':');
  std::string scheme = colon == std::string::npos ? url : url.substr(0, colon);
  if (scheme == "sqlite") {
    TUNE_ASSIGN_OR_RETURN(SqliteUrl parsed, ParseSqliteUrl(url));
    parsed.options.read_only = access == StorageAccess::kReadOnly;
    parsed.options.create_if_missing = access == StorageAccess::kReadWrite;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Storage> storage,
                          OpenSqliteStorage(parsed.path, parsed.options));
    return std::shared_ptr<Storage>(std::move(storage));
  }
  // postgresql+psycopg2:// and the like: the driver part is SQLAlchemy's, libpq does the work.
  if (const std::string base = scheme.substr(0, scheme.find('+'));
      base == "postgresql" || base == "postgres") {
    TUNE_ASSIGN_OR_RETURN(PostgresUrl parsed, ParsePostgresUrl(url));
    parsed.options.read_only = access == StorageAccess::kReadOnly;
    parsed.options.create_if_missing = access == StorageAccess::kReadWrite;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Storage> storage, OpenPostgresStorage(parsed));
    return std::shared_ptr<Storage>(std::move(storage));
  }
  const std::vector<std::string> schemes = {"memory", "sqlite", "postgresql"};
  // A URL with user info may carry a password: show only its scheme.
  const std::string shown = url.find('@') == std::string::npos ? url : scheme + "://...";
  return InvalidArgumentError(fmt::format(
      "unknown storage '{}'{}; valid: memory, sqlite:///PATH (relative), sqlite:////PATH "
      "(absolute), postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
      shown, DidYouMean(scheme, schemes)));
}

Result<Json> ParseJsonArgument(const std::string& flag, const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    const TextPosition at = LineColumnAt(text, e.byte);
    return InvalidArgumentError(fmt::format("{}: invalid JSON at line {}, column {}: {}", flag,
                                            at.line, at.column, JsonSyntaxMessage(e.what())));
  } catch (const Json::exception& e) {  // a number past double's range (1e400)
    return InvalidArgumentError(
        fmt::format("{}: invalid JSON: {}", flag, JsonSyntaxMessage(e.what())));
  }
}

Result<StoredStudy> OpenStoredStudy(const std::string& url, const std::string& study,
                                    StorageAccess access) {
  StoredStudy out;
  TUNE_ASSIGN_OR_RETURN(out.storage, OpenStorage(url, access));
  TUNE_ASSIGN_OR_RETURN(out.id, out.storage->GetStudyId(study));
  return out;
}

Result<std::unique_ptr<Study>> LoadStoredStudy(const StoredStudy& opened,
                                               const std::string& study) {
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler, MakeSampler(SamplerConfig{}));
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Pruner> pruner, MakePruner(PrunerConfig{}));
  return Study::Load(opened.storage, study, std::move(sampler), std::move(pruner));
}

Result<StudyRecords> ReadStoredStudy(const std::string& url, const std::string& study,
                                     const std::vector<TrialState>& states) {
  TUNE_ASSIGN_OR_RETURN(StoredStudy opened, OpenStoredStudy(url, study, StorageAccess::kReadOnly));
  StudyRecords out;
  TUNE_ASSIGN_OR_RETURN(out.info, opened.storage->GetStudy(opened.id));
  TUNE_ASSIGN_OR_RETURN(out.trials, opened.storage->GetAllTrials(opened.id, states));
  return out;
}

Result<Format> ParseFormat(const std::string& name) {
  if (name == "table") return Format::kTable;
  if (name == "json") return Format::kJson;
  if (name == "csv") return Format::kCsv;
  return InvalidArgumentError(fmt::format("unknown format '{}'{}; valid: table, json, csv", name,
                                          DidYouMean(name, {"table", "json", "csv"})));
}

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], DisplayWidth(r[i]));
  }
  std::ostringstream out;
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t i = 0; i < rows[k].size(); ++i) {
      out << (i ? "  " : "") << rows[k][i];
      if (i + 1 < rows[k].size()) out << std::string(width[i] - DisplayWidth(rows[k][i]), ' ');
    }
    out << "\n";
    if (k == 0) {
      for (size_t i = 0; i < width.size(); ++i)
        out << (i ? "  " : "") << std::string(width[i], '-');
      out << "\n";
    }
  }
  return out.str();
}

std::string RenderCsv(const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream out;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string& f = r[i];
      if (i) out << ",";
      if (f.find_first_of(",\"\n") != std::string::npos) {
        std::string q;
        for (char c : f) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        out << '"' << q << '"';
      } else {
        out << f;
      }
    }
    out << "\n";
  }
  return out.str();
}

namespace {
Json NumberJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}
}  // namespace

Json TrialToJson(const FrozenTrial& t) {
  Json j;
  j["number"] = t.number;
  j["state"] = TrialStateName(t.state);
  Json values = Json::array();
  for (double v : t.values) values.push_back(NumberJson(v));
  j["values"] = values;
  j["value"] = t.values.size() == 1 ? NumberJson(t.values[0]) : Json(nullptr);
  j["params"] = t.ExternalParams();
  Json iv = Json::object();
  for (const auto& [step, v] : t.intermediate_values) iv[std::to_string(step)] = NumberJson(v);
  j["intermediate_values"] = iv;
  j["user_attrs"] = t.user_attrs;
  j["system_attrs"] = t.system_attrs;
  j["datetime_start"] = t.datetime_start ? Json(FormatDatetime(*t.datetime_start)) : Json(nullptr);
  j["datetime_complete"] =
      t.datetime_complete ? Json(FormatDatetime(*t.datetime_complete)) : Json(nullptr);
  auto d = t.duration_seconds();
  j["duration"] = d ? Json(*d) : Json(nullptr);
  return j;
}

std::string ValueText(const FrozenTrial& t) {
  std::string out;
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (i) out += ",";
    out += fmt::format("{:.6g}", t.values[i]);
  }
  return out;
}

std::string ParamsText(const FrozenTrial& t) {
  std::string out;
  const Json params = t.ExternalParams();
  for (const auto& [name, v] : params.items()) {
    if (!out.empty()) out += " ";
    out += name + "=" +
           (v.is_number_float() ? fmt::format("{:.4g}", v.get<double>())
                                : (v.is_string() ? v.get<std::string>() : v.dump()));
  }
  return out;
}

// Trials as JSON (an array of TrialToJson), or a table/CSV: number, state, value, duration and
// one params_<name> column per parameter any of them has.
void PrintTrials(const std::vector<FrozenTrial>& trials, Format format) {
  if (format == Format::kJson) {
    Json out = Json::array();
    for (const auto& t : trials) out.push_back(TrialToJson(t));
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::vector<std::string> param_names;
  for (const auto& t : trials) {
    for (const auto& [name, v] : t.params) {
      if (std::find(param_names.begin(), param_names.end(), name) == param_names.end()) {
        param_names.push_back(name);
      }
    }
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"number", "state", "value", "duration"};
  for (const auto& n : param_names) header.push_back("params_" + n);
  rows.push_back(header);
  for (const auto& t : trials) {
    auto d = t.duration_seconds();
    std::vector<std::string> row = {std::to_string(t.number), TrialStateName(t.state), ValueText(t),
                                    d ? fmt::format("{:.3f}", *d) : ""};
    Json params = t.ExternalParams();
    for (const auto& n : param_names) {
      row.push_back(!params.contains(n)     ? ""
                    : params[n].is_string() ? params[n].get<std::string>()
                                            : params[n].dump());
    }
    rows.push_back(row);
  }
  std::cout << (format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
}

void PrintBestTrial(const FrozenTrial& best, Format format) {
  if (format == Format::kJson) {
    std::cout << TrialToJson(best).dump(2) << "\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"key", "value"}};
  rows.push_back({"number", std::to_string(best.number)});
  rows.push_back({"value", ValueText(best)});
  const Json params = best.ExternalParams();
  for (const auto& [name, v] : params.items()) {
    rows.push_back({"params_" + name, v.is_string() ? v.get<std::string>() : v.dump()});
  }
  auto d = best.duration_seconds();
  rows.push_back({"duration", d ? fmt::format("{:.3f}s", *d) : ""});
  std::cout << (format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
}

}  // namespace tune::app

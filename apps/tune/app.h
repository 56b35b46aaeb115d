// Shared pieces of the tune command-line app: exit codes, storage URLs, output formats.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/config.h"
#include "tune/status.h"
#include "tune/storages/storage.h"
#include "tune/trial.h"

namespace tune::app {

enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitInterrupted = 130 };

// Usage/config errors (bad input) exit 2; everything else 1.
int ExitCodeFor(const Status& status);
// Logs the error and returns its exit code.
int Fail(const Status& status);

enum class StorageAccess { kReadWrite, kReadOnly, kExisting };
// "memory" (or ":memory:") or "sqlite:///PATH[?schema=REV&timeout=S]" (see docs/cli.md).
// kReadOnly opens an existing file without writing to it (NotFound if it is missing);
// kExisting opens an existing file for writing (NotFound if it is missing).
Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url,
                                             StorageAccess access = StorageAccess::kReadWrite);

enum class Format { kTable, kJson, kCsv };
Result<Format> ParseFormat(const std::string& name);

// Renders rows as an aligned table or CSV (first row = header).
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);
std::string RenderCsv(const std::vector<std::vector<std::string>>& rows);

// Parses a JSON command-line value; InvalidArgument naming `flag`, the line and column of a
// syntax error.
Result<Json> ParseJsonArgument(const std::string& flag, const std::string& text);

// A trial as JSON (number, state, values, params, attributes, times).
Json TrialToJson(const FrozenTrial& t);
// Short text of a value / of params for tables and logs.
std::string ValueText(const FrozenTrial& t);
std::string ParamsText(const FrozenTrial& t);

struct RunArgs {
  std::string study;
  std::optional<std::string> config;
  std::optional<int64_t> n_trials;
  std::optional<double> timeout;
  std::optional<std::string> storage;
  std::optional<std::string> sampler;
  std::optional<int64_t> seed;
  std::optional<double> heartbeat_interval;
  std::optional<double> grace_period;
  std::optional<int64_t> retry_failed;
  std::string format = "table";
};
int RunStudy(const RunArgs& args);

struct ShowArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string format = "table";
  std::vector<std::string> states;
};
int ListStudies(const ShowArgs& args);
int ListTrials(const ShowArgs& args);
int ShowBestTrial(const ShowArgs& args);

struct DeleteStudyArgs {
  std::string storage = kDefaultStorage;
  std::string study;
};
int DeleteStudy(const DeleteStudyArgs& args);

struct EnqueueArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string params;  // a JSON object
  std::string format = "table";
};
int Enqueue(const EnqueueArgs& args);

struct ExportArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string format = "csv";
  std::optional<std::string> output;  // unset: stdout
};
int ExportStudy(const ExportArgs& args);

// Prints the best trial of `trials` to stdout in `format`.
void PrintBestTrial(const FrozenTrial& best, Format format);

}  // namespace tune::app

// Shared pieces of the tune command-line app: exit codes, storage URLs, output formats.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "study/study_summary.h"
#include "tune/status.h"
#include "tune/storages/storage.h"
#include "tune/study.h"
#include "tune/trial.h"

namespace tune::app {

// kExitRestart is never a process's exit status: a study run returns it to main() to be run
// again in a fresh process. After a trial's sticky CUDA error (StatusCode::kDeviceLost) the
// process cannot use the device again, and the study resumes from its storage.
enum ExitCode {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitInterrupted = 130,
  kExitRestart = 1000,
};

inline constexpr int kMaxRestarts = 3;  // per run of the command: then it stops, saying why
// TUNE_RESTARTS: how many times this run started afresh (0 the first time).
int Restarts();
// The run's clock: main() starts it first thing, from TUNE_RUN_STARTED when a restart's parent
// passed it on, else now. RunElapsedSeconds: seconds since then, counting the processes before
// a restart (a restarted run's --timeout is what is left of it); 0 before StartRunClock.
void StartRunClock();
double RunElapsedSeconds();
// Replaces the process (execv of /proc/self/exe with `argv`, TUNE_RESTARTS one higher and the
// run's clock passed on); returns kExitFailure, having said why, only when that fails.
int Restart(char** argv);

// Sets the log lines' pattern (spdlog's) on every logger; whatever a message holds, the line
// written is valid UTF-8 (bytes quoted from a file or a program's output: \xNN escapes).
void SetLogPattern(const std::string& pattern);

// Usage/config errors (bad input) exit 2; everything else 1.
int ExitCodeFor(const Status& status);
// Logs the error and returns its exit code.
int Fail(const Status& status);

enum class StorageAccess { kReadWrite, kReadOnly, kExisting };
// "memory" (or ":memory:"), "sqlite:///PATH[?schema=REV&timeout=S]" or
// "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE" (see docs/cli.md); InvalidArgument naming
// the valid schemes otherwise.
// kReadOnly opens an existing file without writing to it (NotFound if it is missing);
// kExisting opens an existing file for writing (NotFound if it is missing).
Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url,
                                             StorageAccess access = StorageAccess::kReadWrite);

// A study of a storage, found by name, for the management commands. NotFound (with the
// closest name) when the study does not exist.
struct StoredStudy {
  std::shared_ptr<Storage> storage;
  int64_t id = 0;
};
Result<StoredStudy> OpenStoredStudy(const std::string& url, const std::string& study,
                                    StorageAccess access);
// The opened study as a Study with the default sampler and pruner, for the commands that change
// its trials without sampling them (tell, enqueue).
Result<std::unique_ptr<Study>> LoadStoredStudy(const StoredStudy& opened, const std::string& study);

// A study read whole (read-only) for the commands that show it: its record and its trials in
// `states` (every state when empty).
struct StudyRecords {
  StudyInfo info;
  std::vector<FrozenTrial> trials;
};
Result<StudyRecords> ReadStoredStudy(const std::string& url, const std::string& study,
                                     const std::vector<TrialState>& states = {});

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
  std::optional<std::string> device;         // train objective: cpu, cuda, cuda:N
  std::optional<std::string> device_memory;  // train objective: the memory guard's budget
  std::optional<std::string> devices;        // --jobs over these CUDA cards: "0,2"
  std::optional<int64_t> oom_retry;
  std::optional<std::string> save_best;  // train objective: the best trial's model directory
  std::optional<std::string> jobs;       // N or "auto"
  std::optional<int64_t> max_jobs;
  std::optional<std::string> progress;  // auto, bar, lines, off
  std::optional<double> progress_interval;
  std::optional<std::string> mlflow_uri;  // tracking: the MLflow server (the config's, replaced)
  std::string format = "table";
};
int RunStudy(const RunArgs& args);

struct ShowArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string format = "table";
  std::vector<std::string> states;
  std::vector<std::string> filters;  // tune trials --filter KEY=VALUE
  std::optional<std::string> sort;   // tune trials --sort KEY[:desc]
  std::optional<int64_t> limit;      // tune trials --limit N
};
int ListStudies(const ShowArgs& args);
int ListTrials(const ShowArgs& args);
int ShowBestTrial(const ShowArgs& args);
int ShowBestTrials(const ShowArgs& args);  // the Pareto front

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
  std::optional<std::string> output;             // unset: stdout
  std::optional<std::string> mlflow;             // record the study's trials in MLflow there
  std::optional<std::string> mlflow_experiment;  // ... in this experiment (default: the study's)
  std::optional<std::string> tensorboard;        // write its TensorBoard event files there
};
int ExportStudy(const ExportArgs& args);

struct EstimateArgs {
  std::string model;
  std::optional<std::string> study;  // a study that stored a measured fit of `model`
  std::string storage = kDefaultStorage;
  std::optional<std::string> catalog;  // a catalog file merged into the built-in one
  std::string architecture = "encoder";
  int64_t batch_size = 16;
  int64_t max_length = 128;
  std::vector<int64_t> max_lengths;  // --max-batch: the lengths to tabulate
  int64_t grad_accum = 1;
  int64_t eval_batch_size = 0;
  std::string precision = "fp32";
  bool gradient_checkpointing = false;
  std::string optimizer = "adamw";
  double momentum = 0.9;
  double weight_decay = 0.01;
  double dropout = 0.1;
  std::optional<double> attention_dropout;  // unset: --dropout
  std::string attention = "auto";           // the attention hyperparameter: auto, sdpa, eager
  bool fused_qkv = false;
  // --num-labels; unset: a TorchScript model's own number of outputs, else 2.
  std::optional<int64_t> num_labels;
  int64_t classifier_layers = 0;
  int64_t classifier_hidden = 0;
  int64_t num_features = 0;
  int64_t mlp_layers = 2;
  int64_t mlp_hidden = 128;
  bool eval_only = false;
  std::string device = "cuda";
  std::optional<std::string> device_memory;
  double margin = 0.05;
  bool max_batch = false;
  int64_t batch_limit = 4096;
  bool measure = false;
  int64_t measure_steps = 2;
  bool measure_padded = false;  // half the measuring examples one token short: masks run
  int64_t threads = 0;
  std::string format = "table";
};
int Estimate(const EstimateArgs& args);

// The study summary (commands/summary.cpp) as text lines and as JSON.
std::string SummaryText(const std::string& study, const std::vector<StudyDirection>& directions,
                        const StudySummary& summary);
Json SummaryJson(const std::string& study, const std::vector<StudyDirection>& directions,
                 const StudySummary& summary);

// The models outside the catalog whose peaks the trials measured, their points and fits.
Json MeasuredMemoryJson(const StudySummary& summary);

// Prints the best trial of `trials` to stdout in `format`.
void PrintBestTrial(const FrozenTrial& best, Format format);
// Prints `trials` to stdout: JSON (an array of trial objects), or a table/CSV of number, state,
// values, duration and one params_<name> column per parameter.
void PrintTrials(const std::vector<FrozenTrial>& trials, Format format);

}  // namespace tune::app

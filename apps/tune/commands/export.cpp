// `tune export --study NAME --format csv|json [--output FILE]`: every trial of a study.
// `tune export --study NAME --mlflow URI [--mlflow-experiment E] [--tensorboard DIR]`: its
// finished trials recorded in MLflow (those not there yet) and TensorBoard.
//
// CSV has the columns of Optuna's study.trials_dataframe(): number, value (values_0, ... for
// several objectives), datetime_start, datetime_complete, duration, params_<name>...,
// user_attrs_<key>..., state, with params and attributes sorted by name.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "app.h"
#include "commands.h"
#include "tracking/mlflow.h"
#include "tracking/tensorboard.h"
#include "util/text.h"

namespace tune::app {
namespace {

namespace fs = std::filesystem;

// A number as pandas writes it to CSV: empty for NaN, inf / -inf.
std::string CsvNumber(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

// A parameter or attribute value: numbers and strings as they are, booleans as Python prints
// them, null empty, lists and objects as JSON.
std::string CsvCell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return CsvNumber(v.get<double>());
  return v.dump();
}

std::string ExportCsv(const StudyInfo& study, const std::vector<FrozenTrial>& trials) {
  std::set<std::string> param_names, attr_keys;
  for (const FrozenTrial& t : trials) {
    for (const auto& [name, v] : t.params) param_names.insert(name);
    for (const auto& [key, v] : t.user_attrs.items()) attr_keys.insert(key);
  }
  const size_t n_values = std::max<size_t>(1, study.directions.size());
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"number"};
  if (n_values == 1) {
    header.push_back("value");
  } else {
    for (size_t i = 0; i < n_values; ++i) header.push_back(fmt::format("values_{}", i));
  }
  for (const char* c : {"datetime_start", "datetime_complete", "duration"}) header.push_back(c);
  for (const auto& n : param_names) header.push_back("params_" + n);
  for (const auto& k : attr_keys) header.push_back("user_attrs_" + k);
  header.push_back("state");
  rows.push_back(std::move(header));
  for (const FrozenTrial& t : trials) {
    std::vector<std::string> row = {std::to_string(t.number)};
    for (size_t i = 0; i < n_values; ++i) {
      row.push_back(i < t.values.size() ? CsvNumber(t.values[i]) : "");
    }
    row.push_back(t.datetime_start ? FormatDatetime(*t.datetime_start) : "");
    row.push_back(t.datetime_complete ? FormatDatetime(*t.datetime_complete) : "");
    auto d = t.duration_seconds();
    row.push_back(d ? fmt::format("{}", *d) : "");
    const Json params = t.ExternalParams();
    for (const auto& n : param_names) row.push_back(params.contains(n) ? CsvCell(params[n]) : "");
    for (const auto& k : attr_keys) {
      row.push_back(t.user_attrs.contains(k) ? CsvCell(t.user_attrs[k]) : "");
    }
    row.push_back(TrialStateName(t.state));
    rows.push_back(std::move(row));
  }
  return RenderCsv(rows);
}

std::string ExportJson(const StudyInfo& study, const std::vector<FrozenTrial>& trials) {
  Json dirs = Json::array();
  for (auto d : study.directions) dirs.push_back(StudyDirectionName(d));
  Json out = {{"study_name", study.name},       {"directions", dirs},
              {"user_attrs", study.user_attrs}, {"system_attrs", study.system_attrs},
              {"n_trials", trials.size()},      {"trials", Json::array()}};
  for (const FrozenTrial& t : trials) out["trials"].push_back(TrialToJson(t));
  return out.dump(2) + "\n";
}

// Writes `text` to `path` through a temporary file in the same directory, so that a failure
// leaves no partial file and an existing one is replaced at once.
Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const fs::path target(path);
  const fs::path tmp = target.parent_path() /
                       ("." + target.filename().string() + ".tune-tmp-" + std::to_string(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return InvalidArgumentError(
          fmt::format("--output: cannot write '{}': {}", path, std::strerror(errno)));
    }
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return InternalError(fmt::format("--output: writing '{}' failed", path));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return InvalidArgumentError(
        fmt::format("--output: cannot replace '{}': {}", path, ec.message()));
  }
  return Status::Ok();
}

// The study's finished trials in MLflow: each one not there yet (a half-written run, still
// RUNNING, is written again), options.concurrency at once, then the study's counts; an error
// stops it (the trials already written stay, and a second export writes only the rest).
Status ExportToMlflow(const ExportArgs& args, const TrackedStudy& study,
                      const std::vector<FrozenTrial>& trials) {
  MlflowSink sink(MlflowOptions{*args.mlflow, args.mlflow_experiment.value_or("")}, study,
                  [] { return NewCurlHttpClient(10.0); });
  TUNE_ASSIGN_OR_RETURN(auto recorded, sink.RecordedTrials());
  StudyTally tally;
  std::vector<const FrozenTrial*> to_write;
  int64_t present = 0;
  for (const FrozenTrial& t : trials) {
    if (!IsFinished(t.state)) continue;
    tally.Add(t, study.directions);
    auto it = recorded.find(t.number);
    if (it != recorded.end() && it->second.second != "RUNNING") {
      ++present;
      continue;
    }
    if (it != recorded.end()) TUNE_RETURN_IF_ERROR(sink.DeleteRun(it->second.first));
    to_write.push_back(&t);
  }
  std::atomic<size_t> next{0};
  std::atomic<int64_t> written{0};
  std::mutex mu;
  Status first_error;  // guarded by mu
  auto work = [&] {
    for (size_t i = next++; i < to_write.size(); i = next++) {
      // The tally is for a sink's per-trial view; MLflow's runs do not use it.
      if (Status st = sink.Record(*to_write[i], tally); !st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) {
          first_error =
              UnavailableError(fmt::format("trial {}: {}", to_write[i]->number, st.message()));
        }
        next = to_write.size();  // stop the others after their current trial
        return;
      }
      ++written;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < sink.concurrency(); ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (!first_error.ok()) {
    return UnavailableError(
        fmt::format("{} ({} of {} trial(s) recorded; run the export again for "
                    "the rest)",
                    first_error.message(), written.load(), to_write.size()));
  }
  TUNE_RETURN_IF_ERROR(sink.RecordTally(tally));
  spdlog::info("{}: recorded {} trial(s) of study '{}', {} already there", sink.name(),
               written.load(), study.name, present);
  return Status::Ok();
}

// The study's finished trials as TensorBoard event files under DIR/<study>/.
Status ExportToTensorBoard(const std::string& dir, const TrackedStudy& study,
                           const std::vector<FrozenTrial>& trials) {
  // A second set of event files beside the first would show every trial twice.
  const fs::path study_dir = fs::path(dir) / TensorBoardRunName(study.name);
  std::error_code ec;
  if (fs::is_directory(study_dir, ec) && !fs::is_empty(study_dir, ec)) {
    return AlreadyExistsError(fmt::format(
        "--tensorboard: '{}' already holds event files of study '{}' (TensorBoard would show "
        "its trials twice); remove it or give another directory",
        study_dir.string(), study.name));
  }
  std::unique_ptr<TrackingSink> sink = NewTensorBoardSink(dir, study);
  StudyTally tally;
  int64_t written = 0;
  for (const FrozenTrial& t : trials) {
    if (!IsFinished(t.state)) continue;
    tally.Add(t, study.directions);
    TUNE_RETURN_IF_ERROR(sink->Record(t, tally));
    ++written;
  }
  TUNE_RETURN_IF_ERROR(sink->RecordTally(tally));
  spdlog::info("{}: wrote {} trial(s) of study '{}'", sink->name(), written, study.name);
  return Status::Ok();
}

// --mlflow and --tensorboard.
int ExportToTrackers(const ExportArgs& args, const StudyInfo& info,
                     const std::vector<FrozenTrial>& trials) {
  // A stored study does not keep its pruner: a trial it pruned is tagged with the pruner's name
  // tune recorded (attrs::kPrunedBy), else (a trial of Optuna or of an older tune) "pruner".
  const TrackedStudy study{args.study, info.directions, "pruner"};
  if (args.mlflow) {
    if (Status s = ExportToMlflow(args, study, trials); !s.ok()) return Fail(s);
  }
  if (args.tensorboard) {
    if (Status s = ExportToTensorBoard(*args.tensorboard, study, trials); !s.ok()) return Fail(s);
  }
  return kExitOk;
}

}  // namespace

int ExportStudy(const ExportArgs& args) {
  if (args.format != "csv" && args.format != "json") {
    return Fail(
        InvalidArgumentError(fmt::format("unknown export format '{}'{}; valid: csv, json",
                                         args.format, DidYouMean(args.format, {"csv", "json"}))));
  }
  if (args.output && args.output->empty()) {
    return Fail(InvalidArgumentError("--output needs a file name"));
  }
  if (args.mlflow) {
    for (Status st : {CheckMlflowUri(*args.mlflow), CheckMlflowSupported()}) {
      if (!st.ok()) return Fail(InvalidArgumentError("--mlflow: " + st.message()));
    }
  }
  auto opened = OpenStoredStudy(args.storage, args.study, StorageAccess::kReadOnly);
  if (!opened.ok()) return Fail(opened.status());
  Storage& storage = *opened->storage;
  const int64_t id = opened->id;
  auto info = storage.GetStudy(id);
  if (!info.ok()) return Fail(info.status());
  auto trials = storage.GetAllTrials(id);
  if (!trials.ok()) return Fail(trials.status());
  if (args.mlflow || args.tensorboard) return ExportToTrackers(args, *info, *trials);
  const std::string text =
      args.format == "csv" ? ExportCsv(*info, *trials) : ExportJson(*info, *trials);
  if (!args.output) {
    std::cout << text;
    return kExitOk;
  }
  if (Status s = WriteFileAtomically(*args.output, text); !s.ok()) return Fail(s);
  spdlog::info("Exported {} trial(s) of study '{}' to {} ({})", trials->size(), args.study,
               *args.output, args.format);
  return kExitOk;
}

std::function<int()> DeclareExport(CLI::App& command) {
  auto args = std::make_shared<ExportArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--format", args->format, "csv (default) or json");
  command.add_option("--output", args->output, "Write to FILE instead of stdout");
  command.add_option("--storage", args->storage, kReadOnlyStorageHelp);
  command
      .add_option("--mlflow", args->mlflow,
                  "Record the study's finished trials as runs of the MLflow tracking server at "
                  "URI (http://HOST:PORT), each one not recorded there yet; no CSV or JSON")
      ->type_name("URI");
  command.add_option("--mlflow-experiment", args->mlflow_experiment,
                     "With --mlflow: the experiment (default: the study's name)");
  command
      .add_option("--tensorboard", args->tensorboard,
                  "Write the study's finished trials as TensorBoard event files under "
                  "DIR/<study>/; no CSV or JSON")
      ->type_name("DIR");
  return [args] { return ExportStudy(*args); };
}

}  // namespace tune::app

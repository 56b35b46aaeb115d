// `tune studies`, `tune trials`, `tune best-trial`: read-only views of a storage.
#include <fmt/format.h>

#include <iostream>

#include "app.h"
#include "commands.h"
#include "trial_query.h"
#include "tune/study.h"

namespace tune::app {

int ListStudies(const ShowArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto storage = OpenStorage(args.storage, StorageAccess::kReadOnly);
  if (!storage.ok()) return Fail(storage.status());
  auto studies = (*storage)->GetAllStudies();
  if (!studies.ok()) return Fail(studies.status());
  if (*format == Format::kJson) {
    Json out = Json::array();
    for (const StudyInfo& s : *studies) {
      Json dirs = Json::array();
      for (auto d : s.directions) dirs.push_back(StudyDirectionName(d));
      out.push_back({{"name", s.name},
                     {"directions", dirs},
                     {"n_trials", s.n_trials},
                     {"user_attrs", s.user_attrs},
                     {"datetime_start",
                      s.datetime_start ? Json(FormatDatetime(*s.datetime_start)) : Json(nullptr)}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"name", "direction", "n_trials", "datetime_start"}};
  for (const StudyInfo& s : *studies) {
    std::string dirs;
    for (auto d : s.directions)
      dirs += (dirs.empty() ? "" : ",") + std::string(StudyDirectionName(d));
    rows.push_back({s.name, dirs, std::to_string(s.n_trials),
                    s.datetime_start ? FormatDatetime(*s.datetime_start) : ""});
  }
  std::cout << (*format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
  return kExitOk;
}

namespace {

// --filter, --sort and --limit of `tune trials`.
Result<std::vector<FrozenTrial>> SelectTrials(std::vector<FrozenTrial> trials,
                                              const ShowArgs& args) {
  std::vector<TrialFilter> filters;
  for (const std::string& text : args.filters) {
    TUNE_ASSIGN_OR_RETURN(TrialFilter f, ParseTrialFilter(text));
    filters.push_back(f);
  }
  std::optional<TrialSort> sort;
  if (args.sort) {
    TUNE_ASSIGN_OR_RETURN(sort, ParseTrialSort(*args.sort));
  }
  return QueryTrials(std::move(trials), filters, sort, args.limit);
}

}  // namespace

int ListTrials(const ShowArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  std::vector<TrialState> states;
  for (const auto& name : args.states) {
    auto s = ParseTrialState(name);
    if (!s.ok()) return Fail(s.status().WithContext("--state"));
    states.push_back(*s);
  }
  auto opened = OpenStoredStudy(args.storage, args.study, StorageAccess::kReadOnly);
  if (!opened.ok()) return Fail(opened.status());
  auto trials = opened->storage->GetAllTrials(opened->id, states);
  if (!trials.ok()) return Fail(trials.status());
  auto selected = SelectTrials(std::move(trials).value(), args);
  if (!selected.ok()) return Fail(selected.status());
  PrintTrials(*selected, *format);
  return kExitOk;
}

int ShowBestTrials(const ShowArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto study = ReadStoredStudy(args.storage, args.study, {TrialState::kComplete});
  if (!study.ok()) return Fail(study.status());
  PrintTrials(FindBestTrials(study->trials, study->info.directions), *format);
  return kExitOk;
}

int ShowBestTrial(const ShowArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto study = ReadStoredStudy(args.storage, args.study, {TrialState::kComplete});
  if (!study.ok()) return Fail(study.status());
  if (study->info.directions.size() != 1) {
    return Fail(InvalidArgumentError("best-trial needs a single-objective study"));
  }
  auto best = FindBestTrial(study->trials, study->info.directions[0]);
  if (!best)
    return Fail(
        FailedPreconditionError(fmt::format("study '{}' has no COMPLETE trial", args.study)));
  PrintBestTrial(*best, *format);
  return kExitOk;
}

namespace {

// --study (unless listing studies) and --storage, bound to the returned arguments.
std::shared_ptr<ShowArgs> DeclareShowArgs(CLI::App& command, bool study) {
  auto args = std::make_shared<ShowArgs>();
  if (study) command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage, kReadOnlyStorageHelp);
  return args;
}

void DeclareFormat(CLI::App& command, ShowArgs& args) {
  command.add_option("--format", args.format, "table, json or csv");
}

}  // namespace

std::function<int()> DeclareStudies(CLI::App& command) {
  auto args = DeclareShowArgs(command, /*study=*/false);
  DeclareFormat(command, *args);
  return [args] { return ListStudies(*args); };
}

std::function<int()> DeclareTrials(CLI::App& command) {
  auto args = DeclareShowArgs(command, /*study=*/true);
  command.add_option("--state", args->states,
                     "Only trials in this state (RUNNING, COMPLETE, PRUNED, FAIL, WAITING)");
  command.add_option("--filter", args->filters,
                     "KEY=VALUE (or !=, <, <=, >, >=) on a field, params_NAME or a user "
                     "attribute: state=PRUNED, reason=oom, value<0.3; repeat: all must hold");
  command.add_option("--sort", args->sort,
                     "KEY[:asc|:desc]: number (default), value, duration, datetime_start, "
                     "params_NAME, a user attribute (memory.peak)");
  command.add_option("--limit", args->limit, "At most N trials (after --filter and --sort)")
      ->check(CLI::NonNegativeNumber);
  DeclareFormat(command, *args);
  return [args] { return ListTrials(*args); };
}

std::function<int()> DeclareBestTrials(CLI::App& command) {
  auto args = DeclareShowArgs(command, /*study=*/true);
  DeclareFormat(command, *args);
  return [args] { return ShowBestTrials(*args); };
}

std::function<int()> DeclareBestTrial(CLI::App& command) {
  auto args = DeclareShowArgs(command, /*study=*/true);
  DeclareFormat(command, *args);
  return [args] { return ShowBestTrial(*args); };
}

}  // namespace tune::app

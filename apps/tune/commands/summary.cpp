// `tune summary --study NAME [--format table|json]`, and the same summary at the end of a run:
// trials by outcome with the time spent in each, the memory estimator's error over the trials
// that measured a peak, the memory levers applied, and the best trial (or Pareto front).
#include <fmt/format.h>

#include <iostream>

#include "app.h"
#include "commands.h"
#include "study/study_summary.h"

namespace tune::app {
namespace {

struct SummaryArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string format = "table";
};

// "12.3s" under a minute, else "H:MM:SS".
std::string Duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

std::string Percent(double fraction) { return fmt::format("{:+.1f}%", 100 * fraction); }

std::string ErrorLine(const char* what, const ErrorStats& e) {
  if (e.count == 0) return "";
  return fmt::format(
      "  {} vs measured peak ({} trial{}): median |error| {:.1f}% (median {}), "
      "worst {} (trial {}), {} under the peak\n",
      what, e.count, e.count == 1 ? "" : "s", 100 * e.median_abs, Percent(e.median),
      Percent(e.worst), e.worst_trial, e.under);
}

std::string LeversLine(const StudySummary& s) {
  if (s.admissions.empty() && s.oom_retries == 0) return "";
  std::string admissions;
  for (const auto& [verdict, n] : s.admissions) {
    admissions += fmt::format("{}{} {}", admissions.empty() ? "" : ", ", verdict, n);
  }
  return fmt::format(
      "  Memory levers: {} trial(s) at a smaller micro-batch with more "
      "accumulation, {} with gradient checkpointing; {} OOM retr{} in {} "
      "trial(s){}\n",
      s.lever_batch, s.lever_checkpointing, s.oom_retries, s.oom_retries == 1 ? "y" : "ies",
      s.oom_retry_trials, admissions.empty() ? "" : "; admission: " + admissions);
}

// Per model outside the catalog: its measured points and their fit.
std::string MeasuredLines(const StudySummary& s) {
  std::string out;
  for (const auto& [family, x] : s.measured) {
    std::string points;
    for (const MemoryPoint& p : DistinctShapes(x.points)) {
      points += fmt::format("{}(B={}, T={}): {}", points.empty() ? "" : ", ", p.batch_size,
                            p.max_length, FormatBytes(p.peak));
    }
    out += x.probed
               ? fmt::format("  Measured memory of TorchScript model '{}' ({}): {} probe(s)\n",
                             x.model, x.precision, x.points.size())
               : fmt::format("  Measured memory of '{}' ({}): {} peak(s) at {} shape(s)\n", x.model,
                             x.precision, x.points.size(), DistinctShapes(x.points).size());
    if (!points.empty()) out += "    " + points + "\n";
    if (!x.fit) {
      out += fmt::format("    no fit yet: it needs {} shapes with 2 values of max_length\n",
                         MeasuredFit::kMinPoints);
      continue;
    }
    out += "    " + MeasuredFitText(*x.fit) + "\n";
    out += fmt::format("    {} trial(s) predicted by the fit, {} out of memory at run time\n",
                       x.fitted_trials, x.oom_after_fit);
  }
  return out;
}

}  // namespace

Json MeasuredMemoryJson(const StudySummary& s) {
  Json out = Json::array();
  for (const auto& [family, x] : s.measured) {
    Json points = Json::array();
    for (const MemoryPoint& p : x.points) {
      points.push_back(
          {{"batch_size", p.batch_size}, {"max_length", p.max_length}, {"peak", p.peak}});
    }
    out.push_back({{"model", x.model},
                   {"precision", x.precision},
                   {"points", points},
                   {"fit", x.fit ? MeasuredFitToJson(*x.fit) : Json(nullptr)},
                   {"text", x.fit ? Json(MeasuredFitText(*x.fit)) : Json(nullptr)},
                   {"fitted_trials", x.fitted_trials},
                   {"oom_after_fit", x.oom_after_fit},
                   {"source", x.probed ? "probes" : "trials"}});
  }
  return out;
}

namespace {

std::string BestLine(const StudySummary& s, size_t n_objectives) {
  if (n_objectives == 1) {
    if (!s.best) return "  Best trial: none (no COMPLETE trial)\n";
    return fmt::format("  Best trial: {} value={} params: {}\n", s.best->number, ValueText(*s.best),
                       ParamsText(*s.best));
  }
  std::string numbers;
  for (size_t i = 0; i < s.pareto_front.size() && i < 20; ++i) {
    numbers += (i ? ", " : "") + std::to_string(s.pareto_front[i]);
  }
  if (s.pareto_front.size() > 20) numbers += ", ...";
  return fmt::format("  Pareto front: {} trial(s) ({}); tune best-trials lists them\n",
                     s.pareto_front.size(), numbers);
}

Json ErrorJson(const ErrorStats& e) {
  if (e.count == 0) return nullptr;
  return {{"trials", e.count}, {"median", e.median},           {"median_abs", e.median_abs},
          {"worst", e.worst},  {"worst_trial", e.worst_trial}, {"under", e.under}};
}

}  // namespace

std::string SummaryText(const std::string& study, const std::vector<StudyDirection>& directions,
                        const StudySummary& s) {
  std::string dirs;
  for (auto d : directions) dirs += (dirs.empty() ? "" : ", ") + std::string(StudyDirectionName(d));
  std::string out = fmt::format("Summary of study '{}' ({}): {} trial(s), {} of trial time", study,
                                dirs, s.n_trials, Duration(s.trial_seconds));
  if (s.first_start && s.last_complete && *s.last_complete > *s.first_start) {
    out += fmt::format(
        " over {} of wall time",
        Duration(std::chrono::duration<double>(*s.last_complete - *s.first_start).count()));
  }
  out += "\n";
  size_t width = 0;
  for (const auto& [c, row] : s.categories)
    width = std::max(width, std::string(TrialCategoryLabel(c)).size());
  for (const auto& [c, row] : s.categories) {
    out += fmt::format("  {:<{}}  {:>6}  {:>9}\n", TrialCategoryLabel(c), width, row.trials,
                       Duration(row.seconds));
  }
  out += ErrorLine("Memory estimate", s.estimate_error);
  out += ErrorLine("Guard's prediction", s.prediction_error);
  out += LeversLine(s);
  out += MeasuredLines(s);
  out += BestLine(s, directions.size());
  return out;
}

Json SummaryJson(const std::string& study, const std::vector<StudyDirection>& directions,
                 const StudySummary& s) {
  Json j;
  j["study"] = study;
  j["directions"] = Json::array();
  for (auto d : directions) j["directions"].push_back(StudyDirectionName(d));
  j["n_trials"] = s.n_trials;
  j["states"] = Json::object();
  for (const auto& [state, n] : s.states) j["states"][TrialStateName(state)] = n;
  j["categories"] = Json::array();
  for (const auto& [c, row] : s.categories) {
    j["categories"].push_back({{"category", TrialCategoryName(c)},
                               {"label", TrialCategoryLabel(c)},
                               {"trials", row.trials},
                               {"seconds", row.seconds}});
  }
  j["trial_seconds"] = s.trial_seconds;
  j["datetime_start"] = s.first_start ? Json(FormatDatetime(*s.first_start)) : Json(nullptr);
  j["datetime_complete"] = s.last_complete ? Json(FormatDatetime(*s.last_complete)) : Json(nullptr);
  j["memory"] = {
      {"estimate_error", ErrorJson(s.estimate_error)},
      {"prediction_error", ErrorJson(s.prediction_error)},
      {"admissions", s.admissions},
      {"levers",
       {{"batch_size", s.lever_batch}, {"gradient_checkpointing", s.lever_checkpointing}}},
      {"oom_retry_trials", s.oom_retry_trials},
      {"oom_retries", s.oom_retries},
      {"measured", MeasuredMemoryJson(s)}};
  j["best_trial"] = s.best ? TrialToJson(*s.best) : Json(nullptr);
  j["pareto_front"] = s.pareto_front;
  return j;
}

namespace {

int ShowSummary(const SummaryArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  if (*format == Format::kCsv) {
    return Fail(InvalidArgumentError("--format: summary is table or json, not csv"));
  }
  auto study = ReadStoredStudy(args.storage, args.study);
  if (!study.ok()) return Fail(study.status());
  const std::vector<StudyDirection>& directions = study->info.directions;
  const StudySummary s = SummarizeTrials(study->trials, directions, study->info.system_attrs);
  if (*format == Format::kJson) {
    std::cout << SummaryJson(args.study, directions, s).dump(2) << "\n";
  } else {
    std::cout << SummaryText(args.study, directions, s);
  }
  return kExitOk;
}

}  // namespace

std::function<int()> DeclareSummary(CLI::App& command) {
  auto args = std::make_shared<SummaryArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage, kReadOnlyStorageHelp);
  command.add_option("--format", args->format, "table or json");
  return [args] { return ShowSummary(*args); };
}

}  // namespace tune::app

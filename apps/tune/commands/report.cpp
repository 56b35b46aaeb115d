// `tune report --study NAME [--output report.html]`: one self-contained HTML page of a study's
// charts, built from the storage alone (so it works on studies Optuna wrote). The page is a
// template (apps/tune/report/report.html) with its style, script and Chart.js inlined and the
// study's data as one JSON blob; report.js draws the charts in the browser. docs/report.md
// describes every chart.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "app.h"
#include "commands.h"
#include "report/report_assets.h"
#include "samplers/hypervolume.h"
#include "samplers/multi_objective.h"
#include "study/study_summary.h"
#include "tune/importance.h"
#include "tune/trial_attrs.h"

namespace tune::app {
namespace {

struct ReportArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::string output = "report.html";
};

// Non-finite values (NaN, inf) are null: the charts leave them out.
Json Finite(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

double Seconds(TimePoint t, TimePoint t0) { return std::chrono::duration<double>(t - t0).count(); }

Json SecondsOrNull(const std::optional<TimePoint>& t, TimePoint t0) {
  return t ? Json(Seconds(*t, t0)) : Json(nullptr);
}

// "schedule" (--jobs): queued, started and ended, as seconds since t0, and the card.
Json ScheduleJson(const Json& attrs, TimePoint t0) {
  auto s = attrs.find(attrs::kSchedule);
  if (s == attrs.end() || !s->is_object()) return nullptr;
  Json out = Json::object();
  for (const char* key : {"queued", "started", "ended"}) {
    auto v = s->find(key);
    if (v == s->end() || !v->is_string()) continue;
    auto t = ParseDatetime(v->get<std::string>());
    if (t.ok()) out[key] = Seconds(*t, t0);
  }
  if (auto card = s->find("card"); card != s->end() && card->is_string()) out["card"] = *card;
  return out;
}

// "memory": the estimate, the guard's prediction and the measured peak (bytes; null: none).
Json MemoryJson(const Json& attrs) {
  auto m = attrs.find(attrs::kMemory);
  if (m == attrs.end()) return nullptr;
  auto memory = MemoryAttrFromJson(*m);
  if (!memory) return nullptr;
  auto positive = [](int64_t v) { return v > 0 ? Json(v) : Json(nullptr); };
  Json out = {{"estimate", positive(memory->estimate)},
              {"predicted", positive(memory->predicted)},
              {"peak", positive(memory->peak)},
              {"model", memory->model}};
  if (memory->run) {
    out["batch_size"] = memory->run->batch_size;
    out["max_length"] = memory->run->max_length;
  }
  return out;
}

// The metrics of a train trial's best evaluation (its summary's history entry at best_step, or
// best_epoch; else the last), without the bookkeeping: what the trial table shows per metric.
Json MetricsJson(const Json& user_attrs) {
  auto it = user_attrs.find(attrs::kTrain);
  if (it == user_attrs.end() || !it->is_object()) return nullptr;
  const Json& summary = *it;
  const Json history = summary.value("history", Json::array());
  if (!history.is_array() || history.empty()) return nullptr;
  Json best = history.back();
  for (const Json& e : history) {
    if (!e.is_object()) continue;
    if ((summary.contains("best_step") &&
         e.value("optimizer_steps", Json()) == summary["best_step"]) ||
        (!summary.contains("best_step") && summary.contains("best_epoch") &&
         e.value("epoch", Json()) == summary["best_epoch"])) {
      best = e;
    }
  }
  Json out = Json::object();
  if (!best.is_object()) return nullptr;
  for (const auto& [key, value] : best.items()) {
    static const std::set<std::string> kSkip = {"epoch",     "optimizer_steps", "learning_rate",
                                                "seconds",   "eval_seconds",    "class_f1",
                                                "train_loss"};
    if (value.is_number() && !kSkip.count(key)) out[key] = Finite(value.get<double>());
  }
  return out;
}

Json TrialJson(const FrozenTrial& t, TimePoint t0) {
  Json iv = Json::array();
  for (const auto& [step, v] : t.intermediate_values) iv.push_back({step, Finite(v)});
  Json values = Json::array();
  for (double v : t.values) values.push_back(Finite(v));
  return {{"number", t.number},
          {"state", TrialStateName(t.state)},
          {"category", TrialCategoryName(TrialCategoryOf(t))},
          {"values", values},
          {"params", t.ExternalParams()},
          {"intermediate", iv},
          {"start", SecondsOrNull(t.datetime_start, t0)},
          {"complete", SecondsOrNull(t.datetime_complete, t0)},
          {"schedule", ScheduleJson(t.user_attrs, t0)},
          {"memory", MemoryJson(t.user_attrs)},
          {"metrics", MetricsJson(t.user_attrs)}};
}

Json ImportanceJson(const std::vector<FrozenTrial>& trials,
                    const std::vector<StudyDirection>& directions) {
  Json params = Json::array();
  if (directions.size() == 1) {
    for (const auto& p : PedAnovaImportances(trials, directions[0])) {
      params.push_back({{"name", p.name}, {"importance", p.importance}});
    }
  }
  return {{"method",
           "PED-ANOVA (as Optuna's PedAnovaImportanceEvaluator: top 10% of COMPLETE "
           "trials against all of them)"},
          {"params", params}};
}

// The time axis' origin: the earliest start, or queue time of a --jobs run.
std::optional<TimePoint> FirstTime(const std::vector<FrozenTrial>& trials) {
  std::optional<TimePoint> first;
  auto consider = [&first](TimePoint t) { first = first ? std::min(*first, t) : t; };
  for (const auto& t : trials) {
    if (t.datetime_start) consider(*t.datetime_start);
    auto s = t.user_attrs.find(attrs::kSchedule);
    if (s == t.user_attrs.end() || !s->is_object()) continue;
    for (const char* key : {"queued", "started"}) {
      auto v = s->find(key);
      if (v == s->end() || !v->is_string()) continue;
      if (auto parsed = ParseDatetime(v->get<std::string>()); parsed.ok()) consider(*parsed);
    }
  }
  return first;
}

// Several objectives: the objectives' names (the train objective records them), the Pareto
// front's trial numbers and the hypervolume of the COMPLETE trials so far after each of them (at
// most 200 points), with Optuna's reference point rule over all of them.
Json ParetoJson(const std::vector<StudyDirection>& directions,
                const std::vector<FrozenTrial>& trials) {
  Json names = Json::array();
  LossPoints losses;
  std::vector<int64_t> numbers;
  for (const FrozenTrial& t : trials) {
    if (t.state != TrialState::kComplete || t.values.size() != directions.size()) continue;
    std::vector<double> loss;
    for (size_t k = 0; k < directions.size(); ++k) {
      loss.push_back(directions[k] == StudyDirection::kMaximize ? -t.values[k] : t.values[k]);
    }
    if (!std::all_of(loss.begin(), loss.end(), [](double v) { return std::isfinite(v); })) continue;
    losses.push_back(std::move(loss));
    numbers.push_back(t.number);
    auto train = t.user_attrs.find(attrs::kTrain);
    if (names.empty() && train != t.user_attrs.end() && train->contains("objectives")) {
      names = (*train)["objectives"];
    }
  }
  Json out = {{"names", names}, {"front", Json::array()}, {"hypervolume", Json::array()}};
  if (losses.empty()) return out;
  const std::vector<char> on_front = IsParetoFront(losses);
  for (size_t i = 0; i < losses.size(); ++i) {
    if (on_front[i]) out["front"].push_back(numbers[i]);
  }
  const std::vector<double> reference = ReferencePoint(losses);
  out["reference"] = reference;
  const size_t stride = std::max<size_t>(1, losses.size() / 200);
  for (size_t i = 0; i < losses.size(); ++i) {
    if ((i + 1) % stride != 0 && i + 1 != losses.size()) continue;
    Result<double> hv =
        Hypervolume({losses.begin(), losses.begin() + static_cast<long>(i) + 1}, reference);
    if (hv.ok()) out["hypervolume"].push_back({numbers[i], Finite(*hv)});
  }
  return out;
}

Json ReportData(const std::string& study, const std::vector<StudyDirection>& directions,
                const std::vector<FrozenTrial>& trials, const Json& system_attrs) {
  const std::optional<TimePoint> t0 = FirstTime(trials);
  Json j = {{"study", study}, {"datetime_start", t0 ? Json(FormatDatetime(*t0)) : Json(nullptr)}};
  j["directions"] = Json::array();
  for (auto d : directions) j["directions"].push_back(StudyDirectionName(d));
  j["trials"] = Json::array();
  j["metric"] = nullptr;  // a train study's metric (its summaries'), shown first in the table
  for (const auto& t : trials) {
    j["trials"].push_back(TrialJson(t, t0.value_or(TimePoint{})));
    auto train = t.user_attrs.find(attrs::kTrain);
    if (j["metric"].is_null() && train != t.user_attrs.end() && train->is_object() &&
        train->contains("metric")) {
      j["metric"] = (*train)["metric"];
    }
  }
  j["distributions"] = Json::object();
  for (const auto& t : trials) {
    for (const auto& [name, d] : t.distributions)
      j["distributions"][name] = Json::parse(DistributionToJson(d));
  }
  j["importance"] = ImportanceJson(trials, directions);
  if (directions.size() > 1) j["pareto"] = ParetoJson(directions, trials);
  j["memory_fits"] = MeasuredMemoryJson(SummarizeTrials(trials, directions, system_attrs));
  return j;
}

Result<std::string> ReadChartJs() {
  std::ifstream in(TUNE_CHARTJS, std::ios::binary);
  if (!in) {
    return NotFoundError(fmt::format(
        "tune report inlines Chart.js from {}, which is missing: install Debian's libjs-chart.js "
        "(or build tune with -DTUNE_CHARTJS=/path/to/chart.min.js)",
        TUNE_CHARTJS));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void Replace(std::string& page, const std::string& marker, const std::string& text) {
  const size_t at = page.find(marker);
  if (at != std::string::npos) page.replace(at, marker.size(), text);
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  }
  return out;
}

// The page: the template with its style, Chart.js, the data and the script inlined. "</" is
// escaped in the JSON so no string can close its <script> element.
std::string RenderPage(const Json& data, const std::string& chartjs) {
  std::string json = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) {
    json.replace(at, 2, "<\\/");
  }
  std::string page = internal::ReportHTML();
  Replace(page, "/*TUNE_REPORT_CSS*/", internal::ReportCSS());
  Replace(page, "/*TUNE_REPORT_TITLE*/", "tune report: study " + HtmlEscape(data["study"]));
  Replace(page, "/*TUNE_REPORT_CHARTJS*/", chartjs);
  Replace(page, "/*TUNE_REPORT_JS*/", internal::ReportJS());
  Replace(page, "/*TUNE_REPORT_DATA*/", json);
  return page;
}

int WriteReport(const ReportArgs& args) {
  auto chartjs = ReadChartJs();
  if (!chartjs.ok()) return Fail(chartjs.status());
  auto study = ReadStoredStudy(args.storage, args.study);
  if (!study.ok()) return Fail(study.status());
  const std::vector<FrozenTrial>& trials = study->trials;
  const std::string page = RenderPage(
      ReportData(args.study, study->info.directions, trials, study->info.system_attrs), *chartjs);
  std::ofstream out(args.output, std::ios::binary);
  out << page;
  out.close();
  if (!out) return Fail(InternalError("tune report: could not write " + args.output));
  std::cout << fmt::format("Wrote {} ({:.1f} KiB, {} trial(s) of study '{}')\n", args.output,
                           static_cast<double>(page.size()) / 1024, trials.size(), args.study);
  return kExitOk;
}

}  // namespace

std::function<int()> DeclareReport(CLI::App& command) {
  auto args = std::make_shared<ReportArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage, kReadOnlyStorageHelp);
  command.add_option("--output,-o", args->output, "The HTML file to write (default: report.html)");
  return [args] { return WriteReport(*args); };
}

}  // namespace tune::app

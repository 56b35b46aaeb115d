// The end-of-run summary and `tune summary` on real studies: a command objective whose program
// runs out of memory, times out, crashes or finishes; a pruned function study; a train study
// on a simulated card with the memory guard (estimate against measured peaks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "testing/sqlite_cli.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::TempDir;
using testing::Tune;

class SummaryCli : public testing::SqliteCliTest {
 protected:
  Json Summary(const std::string& study) {
    ProcessRun r = Run({"summary", "--study", study, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? Json::parse(r.out) : Json::object();
  }
  Json Trials(const std::string& study) {
    ProcessRun r = Run({"trials", "--study", study, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? Json::parse(r.out) : Json::array();
  }
  static std::map<std::string, Json> ByCategory(const Json& summary) {
    std::map<std::string, Json> out;
    for (const Json& c : summary["categories"]) out[c["category"]] = c;
    return out;
  }
};

// Each x picks what the program does: x < 0.2 prints CUDA's out-of-memory error, x < 0.35
// sleeps past the 0.3 s timeout, x < 0.5 exits 3, otherwise it reports the value x.
TEST_F(SummaryCli, CountsEveryOutcomeOfACommandStudyAndItsTime) {
  // Braces are doubled: argv elements are templates ({x} is the parameter).
  const std::string script =
      "lt() {{ awk -v x=\"$1\" -v y=\"$2\" 'BEGIN {{ exit !(x < y) }}'; }}\n"
      "if lt \"$1\" 0.2; then echo 'CUDA out of memory. Tried to allocate' >&2; exit 1; fi\n"
      "if lt \"$1\" 0.35; then sleep 5; fi\n"
      "if lt \"$1\" 0.5; then exit 3; fi\n"
      "echo \"{{\\\"value\\\": $1}}\"\n";
  const Json doc = {
      {"direction", "minimize"},
      {"sampler", {{"name", "random"}, {"seed", 3}}},
      {"search_space", {{"x", {{"type", "float"}, {"low", 0}, {"high", 1}}}}},
      {"objective",
       {{"type", "command"}, {"timeout", 0.3}, {"argv", {"sh", "-c", script, "sh", "{x}"}}}}};
  std::ofstream(dir_.path() / "c.json") << doc.dump(2);
  ProcessRun r = Run({"--study", "c", "--config", "c.json", "--n-trials", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The end-of-run summary, on stderr.
  EXPECT_NE(r.err.find("Summary of study 'c' (MINIMIZE): 16 trial(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("This run: 16 trial(s) finished in"), std::string::npos) << r.err;

  const Json trials = Trials("c");
  std::map<std::string, int> expected;
  std::map<std::string, double> seconds;
  for (const Json& t : trials) {
    const double x = t["params"]["x"].get<double>();
    const std::string c = x < 0.2 ? "oom" : x < 0.35 ? "timeout" : x < 0.5 ? "failed" : "complete";
    ++expected[c];
    seconds[c] += t["duration"].get<double>();
  }
  ASSERT_EQ(expected.size(), 4u) << "the seed should give every outcome";
  const Json s = Summary("c");
  EXPECT_EQ(s["n_trials"], 16);
  auto by = ByCategory(s);
  ASSERT_EQ(by.size(), 4u) << s.dump(2);
  for (const auto& [c, n] : expected) {
    EXPECT_EQ(by[c]["trials"], n) << c;
    EXPECT_NEAR(by[c]["seconds"].get<double>(), seconds[c], 1e-3) << c;
  }
  EXPECT_GE(by["timeout"]["seconds"].get<double>(), 0.3 * expected["timeout"]);
  EXPECT_EQ(s["states"]["PRUNED"], expected["oom"]);
  EXPECT_EQ(s["states"]["FAIL"], expected["timeout"] + expected["failed"]);
  ProcessRun best = Run({"best-trial", "--study", "c", "--format", "json"});
  EXPECT_EQ(s["best_trial"]["number"], Json::parse(best.out)["number"]);
  EXPECT_TRUE(s["memory"]["estimate_error"].is_null());

  ProcessRun table = Run({"summary", "--study-name", "c"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("PRUNED: out of memory at run time"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("FAIL: timed out"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Best trial: " + std::to_string(s["best_trial"]["number"].get<int>())),
            std::string::npos)
      << table.out;
  EXPECT_EQ(Run({"summary", "--study", "c", "--format", "csv"}).code, 2);
  EXPECT_EQ(Run({"summary", "--study", "d"}).code, 2);
}

// A pruner stops trials of the function objective's learning curves: "PRUNED by the pruner",
// kept apart from the simulated out-of-memory trials of the same study.
TEST_F(SummaryCli, PrunedByThePrunerIsNotOom) {
  std::ofstream(dir_.path() / "m.json") << R"({"direction": "minimize",
    "sampler": {"name": "random", "seed": 5},
    "pruner": {"name": "median", "n_startup_trials": 2, "n_warmup_steps": 1},
    "search_space": {"model": {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased"]},
      "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
      "max_length": {"type": "int", "low": 128, "high": 512, "step": 128},
      "lr": {"type": "float", "low": 1e-5, "high": 1e-3, "log": true}},
    "objective": {"type": "function", "name": "mixed", "oom_threshold": 6000, "n_steps": 6}})";
  ASSERT_EQ(
      Run({"--study", "m", "--config", "m.json", "--n-trials", "40", "--log-level", "warn"}).code,
      0);
  int oom = 0, pruned = 0;
  for (const Json& t : Trials("m")) {
    oom += t["user_attrs"].value("reason", "") == "oom";
    pruned += t["state"] == "PRUNED" && !t["user_attrs"].contains("reason");
  }
  ASSERT_GT(oom, 0);
  ASSERT_GT(pruned, 0);
  auto by = ByCategory(Summary("m"));
  EXPECT_EQ(by["oom"]["trials"], oom);
  EXPECT_EQ(by["pruned"]["trials"], pruned);
  EXPECT_EQ(by["pruned"]["label"], "PRUNED by the pruner");
}

#ifdef TUNE_WITH_TORCH
// Tiny real training runs under the memory guard on a simulated 2 GiB card: every trial
// measures its peak, so the summary has the estimator's error over all of them.
TEST_F(SummaryCli, EstimatorErrorOverTrialsThatMeasuredAPeak) {
  std::ofstream train(dir_.path() / "train.csv"), val(dir_.path() / "val.csv");
  train << "sentence,topic\n";
  val << "sentence,topic\n";
  for (int i = 0; i < 48; ++i) {
    (i < 32 ? train : val) << "\"the " << (i % 2 ? "goal and team" : "rain and cloud")
                           << " today\"," << (i % 2 ? "sports" : "weather") << "\n";
  }
  train.close();
  val.close();
  const std::string card = "summary-cli-" + std::to_string(getpid());
  const Json data = {{"train", "train.csv"},
                     {"validation", "val.csv"},
                     {"text_column", "sentence"},
                     {"label_column", "topic"}};
  const Json lr = {{"type", "float"}, {"low", 1e-3}, {"high", 5e-3}, {"log", true}};
  Json doc = {
      {"direction", "maximize"},
      {"sampler", {{"name", "random"}, {"seed", 1}}},
      {"search_space",
       {{"learning_rate", lr}, {"batch_size", {{"type", "categorical"}, {"choices", {4, 8, 16}}}}}},
      {"objective",
       {{"type", "train"},
        {"data", data},
        {"model", "tiny-bert"},
        {"init", "scratch"},
        {"epochs", 1},
        {"max_length", 16},
        {"threads", 1},
        {"memory", {{"device_memory", "2GiB"}, {"simulate", card}}}}}};
  std::ofstream(dir_.path() / "t.json") << doc.dump(2);
  ProcessRun r = Run({"--study", "t", "--config", "t.json", "--n-trials", "3"});
  fs::remove("/dev/shm/tune-card-" + card);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Memory estimate vs measured peak (3 trials)"), std::string::npos) << r.err;
  const Json s = Summary("t");
  const Json& e = s["memory"]["estimate_error"];
  ASSERT_TRUE(e.is_object()) << s.dump(2);
  EXPECT_EQ(e["trials"], 3);
  // The worst error is the one of largest magnitude among the trials' own.
  double worst = 0;
  for (const Json& t : Trials("t")) {
    const Json& m = t["user_attrs"]["memory"];
    const double err =
        (m["estimate"].get<double>() - m["peak"].get<double>()) / m["peak"].get<double>();
    if (std::fabs(err) > std::fabs(worst)) worst = err;
  }
  EXPECT_NEAR(e["worst"].get<double>(), worst, 1e-9);
  EXPECT_LE(std::fabs(e["median"].get<double>()), std::fabs(worst) + 1e-12);
  EXPECT_EQ(s["memory"]["admissions"]["run"], 3) << s.dump(2);
}
#endif

// docs/config.md "Non-finite values", through the binary: a command program that returns NaN
// (FAIL, reason "nonfinite"), +inf (COMPLETE, as in Optuna), or reports NaN and infinite
// intermediate values, under every sampler and pruner; every study finishes, `tune summary`
// counts the NaN trials on their own row, and `tune report`, `tune trials --sort value` and
// `tune best-trial` read the study.
TEST_F(SummaryCli, NanAndInfiniteValuesNeverStopAStudyUnderAnySamplerOrPruner) {
  const std::string script =
      "lt() {{ awk -v x=\"$1\" -v y=\"$2\" 'BEGIN {{ exit !(x < y) }}'; }}\n"
      "if lt \"$1\" 0.25; then echo '{{\"value\": NaN}}'; exit 0; fi\n"
      "if lt \"$1\" 0.5; then echo \"{{\\\"step\\\": 0, \\\"value\\\": $1}}\";\n"
      "  echo '{{\"step\": 1, \"value\": nan}}'; echo \"{{\\\"value\\\": $1}}\"; exit 0; fi\n"
      "if lt \"$1\" 0.6; then echo '{{\"value\": Infinity}}'; exit 0; fi\n"
      "echo \"{{\\\"step\\\": 0, \\\"value\\\": $1}}\"; echo '{{\"step\": 1, \"value\": -inf}}'\n"
      "echo \"{{\\\"value\\\": $1}}\"\n";
  const std::vector<std::string> samplers = {"random", "tpe", "nsgaii"};
  const std::vector<std::string> pruners = {
      "nop", "median", "percentile", "successive_halving", "hyperband", "threshold", "patient"};
  int studies = 0;
  for (const std::string& sampler : samplers) {
    for (const std::string& pruner : pruners) {
      const std::string name = sampler + "-" + pruner;
      Json pruner_doc = {{"name", pruner}};
      if (pruner == "threshold") pruner_doc["upper"] = 0.9;
      if (pruner == "percentile") pruner_doc["percentile"] = 25;
      if (pruner == "patient") pruner_doc["patience"] = 0;
      Json sampler_doc = {{"name", sampler}, {"seed", 11}};
      if (sampler == "tpe") sampler_doc["n_startup_trials"] = 4;
      if (sampler == "nsgaii") sampler_doc["population_size"] = 4;
      const Json doc = {
          {"direction", "minimize"},
          {"sampler", sampler_doc},
          {"pruner", pruner_doc},
          {"search_space", {{"x", {{"type", "float"}, {"low", 0}, {"high", 1}}}}},
          {"objective", {{"type", "command"}, {"argv", {"sh", "-c", script, "sh", "{x}"}}}}};
      std::ofstream(dir_.path() / (name + ".json")) << doc.dump(2);
      ProcessRun r = Run({"--study", name, "--config", name + ".json", "--n-trials", "14"});
      ASSERT_EQ(r.code, 0) << name << "\n" << r.err;
      ++studies;
      int nan_values = 0;
      for (const Json& t : Trials(name)) {
        const double x = t["params"]["x"].get<double>();
        if (x < 0.25) {
          ++nan_values;
          EXPECT_EQ(t["state"], "FAIL") << name << " " << t.dump();
          EXPECT_EQ(t["user_attrs"]["reason"], "nonfinite") << name;
        } else if (x >= 0.5 && x < 0.6) {
          EXPECT_EQ(t["state"], "COMPLETE") << name << " " << t.dump();
        } else {
          EXPECT_TRUE(t["state"] == "COMPLETE" || t["state"] == "PRUNED") << name << t.dump();
        }
      }
      const auto by = ByCategory(Summary(name));
      if (nan_values > 0) {
        ASSERT_TRUE(by.count("nonfinite")) << name;
        EXPECT_EQ(by.at("nonfinite")["trials"], nan_values) << name;
      }
      EXPECT_EQ(by.count("failed"), 0u) << name;
      ProcessRun table = Run({"summary", "--study-name", name});
      EXPECT_EQ(table.code, 0) << table.err;
      if (nan_values > 0) {
        EXPECT_NE(table.out.find("FAIL: non-finite loss, output or value"), std::string::npos)
            << table.out;
      }
      ProcessRun sorted = Run({"trials", "--study", name, "--sort", "value", "--format", "json"});
      EXPECT_EQ(sorted.code, 0) << sorted.err;
      ProcessRun best = Run({"best-trial", "--study", name, "--format", "json"});
      EXPECT_EQ(best.code, 0) << best.err;
      if (best.code == 0) {
        EXPECT_LT(Json::parse(best.out)["value"].get<double>(), 1.0);
      }
      ProcessRun report =
          Run({"report", "--study", name, "--output", (dir_.path() / (name + ".html")).string()});
      EXPECT_EQ(report.code, 0) << report.err;
    }
  }
  EXPECT_EQ(studies, 21);
}

}  // namespace
}  // namespace tune

// The management commands on SQLite storages: delete-study, enqueue, export; bad input exits 2
// and changes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "testing/workers.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::Slurp;
using testing::TempDir;
using testing::Tune;

// The database and its WAL, to show that a command changed nothing.
std::string Files(const fs::path& db) {
  fs::path wal = db;
  wal += "-wal";
  return Slurp(db) + "|" + (fs::exists(wal) ? Slurp(wal) : "");
}

class CliManage : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_ = testing::WriteSphereConfig(dir_.path());
    for (const char* study : {"sphere", "other"}) {
      ProcessRun r =
          Tune({"--study", study, "--config", cfg_, "--n-trials", "4", "--storage", url_},
               dir_.path().string());
      ASSERT_EQ(r.code, 0) << r.err;
    }
  }
  ProcessRun Run(std::vector<std::string> args) {
    args.insert(args.end(), {"--storage", url_});
    return Tune(args, dir_.path().string());
  }

  TempDir dir_;
  const fs::path db_ = dir_.path() / "m.db";
  const std::string url_ = "sqlite:///" + db_.string();
  std::string cfg_;
};

TEST_F(CliManage, DeleteStudyRemovesOneStudyAndItsTrials) {
  const std::string before = Files(db_);
  ProcessRun typo = Run({"delete-study", "--study", "spher"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("study 'spher' not found (did you mean 'sphere'?)"), std::string::npos)
      << typo.err;
  EXPECT_EQ(Files(db_), before);
  ProcessRun missing = Tune({"delete-study", "--study", "sphere", "--storage", "sqlite:///no.db"},
                            dir_.path().string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_FALSE(fs::exists(dir_.path() / "no.db"));

  ProcessRun del = Run({"delete-study", "--study", "sphere"});
  ASSERT_EQ(del.code, 0) << del.err;
  EXPECT_NE(del.err.find("Deleted study 'sphere' and its 4 trial(s)"), std::string::npos)
      << del.err;
  ProcessRun studies = Run({"studies", "--format", "json"});
  ASSERT_EQ(studies.code, 0);
  Json s = Json::parse(studies.out);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["name"], "other");
  EXPECT_EQ(s[0]["n_trials"], 4);
  EXPECT_EQ(Run({"trials", "--study", "sphere"}).code, 2);
  // The name can be used again; numbering starts over.
  ProcessRun again =
      Tune({"--study", "sphere", "--config", cfg_, "--n-trials", "2", "--storage", url_},
           dir_.path().string());
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(testing::TrialsJson(url_, "sphere", dir_.path().string()).size(), 2u);
}

TEST_F(CliManage, EnqueuedParamsRunFirst) {
  ProcessRun r = Run(
      {"enqueue", "--study", "sphere", "--params", R"({"x0": 1.5, "x1": -2})", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json enqueued = Json::parse(r.out);
  EXPECT_EQ(enqueued["number"], 4);
  EXPECT_EQ(enqueued["state"], "WAITING");
  EXPECT_EQ(enqueued["params"], (Json{{"x0", 1.5}, {"x1", -2}}));
  Json waiting = testing::TrialsJson(url_, "sphere", dir_.path().string());
  ASSERT_EQ(waiting.size(), 5u);
  EXPECT_EQ(waiting[4]["state"], "WAITING");
  EXPECT_EQ(waiting[4]["system_attrs"]["fixed_params"], (Json{{"x0", 1.5}, {"x1", -2}}));

  ProcessRun run =
      Tune({"--study", "sphere", "--config", cfg_, "--n-trials", "6", "--storage", url_},
           dir_.path().string());
  ASSERT_EQ(run.code, 0) << run.err;
  Json trials = testing::TrialsJson(url_, "sphere", dir_.path().string());
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[4]["state"], "COMPLETE");
  EXPECT_EQ(trials[4]["params"], (Json{{"x0", 1.5}, {"x1", -2.0}}));
  EXPECT_DOUBLE_EQ(trials[4]["value"].get<double>(), 1.5 * 1.5 + 2.0 * 2.0);
}

TEST_F(CliManage, EnqueueRejectsBadParamsAndChangesNothing) {
  const std::string before = Files(db_);
  ProcessRun syntax = Run({"enqueue", "--study", "sphere", "--params", R"({"x0": 1.5,, "x1": 2})"});
  EXPECT_EQ(syntax.code, 2);
  EXPECT_NE(syntax.err.find("--params: invalid JSON at line 1, column 12: syntax error"),
            std::string::npos)
      << syntax.err;
  ProcessRun lines =
      Run({"enqueue", "--study", "sphere", "--params", "{\n  \"x0\": 1.5\n  \"x1\": 2}"});
  EXPECT_EQ(lines.code, 2);
  EXPECT_NE(lines.err.find("invalid JSON at line 3, column 6"), std::string::npos) << lines.err;
  ProcessRun array = Run({"enqueue", "--study", "sphere", "--params", "[1, 2]"});
  EXPECT_EQ(array.code, 2);
  EXPECT_NE(array.err.find("--params must be a JSON object"), std::string::npos) << array.err;
  ProcessRun nested = Run({"enqueue", "--study", "sphere", "--params", R"({"x0": [1]})"});
  EXPECT_EQ(nested.code, 2);
  EXPECT_NE(nested.err.find("'x0' is an array"), std::string::npos) << nested.err;
  ProcessRun type = Run({"enqueue", "--study", "sphere", "--params", R"({"x0": "big"})"});
  EXPECT_EQ(type.code, 2);
  EXPECT_NE(type.err.find("--params: 'x0':"), std::string::npos) << type.err;
  ProcessRun study = Run({"enqueue", "--study", "sphre", "--params", R"({"x0": 1})"});
  EXPECT_EQ(study.code, 2);
  EXPECT_NE(study.err.find("did you mean 'sphere'"), std::string::npos) << study.err;
  ProcessRun format =
      Run({"enqueue", "--study", "sphere", "--params", R"({"x0": 1})", "--format", "yaml"});
  EXPECT_EQ(format.code, 2);
  EXPECT_EQ(Files(db_), before);
  // An unknown name is only a warning (a conditional parameter may not have run yet).
  ProcessRun unknown = Run({"enqueue", "--study", "sphere", "--params", R"({"x2": 1})"});
  EXPECT_EQ(unknown.code, 0) << unknown.err;
  EXPECT_NE(unknown.err.find("no trial of study 'sphere' has a parameter 'x2'"), std::string::npos)
      << unknown.err;
}

// Splits CSV text (RFC 4180 quoting) into rows of fields.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  rows.pop_back();  // after the last newline
  return rows;
}

TEST(CliExport, CsvHasOptunasTrialsDataframeColumnsAndJsonEverything) {
  TempDir dir;
  // The mixed function with a low memory threshold: conditional params, PRUNED trials with
  // user attrs (oom, reason, oom_config).
  fs::path cfg = dir.path() / "mixed.json";
  std::ofstream(cfg) << R"({"sampler": {"name": "random", "seed": 5},
    "objective": {"type": "function", "name": "mixed", "oom_threshold": 6000}})";
  const std::string url = "sqlite:///" + (dir.path() / "e.db").string();
  ProcessRun run =
      Tune({"--study", "mixed", "--config", cfg.string(), "--n-trials", "30", "--storage", url},
           dir.path().string());
  ASSERT_EQ(run.code, 0) << run.err;
  Json trials = testing::TrialsJson(url, "mixed", dir.path().string());
  ASSERT_EQ(trials.size(), 30u);

  ProcessRun csv = Tune({"export", "--study", "mixed", "--storage", url}, dir.path().string());
  ASSERT_EQ(csv.code, 0) << csv.err;
  auto rows = ParseCsv(csv.out);
  ASSERT_EQ(rows.size(), 31u);
  std::set<std::string> params, attrs;
  bool pruned = false;
  for (const Json& t : trials) {
    for (const auto& [k, v] : t["params"].items()) params.insert(k);
    for (const auto& [k, v] : t["user_attrs"].items()) attrs.insert(k);
    pruned = pruned || t["state"] == "PRUNED";
  }
  ASSERT_TRUE(pruned) << "the threshold should make some trials run out of memory";
  ASSERT_FALSE(attrs.empty());
  std::vector<std::string> header = {"number", "value", "datetime_start", "datetime_complete",
                                     "duration"};
  for (const auto& p : params) header.push_back("params_" + p);
  for (const auto& a : attrs) header.push_back("user_attrs_" + a);
  header.push_back("state");
  EXPECT_EQ(rows[0], header);
  auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (size_t i = 0; i < trials.size(); ++i) {
    const Json& t = trials[i];
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), header.size());
    EXPECT_EQ(row[0], std::to_string(i));
    EXPECT_EQ(row[column("state")], t["state"].get<std::string>());
    EXPECT_EQ(row[column("datetime_start")], t["datetime_start"].get<std::string>());
    if (t["value"].is_number()) {
      EXPECT_EQ(std::stod(row[1]), t["value"].get<double>());
    } else {
      EXPECT_EQ(row[1], "");
    }
    for (const auto& p : params) {
      const std::string& cell = row[column("params_" + p)];
      if (!t["params"].contains(p)) {
        EXPECT_EQ(cell, "") << p;  // inactive in this trial
      } else if (t["params"][p].is_string()) {
        EXPECT_EQ(cell, t["params"][p].get<std::string>()) << p;
      } else {
        EXPECT_EQ(Json::parse(cell), t["params"][p]) << p;
      }
    }
    if (t["user_attrs"].contains("oom_config")) {
      EXPECT_EQ(Json::parse(row[column("user_attrs_oom_config")]), t["user_attrs"]["oom_config"]);
      EXPECT_EQ(row[column("user_attrs_oom")], "True");
    }
  }

  // JSON to a file: the study and every trial as `tune trials --format json` prints it.
  ProcessRun json = Tune({"export", "--study", "mixed", "--storage", url, "--format", "json",
                          "--output", "out/mixed.json"},
                         dir.path().string());
  EXPECT_EQ(json.code, 2);  // the directory does not exist
  EXPECT_NE(json.err.find("--output: cannot write 'out/mixed.json'"), std::string::npos)
      << json.err;
  fs::create_directory(dir.path() / "out");
  json = Tune({"export", "--study", "mixed", "--storage", url, "--format", "json", "--output",
               "out/mixed.json"},
              dir.path().string());
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out, "");
  Json doc = Json::parse(Slurp(dir.path() / "out" / "mixed.json"));
  EXPECT_EQ(doc["study_name"], "mixed");
  EXPECT_EQ(doc["directions"], Json::array({"MINIMIZE"}));
  EXPECT_EQ(doc["n_trials"], 30);
  EXPECT_EQ(doc["trials"], trials);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() / "out"), fs::directory_iterator()),
            1);  // no temporary file left

  ProcessRun bad = Tune({"export", "--study", "mixed", "--storage", url, "--format", "xml"},
                        dir.path().string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown export format 'xml'; valid: csv, json"), std::string::npos)
      << bad.err;
  ProcessRun missing = Tune({"export", "--study", "mixd", "--storage", url}, dir.path().string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("did you mean 'mixed'"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace tune

// Optuna's shell verbs (create-study, ask, tell, best-trials), --study-name, and the trials
// command's --filter, --sort and --limit, on real SQLite files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "testing/sqlite_cli.h"
#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "testing/workers.h"
#include "tune/distributions.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::ProcessRun;
using testing::TempDir;
using testing::Tune;

class CliAskTell : public testing::SqliteCliTest {
 protected:
  Json Trials(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"trials", "--study-name", "s", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessRun r = Run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? Json::parse(r.out) : Json::array();
  }
};

TEST_F(CliAskTell, CreateStudyPrintsTheNameAndRefusesADuplicate) {
  ProcessRun r = Run({"create-study", "--study-name", "s", "--direction", "maximize"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "s\n");
  ProcessRun dup = Run({"create-study", "--study-name", "s"});
  EXPECT_EQ(dup.code, 2);
  EXPECT_NE(dup.err.find("--skip-if-exists"), std::string::npos) << dup.err;
  EXPECT_EQ(
      Run({"create-study", "--study", "s", "--direction", "maximize", "--skip-if-exists"}).code, 0);
  ProcessRun other = Run({"create-study", "--study", "s", "--skip-if-exists"});
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("exists with direction(s) MAXIMIZE, not MINIMIZE"), std::string::npos)
      << other.err;
  ProcessRun typo = Run({"create-study", "--study", "t", "--direction", "maximise"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean 'maximize'?"), std::string::npos) << typo.err;
  ProcessRun unnamed = Run({"create-study", "--directions", "minimize", "maximize"});
  ASSERT_EQ(unnamed.code, 0) << unnamed.err;
  EXPECT_EQ(unnamed.out.rfind("no-name-", 0), 0u) << unnamed.out;
  ProcessRun studies = Run({"studies", "--format", "json"});
  Json list = Json::parse(studies.out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]["directions"], Json::parse(R"(["MINIMIZE", "MAXIMIZE"])"));
}

TEST_F(CliAskTell, AskPrintsNumberAndParamsAndTellFinishesTheTrial) {
  ASSERT_EQ(Run({"create-study", "--study-name", "s"}).code, 0);
  const std::string space =
      R"({"x": {"type": "float", "low": -1, "high": 1}, "opt": {"type": "categorical", "choices": ["a", "b"]}})";
  std::vector<Json> asked;
  for (int i = 0; i < 4; ++i) {
    ProcessRun r = Run({"ask", "--study-name", "s", "--search-space", space, "--seed", "3"});
    ASSERT_EQ(r.code, 0) << r.err;
    asked.push_back(Json::parse(r.out));
    EXPECT_EQ(asked.back()["number"], i);
    EXPECT_GE(asked.back()["params"]["x"].get<double>(), -1.0);
    EXPECT_TRUE(asked.back()["params"]["opt"] == "a" || asked.back()["params"]["opt"] == "b");
  }
  EXPECT_EQ(Run({"tell", "--study-name", "s", "--trial-number", "0", "--values", "-0.5"}).code, 0);
  EXPECT_EQ(Run({"tell", "--study", "s", "--trial-number", "1", "--values", "inf"}).code, 0);
  EXPECT_EQ(Run({"tell", "--study", "s", "--trial-number", "2", "--state", "pruned"}).code, 0);
  EXPECT_EQ(Run({"tell", "--study", "s", "--trial-number", "3", "--state", "FAIL"}).code, 0);
  Json trials = Trials();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0]["values"], Json::parse("[-0.5]"));
  EXPECT_EQ(trials[1]["values"], Json::parse(R"(["Infinity"])"));
  EXPECT_EQ(trials[2]["state"], "PRUNED");
  EXPECT_EQ(trials[3]["state"], "FAIL");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(trials[i]["params"], asked[i]["params"]);
  ProcessRun best = Run({"best-trial", "--study-name", "s", "--format", "json"});
  EXPECT_EQ(Json::parse(best.out)["number"], 0);
}

TEST_F(CliAskTell, TellRejectsWhatOptunaRejects) {
  ASSERT_EQ(Run({"create-study", "--study", "s"}).code, 0);
  ASSERT_EQ(Run({"ask", "--study", "s"}).code, 0);  // no search space: a trial with no params
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--trial-number", "0"}, "--values V... is required"},
      {{"--trial-number", "0", "--values", "1", "2"}, "2 value(s) given, but the study has 1"},
      {{"--trial-number", "0", "--values", "x1"}, "'x1' is not a number"},
      {{"--trial-number", "0", "--state", "pruned", "--values", "1"}, "--values is for COMPLETE"},
      {{"--trial-number", "0", "--state", "prune"}, "did you mean 'pruned'?"},
      {{"--trial-number", "7", "--values", "1"}, "study 's' has no trial 7"},
  };
  for (const auto& [args, message] : bad) {
    std::vector<std::string> cmd = {"tell", "--study", "s"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    ProcessRun r = Run(cmd);
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_EQ(Trials()[0]["state"], "RUNNING");  // nothing changed
  ProcessRun missing = Run({"ask", "--study", "nope"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("create it first with 'tune create-study'"), std::string::npos)
      << missing.err;
  ProcessRun space = Run({"ask", "--study", "s", "--search-space", R"({"x": {"type": "flaot"}})"});
  EXPECT_EQ(space.code, 2);
  EXPECT_NE(space.err.find("did you mean 'float'?"), std::string::npos) << space.err;
}

TEST_F(CliAskTell, AskWithAConfigSamplesItsConditionalSpaceAndCreatesTheStudy) {
  const std::string cfg = testing::WriteSphereConfig(dir_.path(), "maximize");
  ProcessRun r = Run({"ask", "--study", "s", "--config", cfg, "--format", "csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "number,params_x0,params_x1");
  ProcessRun info = Run({"studies", "--format", "json"});
  EXPECT_EQ(Json::parse(info.out)[0]["directions"], Json::parse(R"(["MAXIMIZE"])"));
}

TEST_F(CliAskTell, BestTrialsIsTheParetoFront) {
  ASSERT_EQ(Run({"create-study", "--study", "s", "--directions", "minimize", "maximize"}).code, 0);
  // (1, 1) and (2, 3) are on the front, (2, 1) is dominated by (1, 1), (3, 3) by (2, 3); the
  // duplicate (1, 1) stays; a FAIL trial is never on it.
  const std::vector<std::pair<double, double>> values = {{1, 1}, {2, 1}, {2, 3}, {3, 3}, {1, 1}};
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(Run({"ask", "--study", "s"}).code, 0);
    ASSERT_EQ(Run({"tell", "--study", "s", "--trial-number", std::to_string(i), "--values",
                   std::to_string(values[i].first), std::to_string(values[i].second)})
                  .code,
              0);
  }
  ASSERT_EQ(Run({"ask", "--study", "s"}).code, 0);
  ASSERT_EQ(Run({"tell", "--study", "s", "--trial-number", "5", "--state", "fail"}).code, 0);
  ProcessRun r = Run({"best-trials", "--study-name", "s", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int64_t> front;
  for (const Json& t : Json::parse(r.out)) front.push_back(t["number"].get<int64_t>());
  EXPECT_EQ(front, (std::vector<int64_t>{0, 2, 4}));
  ProcessRun table = Run({"best-trials", "--study", "s"});
  EXPECT_NE(table.out.find("1,1"), std::string::npos) << table.out;
}

// A real study of the mixed function with simulated out-of-memory trials (reason "oom").
class CliTrialsQuery : public CliAskTell {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "m.json") << R"({"direction": "minimize",
      "sampler": {"name": "random", "seed": 5},
      "search_space": {"model": {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased"]},
        "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
        "max_length": {"type": "int", "low": 128, "high": 512, "step": 128},
        "lr": {"type": "float", "low": 1e-5, "high": 1e-3, "log": true}},
      "objective": {"type": "function", "name": "mixed", "oom_threshold": 6000}})";
    ProcessRun r =
        Tune({"--study", "s", "--config", "m.json", "--n-trials", "30", "--storage", url_},
             dir_.path().string());
    ASSERT_EQ(r.code, 0) << r.err;
  }
};

TEST_F(CliTrialsQuery, FilterOnStateAndUserAttributes) {
  Json all = Trials();
  ASSERT_EQ(all.size(), 30u);
  size_t n_oom = 0;
  for (const Json& t : all) n_oom += t["user_attrs"].value("reason", "") == "oom";
  ASSERT_GT(n_oom, 0u);
  ASSERT_LT(n_oom, 30u);
  Json oom = Trials({"--filter", "reason=oom"});
  EXPECT_EQ(oom.size(), n_oom);
  for (const Json& t : oom) EXPECT_EQ(t["state"], "PRUNED");
  EXPECT_EQ(Trials({"--filter", "state=pruned"}).size(), n_oom);
  EXPECT_EQ(Trials({"--filter", "oom=true"}).size(), n_oom);
  EXPECT_EQ(Trials({"--filter", "reason!=oom"}).size(), 30 - n_oom);
  Json big = Trials({"--filter", "params_batch_size>=32", "--filter", "state=COMPLETE"});
  for (const Json& t : big) {
    EXPECT_GE(t["params"]["batch_size"].get<int>(), 32);
    EXPECT_EQ(t["state"], "COMPLETE");
  }
  ProcessRun typo = Run({"trials", "--study", "s", "--filter", "reasn=oom"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("no trial has 'reasn' (did you mean 'reason'?)"), std::string::npos)
      << typo.err;
  EXPECT_EQ(Run({"trials", "--study", "s", "--filter", "reason"}).code, 2);
}

TEST_F(CliTrialsQuery, SortAndLimit) {
  Json best = Trials({"--sort", "value", "--limit", "3"});
  ASSERT_EQ(best.size(), 3u);
  Json complete = Trials({"--filter", "state=COMPLETE"});
  double lowest = 1e300;
  for (const Json& t : complete) lowest = std::min(lowest, t["value"].get<double>());
  EXPECT_EQ(best[0]["value"].get<double>(), lowest);
  EXPECT_LE(best[0]["value"].get<double>(), best[1]["value"].get<double>());
  EXPECT_LE(best[1]["value"].get<double>(), best[2]["value"].get<double>());
  // Descending by a parameter; trials without a value sort last even when descending.
  Json desc = Trials({"--sort", "params_lr:desc"});
  for (size_t i = 1; i < desc.size(); ++i) {
    EXPECT_GE(desc[i - 1]["params"]["lr"].get<double>(), desc[i]["params"]["lr"].get<double>());
  }
  Json by_value = Trials({"--sort", "value:desc"});
  EXPECT_TRUE(by_value.back()["value"].is_null());
  EXPECT_FALSE(by_value.front()["value"].is_null());
  EXPECT_EQ(Trials({"--limit", "0"}).size(), 0u);
  ProcessRun bad = Run({"trials", "--study", "s", "--sort", "value:down"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("asc or desc"), std::string::npos) << bad.err;
}

TEST_F(CliTrialsQuery, StudyNameIsAnAliasOfStudyEverywhere) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"trials", "--study-name", "s"},
        {"best-trial", "--study-name", "s"},
        {"export", "--study-name", "s"},
        {"enqueue", "--study-name", "s", "--params", R"({"lr": 0.001})"},
        {"--study-name", "s", "--config", "m.json", "--n-trials", "31"},
        {"delete-study", "--study-name", "s"}}) {
    ProcessRun r = Run(args);
    EXPECT_EQ(r.code, 0) << args[0] << ": " << r.err;
  }
}

}  // namespace
}  // namespace tune

// `tune report` on real studies: a function study with simulated out-of-memory trials, a median
// pruner and --jobs 2 gives one self-contained page whose JSON blob holds every trial, its
// outcome, learning curve and schedule, and the PED-ANOVA importances. (The page in a real
// browser: tests/report/report_browser_test.py.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

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

class ReportCli : public testing::SqliteCliTest {
 protected:
  std::string Read(const std::string& name) {
    std::ifstream in(dir_.path() / name);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // The page's JSON blob.
  static Json Blob(const std::string& page) {
    const std::string open = "<script id=\"tune-data\" type=\"application/json\">";
    const size_t begin = page.find(open);
    const size_t end = page.find("</script>", begin);
    if (begin == std::string::npos || end == std::string::npos) return nullptr;
    return Json::parse(page.substr(begin + open.size(), end - begin - open.size()));
  }
};

TEST_F(ReportCli, OneSelfContainedPageOfAStudyWithOutOfMemoryTrials) {
  std::ofstream(dir_.path() / "m.json") << R"({"direction": "minimize",
    "sampler": {"name": "random", "seed": 5},
    "pruner": {"name": "median", "n_startup_trials": 2, "n_warmup_steps": 1},
    "search_space": {"model": {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased"]},
      "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
      "max_length": {"type": "int", "low": 128, "high": 512, "step": 128},
      "lr": {"type": "float", "low": 1e-5, "high": 1e-3, "log": true}},
    "objective": {"type": "function", "name": "mixed", "oom_threshold": 6000, "n_steps": 6}})";
  ASSERT_EQ(Run({"--study", "m", "--config", "m.json", "--n-trials", "40", "--jobs", "2",
                 "--log-level", "warn"})
                .code,
            0);
  ProcessRun r = Run({"report", "--study-name", "m", "--output", "r.html"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = Read("r.html");
  EXPECT_NE(r.out.find("Wrote r.html ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" KiB, 40 trial(s) of study 'm')"), std::string::npos) << r.out;
  // Offline: Chart.js inlined, nothing fetched.
  EXPECT_NE(page.find("Chart.js v"), std::string::npos);
  EXPECT_FALSE(
      std::regex_search(page, std::regex(R"((src|href)\s*=\s*["']?https?://)", std::regex::icase)));
  EXPECT_EQ(page.find("<link"), std::string::npos);

  const Json data = Blob(page);
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["study"], "m");
  ASSERT_EQ(data["trials"].size(), 40u);
  std::set<std::string> categories;
  int curves = 0, scheduled = 0;
  for (const Json& t : data["trials"]) {
    categories.insert(t["category"].get<std::string>());
    curves += !t["intermediate"].empty();
    scheduled += t["schedule"].is_object() && t["schedule"].contains("started");
    EXPECT_LE(t["start"].get<double>(), t["complete"].get<double>());
  }
  EXPECT_TRUE(categories.count("oom") && categories.count("pruned") && categories.count("complete"))
      << data["trials"].dump();
  EXPECT_GT(curves, 0);
  EXPECT_EQ(scheduled, 40);
  EXPECT_EQ(data["distributions"].size(), 4u);
  EXPECT_EQ(data["distributions"]["lr"]["name"], "FloatDistribution");
  const Json& imp = data["importance"]["params"];
  ASSERT_EQ(imp.size(), 4u) << data["importance"].dump();
  double sum = 0;
  for (size_t i = 0; i < imp.size(); ++i) {
    sum += imp[i]["importance"].get<double>();
    if (i) EXPECT_GE(imp[i - 1]["importance"].get<double>(), imp[i]["importance"].get<double>());
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_NE(data["importance"]["method"].get<std::string>().find("PED-ANOVA"), std::string::npos);
}

// A study name cannot break out of the page: the title is escaped, the blob's "</" too.
TEST_F(ReportCli, StudyNamesAreEscapedAndMissingStudiesFail) {
  const std::string name = "a</script><b>&";
  ASSERT_EQ(Run({"create-study", "--study-name", name}).code, 0);
  ProcessRun r = Run({"report", "--study", name, "-o", "e.html"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = Read("e.html");
  EXPECT_NE(page.find("<title>tune report: study a&lt;/script&gt;&lt;b&gt;&amp;</title>"),
            std::string::npos);
  const Json data = Blob(page);
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["study"], name);
  EXPECT_TRUE(data["trials"].empty());
  EXPECT_TRUE(data["importance"]["params"].empty());

  ProcessRun missing = Run({"report", "--study", "nope", "-o", "n.html"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir_.path() / "n.html"));
}

}  // namespace
}  // namespace tune

// A command study of a model outside the catalog (issue 33): tune measures its peaks, fits
// a + b·B·T + c·B·T² once four shapes with two lengths exist, and from then on admits, reserves
// and rejects its trials by the fit, with no run-time out-of-memory error; `tune summary`,
// `tune report` and `tune estimate --study` show the fit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"
#include "tune/distributions.h"

namespace tune {
namespace {

using testing::ProcessRun;
using testing::Slurp;
using testing::Tune;

constexpr double kA = 300e6, kB = 2000, kC = 24;  // the program's true peak
double Truth(double b, double t) { return kA + kB * b * t + kC * b * t * t; }

class MeasuredMemoryCli : public ::testing::Test {
 protected:
  // The simulated card lives in /dev/shm until removed.
  void TearDown() override {
    std::filesystem::remove("/dev/shm/tune-card-measured-" + dir_.path().filename().string());
  }

  std::string Storage() const { return "sqlite:///" + (dir_.path() / "s.db").string(); }

  // A study of measured_memory_program.py on a simulated 420 MB card: (8, 512) and (32, 256)
  // fit, (16, 512) and (32, 512) do not. Four probes at the smallest batches and the longest
  // lengths come first: the user's (enqueue_trials), or else tune's boundary probes.
  std::string Config(int64_t n_trials, bool user_probes = true,
                     std::optional<bool> boundary_probes = std::nullopt) const {
    const std::string program = std::string(TUNE_TEST_DATA_DIR) + "/measured_memory_program.py";
    Json probes = Json::array();
    for (auto [b, t] : std::vector<std::pair<int, int>>{{1, 512}, {1, 256}, {2, 512}, {1, 64}}) {
      if (user_probes) probes.push_back({{"batch_size", b}, {"max_length", t}});
    }
    Json doc = {{"direction", "maximize"},
                {"n_trials", n_trials},
                {"sampler", {{"name", "random"}, {"seed", 3}}},
                {"search_space",
                 {{"batch_size", {1, 2, 4, 8, 16, 32}}, {"max_length", {32, 64, 128, 256, 512}}}},
                {"enqueue_trials", probes},
                {"objective",
                 {{"type", "command"},
                  {"argv", {"/usr/bin/python3", program}},
                  {"env",
                   {{"MEASURED_A", fmt::format("{}", kA)},
                    {"MEASURED_B", fmt::format("{}", kB)},
                    {"MEASURED_C", fmt::format("{}", kC)}}},
                  {"memory",
                   {{"device_memory", 420'000'000},
                    {"model", "my-script"},
                    {"batch_size", "{batch_size}"},
                    {"max_length", "{max_length}"},
                    {"simulate", "measured-" + dir_.path().filename().string()}}}}}};
    if (boundary_probes) doc["objective"]["memory"]["boundary_probes"] = *boundary_probes;
    const std::string path = (dir_.path() / "study.json").string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  Json Trials(const std::string& study = "m") const {
    ProcessRun r = Tune({"trials", "--study", study, "--storage", Storage(), "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out);
  }

  testing::TempDir dir_;
};

TEST_F(MeasuredMemoryCli, FitsTheMeasuredPeaksAndRunsOutOfMemoryOnlyBeforeTheFit) {
  ProcessRun run =
      Tune({"--study", "m", "--config", Config(24), "--storage", Storage(), "--jobs", "2"});
  ASSERT_EQ(run.code, 0) << run.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 24u);
  int64_t fitted = 0, predicted_misfits = 0, largest_run = 0;
  for (const Json& t : trials) {
    const Json& m = t["user_attrs"]["memory"];
    ASSERT_EQ(m["family"], "measured:my-script") << t.dump();
    const int64_t b = t["params"]["batch_size"], len = t["params"]["max_length"];
    if (t["number"].get<int64_t>() < 4) {
      EXPECT_EQ(t["state"], "COMPLETE") << t.dump();  // the probes: no fit yet
      EXPECT_FALSE(m.contains("admission")) << t.dump();
      continue;
    }
    ASSERT_TRUE(m.contains("admission")) << "no fit after four probes: " << t.dump();
    ++fitted;
    EXPECT_NE(t["user_attrs"].value("reason", ""), "oom") << "run-time OOM after the fit";
    const bool fits = Truth(b, len) * 1.01 <= 0.95 * 420e6;
    if (t["state"] == "COMPLETE") {
      EXPECT_TRUE(fits) << t.dump();
      largest_run = std::max<int64_t>(largest_run, b * len * len);
      EXPECT_NEAR(m["peak"].get<double>(), Truth(b, len), 0.011 * Truth(b, len));
      EXPECT_EQ(m["peak_source"], "reported");
    } else {
      EXPECT_EQ(t["user_attrs"]["reason"], "predicted") << t.dump();
      ++predicted_misfits;
    }
  }
  EXPECT_EQ(fitted, 20);
  EXPECT_GT(predicted_misfits, 0);
  EXPECT_GT(largest_run, 0);

  // The summary shows the fit and its points.
  ProcessRun summary = Tune({"summary", "--study", "m", "--storage", Storage()});
  ASSERT_EQ(summary.code, 0) << summary.err;
  EXPECT_NE(summary.out.find("Measured memory of 'my-script' (fp32)"), std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("out of memory at run time"), std::string::npos) << summary.out;
  ProcessRun sj = Tune({"summary", "--study", "m", "--storage", Storage(), "--format", "json"});
  ASSERT_EQ(sj.code, 0) << sj.err;
  const Json measured = Json::parse(sj.out)["memory"]["measured"];
  ASSERT_EQ(measured.size(), 1u) << sj.out;
  EXPECT_EQ(measured[0]["oom_after_fit"], 0);
  EXPECT_NEAR(measured[0]["fit"]["c"].get<double>(), kC, 0.1 * kC);

  // tune estimate predicts from the study's stored fit, within the wobble and the margin.
  ProcessRun e = Tune({"estimate", "--model", "my-script", "--study", "m", "--storage", Storage(),
                       "--batch-size", "32", "--max-length", "512", "--format", "json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const Json est = Json::parse(e.out);
  EXPECT_EQ(est["memory_model"]["kind"], "fit");
  const double truth = Truth(32, 512);
  EXPECT_GT(est["device_peak"].get<double>(), truth);
  EXPECT_LT(est["device_peak"].get<double>(), 1.25 * truth);
  ProcessRun table =
      Tune({"estimate", "--model", "my-script", "--study", "m", "--storage", Storage(),
            "--batch-size", "32", "--max-length", "512", "--device-memory", "420000000"});
  EXPECT_EQ(table.code, 1) << table.out;  // does not fit
  EXPECT_NE(table.out.find("probe B=1 T=512: measured"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("does NOT fit"), std::string::npos) << table.out;
  ProcessRun max_batch = Tune({"estimate", "--model", "my-script", "--study", "m", "--storage",
                               Storage(), "--max-batch", "--device-memory", "420000000",
                               "--max-lengths", "256,512", "--format", "json"});
  ASSERT_EQ(max_batch.code, 0) << max_batch.err;
  const Json mb = Json::parse(max_batch.out)["max_batch"];
  EXPECT_GE(mb[1]["max_batch_size"].get<int64_t>(), 8) << max_batch.out;
  EXPECT_LT(mb[1]["max_batch_size"].get<int64_t>(), 16) << max_batch.out;

  // The report page carries the fit.
  const std::string page = (dir_.path() / "report.html").string();
  ProcessRun report = Tune({"report", "--study", "m", "--storage", Storage(), "--output", page});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(Slurp(page).find("\"memory_fits\":[{"), std::string::npos);
}

// Without the user's probes tune enqueues its own at the space's boundary: B 1 and 2 at the
// longest length, B 1 at the length nearest the geometric mean (sqrt(32 · 512) = 128) and the
// shortest. They run first and make the fit; a resumed study does not enqueue them again.
TEST_F(MeasuredMemoryCli, BoundaryProbesRunFirstAndMakeTheFit) {
  const std::string config = Config(6, /*user_probes=*/false);
  ProcessRun first = Tune({"--study", "m", "--config", config, "--storage", Storage(), "--n-trials",
                           "2", "--jobs", "2"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.err.find("Enqueued 4 boundary probes for measured model 'my-script': "
                           "(B=1,T=512), (B=1,T=128), (B=2,T=512), (B=1,T=32)"),
            std::string::npos)
      << first.err;
  ASSERT_EQ(Trials().size(), 4u);  // two ran, two still WAITING

  ProcessRun resumed = Tune({"--study", "m", "--config", config, "--storage", Storage()});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("boundary probe"), std::string::npos) << resumed.err;
  const Json trials = Trials();
  ASSERT_EQ(trials.size(), 6u);
  const std::vector<std::pair<int64_t, int64_t>> probes = {{1, 512}, {1, 128}, {2, 512}, {1, 32}};
  for (const Json& t : trials) {
    const size_t n = t["number"].get<size_t>();
    const Json& m = t["user_attrs"]["memory"];
    EXPECT_EQ(t["state"], "COMPLETE") << t.dump();
    if (n < probes.size()) {
      EXPECT_EQ(t["params"]["batch_size"], probes[n].first) << t.dump();
      EXPECT_EQ(t["params"]["max_length"], probes[n].second) << t.dump();
      EXPECT_FALSE(m.contains("admission")) << t.dump();  // measured before the fit
    } else {
      EXPECT_TRUE(m.contains("admission")) << "no fit after the probes: " << t.dump();
    }
  }
  EXPECT_NE(resumed.err.find("Memory of 'my-script' (fp32) fitted from 4 measured peak(s)"),
            std::string::npos)
      << resumed.err;
}

TEST_F(MeasuredMemoryCli, BoundaryProbesOffEnqueueNothing) {
  ProcessRun off =
      Tune({"--study", "off", "--config", Config(1, false, false), "--storage", Storage()});
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.err.find("boundary probe"), std::string::npos) << off.err;
  EXPECT_EQ(Trials("off").size(), 1u);
  ProcessRun on = Tune({"--study", "on", "--config", Config(1, false), "--storage", Storage()});
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_EQ(Trials("on").size(), 4u);  // one probe ran, three wait
}

TEST_F(MeasuredMemoryCli, BadEstimateRequestsSayWhatTheStudyHas) {
  ProcessRun run = Tune({"--study", "m", "--config", Config(4), "--storage", Storage()});
  ASSERT_EQ(run.code, 0) << run.err;
  ProcessRun e = Tune({"estimate", "--model", "my-script", "--study", "m", "--storage", Storage(),
                       "--precision", "bf16"});
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("study 'm' has no memory fit of 'my-script/bf16'"), std::string::npos)
      << e.err;
  EXPECT_NE(e.err.find("it has: my-script/fp32"), std::string::npos) << e.err;
  ProcessRun typo =
      Tune({"estimate", "--model", "my-scrip", "--study", "m", "--storage", Storage()});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean 'my-script/fp32'?"), std::string::npos) << typo.err;
}

}  // namespace
}  // namespace tune

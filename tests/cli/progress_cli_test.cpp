// How a run shows its progress (--progress): on a terminal (a pseudo-terminal made by
// util-linux `script`), the status line redrawn in place with log lines above it; piped to a
// file, plain lines without escape sequences, at most one progress line per interval.
#include <fmt/format.h>
#include <gtest/gtest.h>

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

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ProgressCli : public testing::SqliteCliTest {
 protected:
  void SetUp() override {
    // x < 0.2 prints CUDA's out-of-memory error (an OOM trial), x < 0.4 exits 3 (FAIL),
    // otherwise it reports x. Braces are doubled: argv elements are templates.
    const std::string script =
        "lt() {{ awk -v x=\"$1\" -v y=\"$2\" 'BEGIN {{ exit !(x < y) }}'; }}\n"
        "if lt \"$1\" 0.2; then echo 'CUDA out of memory. Tried to allocate' >&2; exit 1; fi\n"
        "if lt \"$1\" 0.4; then exit 3; fi\n"
        "echo \"{{\\\"value\\\": $1}}\"\n";
    const Json doc = {
        {"direction", "minimize"},
        {"sampler", {{"name", "random"}, {"seed", 3}}},
        {"search_space", {{"x", {{"type", "float"}, {"low", 0}, {"high", 1}}}}},
        {"objective", {{"type", "command"}, {"argv", {"sh", "-c", script, "sh", "{x}"}}}}};
    std::ofstream(dir_.path() / "c.json") << doc.dump(2);
  }

  // "16/16 finished | 9 COMPLETE, 0 pruned, 4 OOM, 3 FAIL": the stored study's counts.
  std::string FinalCounts(const std::string& study, int n) {
    ProcessRun r = Run({"trials", "--study", study, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    std::map<std::string, int> by;
    for (const Json& t : Json::parse(r.out)) {
      const bool oom = t["user_attrs"].value("oom", false);
      ++by[oom ? "OOM" : t["state"].get<std::string>()];
    }
    EXPECT_GT(by["OOM"], 0);
    EXPECT_GT(by["FAIL"], 0);
    EXPECT_GT(by["COMPLETE"], 0);
    return fmt::format("{}/{} finished | {} COMPLETE, {} pruned, {} OOM, {} FAIL", n, n,
                       by["COMPLETE"], by["PRUNED"], by["OOM"], by["FAIL"]);
  }
};

TEST_F(ProgressCli, OnATerminalRedrawsOneStatusLineBelowTheLogLines) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux `script` is not installed";
  }
  const fs::path typescript = dir_.path() / "typescript";
  const std::string cmd = "cd '" + dir_.path().string() + "' && script -qfec \"'" +
                          std::string(TUNE_BINARY) + "' --study c --config c.json --storage " +
                          url_ + " --n-trials 16\" '" + typescript.string() + "' </dev/null " +
                          ">/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string screen = testing::Slurp(typescript);
  const std::string counts = FinalCounts("c", 16);
  // The status line, erased and drawn again in place (carriage return, erase to the end of the
  // line, reverse video) with the final counts; then replaced by a plain progress line.
  EXPECT_NE(screen.find("\r\033[K\033[7m" + counts + " | best "), std::string::npos) << screen;
  EXPECT_NE(screen.find("\r\033[K\033[7m0/16 finished"), std::string::npos) << screen;
  EXPECT_NE(screen.find("Progress: " + counts), std::string::npos) << screen;
  // Log lines scroll above it: each is written after the status line was erased.
  EXPECT_NE(screen.find("\r\033[K["), std::string::npos) << screen;
  EXPECT_NE(screen.find("Trial 15 "), std::string::npos) << screen;
  // One job: the status line says what runs.
  EXPECT_NE(screen.find("| 1 running | elapsed"), std::string::npos) << screen;
  EXPECT_NE(screen.find("Summary of study 'c'"), std::string::npos) << screen;
  // No periodic progress lines on a terminal: only the last one.
  EXPECT_EQ(Count(screen, "Progress: "), 1u) << screen;
}

TEST_F(ProgressCli, PipedWritesPlainLinesAtMostOnePerInterval) {
  ProcessRun r = Tune({"--study", "c", "--config", "c.json", "--storage", url_, "--n-trials", "16",
                       "--progress-interval", "3600"},
                      dir_.path().string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  // The first trial's progress line, then none for an hour, then the last one.
  EXPECT_EQ(Count(r.err, "Progress: "), 2u) << r.err;
  EXPECT_NE(r.err.find("Progress: 1/16 finished"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Progress: " + FinalCounts("c", 16)), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.err, " duration="), 16u) << r.err;  // one line per trial, as before

  // --progress off: the trial lines, no progress lines. A resumed run counts the earlier
  // trials.
  ProcessRun off = Tune({"--study", "c", "--config", "c.json", "--storage", url_, "--n-trials",
                         "18", "--progress", "off"},
                        dir_.path().string());
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.err.find("Progress: "), std::string::npos) << off.err;
  EXPECT_NE(off.err.find("Trial 17 "), std::string::npos) << off.err;

  // bar forced on a file: the status line's sequences, even without a terminal.
  ProcessRun bar = Tune({"--study", "c", "--config", "c.json", "--storage", url_, "--n-trials",
                         "19", "--progress", "bar"},
                        dir_.path().string());
  ASSERT_EQ(bar.code, 0) << bar.err;
  EXPECT_NE(bar.err.find("\r\033[K\033[7m19/19 finished"), std::string::npos) << bar.err;
}

TEST_F(ProgressCli, RejectsAnUnknownModeNamingTheValidOnes) {
  ProcessRun r = Tune({"--study", "c", "--config", "c.json", "--storage", url_, "--n-trials", "1",
                       "--progress", "lnes"},
                      dir_.path().string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--progress: unknown progress mode 'lnes' (did you mean 'lines'?); "
                       "valid: auto, bar, lines, off"),
            std::string::npos)
      << r.err;
  std::ofstream(dir_.path() / "bad.json")
      << R"({"objective": {"type": "function", "name": "branin"}, "progress": "barr"})";
  ProcessRun cfg =
      Tune({"--study", "bad", "--config", "bad.json", "--storage", url_}, dir_.path().string());
  EXPECT_EQ(cfg.code, 2) << cfg.err;
  EXPECT_NE(cfg.err.find("progress"), std::string::npos) << cfg.err;
}

}  // namespace
}  // namespace tune

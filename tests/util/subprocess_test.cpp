// Subprocess against real programs: /bin/sh scripts started without a shell of tune's own.
#include "util/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace tune {
namespace {

using std::chrono::milliseconds;

struct Lines {
  std::vector<std::string> out, err;
  Subprocess::LineHandler Handler() {
    return [this](Stream s, const std::string& line) {
      (s == Stream::kStdout ? out : err).push_back(line);
      return Status::Ok();
    };
  }
};

SubprocessOptions Sh(const std::string& script) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin", "GREETING=hello world"};
  return o;
}

// Polls until the program is finished; returns Poll's last status.
Status RunToEnd(Subprocess& p, const Subprocess::LineHandler& on_line) {
  Status s;
  while (!p.finished()) s = p.Poll(milliseconds(50), on_line);
  return s;
}

// Running (a zombie that nobody reaped yet does not count).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

TEST(Subprocess, ReadsLinesOfBothStreamsAndTheExitStatus) {
  auto p =
      Subprocess::Spawn(Sh("echo one; echo \"$GREETING\" >&2; printf 'two\\r\\nlast'; exit 3"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Lines lines;
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  EXPECT_EQ(lines.out, (std::vector<std::string>{"one", "two", "last"}));
  EXPECT_EQ(lines.err, (std::vector<std::string>{"hello world"}));
  const ExitStatus& e = (*p)->exit_status();
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 3);
  EXPECT_FALSE(e.success());
  EXPECT_EQ(e.Describe(), "exit status 3");
  EXPECT_EQ((*p)->stderr_tail(), "hello world\n");
}

TEST(Subprocess, ASignalIsReportedByNameAndNumber) {
  auto p = Subprocess::Spawn(Sh("kill -SEGV $$"));
  ASSERT_TRUE(p.ok());
  Lines lines;
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  const ExitStatus& e = (*p)->exit_status();
  EXPECT_FALSE(e.exited);
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.Describe(), "killed by signal 11 (Segmentation fault)");
}

TEST(Subprocess, AMissingProgramIsAnInvalidArgumentNamingIt) {
  SubprocessOptions o;
  o.argv = {"/nonexistent/program"};
  auto p = Subprocess::Spawn(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "cannot start '/nonexistent/program': No such file or directory");
}

TEST(Subprocess, NothingIsInheritedButTheGivenEnvironmentAndDirectory) {
  testing::TempDir dir;
  SubprocessOptions o = Sh("pwd; echo \"${HOME:-unset}\"; read x || echo eof");
  o.cwd = dir.path().string();
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  Lines lines;
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  ASSERT_EQ(lines.out.size(), 3u);
  EXPECT_EQ(lines.out[0], dir.path().string());
  EXPECT_EQ(lines.out[1], "unset");
  EXPECT_EQ(lines.out[2], "eof");  // stdin is /dev/null
}

// Stop() reaches the program's children (its process group), and a program that ignores
// SIGTERM is killed after the grace period.
TEST(Subprocess, StopEndsTheWholeGroupEscalatingToSigkill) {
  SubprocessOptions o = Sh("trap '' TERM; sleep 30 & echo $!; wait");
  o.kill_grace_seconds = 0.5;
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  Lines lines;
  while (lines.out.empty()) ASSERT_TRUE((*p)->Poll(milliseconds(50), lines.Handler()).ok());
  const pid_t child = std::stoi(lines.out[0]);
  ASSERT_TRUE(Alive(child));
  const auto start = std::chrono::steady_clock::now();
  (*p)->Stop();
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.5);  // SIGTERM was ignored
  EXPECT_LT(seconds, 3.0);
  EXPECT_EQ((*p)->exit_status().signal, SIGKILL);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(Alive(child));
}

// A child left behind holding the pipes does not keep the program "running" forever.
TEST(Subprocess, LeftoverChildrenHoldingThePipesAreKilledAfterTheLinger) {
  SubprocessOptions o = Sh("sleep 30 & echo $!");
  o.linger_seconds = 0.3;
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  Lines lines;
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  ASSERT_EQ(lines.out.size(), 1u);
  EXPECT_TRUE((*p)->exit_status().success());
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(Alive(std::stoi(lines.out[0])));
}

TEST(Subprocess, AHandlerErrorStopsTheProgramAndIsReturned) {
  auto p = Subprocess::Spawn(Sh("echo bad; sleep 30"));
  ASSERT_TRUE(p.ok());
  int calls = 0;
  const Subprocess::LineHandler handler = [&](Stream, const std::string& line) {
    ++calls;
    return line == "bad" ? InternalError("cannot store the report") : Status::Ok();
  };
  const auto start = std::chrono::steady_clock::now();
  Status s = RunToEnd(**p, handler);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "cannot store the report");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ((*p)->exit_status().signal, SIGTERM);
}

TEST(Subprocess, TheStderrTailKeepsTheLastBytes) {
  SubprocessOptions o = Sh("i=0; while [ $i -lt 200 ]; do echo line$i >&2; i=$((i+1)); done");
  o.stderr_tail_bytes = 16;
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  Lines lines;
  ASSERT_TRUE(RunToEnd(**p, lines.Handler()).ok());
  EXPECT_EQ(lines.err.size(), 200u);
  EXPECT_EQ((*p)->stderr_tail(), "line198\nline199\n");
}

// The destructor leaves no process behind.
TEST(Subprocess, DestroyingARunningProgramKillsItsGroup) {
  pid_t child = -1;
  {
    auto p = Subprocess::Spawn(Sh("sleep 30 & echo $!; wait"));
    ASSERT_TRUE(p.ok());
    Lines lines;
    while (lines.out.empty()) ASSERT_TRUE((*p)->Poll(milliseconds(50), lines.Handler()).ok());
    child = std::stoi(lines.out[0]);
    EXPECT_TRUE(Alive(child));
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(Alive(child));
}

}  // namespace
}  // namespace tune

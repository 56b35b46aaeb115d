// Subprocess: a program started without a shell (fork + exec), in its own process group, whose
// stdout and stderr are read line by line, and that dies with tune (PR_SET_PDEATHSIG). Stopping it
// signals the whole group, so no child of the program outlives it holding a GPU's memory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

struct SubprocessOptions {
  std::vector<std::string> argv;    // argv[0] is looked up in PATH
  std::vector<std::string> env;     // the whole environment, "NAME=value" each
  std::optional<std::string> cwd;   // unset: this process's working directory
  double kill_grace_seconds = 5.0;  // Stop(): SIGTERM, then SIGKILL after this long
  size_t stderr_tail_bytes = 4096;  // the end of stderr kept for stderr_tail()
  // After the program exits, how long its leftover children may hold the pipes open before the
  // group is killed.
  double linger_seconds = 2.0;
  // A pipe to the program's stdin (WriteLine); otherwise it reads /dev/null.
  bool stdin_pipe = false;
  // The program gets SIGKILL when tune dies (PR_SET_PDEATHSIG), even by SIGKILL. (Its own
  // children are reached through the process group only while tune lives.)
  bool die_with_parent = true;
};

// How a program ended.
struct ExitStatus {
  bool exited = false;  // it called exit(): `code` is its status
  int code = -1;
  int signal = 0;              // it was killed by this signal (0: not signalled)
  int64_t max_rss_bytes = -1;  // the largest resident set of the program or a child it waited for

  bool success() const { return exited && code == 0; }
  // "exit status 3", "killed by signal 11 (Segmentation fault)".
  std::string Describe() const;
  // "Segmentation fault" for a signalled program, "" otherwise.
  std::string SignalName() const;
};

enum class Stream { kStdout, kStderr };

// This process's environment, "NAME=value" each (for SubprocessOptions::env).
std::vector<std::string> CurrentEnvironment();
// `env` ("NAME=VALUE" entries) with each of `overrides` replacing the entry of its name, if any
// (getenv reads the first of two entries of one name).
void OverrideEnvironment(std::vector<std::string>& env, const std::vector<std::string>& overrides);

// Example:
//   TUNE_ASSIGN_OR_RETURN(auto p, Subprocess::Spawn({.argv = {"python3", "train.py"},
//                                                     .env = env}));
//   while (!p->finished()) {
//     TUNE_RETURN_IF_ERROR(p->Poll(std::chrono::milliseconds(100), on_line));
//     if (deadline_passed) p->Stop();
//   }
//   if (!p->exit_status().success()) ... p->exit_status().Describe(), p->stderr_tail() ...
//
// Thread safety: one thread drives a Subprocess.
class Subprocess {
 public:
  // A complete line (without its newline; a last line without one is passed at EOF). A non-OK
  // Status stops the program and is returned by Poll().
  using LineHandler = std::function<Status(Stream stream, const std::string& line)>;

  // InvalidArgument "cannot start 'prog': No such file or directory" when it cannot start (or
  // argv is empty); Internal when a pipe or fork fails.
  static Result<std::unique_ptr<Subprocess>> Spawn(const SubprocessOptions& options);

  // Kills the process group and reaps the program if it still runs.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits up to `wait` for output, hands each complete line to `on_line`, reaps the program when
  // it has exited and escalates a Stop() to SIGKILL after the grace period. The first non-OK
  // Status of `on_line` stops the program; Poll returns it once the program is gone.
  Status Poll(std::chrono::milliseconds wait, const LineHandler& on_line);

  // Writes `line` and a newline to the program's stdin. FailedPrecondition without
  // options.stdin_pipe; Unavailable once the program has closed it.
  Status WriteLine(const std::string& line);

  // True once the program has exited and its output is read (or given up after linger_seconds).
  bool finished() const;
  // True once the program has exited (its output may still be coming).
  bool exited() const { return reaped_; }
  // Sends SIGTERM to the group (once); Poll sends SIGKILL after kill_grace_seconds.
  void Stop();
  bool stop_requested() const { return term_sent_.has_value(); }

  // REQUIRES: finished().
  const ExitStatus& exit_status() const { return exit_status_; }
  // The last stderr_tail_bytes of stderr.
  std::string stderr_tail() const;
  // Seconds since the program started.
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pipe {
    int fd = -1;
    std::string partial;  // bytes after the last newline
  };

  Subprocess(pid_t pid, int out_fd, int err_fd, const SubprocessOptions& options);
  Status Drain(Pipe& pipe, Stream stream, const LineHandler& on_line);
  void Close(Pipe& pipe);
  void Reap();
  void KillGroup(int sig) const;

  pid_t pid_;
  Pipe out_, err_;
  int in_fd_ = -1;
  SubprocessOptions options_;
  Clock::time_point start_;
  std::optional<Clock::time_point> term_sent_, exited_at_;
  bool reaped_ = false;
  ExitStatus exit_status_;
  std::string err_tail_;
  Status handler_status_;
};

}  // namespace tune

#include "tune/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace tune {
namespace {

constexpr size_t kMaxPartialLine = size_t{1} << 20;  // a runaway line keeps its last 64 KiB
constexpr size_t kKeptOfRunawayLine = size_t{1} << 16;

double SecondsBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// posix_spawn's file actions and attributes, destroyed with the scope.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;

  SpawnSetup(int out_fd, int err_fd, const std::optional<std::string>& cwd) {
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    if (cwd) posix_spawn_file_actions_addchdir_np(&actions, cwd->c_str());
    posix_spawnattr_init(&attr);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);  // its own process group: Stop() reaches its children
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ExitStatus::SignalName() const {
  return signal != 0 ? std::string(strsignal(signal)) : std::string();
}

std::string ExitStatus::Describe() const {
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, SignalName());
  return fmt::format("exit status {}", code);
}

Result<std::unique_ptr<Subprocess>> Subprocess::Spawn(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return InvalidArgumentError("cannot start a program without a name (argv is empty)");
  }
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return InternalError("pipe: " + std::string(std::strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return InternalError("pipe: " + std::string(std::strerror(e)));
  }
  pid_t pid = -1;
  int rc = 0;
  {
    SpawnSetup setup(out_pipe[1], err_pipe[1], options.cwd);
    std::vector<char*> argv = CStrings(options.argv), env = CStrings(options.env);
    rc = posix_spawnp(&pid, argv[0], &setup.actions, &setup.attr, argv.data(), env.data());
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return InvalidArgumentError(fmt::format("cannot start '{}': {}{}", options.argv[0],
                                            std::strerror(rc),
                                            options.cwd ? " (cwd " + *options.cwd + ")" : ""));
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, out_pipe[0], err_pipe[0], options));
}

Subprocess::Subprocess(pid_t pid, int out_fd, int err_fd, const SubprocessOptions& options)
    : pid_(pid), options_(options), start_(Clock::now()) {
  out_.fd = out_fd;
  err_.fd = err_fd;
  fcntl(out_fd, F_SETFL, O_NONBLOCK);
  fcntl(err_fd, F_SETFL, O_NONBLOCK);
}

Subprocess::~Subprocess() {
  KillGroup(SIGKILL);  // nothing of the program outlives it (ESRCH when already gone)
  if (!reaped_) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  Close(out_);
  Close(err_);
}

void Subprocess::KillGroup(int sig) const { kill(-pid_, sig); }

void Subprocess::Stop() {
  if (term_sent_ || reaped_) return;
  KillGroup(SIGTERM);
  term_sent_ = Clock::now();
}

bool Subprocess::finished() const { return reaped_ && out_.fd < 0 && err_.fd < 0; }

double Subprocess::seconds() const { return SecondsBetween(start_, Clock::now()); }

std::string Subprocess::stderr_tail() const {
  const size_t keep = options_.stderr_tail_bytes;
  return err_tail_.size() > keep ? err_tail_.substr(err_tail_.size() - keep) : err_tail_;
}

void Subprocess::Close(Pipe& pipe) {
  if (pipe.fd >= 0) close(pipe.fd);
  pipe.fd = -1;
}

Status Subprocess::Drain(Pipe& pipe, Stream stream, const LineHandler& on_line) {
  auto deliver = [&](const std::string& line) {
    if (!handler_status_.ok()) return;  // stopping: the rest is read and dropped
    Status s = on_line(stream, line);
    if (!s.ok()) {
      handler_status_ = s;
      Stop();
    }
  };
  char buf[8192];
  while (true) {
    const ssize_t n = read(pipe.fd, buf, sizeof buf);
    if (n > 0) {
      if (stream == Stream::kStderr) {
        err_tail_.append(buf, static_cast<size_t>(n));
        if (err_tail_.size() > 2 * options_.stderr_tail_bytes) {
          err_tail_.erase(0, err_tail_.size() - options_.stderr_tail_bytes);
        }
      }
      pipe.partial.append(buf, static_cast<size_t>(n));
      size_t pos;
      while ((pos = pipe.partial.find('\n')) != std::string::npos) {
        std::string line = pipe.partial.substr(0, pos);
        pipe.partial.erase(0, pos + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        deliver(line);
      }
      if (pipe.partial.size() > kMaxPartialLine) {
        pipe.partial.erase(0, pipe.partial.size() - kKeptOfRunawayLine);
      }
      continue;
    }
    if (n == 0) {
      if (!pipe.partial.empty()) deliver(pipe.partial);
      pipe.partial.clear();
      Close(pipe);
    }
    return Status::Ok();  // EAGAIN, EINTR or EOF
  }
}

void Subprocess::Reap() {
  if (reaped_) return;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return;
  reaped_ = true;
  exited_at_ = Clock::now();
  exit_status_.exited = WIFEXITED(status);
  exit_status_.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  exit_status_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

Status Subprocess::Poll(std::chrono::milliseconds wait, const LineHandler& on_line) {
  if (finished()) return handler_status_;
  std::vector<pollfd> fds;
  if (out_.fd >= 0) fds.push_back({out_.fd, POLLIN, 0});
  if (err_.fd >= 0) fds.push_back({err_.fd, POLLIN, 0});
  if (!fds.empty()) {
    poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  } else if (!reaped_) {
    std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(20)));
  }
  if (out_.fd >= 0) TUNE_RETURN_IF_ERROR(Drain(out_, Stream::kStdout, on_line));
  if (err_.fd >= 0) TUNE_RETURN_IF_ERROR(Drain(err_, Stream::kStderr, on_line));
  Reap();
  const auto now = Clock::now();
  if (term_sent_ && !reaped_ && SecondsBetween(*term_sent_, now) > options_.kill_grace_seconds) {
    KillGroup(SIGKILL);
  }
  // Leftover children of the program may still hold the pipes: give them a moment, then stop
  // the whole process group so that no orphan keeps device memory.
  if (reaped_ && !finished() && SecondsBetween(*exited_at_, now) > options_.linger_seconds) {
    KillGroup(SIGKILL);
    Close(out_);
    Close(err_);
  }
  return finished() ? handler_status_ : Status::Ok();
}

}  // namespace tune

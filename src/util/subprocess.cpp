#include "util/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "util/text.h"

extern char** environ;

namespace tune {
namespace {

constexpr size_t kMaxPartialLine = size_t{1} << 20;  // a runaway line keeps its last 64 KiB
constexpr size_t kKeptOfRunawayLine = size_t{1} << 16;

double SecondsBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// What the child does between fork() and exec(): only async-signal-safe calls.
struct ChildSetup {
  std::vector<char*> argv, env;
  const char* cwd = nullptr;
  int stdin_fd = -1;  // -1: /dev/null
  int out_fd = -1, err_fd = -1;
  int report_fd = -1;  // exec failures: the child writes errno here (close-on-exec)
  bool die_with_parent = true;
  pid_t parent = 0;
};

// Tells the parent why the child cannot exec, and ends it.
[[noreturn]] void FailChild(int report_fd, int err) {
  (void)!write(report_fd, &err, sizeof err);
  _exit(127);
}

[[noreturn]] void ExecChild(const ChildSetup& c) {
  if (c.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != c.parent) _exit(127);  // the parent died before prctl
  }
  setpgid(0, 0);  // its own process group: Stop() reaches its children
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  const int in = c.stdin_fd >= 0 ? c.stdin_fd : open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0 || dup2(c.out_fd, 1) < 0 || dup2(c.err_fd, 2) < 0) {
    FailChild(c.report_fd, errno);
  }
  if (c.cwd != nullptr && chdir(c.cwd) != 0) FailChild(c.report_fd, errno);
  execvpe(c.argv[0], c.argv.data(), c.env.data());
  FailChild(c.report_fd, errno);
}

// The fds a spawn opens, closed unless handed on.
struct Pipes {
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, report[2] = {-1, -1};
  ~Pipes() {
    for (int* p : {out, err, in, report}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
      }
    }
  }
  static int Take(int& fd) {
    const int taken = fd;
    fd = -1;
    return taken;
  }
};

}  // namespace

void OverrideEnvironment(std::vector<std::string>& env, const std::vector<std::string>& overrides) {
  for (const std::string& entry : overrides) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.rfind(name, 0) == 0; });
    env.push_back(entry);
  }
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

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
  Pipes pipes;
  for (int* p : {pipes.out, pipes.err, pipes.report}) {
    if (pipe2(p, O_CLOEXEC) != 0)
      return InternalError("pipe: " + std::string(std::strerror(errno)));
  }
  if (options.stdin_pipe && pipe2(pipes.in, O_CLOEXEC) != 0) {
    return InternalError("pipe: " + std::string(std::strerror(errno)));
  }
  ChildSetup child;
  child.argv = CStrings(options.argv);
  child.env = CStrings(options.env);
  child.cwd = options.cwd ? options.cwd->c_str() : nullptr;
  child.stdin_fd = pipes.in[0];
  child.out_fd = pipes.out[1];
  child.err_fd = pipes.err[1];
  child.report_fd = pipes.report[1];
  child.die_with_parent = options.die_with_parent;
  child.parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return InternalError("fork: " + std::string(std::strerror(errno)));
  if (pid == 0) ExecChild(child);
  setpgid(pid, pid);  // also here: no race with a Stop() right after the start
  close(Pipes::Take(pipes.report[1]));
  int err = 0;
  ssize_t n;
  while ((n = read(pipes.report[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  if (n > 0) {  // exec failed
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return InvalidArgumentError(fmt::format("cannot start '{}': {}{}", options.argv[0],
                                            std::strerror(err),
                                            options.cwd ? " (cwd " + *options.cwd + ")" : ""));
  }
  auto p = std::unique_ptr<Subprocess>(
      new Subprocess(pid, Pipes::Take(pipes.out[0]), Pipes::Take(pipes.err[0]), options));
  p->in_fd_ = Pipes::Take(pipes.in[1]);
  return p;
}

Status Subprocess::WriteLine(const std::string& line) {
  if (in_fd_ < 0) return FailedPreconditionError("the program has no stdin pipe");
  // A program that exited closes its stdin: EPIPE, not a SIGPIPE that would end tune.
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const std::string text = line + "\n";
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t n = write(in_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);  // the SIGPIPE the write raised
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0)
    return UnavailableError("cannot write to the program: " + std::string(std::strerror(err)));
  return Status::Ok();
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
  if (in_fd_ >= 0) close(in_fd_);
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
  std::string_view tail = err_tail_;
  if (tail.size() > keep) {
    tail.remove_prefix(tail.size() - keep);
    // A character the cut went through: its continuation bytes are dropped, not escaped.
    for (int k = 0; k < 3 && !tail.empty() && (static_cast<unsigned char>(tail[0]) & 0xc0) == 0x80;
         ++k) {
      tail.remove_prefix(1);
    }
  }
  return ValidUtf8(tail);
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
        deliver(ValidUtf8(line));
      }
      if (pipe.partial.size() > kMaxPartialLine) {
        pipe.partial.erase(0, pipe.partial.size() - kKeptOfRunawayLine);
      }
      continue;
    }
    if (n == 0) {
      if (!pipe.partial.empty()) deliver(ValidUtf8(pipe.partial));
      pipe.partial.clear();
      Close(pipe);
    }
    return Status::Ok();  // EAGAIN, EINTR or EOF
  }
}

void Subprocess::Reap() {
  if (reaped_) return;
  int status = 0;
  struct rusage usage {};
  if (wait4(pid_, &status, WNOHANG, &usage) != pid_) return;
  reaped_ = true;
  exit_status_.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
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

#include "tune/objectives/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tune/interrupt.h"

extern char** environ;

namespace tune {
namespace fs = std::filesystem;

const std::vector<std::string>& DefaultOomPatterns() {
  static const std::vector<std::string> kPatterns = {
      "CUDA out of memory",        "OutOfMemoryError",          "CUBLAS_STATUS_ALLOC_FAILED",
      "CUDNN_STATUS_ALLOC_FAILED", "CUDA error: out of memory", "HIP out of memory",
      "MPS backend out of memory"};
  return kPatterns;
}

const std::vector<std::string>& CommandSpecialNames() {
  static const std::vector<std::string> kNames = {"trial.number", "study.name", "trial.dir",
                                                  "trial.params_file", "trial.result_file"};
  return kNames;
}

Result<std::vector<std::string>> TemplateNames(const std::string& text) {
  std::vector<std::string> names;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      if (i + 1 < text.size() && text[i + 1] == '{') {
        ++i;
        continue;
      }
      size_t end = text.find('}', i);
      if (end == std::string::npos) {
        return InvalidArgumentError(fmt::format("unbalanced '{{' in \"{}\" (write '{{{{' for a "
                                                "literal brace)",
                                                text));
      }
      names.push_back(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (text[i] == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        ++i;
        continue;
      }
      return InvalidArgumentError(
          fmt::format("unbalanced '}}' in \"{}\" (write '}}}}' for a literal brace)", text));
    }
  }
  return names;
}

std::string ParamEnvName(const std::string& param) {
  std::string out = "TUNE_PARAM_";
  for (char c : param) {
    out += std::isalnum(static_cast<unsigned char>(c))
               ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
               : '_';
  }
  return out;
}

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string ValueText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return PyFloatRepr(v.get<double>());
  return v.dump();
}

// Expands placeholders; nullopt when one names a value that is not defined for this trial.
std::optional<std::string> Expand(const std::string& text,
                                  const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '{' && text.find('}', i) != std::string::npos) {
      size_t end = text.find('}', i);
      auto it = values.find(text.substr(i + 1, end - i - 1));
      if (it == values.end()) return std::nullopt;
      out += it->second;
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

Result<double> ToNumber(const Json& v) {
  if (v.is_number() && !v.is_boolean()) return v.get<double>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "NaN" || s == "nan") return std::nan("");
    if (s == "Infinity" || s == "inf") return HUGE_VAL;
    if (s == "-Infinity" || s == "-inf") return -HUGE_VAL;
  }
  return InvalidArgumentError("not a number: " + v.dump());
}

// Parses a JSON line, accepting Python's NaN / Infinity / -Infinity tokens.
std::optional<Json> ParseLine(const std::string& line) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() && line.find_first_of("NI") != std::string::npos) {
    static const std::regex kTokens(R"((-?Infinity|NaN)(?=\s*[,}\]]))");
    j = Json::parse(std::regex_replace(line, kTokens, "\"$1\""), nullptr, false);
  }
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

bool IsReport(const Json& j) { return j.contains("value") || j.contains("values"); }

// The number(s) of a report object.
Result<std::vector<double>> ReportValues(const Json& j) {
  std::vector<double> vals;
  if (j.contains("values") && j.at("values").is_array()) {
    for (const Json& v : j.at("values")) {
      TUNE_ASSIGN_OR_RETURN(double n, ToNumber(v));
      vals.push_back(n);
    }
    return vals;
  }
  TUNE_ASSIGN_OR_RETURN(double n, ToNumber(j.at("value")));
  vals.push_back(n);
  return vals;
}

struct Reports {
  std::optional<std::vector<double>> final_values;
  std::optional<int64_t> pruned_step;
};

class CommandObjective : public Objective {
 public:
  explicit CommandObjective(CommandOptions options) : options_(std::move(options)) {
    patterns_ = DefaultOomPatterns();
    patterns_.insert(patterns_.end(), options_.oom_patterns.begin(), options_.oom_patterns.end());
  }

  std::string name() const override { return "command:" + options_.argv.at(0); }

  Result<TrialOutcome> Run(Trial& trial, const Json& params) override {
    TUNE_ASSIGN_OR_RETURN(fs::path dir, MakeTrialDir(trial));
    struct Cleanup {
      fs::path dir;
      bool remove;
      ~Cleanup() {
        std::error_code ec;
        if (remove) fs::remove_all(dir, ec);
      }
    } cleanup{dir, !options_.work_dir.has_value()};

    const fs::path params_file = dir / "params.json";
    const fs::path result_file = dir / "result.json";
    {
      std::ofstream out(params_file);
      out << params.dump(2) << "\n";
      if (!out) return InternalError("cannot write " + params_file.string());
    }
    std::map<std::string, std::string> values;
    for (const auto& [name, v] : params.items()) values[name] = ValueText(v);
    values["trial.number"] = std::to_string(trial.number());
    values["study.name"] = trial.study_name();
    values["trial.dir"] = dir.string();
    values["trial.params_file"] = params_file.string();
    values["trial.result_file"] = result_file.string();

    std::vector<std::string> argv;
    for (const std::string& a : options_.argv) {
      if (auto e = Expand(a, values)) {
        argv.push_back(*e);
      } else if (argv.empty()) {
        return InvalidArgumentError("the program name \"" + a + "\" names an inactive parameter");
      } else {
        spdlog::debug("Trial {}: argument \"{}\" left out (inactive parameter)", trial.number(),
                      a);
      }
    }
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      // Inherited TUNE_* variables and those the config overrides are not passed twice.
      std::string_view kv(*e);
      std::string name(kv.substr(0, kv.find('=')));
      if (name.rfind("TUNE_", 0) != 0 && !options_.env.count(name)) env.emplace_back(kv);
    }
    for (const auto& [name, v] : params.items()) env.push_back(ParamEnvName(name) + "=" + ValueText(v));
    env.push_back("TUNE_TRIAL_NUMBER=" + values["trial.number"]);
    env.push_back("TUNE_STUDY_NAME=" + trial.study_name());
    env.push_back("TUNE_TRIAL_DIR=" + dir.string());
    env.push_back("TUNE_PARAMS_FILE=" + params_file.string());
    env.push_back("TUNE_RESULT_FILE=" + result_file.string());
    for (const auto& [k, v] : options_.env) {
      if (auto e = Expand(v, values)) env.push_back(k + "=" + *e);
    }
    return Execute(trial, params, argv, env, result_file);
  }

 private:
  Result<fs::path> MakeTrialDir(const Trial& trial) const {
    std::error_code ec;
    if (options_.work_dir) {
      fs::path dir = fs::path(*options_.work_dir) / fmt::format("trial_{}", trial.number());
      fs::create_directories(dir, ec);
      if (ec) return InternalError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
      fs::remove(dir / "result.json", ec);
      return dir;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tune-trial-XXXXXX";
    if (!mkdtemp(templ.data())) {
      return InternalError(fmt::format("cannot create a temporary directory {}: {}", templ,
                                       std::strerror(errno)));
    }
    return fs::path(templ);
  }

  Result<TrialOutcome> Execute(Trial& trial, const Json& params,
                               const std::vector<std::string>& argv,
                               const std::vector<std::string>& env, const fs::path& result_file) {
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return InternalError("pipe: " + std::string(std::strerror(errno)));
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
      return InternalError("pipe: " + std::string(std::strerror(errno)));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    if (options_.cwd) posix_spawn_file_actions_addchdir_np(&fa, options_.cwd->c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);  // own process group: we can stop all its children
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, cargv[0], &fa, &attr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
      return InvalidArgumentError(fmt::format("cannot start '{}': {}{}", argv[0],
                                              std::strerror(rc),
                                              options_.cwd ? " (cwd " + *options_.cwd + ")" : ""));
    }
    spdlog::debug("Trial {}: started pid {}: {}", trial.number(), pid, fmt::join(argv, " "));

    const auto start = SteadyClock::now();
    std::optional<SteadyClock::time_point> term_sent, child_exited_at;
    std::string why_killed;
    std::string out_buf, err_line, err_tail, oom_line;
    Reports reports;
    int status = 0;
    bool reaped = false;
    bool out_open = true, err_open = true;
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);

    auto kill_group = [&](const std::string& why) {
      if (term_sent || reaped) return;
      why_killed = why;
      kill(-pid, SIGTERM);
      term_sent = SteadyClock::now();
    };
    // Handles one report object ({"value": x}, {"values": [...]}, {"step": n, "value": x}).
    auto on_report = [&](const Json& j, const std::string& shown) -> Status {
      Result<std::vector<double>> parsed = ReportValues(j);
      if (!parsed.ok()) {
        spdlog::warn("Trial {}: ignoring report {}: {}", trial.number(), shown,
                     parsed.status().message());
        return Status::Ok();
      }
      const std::vector<double>& vals = *parsed;
      if (j.contains("step")) {
        const Json& s = j.at("step");
        if (!s.is_number_integer() || s.get<int64_t>() < 0 || vals.size() != 1) {
          spdlog::warn("Trial {}: ignoring report {}: step must be an integer >= 0 with one value",
                       trial.number(), shown);
          return Status::Ok();
        }
        TUNE_RETURN_IF_ERROR(trial.Report(vals[0], s.get<int64_t>()));
        TUNE_ASSIGN_OR_RETURN(bool prune, trial.ShouldPrune());
        if (prune && !reports.pruned_step) {
          reports.pruned_step = s.get<int64_t>();
          kill_group(fmt::format("pruned at step {}", s.get<int64_t>()));
        }
      } else {
        reports.final_values = vals;
      }
      return Status::Ok();
    };
    auto on_stdout_line = [&](const std::string& line) -> Status {
      auto j = ParseLine(line);
      if (!j || !IsReport(*j)) {
        spdlog::debug("[trial {}] {}", trial.number(), line);
        return Status::Ok();
      }
      return on_report(*j, line);
    };
    auto on_stderr_line = [&](const std::string& line) {
      spdlog::debug("[trial {} stderr] {}", trial.number(), line);
      if (oom_line.empty()) {
        for (const auto& p : patterns_) {
          if (line.find(p) != std::string::npos) {
            oom_line = line.substr(0, 500);
            break;
          }
        }
      }
    };
    auto drain = [&](int fd, bool& open, bool is_stdout) -> Status {
      char buf[8192];
      while (true) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
          std::string& acc = is_stdout ? out_buf : err_line;
          if (!is_stdout) {
            err_tail.append(buf, static_cast<size_t>(n));
            if (err_tail.size() > 2 * options_.stderr_tail_bytes) {
              err_tail.erase(0, err_tail.size() - options_.stderr_tail_bytes);
            }
          }
          acc.append(buf, static_cast<size_t>(n));
          size_t pos;
          while ((pos = acc.find('\n')) != std::string::npos) {
            std::string line = acc.substr(0, pos);
            acc.erase(0, pos + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (is_stdout) {
              TUNE_RETURN_IF_ERROR(on_stdout_line(line));
            } else {
              on_stderr_line(line);
            }
          }
          if (acc.size() > (1 << 20)) acc.erase(0, acc.size() - (1 << 16));  // runaway line
          continue;
        }
        if (n == 0) {
          open = false;
          close(fd);
          if (is_stdout && !out_buf.empty()) TUNE_RETURN_IF_ERROR(on_stdout_line(out_buf));
          if (!is_stdout && !err_line.empty()) on_stderr_line(err_line);
        }
        return Status::Ok();  // EAGAIN or EOF
      }
    };

    Status loop_status;
    while (true) {
      std::vector<pollfd> fds;
      if (out_open) fds.push_back({out_pipe[0], POLLIN, 0});
      if (err_open) fds.push_back({err_pipe[0], POLLIN, 0});
      if (!fds.empty()) poll(fds.data(), fds.size(), 100);
      else if (!reaped) usleep(20000);
      if (out_open && loop_status.ok()) loop_status = drain(out_pipe[0], out_open, true);
      if (err_open) (void)drain(err_pipe[0], err_open, false);
      if (!loop_status.ok()) kill_group("internal error");

      if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        child_exited_at = SteadyClock::now();
      }
      const auto now = SteadyClock::now();
      if (InterruptRequested()) kill_group("interrupted");
      if (options_.timeout_seconds &&
          std::chrono::duration<double>(now - start).count() > *options_.timeout_seconds) {
        kill_group(fmt::format("timed out after {}s", *options_.timeout_seconds));
      }
      if (term_sent && !reaped &&
          std::chrono::duration<double>(now - *term_sent).count() > options_.kill_grace_seconds) {
        kill(-pid, SIGKILL);
      }
      if (reaped) {
        // Leftover children of the program may still hold the pipes: give them a moment, then
        // stop the whole process group so no orphan keeps GPU memory.
        if (!out_open && !err_open) break;
        if (std::chrono::duration<double>(now - *child_exited_at).count() > 2.0) {
          kill(-pid, SIGKILL);
          if (out_open) close(out_pipe[0]);
          if (err_open) close(err_pipe[0]);
          break;
        }
      }
    }
    kill(-pid, SIGKILL);  // nothing of the trial outlives it (ESRCH when already gone)
    const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    TUNE_RETURN_IF_ERROR(loop_status);

    std::string tail = err_tail.size() > options_.stderr_tail_bytes
                           ? err_tail.substr(err_tail.size() - options_.stderr_tail_bytes)
                           : err_tail;
    const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    Json exit_status = WIFEXITED(status) ? Json(WEXITSTATUS(status)) : Json(nullptr);

    if (!reports.final_values && !reports.pruned_step && why_killed.empty()) {
      std::ifstream in(result_file);
      if (in) {
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        auto j = ParseLine(text);
        if (!j) {
          Json bare = Json::parse(text, nullptr, false);
          if (bare.is_number()) j = Json{{"value", bare}};
        }
        if (j && IsReport(*j)) {
          TUNE_RETURN_IF_ERROR(on_report(*j, result_file.string()));
        } else if (!text.empty()) {
          spdlog::warn("Trial {}: result file {} holds no {{\"value\": ...}}", trial.number(),
                       result_file.string());
        }
      }
    }

    auto fail = [&](const std::string& reason) -> Result<TrialOutcome> {
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("fail_reason", reason));
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("exit_status", exit_status));
      if (WIFSIGNALED(status)) {
        TUNE_RETURN_IF_ERROR(trial.SetUserAttr("signal", strsignal(WTERMSIG(status))));
      }
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("stderr_tail", tail));
      return TrialOutcome{TrialState::kFail, {}, reason};
    };

    if (reports.pruned_step) {
      return TrialOutcome{TrialState::kPruned, {}, why_killed};
    }
    if (why_killed == "interrupted") {
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("interrupted", true));
      return fail("interrupted by the user");
    }
    if (!why_killed.empty() && why_killed.rfind("timed out", 0) == 0) {
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("timeout", true));
      return fail(why_killed);
    }
    if (!oom_line.empty() && (!exited_ok || !reports.final_values)) {
      TUNE_RETURN_IF_ERROR(trial.SetUserAttr("stderr_tail", tail));
      return RecordOom(trial, params, {{"error", oom_line}}, "out of memory: " + oom_line);
    }
    if (WIFSIGNALED(status)) {
      return fail(fmt::format("killed by signal {} ({})", WTERMSIG(status),
                              strsignal(WTERMSIG(status))));
    }
    if (!exited_ok) return fail(fmt::format("exit status {}", WEXITSTATUS(status)));
    if (!reports.final_values) {
      return fail("no value reported: print {\"value\": X} on stdout or write it to "
                  "$TUNE_RESULT_FILE");
    }
    spdlog::debug("Trial {}: program finished in {:.2f}s", trial.number(), seconds);
    return TrialOutcome{TrialState::kComplete, *reports.final_values, ""};
  }

  CommandOptions options_;
  std::vector<std::string> patterns_;
};

}  // namespace

std::unique_ptr<Objective> NewCommandObjective(CommandOptions options) {
  return std::make_unique<CommandObjective>(std::move(options));
}

}  // namespace tune

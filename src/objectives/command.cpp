#include "tune/objectives/command.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <thread>

#include "measure/gpu_process_memory.h"
#include "objectives/report_reader.h"
#include "tune/memory_guard.h"
#include "tune/trial_attrs.h"
#include "util/interrupt.h"
#include "util/python_module.h"
#include "util/subprocess.h"
#include "util/templates.h"

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

// Why tune stopped the program before it ended by itself.
enum class StopCause { kNone, kPruned, kInterrupted, kTimedOut };

// A trial directory that is removed with the trial unless the config keeps them (work_dir).
struct TrialDir {
  fs::path path;
  bool remove = true;
  TrialDir(fs::path p, bool r) : path(std::move(p)), remove(r) {}
  ~TrialDir() {
    std::error_code ec;
    if (remove) fs::remove_all(path, ec);
  }
  TrialDir(const TrialDir&) = delete;
  TrialDir& operator=(const TrialDir&) = delete;
};

// A program's device peak: the memory the driver reports for its process group, sampled every
// half second while it runs (NVML; none without it). Short spikes between samples are missed;
// PyTorch's caching allocator keeps what it reserved, so its peak is seen.
class DevicePeakSampler {
 public:
  explicit DevicePeakSampler(const GpuProcessMemory* gpu) : gpu_(gpu) {}
  void Sample(pid_t pgid) {
    const auto now = std::chrono::steady_clock::now();
    if (gpu_ == nullptr || now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    if (auto used = gpu_->UsedByGroup(pgid)) peak_ = std::max(peak_, *used);
  }
  int64_t peak() const { return peak_; }  // 0: nothing seen on a device

 private:
  const GpuProcessMemory* gpu_;
  std::chrono::steady_clock::time_point last_{};
  int64_t peak_ = 0;
};

// How a program's run ended: the rows of the outcomes table (command.h), the first that holds.
enum class Ending { kPruned, kInterrupted, kTimedOut, kOutOfMemory, kFailed, kNoValue, kComplete };

// One run of a trial's program, started by CommandObjective: stopped when the pruner says so, on
// Ctrl-C and at the timeout; its outcome decided from how it ended (command.h).
class CommandProcess : public TrialProcess {
 public:
  // `earlier_steps`: the steps earlier attempts of the trial reported; `earlier_seconds`: the
  // time they ran, which counts against the per-trial timeout.
  CommandProcess(TrialHandle& trial, TrialPlan plan, MemoryPlanner* planner,
                 const CommandOptions& options, const std::vector<std::string>& patterns,
                 std::unique_ptr<TrialDir> dir, std::unique_ptr<Subprocess> program,
                 const GpuProcessMemory* gpu, std::set<int64_t>& earlier_steps,
                 double earlier_seconds)
      : trial_(trial),
        params_(plan.params),
        plan_(std::move(plan)),
        planner_(planner),
        options_(options),
        patterns_(patterns),
        dir_(std::move(dir)),
        program_(std::move(program)),
        reader_(trial, dir_->path / "pruner.jsonl", earlier_steps),
        device_peak_(gpu),
        earlier_seconds_(earlier_seconds) {}

  Status Poll(std::chrono::milliseconds wait) override {
    const Subprocess::LineHandler on_line = [this](Stream stream, const std::string& line) {
      if (stream == Stream::kStdout) {
        TUNE_RETURN_IF_ERROR(reader_.OnStdoutLine(line));
        if (oom_line_.empty() && reader_.out_of_memory) oom_line_ = *reader_.out_of_memory;
        return Status::Ok();
      }
      spdlog::debug("[trial {} stderr] {}", trial_.number(), line);
      if (oom_line_.empty() && MatchesOom(line)) oom_line_ = line.substr(0, 500);
      return Status::Ok();
    };
    TUNE_RETURN_IF_ERROR(program_->Poll(wait, on_line));
    if (planner_ != nullptr && !program_->exited()) device_peak_.Sample(program_->pid());
    if (reader_.pruned_step) Stop(StopCause::kPruned);
    if (InterruptRequested()) Stop(StopCause::kInterrupted);
    if (options_.timeout_seconds && seconds() > *options_.timeout_seconds) {
      Stop(StopCause::kTimedOut);
    }
    return Status::Ok();
  }

  bool finished() const override { return program_->finished(); }
  void Interrupt() override { Stop(StopCause::kInterrupted); }

  Result<TrialOutcome> Finish() override {
    TUNE_ASSIGN_OR_RETURN(const Ending ending, Ended());
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome, Decide(ending));
    if (planner_ != nullptr) {
      TUNE_RETURN_IF_ERROR(planner_->Record(trial_, plan_, Peak(), ending == Ending::kOutOfMemory));
    }
    return outcome;
  }

  // REQUIRES: finished(). How the program ended, decided once; a program that gave no value on
  // stdout and was not stopped is asked for $TUNE_RESULT_FILE first.
  Result<Ending> Ended() {
    if (ending_) return *ending_;
    if (!reader_.final_values && !reader_.pruned_step && stop_ == StopCause::kNone) {
      TUNE_RETURN_IF_ERROR(reader_.ReadResultFile(dir_->path / "result.json"));
    }
    const ExitStatus& exit = program_->exit_status();
    spdlog::debug("Trial {}: program ended after {:.2f}s ({})", trial_.number(),
                  program_->seconds(), exit.Describe());
    AwaitSchedulersSignal(exit);
    if (reader_.pruned_step) {
      ending_ = Ending::kPruned;
    } else if (stop_ == StopCause::kInterrupted || (!exit.success() && InterruptRequested())) {
      // A program that died while tune was being stopped (a scheduler signals the whole job, the
      // program too) was interrupted, not failed.
      ending_ = Ending::kInterrupted;
    } else if (stop_ == StopCause::kTimedOut) {
      ending_ = Ending::kTimedOut;
    } else if (!oom_line_.empty() && (!exit.success() || !reader_.final_values)) {
      ending_ = Ending::kOutOfMemory;
    } else if (!exit.success()) {
      ending_ = Ending::kFailed;
    } else {
      ending_ = reader_.final_values ? Ending::kComplete : Ending::kNoValue;
    }
    return *ending_;
  }

  // What the program reported, else what the driver saw on a device, else its resident set.
  ProgramPeak Peak() const {
    if (reader_.memory_peak) {
      return {*reader_.memory_peak, "reported", reader_.memory_peak_reserved.value_or(-1)};
    }
    if (device_peak_.peak() > 0) return {device_peak_.peak(), "device_sampled", -1};
    return {program_->exit_status().max_rss_bytes, "max_rss", -1};
  }

  const TrialPlan& plan() const { return plan_; }
  // The out-of-memory line: the first stderr line matching a pattern, or the program's report.
  const std::string& oom_line() const { return oom_line_; }
  // The time this trial's programs ran, earlier attempts included.
  double seconds() const { return earlier_seconds_ + program_->seconds(); }
  // Added to the trial's oom_config when it ends out of memory.
  void AddOomDetail(const std::string& key, Json value) { oom_details_[key] = std::move(value); }

 private:
  void Stop(StopCause cause) {
    if (program_->stop_requested() || program_->exited()) return;
    stop_ = cause;
    program_->Stop();
  }

  bool MatchesOom(const std::string& line) const {
    return std::any_of(patterns_.begin(), patterns_.end(),
                       [&](const std::string& p) { return line.find(p) != std::string::npos; });
  }

  // A scheduler signals every process of the job, the program sometimes a moment before tune: a
  // program killed by SIGTERM that tune did not stop gives tune's own signal half a second to
  // arrive, so that the trial ends as stopped rather than failed.
  void AwaitSchedulersSignal(const ExitStatus& exit) const {
    if (stop_ != StopCause::kNone || exit.signal != SIGTERM) return;
    for (int i = 0; i < 50 && !InterruptRequested(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // The trial's outcome for `ending`, its user attributes recorded (command.h).
  Result<TrialOutcome> Decide(Ending ending) {
    switch (ending) {
      case Ending::kPruned:
        return TrialOutcome{
            TrialState::kPruned, {}, fmt::format("pruned at step {}", *reader_.pruned_step)};
      case Ending::kInterrupted:
        TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kInterrupted, true));
        TUNE_RETURN_IF_ERROR(
            trial_.SetUserAttr(attrs::kReason, EndReasonName(EndReason::kInterrupted)));
        return Fail(InterruptReason());
      case Ending::kTimedOut:
        TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kTimeout, true));
        TUNE_RETURN_IF_ERROR(
            trial_.SetUserAttr(attrs::kReason, EndReasonName(EndReason::kTimeout)));
        return Fail(fmt::format("timed out after {}s", *options_.timeout_seconds));
      case Ending::kOutOfMemory: {
        TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kStderrTail, program_->stderr_tail()));
        Json details = oom_details_;
        details["error"] = oom_line_;
        return RecordOom(trial_, params_, details, "out of memory: " + oom_line_);
      }
      case Ending::kFailed:
        return Fail(program_->exit_status().Describe());
      case Ending::kNoValue:
        return Fail(
            "no value reported: print {\"value\": X} on stdout or write it to "
            "$TUNE_RESULT_FILE");
      case Ending::kComplete:
        break;
    }
    return TrialOutcome{TrialState::kComplete, *reader_.final_values, ""};
  }

  Result<TrialOutcome> Fail(const std::string& reason) {
    const ExitStatus& exit = program_->exit_status();
    TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kFailReason, reason));
    TUNE_RETURN_IF_ERROR(
        trial_.SetUserAttr(attrs::kExitStatus, exit.exited ? Json(exit.code) : Json(nullptr)));
    if (exit.signal != 0)
      TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kSignal, exit.SignalName()));
    TUNE_RETURN_IF_ERROR(trial_.SetUserAttr(attrs::kStderrTail, program_->stderr_tail()));
    return TrialOutcome{TrialState::kFail, {}, reason};
  }

  TrialHandle& trial_;
  const Json params_;
  const TrialPlan plan_;
  MemoryPlanner* planner_;  // null: no memory section
  const CommandOptions& options_;
  const std::vector<std::string>& patterns_;
  std::unique_ptr<TrialDir> dir_;
  std::unique_ptr<Subprocess> program_;
  ReportReader reader_;
  StopCause stop_ = StopCause::kNone;
  std::optional<Ending> ending_;  // Ended(), once decided
  // The first stderr line matching an out-of-memory pattern, or the program's out_of_memory report.
  std::string oom_line_;
  Json oom_details_ = Json::object();
  DevicePeakSampler device_peak_;
  double earlier_seconds_;
};

// A command trial: its program, and after an out-of-memory error the program again at half the
// micro-batch while the memory guard allows it (memory.oom_retry, MemoryPlanner::RetryAfterOom).
// Each attempt gets its own trial directory contents (params file, pruner answers, result file);
// the steps an earlier attempt reported keep their first values.
class CommandTrial : public TrialProcess {
 public:
  using StartAttempt = std::function<Result<std::unique_ptr<CommandProcess>>(
      const TrialPlan& plan, std::set<int64_t>& earlier_steps, double earlier_seconds)>;

  CommandTrial(TrialHandle& trial, MemoryPlanner* planner, StartAttempt start)
      : trial_(trial), planner_(planner), start_(std::move(start)) {}

  Status Begin(const TrialPlan& plan) {
    TUNE_ASSIGN_OR_RETURN(attempt_, start_(plan, steps_, 0.0));
    return Status::Ok();
  }

  Status Poll(std::chrono::milliseconds wait) override {
    TUNE_RETURN_IF_ERROR(attempt_->Poll(wait));
    if (!attempt_->finished() || planner_ == nullptr || stopped_ || InterruptRequested()) {
      return Status::Ok();
    }
    TUNE_ASSIGN_OR_RETURN(const Ending ending, attempt_->Ended());
    if (ending != Ending::kOutOfMemory) return Status::Ok();
    return Retry();
  }

  bool finished() const override { return attempt_->finished(); }
  void Interrupt() override {
    stopped_ = true;  // no retry either
    attempt_->Interrupt();
  }
  Result<TrialOutcome> Finish() override { return attempt_->Finish(); }

 private:
  // The attempt ran out of memory: the next one at half the micro-batch, when the guard allows.
  Status Retry() {
    const TrialPlan& ran = attempt_->plan();
    const std::string& error = attempt_->oom_line();
    TUNE_ASSIGN_OR_RETURN(std::optional<TrialPlan> next,
                          planner_->RetryAfterOom(trial_, ran, attempt_->Peak(), error));
    if (!next) return Status::Ok();
    Json failed = Json::object();  // the params the retry changes, as this attempt had them
    for (const auto& [name, value] : next->params.items()) {
      if (!ran.params.contains(name) || ran.params[name] != value) failed[name] = ran.params[name];
    }
    failed["error"] = error;
    retries_.push_back(std::move(failed));
    spdlog::warn("Trial {}: out of memory ({}); {}", trial_.number(), error, next->summary);
    const double seconds = attempt_->seconds();
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<CommandProcess> attempt, start_(*next, steps_, seconds));
    attempt_ = std::move(attempt);
    attempt_->AddOomDetail("retries", retries_);
    return Status::Ok();
  }

  TrialHandle& trial_;
  MemoryPlanner* planner_;  // null: no memory section, no retries
  StartAttempt start_;
  std::set<int64_t> steps_;  // the steps the attempts reported
  Json retries_ = Json::array();
  std::unique_ptr<CommandProcess> attempt_;
  bool stopped_ = false;  // Interrupt() was called
};

class CommandObjective : public Objective {
 public:
  CommandObjective(CommandOptions options, std::unique_ptr<MemoryPlanner> planner)
      : options_(std::move(options)), planner_(std::move(planner)) {
    if (planner_) {
      std::string why;
      gpu_ = GpuProcessMemory::Open(&why);
      spdlog::debug("Command trials' device peaks: {}", gpu_ ? "sampled from NVML" : why);
    }
    patterns_ = DefaultOomPatterns();
    patterns_.insert(patterns_.end(), options_.oom_patterns.begin(), options_.oom_patterns.end());
  }

  std::string name() const override { return "command:" + options_.argv.at(0); }

  Result<TrialOutcome> Run(TrialHandle& trial, const Json& params) override {
    TUNE_ASSIGN_OR_RETURN(TrialPlan plan, Plan(trial, params));
    if (plan.outcome) return *plan.outcome;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<TrialProcess> process, StartTrial(trial, plan));
    while (!process->finished()) {
      TUNE_RETURN_IF_ERROR(process->Poll(std::chrono::milliseconds(100)));
    }
    return process->Finish();
  }

  std::vector<Card> CardsNow() const override {
    return planner_ ? planner_->CardsNow() : Objective::CardsNow();
  }

  Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) override {
    if (planner_) return planner_->Plan(trial, params);
    return Objective::Plan(trial, params);
  }

  Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                             int64_t room) override {
    if (planner_) return planner_->PlanToFit(trial, params, room);
    return Objective::PlanToFit(trial, params, room);
  }

  // Several trials at once: the program learns what it may use (TUNE_MEMORY_BUDGET, bytes: its
  // reservation plus the guard's margin), to cap itself there (for example
  // torch.cuda.set_per_process_memory_fraction), so that a wrong prediction runs only this trial
  // out of memory.
  Result<std::unique_ptr<TrialProcess>> Start(TrialHandle& trial, const TrialPlan& plan) override {
    TrialPlan capped = plan;
    capped.cap = planner_ ? planner_->ProgramCap(plan) : plan.reservation;
    return StartTrial(trial, capped);
  }

 private:
  // The trial's program started with the plan's params, retried after an out-of-memory error as
  // the memory guard allows (CommandTrial).
  Result<std::unique_ptr<TrialProcess>> StartTrial(TrialHandle& trial, const TrialPlan& plan) {
    auto process = std::make_unique<CommandTrial>(
        trial, planner_.get(),
        [this, &trial](const TrialPlan& p, std::set<int64_t>& steps, double seconds) {
          return StartProgram(trial, p, steps, seconds);
        });
    TUNE_RETURN_IF_ERROR(process->Begin(plan));
    return std::unique_ptr<TrialProcess>(std::move(process));
  }

  // Writes the trial's directory and params file and starts the program with the plan's params.
  Result<std::unique_ptr<CommandProcess>> StartProgram(TrialHandle& trial, const TrialPlan& plan,
                                                       std::set<int64_t>& earlier_steps,
                                                       double earlier_seconds) {
    const Json& params = plan.params;
    TUNE_ASSIGN_OR_RETURN(fs::path path, MakeTrialDir(trial));
    auto dir = std::make_unique<TrialDir>(path, !options_.work_dir.has_value());
    const fs::path params_file = path / "params.json";
    {
      std::ofstream out(params_file);
      out << params.dump(2) << "\n";
      if (!out) return InternalError("cannot write " + params_file.string());
    }
    std::map<std::string, std::string> values;
    for (const auto& [name, v] : params.items()) values[name] = TemplateValueText(v);
    values["trial.number"] = std::to_string(trial.number());
    values["study.name"] = trial.study_name();
    values["trial.dir"] = path.string();
    values["trial.params_file"] = params_file.string();
    values["trial.result_file"] = (path / "result.json").string();
    SubprocessOptions so;
    TUNE_ASSIGN_OR_RETURN(so.argv, ExpandArgv(trial, values));
    so.env = Environment(params, values);
    if (planner_) {
      OverrideEnvironment(so.env, planner_->Environment(plan));
    }
    if (plan.cap > 0) so.env.push_back(fmt::format("TUNE_MEMORY_BUDGET={}", plan.cap));
    so.cwd = options_.cwd;
    so.kill_grace_seconds = options_.kill_grace_seconds;
    so.stderr_tail_bytes = options_.stderr_tail_bytes;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> program, Subprocess::Spawn(so));
    spdlog::debug("Trial {}: started pid {}: {}", trial.number(), program->pid(),
                  fmt::join(so.argv, " "));
    return std::make_unique<CommandProcess>(trial, plan, planner_.get(), options_, patterns_,
                                            std::move(dir), std::move(program), gpu_.get(),
                                            earlier_steps, earlier_seconds);
  }

  Result<fs::path> MakeTrialDir(const TrialHandle& trial) const {
    std::error_code ec;
    if (options_.work_dir) {
      fs::path dir = fs::path(*options_.work_dir) / fmt::format("trial_{}", trial.number());
      fs::create_directories(dir, ec);
      if (ec) return InternalError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
      // A kept directory's earlier files (an earlier attempt's) must not answer this one.
      fs::remove(dir / "result.json", ec);
      fs::remove(dir / "pruner.jsonl", ec);
      return dir;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tune-trial-XXXXXX";
    if (!mkdtemp(templ.data())) {
      return InternalError(
          fmt::format("cannot create a temporary directory {}: {}", templ, std::strerror(errno)));
    }
    return fs::path(templ);
  }

  // The argv templates expanded; an argument naming an inactive parameter is left out.
  Result<std::vector<std::string>> ExpandArgv(
      const TrialHandle& trial, const std::map<std::string, std::string>& values) const {
    std::vector<std::string> argv;
    for (const std::string& a : options_.argv) {
      if (auto e = ExpandTemplate(a, values)) {
        argv.push_back(*e);
      } else if (argv.empty()) {
        return InvalidArgumentError("the program name \"" + a + "\" names an inactive parameter");
      } else {
        spdlog::debug("Trial {}: argument \"{}\" left out (inactive parameter)", trial.number(), a);
      }
    }
    return argv;
  }

  // tune's environment without inherited TUNE_* variables and those the config sets, plus
  // TUNE_PARAM_<NAME> per parameter, the trial's TUNE_* variables and the config's `env`.
  std::vector<std::string> Environment(const Json& params,
                                       const std::map<std::string, std::string>& values) const {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string_view kv(*e);
      std::string name(kv.substr(0, kv.find('=')));
      if (name.rfind("TUNE_", 0) != 0 && !options_.env.count(name)) env.emplace_back(kv);
    }
    for (const auto& [name, v] : params.items())
      env.push_back(ParamEnvName(name) + "=" + TemplateValueText(v));
    env.push_back("TUNE_TRIAL_NUMBER=" + values.at("trial.number"));
    env.push_back("TUNE_STUDY_NAME=" + values.at("study.name"));
    env.push_back("TUNE_TRIAL_DIR=" + values.at("trial.dir"));
    env.push_back("TUNE_PARAMS_FILE=" + values.at("trial.params_file"));
    env.push_back("TUNE_RESULT_FILE=" + values.at("trial.result_file"));
    env.push_back("TUNE_PRUNER_FILE=" + values.at("trial.dir") + "/pruner.jsonl");
    for (const auto& [k, v] : options_.env) {
      if (auto e = ExpandTemplate(v, values)) env.push_back(k + "=" + *e);
    }
    // tune_trial.py importable: its directory last on PYTHONPATH (a module of the user's wins).
    if (python_dir_) {
      auto it = std::find_if(env.begin(), env.end(),
                             [](const std::string& e) { return e.rfind("PYTHONPATH=", 0) == 0; });
      if (it == env.end()) {
        env.push_back("PYTHONPATH=" + *python_dir_);
      } else {
        *it += (it->size() > std::string_view("PYTHONPATH=").size() ? ":" : "") + *python_dir_;
      }
    }
    return env;
  }

  CommandOptions options_;
  std::unique_ptr<MemoryPlanner> planner_;  // null: no memory section
  std::shared_ptr<GpuProcessMemory> gpu_;   // NVML, when a planner needs device peaks
  std::vector<std::string> patterns_;
  std::optional<std::string> python_dir_ = PythonModuleDir();
};

}  // namespace

std::unique_ptr<Objective> NewCommandObjective(CommandOptions options,
                                               std::unique_ptr<MemoryPlanner> planner) {
  return std::make_unique<CommandObjective>(std::move(options), std::move(planner));
}

}  // namespace tune

// `tune --study NAME ...`: runs (or resumes) a study from its config.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "app.h"
#include "commands.h"
#include "config/boundary_probes.h"
#include "config/config.h"
#include "measure/gpu_process_memory.h"
#include "memory/cards.h"
#include "memory/estimator.h"
#include "memory/guard_planner.h"
#include "memory/simulated_card.h"
#include "progress.h"
#include "study/study_defaults.h"
#include "study/study_summary.h"
#include "torch_loader.h"
#include "tracking/tracker.h"
#include "tune/optimize.h"
#include "tune/samplers/tpe.h"
#include "tune/study.h"
#include "util/device.h"
#include "util/interrupt.h"
#include "util/text.h"

namespace tune::app {
namespace {

namespace fs = std::filesystem;

extern "C" void OnSignal(int sig) {
  RequestInterrupt(sig);
  // A second Ctrl-C ends the process at once.
  std::signal(sig, SIG_DFL);
}

Result<StudyConfig> LoadConfig(const RunArgs& args) {
  fs::path path =
      args.config ? fs::path(*args.config) : fs::path("configs") / (args.study + ".json");
  auto config = LoadStudyConfig(path);
  if (!config.ok() && config.status().code() == StatusCode::kNotFound && !args.config) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("configs", ec)) {
      if (e.path().extension() == ".json" && e.path().stem() != "models") {
        names.push_back(e.path().stem().string());
      }
    }
    std::sort(names.begin(), names.end());
    return NotFoundError(fmt::format("{} (pass --config FILE{}{})", config.status().message(),
                                     names.empty() ? "" : "; configs here: " + JoinNames(names),
                                     DidYouMean(args.study, names)));
  }
  return config;
}

// --oom-retry for a command objective's memory section.
Status ApplyCommandOomRetry(const RunArgs& args, StudyConfig& config) {
  if (!config.objective.command_memory) {
    return InvalidArgumentError(
        fmt::format("--oom-retry applies to the train objective and to a command objective with a "
                    "\"memory\" section; {} has none",
                    config.source));
  }
  CommandMemoryOptions& memory = *config.objective.command_memory;
  memory.guard.oom_retry = *args.oom_retry;
  if (Status st = CheckOomRetry(memory); !st.ok()) {
    return InvalidArgumentError(fmt::format("--oom-retry {}: {}", *args.oom_retry, st.message()));
  }
  return Status::Ok();
}

// --device, --device-memory, --oom-retry: the train objective's settings (--oom-retry: also a
// command objective's).
Status ApplyTrainFlags(const RunArgs& args, StudyConfig& config) {
  if (!args.device && !args.device_memory && !args.oom_retry && !args.save_best) {
    return Status::Ok();
  }
  if (config.objective.type == ObjectiveType::kCommand && args.oom_retry && !args.device &&
      !args.device_memory && !args.save_best) {
    return ApplyCommandOomRetry(args, config);
  }
  if (config.objective.type != ObjectiveType::kTrain) {
    return InvalidArgumentError(fmt::format(
        "--device, --device-memory, --oom-retry and --save-best apply to the train objective "
        "(--oom-retry also to a command objective with a \"memory\" section); {} has objective "
        "'{}'",
        config.source, ObjectiveTypeName(config.objective.type)));
  }
  if (args.save_best) {
    if (config.objective.train.task != TrainTask::kTextClassification) {
      return InvalidArgumentError("--save-best applies to text_classification only");
    }
    config.objective.train.save_best = fs::absolute(*args.save_best).lexically_normal().string();
  }
  if (args.device) config.objective.train.device = *args.device;
  GuardOptions& guard = config.objective.train.guard;
  if (args.device_memory) {
    auto bytes = ParseBytes(*args.device_memory);
    if (!bytes.ok()) {
      return InvalidArgumentError("--device-memory: " + bytes.status().message());
    }
    guard.device_memory = *bytes;
    guard.card_memory.clear();  // one size for every card
  }
  if (args.oom_retry) guard.oom_retry = *args.oom_retry;
  return Status::Ok();
}

// --devices 0,2: the CUDA cards trials share (train objective, or a command objective with a
// memory section).
Status ApplyDevicesFlag(const RunArgs& args, StudyConfig& config) {
  if (!args.devices) return Status::Ok();
  GuardOptions* guard = config.objective.type == ObjectiveType::kTrain
                            ? &config.objective.train.guard
                        : config.objective.command_memory ? &config.objective.command_memory->guard
                                                          : nullptr;
  if (guard == nullptr) {
    return InvalidArgumentError(fmt::format(
        "--devices applies to the train objective and to a command objective with a \"memory\" "
        "section; {} has none",
        config.source));
  }
  guard->devices.clear();
  std::istringstream list(*args.devices);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    if (entry.empty() || entry.size() > 4 ||
        entry.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgumentError(
          fmt::format("--devices {}: '{}' is not a card index; expected a list such as 0,2",
                      *args.devices, entry));
    }
    const int d = std::stoi(entry);
    if (std::find(guard->devices.begin(), guard->devices.end(), d) != guard->devices.end()) {
      return InvalidArgumentError(
          fmt::format("--devices {}: card {} is named twice", *args.devices, d));
    }
    guard->devices.push_back(d);
  }
  if (guard->devices.empty()) {
    return InvalidArgumentError("--devices: expected a list of card indices such as 0,2");
  }
  return Status::Ok();
}

// Command-line values override the config's.
Status ApplyFlags(const RunArgs& args, StudyConfig& config) {
  if (args.n_trials) config.n_trials = *args.n_trials;
  if (args.timeout) config.timeout_seconds = *args.timeout;
  if (args.storage) config.storage = *args.storage;
  if (args.sampler) config.sampler.named = true;
  if (args.sampler && *args.sampler != config.sampler.name) {
    // Options in the config belong to the config's sampler; another sampler starts from its
    // defaults.
    if (!config.sampler.options.empty()) {
      spdlog::info("--sampler {} replaces the config's sampler '{}' and its options", *args.sampler,
                   config.sampler.name);
    }
    config.sampler.name = *args.sampler;
    config.sampler.named = true;
    config.sampler.options = Json::object();
    config.sampler.source = "--sampler";
  }
  if (args.seed) config.sampler.seed = static_cast<uint64_t>(*args.seed);
  if (args.heartbeat_interval) config.heartbeat_interval = *args.heartbeat_interval;
  if (args.grace_period) config.grace_period = *args.grace_period;
  if (args.retry_failed) config.retry_failed = *args.retry_failed;
  if (args.jobs) {
    auto jobs = ParseJobsValue(*args.jobs);
    if (!jobs.ok()) return InvalidArgumentError("--jobs: " + jobs.status().message());
    config.jobs = *jobs;
  }
  if (args.max_jobs) config.max_jobs = *args.max_jobs;
  if (args.progress) {
    auto mode = ParseProgressMode(*args.progress);
    if (!mode.ok()) return InvalidArgumentError("--progress: " + mode.status().message());
    config.progress = *mode;
  }
  if (args.progress_interval) config.progress_interval = *args.progress_interval;
  if (args.mlflow_uri) {
    for (Status st : {CheckMlflowUri(*args.mlflow_uri), CheckMlflowSupported()}) {
      if (!st.ok()) return InvalidArgumentError("--mlflow-uri: " + st.message());
    }
    const std::string experiment =
        config.tracking.mlflow ? config.tracking.mlflow->experiment : std::string();
    config.tracking.mlflow = MlflowOptions{*args.mlflow_uri, experiment};
  }
  TUNE_RETURN_IF_ERROR(CheckHeartbeatSettings(
      config, args.heartbeat_interval || args.grace_period || args.retry_failed
                  ? "--heartbeat-interval/--grace-period/--retry-failed"
                  : config.source));
  TUNE_RETURN_IF_ERROR(ApplyDevicesFlag(args, config));
  return ApplyTrainFlags(args, config);
}

// The train objective's precision against the CUDA cards its trials run on, as the driver (NVML)
// describes them, before the study starts: bf16 on a card without bfloat16 is a config error
// (CheckTrainPrecisionOnCard). LibTorch is not asked: a tune whose LibTorch has no CUDA finds out
// the same. A card NVML cannot describe (no driver library) is not checked here.
Status CheckPrecisionOnCards(const StudyConfig& config) {
  if (config.objective.type != ObjectiveType::kTrain) return Status::Ok();
  const TrainObjectiveOptions& train = config.objective.train;
  const Result<Device> device = ParseDevice(train.device);
  if (!device.ok() || !device->is_cuda() || train.guard.simulate) return Status::Ok();
  std::vector<std::string> devices{train.device};
  if (config.jobs != 1) {  // --jobs: every card (memory/cards.h)
    TUNE_ASSIGN_OR_RETURN(Cards cards, Cards::Resolve(train.device, train.guard));
    devices.clear();
    for (size_t k = 0; k < cards.size(); ++k) devices.push_back(cards.device(k));
  }
  for (const std::string& d : devices) {
    const DeviceNvml nvml(d);
    const std::optional<std::pair<int, int>> capability = nvml.ComputeCapability();
    if (!capability) continue;
    const std::optional<std::string> name = nvml.Name();
    TUNE_RETURN_IF_ERROR(CheckTrainPrecisionOnCard(
        config, name ? fmt::format("{} ({})", d, *name) : d, *capability));
  }
  return Status::Ok();
}

// With several trials at once: TPE counts the running trials as bad ones (constant liar) unless
// the config says otherwise, and train trials run in child `tune run-trial` processes, so that
// this process never initialises the device.
void PrepareJobs(const std::string& study, StudyConfig& config) {
  if (config.jobs == 1) return;
  // Optuna 5.0's TPE has constant_liar on already; a study under the optuna-4.9 preset gets it.
  const std::string preset = config.sampler.options.value("preset", std::string());
  if (config.sampler.name == "tpe" && !config.sampler.options.contains("constant_liar") &&
      (preset == "optuna-4.9" || preset == "optuna")) {
    config.sampler.options["constant_liar"] = true;
    spdlog::info(
        "Several trials at once: TPE's constant_liar is on (running trials count as "
        "bad ones), so that they do not all try the same region");
  }
  if (config.objective.type != ObjectiveType::kTrain) return;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const TrainObjectiveOptions& train = config.objective.train;
  config.objective.train.child_command = {
      ec ? std::string("tune") : self.string(),
      "run-trial",
      "--config",
      fs::absolute(config.source).string(),
      "--study",
      study,
      "--device",
      train.device,
      "--oom-retry",
      std::to_string(train.guard.oom_retry),
      "--log-level",
      std::string(spdlog::level::to_string_view(spdlog::get_level()).data())};
  if (train.save_best) {
    config.objective.train.child_command.push_back("--save-best");
    config.objective.train.child_command.push_back(*train.save_best);
  }
}

// The LibTorch trainer for a train objective (loaded from libtune_torch.so); null otherwise, and
// with several trials at once (each child loads its own).
Result<std::unique_ptr<Trainer>> LoadTrainerFor(const StudyConfig& config) {
  if (config.objective.type != ObjectiveType::kTrain || config.jobs != 1) {
    return std::unique_ptr<Trainer>();
  }
  const GuardOptions& guard = config.objective.train.guard;
  if (guard.simulate)
    TUNE_RETURN_IF_ERROR(SetProcessSimulatedCard(*guard.simulate, *guard.device_memory));
  const TrainObjectiveOptions& train = config.objective.train;
  return LoadTrainer(train.device, train.threads, guard.device_memory);
}

struct OpenedStudy {
  std::unique_ptr<Study> study;
  std::unique_ptr<Objective> objective;
};

// The sampler, pruner, objective (with its trainer), storage and study of `config`; enqueues
// the config's trials into a new study, then the boundary probes its measured models still need.
Result<OpenedStudy> OpenStudy(const std::string& name, const StudyConfig& config,
                              std::shared_ptr<Storage> storage, const StudyDefaults& rules) {
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler, MakeSampler(config.sampler));
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Pruner> pruner, MakePruner(config.pruner));
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, LoadTrainerFor(config));
  OpenedStudy opened;
  TUNE_ASSIGN_OR_RETURN(opened.objective, MakeObjective(config, std::move(trainer)));
  TUNE_ASSIGN_OR_RETURN(opened.study,
                        Study::CreateOrLoad(storage, name, config.directions, std::move(sampler),
                                            std::move(pruner), config.sampler.seed));
  Study& s = *opened.study;
  TUNE_RETURN_IF_ERROR(RecordStudyDefaults(s.storage(), s.study_id(), rules));
  std::vector<std::pair<Json, Json>> enqueue;
  for (const auto& [params, user_attrs] : config.enqueue_trials)
    enqueue.emplace_back(params, user_attrs);
  TUNE_ASSIGN_OR_RETURN(int64_t enqueued, s.EnqueueTrialsIfEmpty(enqueue));
  if (enqueued > 0) spdlog::info("Enqueued the config's {} trial(s)", enqueued);
  TUNE_ASSIGN_OR_RETURN(int64_t existing, s.storage().CountTrials(s.study_id()));
  if (existing > enqueued) {
    spdlog::info("Resuming study '{}' ({} trials stored)", s.name(), existing);
  }
  TUNE_RETURN_IF_ERROR(EnqueueBoundaryProbes(config, s));
  return opened;
}

std::string DirectionsText(const std::vector<StudyDirection>& directions) {
  std::string out;
  for (StudyDirection d : directions)
    out += (out.empty() ? "" : ", ") + std::string(StudyDirectionName(d));
  return out;
}

// "tpe (preset optuna-5.0, multivariate)", "random", ...
std::string SamplerText(Study& s) {
  const auto* tpe = dynamic_cast<const TpeSampler*>(&s.sampler());
  if (tpe == nullptr) return s.sampler().name();
  const TpeOptions& o = tpe->options();
  return fmt::format("tpe (preset {}{}{})", TpePresetName(o.preset),
                     o.Multivariate(s.directions().size()) ? ", multivariate" : "",
                     o.constant_liar ? ", constant liar" : "");
}

void LogStudyStart(Study& s, const Objective& objective, const StudyConfig& config) {
  spdlog::info(
      "Study '{}': {} on {}, sampler {}, pruner {}, objective {}, target {} finished "
      "trials{}",
      s.name(), DirectionsText(s.directions()), s.storage().url(), SamplerText(s),
      s.pruner().name(), objective.name(),
      config.n_trials ? std::to_string(*config.n_trials) : "unlimited",
      config.timeout_seconds ? fmt::format(", timeout {}s", *config.timeout_seconds) : "");
  if (config.heartbeat_interval > 0) {
    spdlog::info(
        "Heartbeat every {}s; RUNNING trials silent for more than {}s are failed as "
        "stale{}",
        config.heartbeat_interval, config.GracePeriod(),
        config.retry_failed > 0 ? fmt::format(" and retried up to {} time(s)", config.retry_failed)
                                : "");
  }
  if (!config.n_trials && !config.timeout_seconds) {
    spdlog::warn("No --n-trials or --timeout: running until Ctrl-C");
  }
  if (config.jobs != 1) {
    const std::vector<Card> now = objective.CardsNow();
    const size_t cards = now.size();
    std::string usable;
    for (const Card& card : now) {
      if (!card.budget) continue;
      usable += (usable.empty() ? "" : ", ") + FormatBytes(*card.budget) +
                (cards > 1 ? " on " + card.name : std::string());
    }
    spdlog::info(
        "Jobs: {}, each trial in its own process{}; {}",
        config.jobs == kJobsAuto ? fmt::format("auto (as many as the memory holds, at most {}{})",
                                               config.max_jobs, cards > 1 ? " per card" : "")
                                 : std::to_string(config.jobs),
        cards > 1 ? fmt::format(", over {} cards (each trial on the least busy card where it "
                                "fits best)",
                                cards)
                  : std::string(),
        !usable.empty() ? fmt::format("trials reserve their predicted peak of {} usable", usable)
                        : std::string("no memory prediction: nothing is reserved"));
  }
}

// The train objective's flags.
void DeclareTrainFlags(CLI::App& app, RunArgs& run) {
  app.add_option("--device", run.device,
                 "train objective: the device trials train on, cpu, cuda or cuda:N (default: the "
                 "config's objective.device, else cpu)");
  app.add_option("--device-memory", run.device_memory,
                 "train objective: the memory trials may use, e.g. 24GiB (on CPU a simulated "
                 "card; on CUDA at most the card); default: the config's memory.device_memory");
  app.add_option("--devices", run.devices,
                 "--jobs over these CUDA cards, e.g. 0,2 (CUDA's numbering; default: the "
                 "objective's devices, else every visible card with --device cuda); each trial's "
                 "process sees only its card")
      ->type_name("LIST");
  app.add_option("--oom-retry", run.oom_retry,
                 "train objective, or a command objective with a memory section: retry a "
                 "trial that runs out of memory up to K times at half the micro-batch and twice "
                 "the accumulation (default: the config's memory.oom_retry, else 0)")
      ->check(CLI::Range(0, 10));
  app.add_option("--save-best", run.save_best,
                 "train objective: keep the study's best model in DIR (a Hugging Face-style "
                 "directory; `tune predict --model DIR`), replaced whenever a trial beats the "
                 "study's best (default: the config's objective.save_best)");
}

// The end of a run waits for the tracker to record the trials still queued while it records one
// at least this often.
constexpr double kTrackingStallSeconds = 30;

// The tracker of the config's "tracking" (MLflow, TensorBoard), or null without one. Its tally
// starts from the study's stored trials.
std::unique_ptr<Tracker> StartTracker(Study& s, const StudyConfig& config) {
  if (config.tracking.empty()) return nullptr;
  const TrackedStudy tracked{s.name(), s.directions(), s.pruner().name()};
  auto stored = s.storage().GetAllTrials(s.study_id());
  std::vector<std::unique_ptr<TrackingSink>> sinks = NewSinks(config.tracking, tracked);
  std::string where;
  for (const auto& sink : sinks) where += (where.empty() ? "" : ", ") + sink->name();
  spdlog::info("Tracking every finished trial: {}", where);
  return std::make_unique<Tracker>(std::move(sinks), tracked,
                                   stored.ok() ? *stored : std::vector<FrozenTrial>());
}

// Records what the tracker still holds, then the study's counts as the storage has them now
// (every worker's trials: the last worker to finish leaves the whole study's counts).
void FinishTracker(Study& s, Tracker& tracker) {
  (void)tracker.Finish(kTrackingStallSeconds, [&s]() -> std::optional<StudyTally> {
    auto all = s.storage().GetAllTrials(s.study_id());
    if (!all.ok()) return std::nullopt;
    return TallyOf(*all, s.directions());
  });
}

// Optimize() with Ctrl-C and SIGTERM turned into a clean stop; each finished trial goes to the
// tracker too.
Result<OptimizeResult> OptimizeWithSignals(Study& s, const StudyConfig& config,
                                           Objective& objective, ProgressLog& progress,
                                           Tracker* tracker) {
  OptimizeOptions options;
  static_cast<RunSettings&>(options) = config;
  options.on_trial_finished = [&](const FrozenTrial& t, const TrialOutcome& o) {
    progress.OnTrialFinished(t, o);
    if (tracker != nullptr) tracker->Add(t);
  };
  options.on_stale_trial = [&](const FailedStaleTrial& stale) { progress.OnStaleTrial(stale); };
  options.on_trial_started = [&](const Trial& t, const TrialPlan& plan, const JobsState& jobs) {
    progress.OnTrialStarted(t, plan, jobs);
  };
  options.on_jobs_changed = [&](const JobsState& jobs) { progress.set_jobs(jobs); };
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto result = Optimize(s, config.space, objective, options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  return result;
}

// After the run, from one read of the study's trials: the summary of the whole study on stderr
// (not at --log-level warn and above) and the best trial on stdout (several objectives: the
// trials of the Pareto front).
void ReportRun(Study& s, const OptimizeResult& result, double elapsed_seconds, Format format) {
  auto trials = s.Trials();
  if (!trials.ok()) {
    spdlog::warn("No summary: {}", trials.status().message());
    return;
  }
  if (spdlog::get_level() <= spdlog::level::info) {
    auto info = s.storage().GetStudy(s.study_id());
    const StudySummary summary =
        SummarizeTrials(*trials, s.directions(), info.ok() ? info->system_attrs : Json::object());
    std::cerr << fmt::format("This run: {} trial(s) finished in {:.1f}s\n", result.trials_run,
                             elapsed_seconds)
              << SummaryText(s.name(), s.directions(), summary);
    std::cerr.flush();
  }
  if (s.directions().size() > 1) {  // the Pareto front, as `tune best-trials` prints it
    PrintTrials(FindBestTrials(*trials, s.directions()), format);
    return;
  }
  auto best_trial = s.BestTrialOf(*trials);
  if (best_trial.ok()) {
    PrintBestTrial(*best_trial, format);
  } else {
    spdlog::warn("{}", best_trial.status().message());
  }
}

// A trial failed with a sticky CUDA error (it is FAIL in the storage, with the error): this
// process cannot use the device again, so the study continues in a fresh one (main() re-executes
// the same command, which resumes the study from its storage), at most kMaxRestarts times per run.
// Returns kExitRestart for main() to do so, or kExitFailure (said why) when it cannot.
int ContinueAfterDeviceLost(const StudyConfig& config, const Status& error) {
  const std::string what = fmt::format(
      "{} (a CUDA error after which this process's CUDA context is unusable; the trial is "
      "FAIL with the error, its params and the user attribute device_lost)",
      error.message());
  if (config.storage == "memory" || config.storage == ":memory:") {
    spdlog::error(
        "{}. The study is in memory, so a fresh process cannot continue it: run it with "
        "--storage sqlite:///FILE (or PostgreSQL) and tune continues it in a fresh process",
        what);
    return kExitFailure;
  }
  if (Restarts() >= kMaxRestarts) {
    spdlog::error(
        "{}. Stopping: this run already continued in a fresh process {} times after such "
        "errors, so the device or the search space needs a look (`tune trials --state fail` "
        "lists the failed trials); the study is consistent and the same command resumes it",
        what, kMaxRestarts);
    return kExitFailure;
  }
  spdlog::warn(
      "{}. Continuing the study in a fresh process (restart {} of at most {} for this "
      "run): the same command, resumed from the storage",
      what, Restarts() + 1, kMaxRestarts);
  return kExitRestart;
}

}  // namespace

int RunStudy(const RunArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto loaded = LoadConfig(args);
  if (!loaded.ok()) return Fail(loaded.status());
  StudyConfig config = std::move(loaded).value();
  if (Status s = ApplyFlags(args, config); !s.ok()) return Fail(s);
  if (Status s = CheckPrecisionOnCards(config); !s.ok()) return Fail(s);
  if (config.timeout_seconds && Restarts() > 0) {  // a fresh process after a sticky CUDA error
    config.timeout_seconds = std::max(0.001, *config.timeout_seconds - RunElapsedSeconds());
    spdlog::info("Restart {}: {:.0f}s of the run's timeout left", Restarts(),
                 *config.timeout_seconds);
  }
  auto storage = OpenStorage(config.storage);
  if (!storage.ok()) return Fail(storage.status());
  auto rules = ResolveStudyDefaults(**storage, args.study, config.sampler);
  if (!rules.ok()) return Fail(rules.status());
  PrepareJobs(args.study, config);
  auto opened = OpenStudy(args.study, config, *storage, *rules);
  if (!opened.ok()) return Fail(opened.status());
  Study& s = *opened->study;
  LogStudyStart(s, *opened->objective, config);
  ProgressLog progress(s, config);
  const auto run_start = std::chrono::steady_clock::now();
  std::unique_ptr<Tracker> tracker = StartTracker(s, config);
  auto result = OptimizeWithSignals(s, config, *opened->objective, progress, tracker.get());
  progress.Finish();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  if (tracker) FinishTracker(s, *tracker);
  if (!result.ok() && result.status().code() == StatusCode::kDeviceLost) {
    return ContinueAfterDeviceLost(config, result.status());
  }
  if (!result.ok()) return Fail(result.status());

  ReportRun(s, *result, elapsed, *format);
  if (result->interrupted && TerminateRequested()) {
    // A scheduler's stop (Slurm's preemption, time limit, scancel) is a clean end of this
    // worker: its trials are recorded (and re-enqueued with retry_failed), so exit 0.
    spdlog::warn(
        "Stopped by SIGTERM: {} trial(s) finished this run; a running trial ended FAIL ({}); "
        "the study is consistent",
        result->trials_run,
        config.retry_failed > 0 ? "re-enqueued for another worker: retry_failed"
                                : "not re-enqueued: retry_failed is 0");
    return kExitOk;
  }
  if (result->interrupted) {
    spdlog::warn("Interrupted: {} trials finished this run; the study is consistent",
                 result->trials_run);
    return kExitInterrupted;
  }
  return kExitOk;
}

std::function<int()> DeclareRun(CLI::App& app) {
  auto run = std::make_shared<RunArgs>();
  app.add_option("--study,--study-name", run->study,
                 "Study name (and configs/NAME.json by default)");
  app.add_option("--config", run->config, "Study config file (default: configs/NAME.json)");
  app.add_option("--n-trials", run->n_trials,
                 "Stop when the study holds N finished trials (resumes count earlier runs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", run->timeout, "Stop starting trials after S seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--storage", run->storage,
                 "Storage URL: sqlite:///PATH[?schema=v3.0.0.d], "
                 "postgresql://USER[:PASSWORD]@HOST[:PORT]/DB or memory (default: the "
                 "config's storage, else sqlite:///tune.db)");
  app.add_option("--sampler", run->sampler, "Sampler name (" + JoinNames(SamplerNames()) + ")");
  app.add_option("--seed", run->seed, "Sampler seed (reproducible runs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heartbeat-interval", run->heartbeat_interval,
                 fmt::format("Seconds between heartbeats of a running trial; 0: off (default: "
                             "the config's heartbeat_interval, else {})",
                             kDefaultHeartbeatInterval))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--grace-period", run->grace_period,
                 "RUNNING trials without a heartbeat for this long are failed as stale "
                 "(default: the config's grace_period, else 2 x the heartbeat interval)")
      ->check(CLI::PositiveNumber);
  app.add_option("--retry-failed", run->retry_failed,
                 "Re-enqueue a stale trial with the same params up to K times (default: the "
                 "config's retry_failed, else 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--jobs", run->jobs,
                 "Trials at once, each in its own process: N, or auto (as many as the device's "
                 "memory holds, at most max_jobs); default: the config's jobs, else 1");
  app.add_option("--max-jobs", run->max_jobs, "With --jobs auto: at most this many (default 8)")
      ->check(CLI::Range(1, 256));
  app.add_option("--progress", run->progress,
                 "auto (a status line on a terminal, else progress lines), bar, lines or off "
                 "(default: the config's progress, else auto)");
  app.add_option("--progress-interval", run->progress_interval,
                 fmt::format("lines: at most one progress line every S seconds (default: the "
                             "config's progress_interval, else {:g})",
                             kDefaultProgressInterval))
      ->check(CLI::PositiveNumber);
  DeclareTrainFlags(app, *run);
  app.add_option("--mlflow-uri", run->mlflow_uri,
                 "Record every finished trial as a run of an MLflow tracking server at URI "
                 "(http://HOST:PORT; replaces the config's tracking.mlflow.uri)")
      ->type_name("URI");
  app.add_option("--format", run->format, "Output of the best trial: table, json or csv");
  return [run] {
    if (run->study.empty()) {
      std::cerr << "tune: --study NAME is required to run a study\n"
                   "Run 'tune --help' for usage.\n";
      return static_cast<int>(kExitUsage);
    }
    return RunStudy(*run);
  };
}

}  // namespace tune::app

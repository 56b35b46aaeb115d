// `tune --study NAME ...`: runs (or resumes) a study from its config.
#include <csignal>
#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app.h"
#include "torch_loader.h"
#include "tune/config.h"
#include "tune/interrupt.h"
#include "tune/memory/estimator.h"
#include "tune/optimize.h"
#include "tune/study.h"
#include "tune/text.h"

namespace tune::app {
namespace {

namespace fs = std::filesystem;

extern "C" void OnSignal(int sig) {
  RequestInterrupt();
  // A second Ctrl-C ends the process at once.
  std::signal(sig, SIG_DFL);
}

std::string Clock(double seconds) {
  auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

Result<StudyConfig> LoadConfig(const RunArgs& args) {
  fs::path path = args.config ? fs::path(*args.config) : fs::path("configs") / (args.study + ".json");
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

}  // namespace

int RunStudy(const RunArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto loaded = LoadConfig(args);
  if (!loaded.ok()) return Fail(loaded.status());
  StudyConfig config = std::move(loaded).value();

  // Command-line values override the config's.
  if (args.n_trials) config.n_trials = *args.n_trials;
  if (args.timeout) config.timeout_seconds = *args.timeout;
  if (args.storage) config.storage = *args.storage;
  if (args.sampler && *args.sampler != config.sampler.name) {
    // Options in the config belong to the config's sampler; another sampler starts from its
    // defaults.
    if (!config.sampler.options.empty()) {
      spdlog::info("--sampler {} replaces the config's sampler '{}' and its options", *args.sampler,
                   config.sampler.name);
    }
    config.sampler.name = *args.sampler;
    config.sampler.options = Json::object();
    config.sampler.source = "--sampler";
  }
  if (args.seed) config.sampler.seed = static_cast<uint64_t>(*args.seed);
  if (args.heartbeat_interval) config.heartbeat_interval = *args.heartbeat_interval;
  if (args.grace_period) config.grace_period = *args.grace_period;
  if (args.retry_failed) config.retry_failed = *args.retry_failed;
  if (Status s = CheckHeartbeatSettings(
          config, args.heartbeat_interval || args.grace_period || args.retry_failed
                      ? "--heartbeat-interval/--grace-period/--retry-failed"
                      : config.source);
      !s.ok()) {
    return Fail(s);
  }

  if (args.device || args.device_memory || args.oom_retry) {
    if (config.objective.type != "train") {
      return Fail(InvalidArgumentError(fmt::format(
          "--device, --device-memory and --oom-retry apply to the train objective; {} has "
          "objective '{}'",
          config.source, config.objective.type)));
    }
    if (args.device) config.objective.train.device = *args.device;
    GuardOptions& guard = config.objective.train.guard;
    if (args.device_memory) {
      auto bytes = ParseBytes(*args.device_memory);
      if (!bytes.ok()) {
        return Fail(InvalidArgumentError("--device-memory: " + bytes.status().message()));
      }
      guard.device_memory = *bytes;
    }
    if (args.oom_retry) guard.oom_retry = *args.oom_retry;
  }

  auto sampler = MakeSampler(config.sampler);
  if (!sampler.ok()) return Fail(sampler.status());
  auto pruner = MakePruner(config.pruner);
  if (!pruner.ok()) return Fail(pruner.status());
  std::unique_ptr<Trainer> trainer;
  if (config.objective.type == "train") {
    TorchTrainerOptions trainer_options;
    trainer_options.device = config.objective.train.device;
    trainer_options.threads = config.objective.train.threads;
    trainer_options.memory_budget_bytes =
        config.objective.train.guard.device_memory.value_or(-1);
    auto t = LoadTorchTrainer(trainer_options);
    if (!t.ok()) return Fail(t.status());
    trainer = std::move(t).value();
  }
  auto objective = MakeObjective(config, std::move(trainer));
  if (!objective.ok()) return Fail(objective.status());
  auto storage = OpenStorage(config.storage);
  if (!storage.ok()) return Fail(storage.status());
  auto study = Study::CreateOrLoad(*storage, args.study, config.directions,
                                   std::move(sampler).value(), std::move(pruner).value(),
                                   config.sampler.seed);
  if (!study.ok()) return Fail(study.status());
  Study& s = **study;

  auto existing = s.storage().CountTrials(s.study_id());
  if (!existing.ok()) return Fail(existing.status());
  if (*existing == 0) {
    for (const Json& params : config.enqueue_trials) {
      auto t = s.EnqueueTrial(params);
      if (!t.ok()) return Fail(t.status());
    }
  } else {
    spdlog::info("Resuming study '{}' ({} trials stored)", s.name(), *existing);
  }
  spdlog::info("Study '{}': {} on {}, sampler {}, pruner {}, objective {}, target {} finished "
               "trials{}",
               s.name(), StudyDirectionName(s.direction()), s.storage().url(),
               s.sampler().name(), s.pruner().name(), (*objective)->name(),
               config.n_trials ? std::to_string(*config.n_trials) : "unlimited",
               config.timeout_seconds ? fmt::format(", timeout {}s", *config.timeout_seconds) : "");
  if (config.heartbeat_interval > 0) {
    spdlog::info(
        "Heartbeat every {}s; RUNNING trials silent for more than {}s are failed as "
        "stale{}",
        config.heartbeat_interval, config.grace_period.value_or(2 * config.heartbeat_interval),
        config.retry_failed > 0 ? fmt::format(" and retried up to {} time(s)", config.retry_failed)
                                : "");
  }
  if (!config.n_trials && !config.timeout_seconds) {
    spdlog::warn("No --n-trials or --timeout: running until Ctrl-C");
  }

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  const auto start = std::chrono::steady_clock::now();
  // n_retried: stale trials this run re-enqueued; each raises its target by one (optimize.h).
  int64_t n_pruned = 0, n_failed = 0, n_run = 0, n_retried = 0;
  std::optional<FrozenTrial> best;
  OptimizeOptions opts;
  opts.n_trials = config.n_trials;
  opts.timeout_seconds = config.timeout_seconds;
  opts.heartbeat_interval_seconds = config.heartbeat_interval;
  opts.grace_period_seconds = config.grace_period;
  opts.retry_failed = config.retry_failed;
  if (auto prev = s.BestTrial(); prev.ok()) best = *prev;
  auto finished_before = s.storage().CountTrials(
      s.study_id(), {TrialState::kComplete, TrialState::kPruned, TrialState::kFail});
  int64_t done = finished_before.ok() ? *finished_before : 0;
  opts.on_trial_finished = [&](const FrozenTrial& t, const TrialOutcome& outcome) {
    ++n_run;
    ++done;
    n_pruned += t.state == TrialState::kPruned;
    n_failed += t.state == TrialState::kFail;
    auto d = t.duration_seconds();
    std::string dur = d ? fmt::format("{:.2f}s", *d) : "-";
    if (t.state == TrialState::kComplete) {
      spdlog::info("Trial {} COMPLETE value={} duration={} params: {}", t.number, ValueText(t), dur,
                   ParamsText(t));
      if (t.values.size() == 1 &&
          (!best || IsBetter(s.direction(), t.value(), best->value()))) {
        best = t;
      }
    } else {
      spdlog::log(t.state == TrialState::kFail ? spdlog::level::warn : spdlog::level::info,
                  "Trial {} {} ({}) duration={} params: {}", t.number, TrialStateName(t.state),
                  outcome.reason, dur, ParamsText(t));
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string eta = "?";
    if (config.n_trials) {
      double left =
          static_cast<double>(std::max<int64_t>(0, *config.n_trials + n_retried - done));
      eta = Clock(elapsed / static_cast<double>(n_run) * left);
    }
    if (config.timeout_seconds) {
      eta = eta == "?" ? Clock(std::max(0.0, *config.timeout_seconds - elapsed))
                       : eta;
    }
    spdlog::info("Progress: {}/{} finished ({} pruned, {} failed this run) | best {} | elapsed {} "
                 "| ETA {}",
                 done, config.n_trials ? std::to_string(*config.n_trials + n_retried) : "-",
                 n_pruned, n_failed,
                 best ? fmt::format("{} (trial {})", ValueText(*best), best->number) : "-",
                 Clock(elapsed), eta);
  };
  opts.on_stale_trial = [&](const FailedStaleTrial& stale) {
    ++done;
    const FrozenTrial& t = stale.failed;
    std::string retry = "not retried";
    if (stale.retry) {
      ++n_retried;
      const Json& history = stale.retry->system_attrs["retry_history"];
      retry = fmt::format("re-enqueued as trial {} with the same params (retry {} of {})",
                          stale.retry->number, history.size(), config.retry_failed);
    } else if (config.retry_failed > 0) {
      retry = fmt::format("not retried: {} retries done", config.retry_failed);
    }
    spdlog::warn("Trial {} FAIL (stale: no heartbeat for {:.1f}s; its worker died or hung); {}",
                 t.number, stale.heartbeat_age_seconds, retry);
  };
  auto result = Optimize(s, config.space, **objective, opts);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!result.ok()) return Fail(result.status());

  auto best_trial = s.BestTrial();
  if (best_trial.ok()) {
    spdlog::info("Best trial: {} value={} params: {}", best_trial->number, ValueText(*best_trial),
                 ParamsText(*best_trial));
    PrintBestTrial(*best_trial, *format);
  } else {
    spdlog::warn("{}", best_trial.status().message());
  }
  if (result->interrupted) {
    spdlog::warn("Interrupted: {} trials finished this run; the study is consistent", result->trials_run);
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace tune::app

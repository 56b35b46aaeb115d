#include "train/train_objective.h"

#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "memory/estimator.h"
#include "memory/guard.h"
#include "memory/memory_model.h"
#include "objectives/gpu_process_memory.h"
#include "objectives/trial_protocol.h"
#include "train/pretrained.h"
#include "train/save_best.h"
#include "train/script_fit.h"
#include "util/device.h"
#include "util/text.h"

namespace tune {

const char* TrainEndName(TrainResult::End end) {
  switch (end) {
    case TrainResult::End::kCompleted:
      return "completed";
    case TrainResult::End::kStopped:
      return "stopped";
    case TrainResult::End::kOutOfMemory:
      return "out_of_memory";
    case TrainResult::End::kFailed:
      return "failed";
    case TrainResult::End::kInterrupted:
      return "interrupted";
  }
  return "?";
}

int64_t ProcessResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(statm >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t ProcessHeapInUseBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

std::string DeviceMemoryStatusText(const DeviceMemoryStatus& m) {
  std::vector<std::string> parts;
  if (m.allocated >= 0) parts.push_back("allocated " + FormatBytes(m.allocated));
  if (m.reserved >= 0) parts.push_back("reserved " + FormatBytes(m.reserved));
  if (m.free >= 0 && m.total > 0) {
    parts.push_back(fmt::format("free {} of {}", FormatBytes(m.free), FormatBytes(m.total)));
  }
  if (m.budget > 0) parts.push_back("budget " + FormatBytes(m.budget));
  return parts.empty() ? "not measured" : JoinNames(parts);
}

const char* TrainMetricName(TrainMetric metric) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return "macro_f1";
    case TrainMetric::kAccuracy:
      return "accuracy";
    case TrainMetric::kLoss:
      return "loss";
  }
  return "?";
}

Result<TrainMetric> ParseTrainMetric(const std::string& name) {
  if (name == "macro_f1" || name == "f1") return TrainMetric::kMacroF1;
  if (name == "accuracy") return TrainMetric::kAccuracy;
  if (name == "loss") return TrainMetric::kLoss;
  const std::vector<std::string> valid = {"macro_f1", "accuracy", "loss"};
  return InvalidArgumentError(fmt::format("unknown metric '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

const char* TrainCostName(TrainCost cost) {
  switch (cost) {
    case TrainCost::kPeakMemory:
      return "peak_memory";
    case TrainCost::kTrainSeconds:
      return "train_seconds";
    case TrainCost::kNumParameters:
      return "num_parameters";
  }
  return "?";
}

Result<TrainCost> ParseTrainCost(const std::string& name) {
  for (TrainCost c : {TrainCost::kPeakMemory, TrainCost::kTrainSeconds,
                      TrainCost::kNumParameters}) {
    if (name == TrainCostName(c)) return c;
  }
  const std::vector<std::string> valid = {"peak_memory", "train_seconds", "num_parameters"};
  return InvalidArgumentError(fmt::format("unknown cost '{}'{}; valid: {}", name,
                                          DidYouMean(name, valid), JoinNames(valid)));
}

StudyDirection TrainMetricDirection(TrainMetric metric) {
  return metric == TrainMetric::kLoss ? StudyDirection::kMinimize : StudyDirection::kMaximize;
}

double TrainMetricValue(TrainMetric metric, const EpochMetrics& m) {
  switch (metric) {
    case TrainMetric::kMacroF1:
      return m.macro_f1;
    case TrainMetric::kAccuracy:
      return m.accuracy;
    case TrainMetric::kLoss:
      return m.validation_loss;
  }
  return m.macro_f1;
}

namespace {

Json EpochToJson(const EpochMetrics& m) {
  return Json{{"epoch", m.epoch},
              {"train_loss", m.train_loss},
              {"validation_loss", m.validation_loss},
              {"accuracy", m.accuracy},
              {"macro_f1", m.macro_f1},
              {"optimizer_steps", m.optimizer_steps},
              {"learning_rate", m.learning_rate},
              {"seconds", m.seconds}};
}

std::string FirstLine(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 300 ? line.substr(0, 297) + "..." : line;
}

// The epoch callback's state: the best value so far, early stopping and pruning.
class EpochTracker {
 public:
  EpochTracker(TrialHandle& trial, TrainMetric metric, const TrainHyperparams& hp)
      : trial_(trial), metric_(metric), hp_(hp) {}

  Result<EpochDecision> OnEpoch(const EpochMetrics& m) {
    const double value = TrainMetricValue(metric_, m);
    // Per-epoch lines are for --log-level debug; the trial's line says how it ended.
    spdlog::debug(
        "Trial {} epoch {}/{}: train_loss={:.4f} validation_loss={:.4f} accuracy={:.4f} "
        "macro_f1={:.4f} ({:.1f}s)",
        trial_.number(), m.epoch + 1, hp_.epochs, m.train_loss, m.validation_loss, m.accuracy,
        m.macro_f1, m.seconds);
    TUNE_RETURN_IF_ERROR(trial_.Report(value, m.epoch));
    const bool improved = Improves(value);
    if (improved) {
      best = value;
      best_epoch = m.epoch;
      since_best_ = 0;
    } else {
      ++since_best_;
    }
    TUNE_ASSIGN_OR_RETURN(bool prune, trial_.ShouldPrune());
    if (prune) {
      pruned = true;
      return EpochDecision::kStop;
    }
    if (hp_.patience > 0 && since_best_ >= hp_.patience && m.epoch + 1 < hp_.epochs) {
      stopped_early = true;
      return EpochDecision::kStop;
    }
    return improved ? EpochDecision::kKeep : EpochDecision::kContinue;
  }

  // Forgets the run (a retry starts over).
  void Reset() {
    best.reset();
    best_epoch = -1;
    since_best_ = 0;
    pruned = stopped_early = false;
  }

  std::optional<double> best;
  int64_t best_epoch = -1;
  bool pruned = false;
  bool stopped_early = false;

 private:
  bool Improves(double value) const {
    if (!best) return true;
    if (!std::isfinite(value)) return false;
    return TrainMetricDirection(metric_) == StudyDirection::kMaximize
               ? value > *best + hp_.min_delta
               : value < *best - hp_.min_delta;
  }

  TrialHandle& trial_;
  const TrainMetric metric_;
  const TrainHyperparams& hp_;  // the job's: a retry changes the batch, not the epochs
  int64_t since_best_ = 0;
};

// The texts tokenized once per tokenizer: by checkpoint directory with "init": "pretrained",
// else one set under "" (`built`: a vocabulary file's tokenizer, or one built from the training
// text; none for a `pretrained` directory's). A TorchScript model's entry may name its own
// tokenizer: a checkpoint directory (its key) or a vocabulary file ("vocab:" + the file, its
// tokenizer in `vocab_files`).
struct TextSets {
  std::map<std::string, TextTrainData> data;
  std::optional<Tokenizer> built;
  std::map<std::string, Tokenizer> vocab_files;
};

constexpr const char* kVocabKeyPrefix = "vocab:";

// Which of the TextSets a model trains on.
std::string TokenizerKey(const TrainObjectiveOptions& options, const ModelSpec& model) {
  if (IsTorchScriptModel(model)) {
    if (model.extra.contains("tokenizer")) return model.extra["tokenizer"].get<std::string>();
    if (model.extra.contains("vocab"))
      return kVocabKeyPrefix + model.extra["vocab"].get<std::string>();
    return std::string();
  }
  return options.init_pretrained ? model.checkpoint : std::string();
}

// --jobs with save_best: the child trained and staged the trial's model; when the trial
// finishes here, the parent (which holds the study) promotes it if it is the best.
class PromotingProcess final : public TrialProcess {
 public:
  PromotingProcess(std::unique_ptr<TrialProcess> inner,
                   std::function<Status(const TrialOutcome&)> on_finish)
      : inner_(std::move(inner)), on_finish_(std::move(on_finish)) {}
  Status Poll(std::chrono::milliseconds wait) override { return inner_->Poll(wait); }
  bool finished() const override { return inner_->finished(); }
  void Interrupt() override { inner_->Interrupt(); }
  Result<TrialOutcome> Finish() override {
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome, inner_->Finish());
    TUNE_RETURN_IF_ERROR(on_finish_(outcome));
    return outcome;
  }

 private:
  std::unique_ptr<TrialProcess> inner_;
  std::function<Status(const TrialOutcome&)> on_finish_;
};

class TrainObjective final : public Objective {
 public:
  TrainObjective(TrainObjectiveOptions options, ModelCatalog catalog,
                 std::unique_ptr<Trainer> trainer, TextSets text, TabularTrainData tabular,
                 TrainHyperparams base)
      : options_(std::move(options)),
        catalog_(std::move(catalog)),
        trainer_(std::move(trainer)),
        text_(std::move(text)),
        tabular_(std::move(tabular)),
        base_(std::move(base)) {
    // Batches are padded to their longest text, so no batch is wider than the longest text.
    for (const auto& [key, data] : text_.data) {
      int64_t& longest = longest_tokens_[key];
      for (const auto* set : {&data.train_ids, &data.validation_ids}) {
        for (const auto& ids : *set) {
          longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()) + 2);
        }
      }
    }
  }

  std::string name() const override {
    return fmt::format("train ({}, {})", TrainMetricName(options_.metric),
                       trainer_ ? trainer_->name() : "in child processes");
  }

  Result<TrialOutcome> Run(TrialHandle& trial, const Json& params) override {
    if (!trainer_) {
      return FailedPreconditionError("this train objective runs trials in child processes only");
    }
    TrainJob job;
    std::string unfit;  // why this trial's configuration cannot train
    TUNE_RETURN_IF_ERROR(BuildJob(params, job, unfit));
    if (!unfit.empty()) return Fail(trial, unfit);
    spdlog::debug("Trial {} memory at trial start: {}", trial.number(),
                 DeviceMemoryStatusText(trainer_->MemoryStatus()));
    TUNE_ASSIGN_OR_RETURN(Guarded guarded, Admit(trial, params, job));
    if (guarded.reject) return *guarded.reject;
    TUNE_RETURN_IF_ERROR(PrepareStaging(trial, job));
    EpochTracker tracker(trial, options_.metric, job.hp);
    std::vector<OomAttempt> retries;
    TUNE_ASSIGN_OR_RETURN(TrainResult result,
                          TrainWithRetries(trial, job, guarded, tracker, retries));
    TUNE_RETURN_IF_ERROR(RecordMemory(trial, job, guarded, result, retries));
    spdlog::debug("Trial {} memory at trial end: {}", trial.number(),
                 DeviceMemoryStatusText(trainer_->MemoryStatus()));
    TUNE_RETURN_IF_ERROR(RecordSummary(trial, result, tracker));
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome,
                          Outcome(trial, params, job, guarded, result, retries, tracker));
    TUNE_RETURN_IF_ERROR(StageBest(trial, params, job, outcome));
    return outcome;
  }

  std::optional<double> DeviceUtilizationNow() const override { return nvml_.Utilization(); }

  std::optional<int64_t> DeviceCapacity() const override {
    const std::optional<int64_t> d = DeviceMemory();
    if (!d) return std::nullopt;
    return UsableMemory(*d, options_.guard.margin);
  }

  // --jobs: admission in this process, which holds the study's history; the child runs the
  // admitted configuration within its reservation.
  Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) override {
    TUNE_ASSIGN_OR_RETURN(std::optional<TrialPlan> plan, PlanWithin(trial, params, std::nullopt));
    return std::move(plan).value();
  }

  Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                             int64_t room) override {
    const GuardOptions& g = options_.guard;
    if (!g.admission || !g.shrink_to_start || !g.lever_grad_accum || !DeviceMemory()) {
      return std::optional<TrialPlan>();
    }
    return PlanWithin(trial, params, room);
  }

  Result<std::unique_ptr<TrialProcess>> Start(TrialHandle& trial, const TrialPlan& plan) override {
    if (options_.child_command.empty()) return Objective::Start(trial, plan);
    SubprocessOptions so;
    so.argv = options_.child_command;
    for (const std::string& arg :
         {std::string("--trial-number"), std::to_string(trial.number()), std::string("--params"),
          plan.params.dump(), std::string("--plan"), plan_json_[trial.number()].dump(),
          std::string("--budget"), std::to_string(plan.reservation)}) {
      so.argv.push_back(arg);
    }
    plan_json_.erase(trial.number());
    so.env = CurrentEnvironment();
    so.kill_grace_seconds = 3.0;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<TrialProcess> child,
                          ChildTrialProcess::Start(trial, plan.params, std::move(so)));
    if (!options_.save_best) return child;
    const int64_t number = trial.number();
    const std::optional<double> study_best = BestCompleteValue(trial.history());
    return std::unique_ptr<TrialProcess>(std::make_unique<PromotingProcess>(
        std::move(child), [this, number, study_best](const TrialOutcome& outcome) {
          return Promote(number, outcome, study_best);
        }));
  }

 private:
  // What the memory guard decided before the trial ran.
  struct Guarded {
    std::optional<TrialOutcome> reject;  // set: the trial does not run
    std::optional<int64_t> estimate;     // device_peak of what runs, when it can be estimated
    std::optional<Admission> admission;  // when admission ran
    std::string levers;                  // the levers admission applied
    std::string family;                  // MemoryFamily
    bool unfit_now = false;              // PlanToFit: no micro-batch fits the room left
    Json memory_model;                   // MemoryModel::ToJson of what estimated it, or null
  };

  // save_best: the trial's staging directory, which the trainer writes the best epoch's weights
  // into.
  Status PrepareStaging(TrialHandle& trial, TrainJob& job) const {
    if (!options_.save_best || job.data == nullptr) return Status::Ok();
    const std::string staging = SaveBestStagingDir(*options_.save_best, trial.number());
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);
    std::filesystem::create_directories(staging, ec);
    if (ec) return InternalError(fmt::format("cannot create {}: {}", staging, ec.message()));
    job.save_weights = (std::filesystem::path(staging) /
                        (IsTorchScriptModel(job.model) ? "model.pt" : "model.safetensors"))
                           .string();
    return Status::Ok();
  }

  // save_best, after the trial: a COMPLETE trial's staging directory is completed (config,
  // tokenizer, trial.json) and, in this process (not a --jobs child), promoted if best.
  Status StageBest(TrialHandle& trial, const Json& params, const TrainJob& job,
                   const TrialOutcome& outcome) {
    if (job.save_weights.empty()) return Status::Ok();
    const std::string staging = SaveBestStagingDir(*options_.save_best, trial.number());
    std::error_code ec;
    if (outcome.state != TrialState::kComplete || outcome.values.size() != 1 ||
        !std::filesystem::exists(job.save_weights, ec)) {
      std::filesystem::remove_all(staging, ec);
      return Status::Ok();
    }
    const SavedTrial saved{trial.study_name(), trial.number(), params, outcome.values[0],
                           TrainMetricName(options_.metric)};
    const std::string key = TokenizerKey(options_, job.model);
    const bool scratch = key.empty() && text_.built;
    const Tokenizer* built = scratch ? &*text_.built : nullptr;
    std::string vocab = scratch && options_.vocab ? *options_.vocab : std::string();
    if (auto file = text_.vocab_files.find(key); file != text_.vocab_files.end()) {
      built = &file->second;
      vocab = key.substr(std::string(kVocabKeyPrefix).size());
    }
    TUNE_RETURN_IF_ERROR(WriteSavedModelFiles(staging, job.model, job.hp, job.data->label_names,
                                              saved, built, vocab));
    if (options_.planned) return Status::Ok();  // a --jobs child: the parent promotes it
    return Promote(trial.number(), outcome, BestCompleteValue(trial.history()));
  }

  // Moves the trial's staged model to save_best when it beats the study's best (or removes it).
  Status Promote(int64_t number, const TrialOutcome& outcome, std::optional<double> study_best) {
    const std::string staging = SaveBestStagingDir(*options_.save_best, number);
    std::error_code ec;
    if (outcome.state != TrialState::kComplete || outcome.values.size() != 1 ||
        !std::filesystem::exists(std::filesystem::path(staging) / "trial.json", ec)) {
      std::filesystem::remove_all(staging, ec);
      return Status::Ok();
    }
    TUNE_ASSIGN_OR_RETURN(bool promoted,
                          PromoteIfBest(staging, *options_.save_best, outcome.values[0],
                                        TrainMetricDirection(options_.metric), study_best));
    if (promoted) {
      spdlog::info("Trial {} is the best so far ({} {}): saved its model to {}", number,
                   TrainMetricName(options_.metric), outcome.values[0], *options_.save_best);
    }
    return Status::Ok();
  }

  // The trial's hyperparameters (the objective's, overridden by the params) and its model.
  // `unfit` says why the configuration cannot train (the trial fails); a non-OK Status is a
  // parameter tune cannot apply.
  Status BuildJob(const Json& params, TrainJob& job, std::string& unfit) const {
    job.hp = base_;
    for (const auto& [key, value] : params.items()) {
      if (std::find(options_.ignore_params.begin(), options_.ignore_params.end(), key) !=
          options_.ignore_params.end()) {
        continue;
      }
      TUNE_RETURN_IF_ERROR(SetHyperparam(job.hp, key, value));
    }
    if (options_.task == TrainTask::kTabularClassification) {
      job.model.name = job.model.model_type = "mlp";
      job.tabular = &tabular_;
      return Status::Ok();
    }
    if (job.hp.model.empty()) {
      return InvalidArgumentError("no model: set the objective's \"model\" or a 'model' parameter");
    }
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog_.Find(job.hp.model));
    auto data = text_.data.find(TokenizerKey(options_, *spec));
    if (data == text_.data.end()) {
      return InvalidArgumentError(fmt::format("model '{}' has no tokenized data", spec->name));
    }
    if (Status st = CheckModelForTraining(*spec, job.hp); !st.ok()) {
      unfit = st.message();
    } else if (spec->vocab_size > 0 && data->second.vocab_size > spec->vocab_size) {
      unfit = fmt::format("the tokenizer has {} tokens but model '{}' embeds only {}",
                          data->second.vocab_size, spec->name, spec->vocab_size);
    }
    job.model = *spec;
    job.data = &data->second;
    return Status::Ok();
  }

  // Trains; after an out-of-memory error, with oom_retry, again at half the micro-batch and
  // twice the accumulation (the effective batch stays the same). Each retried attempt is
  // appended to `retries`.
  Result<TrainResult> TrainWithRetries(TrialHandle& trial, TrainJob& job, Guarded& guarded,
                                       EpochTracker& tracker, std::vector<OomAttempt>& retries) {
    const EpochCallback on_epoch = [&](const EpochMetrics& m) { return tracker.OnEpoch(m); };
    for (;;) {
      TUNE_ASSIGN_OR_RETURN(TrainResult result, trainer_->Train(job, on_epoch));
      TrainHyperparams next = job.hp;
      if (result.end != TrainResult::End::kOutOfMemory ||
          static_cast<int64_t>(retries.size()) >= options_.guard.oom_retry ||
          !HalveMicroBatch(next.batch_size, next.grad_accum)) {
        return result;
      }
      retries.push_back(OomAttempt{job.hp.batch_size, job.hp.grad_accum,
                                   result.details.value("phase", std::string("training")),
                                   FirstLine(result.message), result.peak_memory_bytes,
                                   guarded.estimate});
      spdlog::warn("Trial {}: out of memory at batch_size {} x grad_accum {}; retry {}/{} at "
                   "batch_size {} x grad_accum {}",
                   trial.number(), job.hp.batch_size, job.hp.grad_accum, retries.size(),
                   options_.guard.oom_retry, next.batch_size, next.grad_accum);
      job.hp = next;
      guarded.estimate = EstimateFor(trial, job);
      tracker.Reset();
    }
  }

  // User attribute "train": how the run ended, its epochs and the best one.
  Status RecordSummary(TrialHandle& trial, const TrainResult& result,
                       const EpochTracker& tracker) const {
    Json summary{{"end", TrainEndName(result.end)},
                 {"epochs_run", result.epochs.size()},
                 {"num_parameters", result.num_parameters},
                 {"metric", TrainMetricName(options_.metric)}};
    if (!options_.costs.empty()) {
      Json names = Json::array({TrainMetricName(options_.metric)});
      for (TrainCost c : options_.costs) names.push_back(TrainCostName(c));
      summary["objectives"] = std::move(names);
    }
    if (tracker.best_epoch >= 0) summary["best_epoch"] = tracker.best_epoch;
    if (tracker.stopped_early) summary["stopped_early"] = true;
    if (result.peak_memory_bytes >= 0) summary["peak_memory_bytes"] = result.peak_memory_bytes;
    Json history = Json::array();
    for (const auto& m : result.epochs) history.push_back(EpochToJson(m));
    summary["history"] = std::move(history);
    return trial.SetUserAttr(attrs::kTrain, summary);
  }

  Result<TrialOutcome> Outcome(TrialHandle& trial, const Json& params, const TrainJob& job,
                               const Guarded& guarded, const TrainResult& result,
                               const std::vector<OomAttempt>& retries,
                               const EpochTracker& tracker) {
    switch (result.end) {
      case TrainResult::End::kOutOfMemory:
        return RecordRunTimeOom(trial, params, job, guarded, result, retries);
      case TrainResult::End::kFailed:
        return Fail(trial, result.message);
      case TrainResult::End::kInterrupted:
        spdlog::warn("Trial {} failed: interrupted by the user", trial.number());
        return RecordInterrupted(trial);
      case TrainResult::End::kCompleted:
      case TrainResult::End::kStopped:
        break;
    }
    if (tracker.pruned) {
      return TrialOutcome{
          TrialState::kPruned, {}, fmt::format("pruned after epoch {}", result.epochs.size())};
    }
    if (!tracker.best) return Fail(trial, "the run finished without an evaluated epoch");
    std::vector<double> values{*tracker.best};
    for (TrainCost c : options_.costs) values.push_back(CostValue(c, result));
    if (!options_.constraints.empty()) {
      Json violations = Json::array();
      for (const auto& [c, bound] : options_.constraints) {
        violations.push_back(CostValue(c, result) - bound);
      }
      TUNE_RETURN_IF_ERROR(trial.SetSystemAttr("constraints", violations));
    }
    return TrialOutcome{TrialState::kComplete, std::move(values), ""};
  }

  // A cost of the run as it ran (after the guard's levers and out-of-memory retries).
  static double CostValue(TrainCost cost, const TrainResult& result) {
    switch (cost) {
      case TrainCost::kPeakMemory:
        return static_cast<double>(result.peak_memory_bytes);
      case TrainCost::kTrainSeconds: {
        double seconds = 0.0;
        for (const EpochMetrics& m : result.epochs) seconds += m.seconds;
        return seconds;
      }
      case TrainCost::kNumParameters:
        return static_cast<double>(result.num_parameters);
    }
    return 0.0;
  }

  Result<TrialOutcome> RecordRunTimeOom(TrialHandle& trial, const Json& params, const TrainJob& job,
                                        const Guarded& guarded, const TrainResult& result,
                                        const std::vector<OomAttempt>& retries) {
    Json details = result.details;
    details.update(ConfigDetails(job));
    if (guarded.estimate) details["estimate"] = *guarded.estimate;
    if (!guarded.levers.empty()) details["levers"] = guarded.levers;
    if (!retries.empty()) {
      Json j = MemoryAttrToJson(MemoryAttr{.run = MemoryAttr::Run{.oom_retries = retries}});
      details["retries"] = j["oom_retries"];
    }
    details["error"] = FirstLine(result.message);
    if (result.peak_memory_bytes >= 0) details["peak_memory_bytes"] = result.peak_memory_bytes;
    const std::string phase = details.value("phase", std::string("training"));
    spdlog::warn("Trial {}: out of memory in {}: {}", trial.number(), phase,
                 FirstLine(result.message));
    return RecordOom(trial, params, details, "out of memory in " + phase);
  }

  bool OnCuda() const {
    auto device = ParseDevice(options_.device);
    return device.ok() && device->is_cuda();
  }

  // CUDA: the caching-allocator model with this process's context measured; CPU: bytes as the
  // counting allocator counts them.
  DeviceMemoryModel DeviceModel() const {
    if (!OnCuda()) return GuardDeviceModel(options_.guard, false, -1);
    const DeviceMemoryStatus m = trainer_ ? trainer_->MemoryStatus() : DeviceMemoryStatus{};
    return GuardDeviceModel(options_.guard, true, MeasuredContext(m));
  }

  // This process's CUDA context and kernels: what the driver (NVML) says the process uses, less
  // what the caching allocator reserved; -1 (the model's default) when the driver cannot say.
  // Not total - free - reserved, which counts every other process on the card as context too
  // (the other trials under --jobs: estimates 2-3x too high on an H200).
  int64_t MeasuredContext(const DeviceMemoryStatus& m) const {
    if (m.reserved < 0) return -1;
    const std::optional<int64_t> used = nvml_.UsedByThisProcess();
    return used && *used > m.reserved ? *used - m.reserved : -1;
  }

  // The memory trials may use: device_memory, at most the card's; unset on CPU without it.
  std::optional<int64_t> DeviceMemory() const {
    std::optional<int64_t> d = options_.guard.device_memory;
    const DeviceMemoryStatus m = trainer_ ? trainer_->MemoryStatus() : DeviceMemoryStatus{};
    if (OnCuda() && m.total > 0) d = d ? std::min(*d, m.total) : m.total;
    return d;
  }

  MemoryRequest RequestFor(const TrainJob& job) const {
    const int64_t labels = job.tabular != nullptr ? tabular_.num_labels : job.data->num_labels;
    MemoryRequest r = MemoryRequestFor(job.model, job.hp, labels, tabular_.num_features);
    const auto longest = longest_tokens_.find(TokenizerKey(options_, job.model));
    if (job.tabular == nullptr && job.hp.padding == Padding::kLongest &&
        longest != longest_tokens_.end() && longest->second > 0) {
      r.max_length = std::min(r.max_length, longest->second);
    }
    return r;
  }

  // The study's system attributes, where TorchScript models' fits are kept (script_fit.h).
  class StudyFitStore : public FitStore {
   public:
    explicit StudyFitStore(TrialHandle& trial) : trial_(trial) {}
    Result<std::optional<Json>> Get(const std::string& key) override {
      return trial_.GetStudySystemAttr(key);
    }
    Status Put(const std::string& key, const Json& value) override {
      return trial_.SetStudySystemAttr(key, value);
    }

   private:
    TrialHandle& trial_;
  };

  // The fit of a TorchScript job's measured peaks at its precision (script_fit.h): cached, or
  // the study's, or with `probe` measured now on this process's trainer. FailedPrecondition
  // when there is none (a --jobs parent, which has no trainer, before a child measured it).
  Result<MeasuredFit> ScriptFitFor(TrialHandle& trial, const TrainJob& job, bool probe) {
    ScriptFitRequest request;
    request.model = job.model;
    request.hp = job.hp;
    request.num_labels = job.data != nullptr ? job.data->num_labels : 2;
    StudyFitStore store(trial);
    return script_fits_.Get(probe ? trainer_.get() : nullptr, request, &store);
  }

  // What estimates a job's memory (memory_model.h): the estimator's formulas on the trial's
  // device; for a TorchScript model, which they do not cover, the fit of its measured peaks
  // (measured now only with `probe`: admission's).
  Result<std::unique_ptr<MemoryModel>> MemoryModelFor(TrialHandle& trial, const TrainJob& job,
                                                      bool probe = false) {
    if (!IsTorchScriptModel(job.model)) {
      return std::unique_ptr<MemoryModel>(std::make_unique<FormulaMemoryModel>(DeviceModel()));
    }
    TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, ScriptFitFor(trial, job, probe));
    return std::unique_ptr<MemoryModel>(std::make_unique<FittedMemoryModel>(std::move(fit)));
  }

  std::optional<int64_t> EstimateFor(TrialHandle& trial, const TrainJob& job) {
    auto model = MemoryModelFor(trial, job);
    if (!model.ok()) return std::nullopt;
    auto e = (*model)->Estimate(RequestFor(job));
    if (!e.ok()) return std::nullopt;
    return e->device_peak;
  }

  // Admission (guard.h): runs the trial as it is, with levers applied to job.hp, or not at all.
  // Plan() with `room` unset; PlanToFit() with it: admission against the `room` bytes left
  // beside the running trials, with the micro-batch lever only, and nullopt (nothing recorded)
  // when the trial does not fit there.
  Result<std::optional<TrialPlan>> PlanWithin(TrialHandle& trial, const Json& params,
                                              std::optional<int64_t> room) {
    TrialPlan plan;
    TrainJob job;
    std::string unfit;
    TUNE_RETURN_IF_ERROR(BuildJob(params, job, unfit));
    if (!unfit.empty()) {
      if (room) return std::optional<TrialPlan>();
      TUNE_ASSIGN_OR_RETURN(plan.outcome, Fail(trial, unfit));
      return std::optional<TrialPlan>(std::move(plan));
    }
    TUNE_ASSIGN_OR_RETURN(Guarded guarded, Admit(trial, params, job, room));
    if (guarded.unfit_now) return std::optional<TrialPlan>();
    if (guarded.reject) {
      plan.outcome = *guarded.reject;
      return std::optional<TrialPlan>(std::move(plan));
    }
    plan.params = params;
    plan.params["batch_size"] = job.hp.batch_size;
    plan.params["grad_accum"] = job.hp.grad_accum;
    plan.params["gradient_checkpointing"] = job.hp.gradient_checkpointing;
    plan.reservation =
        guarded.admission ? guarded.admission->predicted : guarded.estimate.value_or(0);
    plan.exclusive = !guarded.estimate;
    plan.summary = guarded.admission ? fmt::format("predicted {} (estimate {} x correction {:.3f})",
                                                   FormatBytes(guarded.admission->predicted),
                                                   FormatBytes(*guarded.estimate),
                                                   guarded.admission->correction)
                                     : "memory unknown: runs alone";
    if (room) plan.summary += ", " + guarded.levers + " to start beside the running trials";
    plan_json_[trial.number()] = GuardedToJson(guarded);
    return std::optional<TrialPlan>(std::move(plan));
  }

  static Guarded UnfitNow() {
    Guarded g;
    g.unfit_now = true;
    return g;
  }

  // Admission (Plan() and PlanToFit(): `room` is what it must fit instead of the usable memory).
  Result<Guarded> Admit(TrialHandle& trial, const Json& params, TrainJob& job,
                        std::optional<int64_t> room = std::nullopt) {
    if (options_.planned && !AdmitsHere(job)) return PlannedGuard(job);
    Guarded g;
    g.family = MemoryFamily(job.model, job.hp.precision);
    const std::optional<int64_t> device_memory = DeviceMemory();
    if (!options_.guard.admission || !device_memory) {
      g.estimate = EstimateFor(trial, job);
      return g;
    }
    double correction = options_.guard.calibrate
                            ? CalibrationFromHistory(trial.history()).Correction(g.family)
                            : 1.0;
    // A measured fit carries its own margin (its held-out and measured shapes' errors):
    // calibration may raise its predictions, never lower them below what was measured (as for
    // a command's measured model).
    if (IsTorchScriptModel(job.model)) correction = std::max(1.0, correction);
    const int64_t usable = room.value_or(UsableMemory(*device_memory, options_.guard.margin));
    GuardOptions guard = options_.guard;
    // A fit does not know checkpointing (a TorchScript module need not declare it).
    if (room || IsTorchScriptModel(job.model)) guard.lever_checkpointing = false;
    auto model = MemoryModelFor(trial, job, /*probe=*/true);
    auto admitted = model.ok() ? AdmitTrial(RequestFor(job), **model, usable, correction, guard)
                               : Result<Admission>(model.status());
    if (model.ok()) g.memory_model = (*model)->ToJson();
    if (!admitted.ok()) {
      if (room) return UnfitNow();
      spdlog::warn("Trial {}: no memory estimate ({}); it runs without admission", trial.number(),
                   admitted.status().message());
      return g;
    }
    const Admission& a = *admitted;
    if (room && (a.verdict == AdmissionVerdict::kReject ||
                 a.request.batch_size < options_.guard.min_micro_batch)) {
      return UnfitNow();  // no micro-batch at or above the floor fits the room left
    }
    g.admission = a;
    g.estimate = a.estimate.device_peak;
    const std::string sizes =
        fmt::format("predicted {} (estimate {} x correction {:.3f}) of {} {}",
                    FormatBytes(a.predicted), FormatBytes(a.estimate.device_peak), correction,
                    FormatBytes(usable), room ? "left beside the running trials" : "usable");
    switch (a.verdict) {
      case AdmissionVerdict::kRun:
        spdlog::info("Trial {} admitted: {}", trial.number(), sizes);
        return g;
      case AdmissionVerdict::kRunWithLevers:
        job.hp.batch_size = a.request.batch_size;
        job.hp.grad_accum = a.request.grad_accum;
        job.hp.gradient_checkpointing = a.request.gradient_checkpointing;
        g.levers = a.levers;
        spdlog::info("Trial {} admitted with {}: {}", trial.number(), a.levers, sizes);
        return g;
      case AdmissionVerdict::kReject:
        break;
    }
    TUNE_ASSIGN_OR_RETURN(g.reject, Reject(trial, params, job, g, *device_memory));
    return g;
  }

  // A trial admission does not run: PRUNED with reason "predicted".
  Result<TrialOutcome> Reject(TrialHandle& trial, const Json& params, const TrainJob& job,
                              const Guarded& g, int64_t device_memory) {
    const Admission& a = *g.admission;
    TUNE_RETURN_IF_ERROR(
        trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(AdmissionAttr(g, device_memory))));
    Json details = ConfigDetails(job);
    details["estimate"] = a.requested_estimate;
    details["predicted"] = a.predicted;
    details["usable"] = a.usable;
    details["correction"] = a.correction;
    const std::string reason =
        fmt::format("predicted out of memory: {} (estimate {} x correction {:.3f}) > {} usable",
                    FormatBytes(a.predicted), FormatBytes(a.requested_estimate), a.correction,
                    FormatBytes(a.usable));
    return RecordOom(trial, params, details, reason, EndReason::kPredicted);
  }

  static Json ConfigDetails(const TrainJob& job) {
    return Json{{"model", job.model.name},
                {"batch_size", job.hp.batch_size},
                {"grad_accum", job.hp.grad_accum},
                {"effective_batch_size", job.hp.batch_size * job.hp.grad_accum},
                {"max_length", job.hp.max_length},
                {"precision", PrecisionName(job.hp.precision)},
                {"gradient_checkpointing", job.hp.gradient_checkpointing}};
  }

  // The parent's admission, for the child process (--plan).
  static Json GuardedToJson(const Guarded& g) {
    Json j{{"family", g.family}, {"levers", g.levers}};
    if (g.estimate) j["estimate"] = *g.estimate;
    if (!g.memory_model.is_null()) j["memory_model"] = g.memory_model;
    if (g.admission) {
      j["predicted"] = g.admission->predicted;
      j["correction"] = g.admission->correction;
      j["usable"] = g.admission->usable;
      j["verdict"] = AdmissionVerdictName(g.admission->verdict);
    }
    return j;
  }

  // In a child process: whether the trial is admitted here rather than by the parent. A
  // TorchScript model the parent had no fit of (its first trial, which runs alone): it is
  // measured here, first (the fit stored in the study for the parent's later plans), and
  // admitted by that fit against the card as without --jobs (its levers shrink it).
  bool AdmitsHere(const TrainJob& job) const {
    const Json model = options_.planned->value("memory_model", Json::object());
    const bool parent_fit = model.value("kind", std::string()) == "fit" && model.contains("fit");
    return !parent_fit && IsTorchScriptModel(job.model) && trainer_ &&
           options_.guard.admission && DeviceMemory().has_value();
  }

  // In a child process: the parent's admission, and the fit it used (an out-of-memory retry
  // estimates with it).
  Result<Guarded> PlannedGuard(const TrainJob& job) {
    const Json& plan = *options_.planned;
    const Json model = plan.value("memory_model", Json::object());
    if (model.value("kind", std::string()) == "fit" && model.contains("fit")) {
      TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, MeasuredFitFromJson(model["fit"]));
      script_fits_.Add(fit);
    }
    return GuardedFromJson(plan, job);
  }

  // The child's Guarded: the parent's admission (the levers are already in the params).
  static Guarded GuardedFromJson(const Json& j, const TrainJob& job) {
    Guarded g;
    g.family = j.value("family", MemoryFamily(job.model, job.hp.precision));
    g.levers = j.value("levers", std::string());
    if (j.contains("estimate")) g.estimate = j["estimate"].get<int64_t>();
    if (j.contains("predicted")) {
      Admission a;
      a.verdict = j.value("verdict", std::string()) == "run_with_levers"
                      ? AdmissionVerdict::kRunWithLevers
                      : AdmissionVerdict::kRun;
      a.predicted = j["predicted"].get<int64_t>();
      a.correction = j.value("correction", 1.0);
      a.usable = j.value("usable", int64_t{0});
      g.admission = a;
    }
    return g;
  }

  static MemoryAttr AdmissionAttr(const Guarded& g, std::optional<int64_t> device_memory) {
    MemoryAttr m;
    m.family = g.family;
    m.estimate = g.estimate.value_or(0);
    m.device_memory = device_memory.value_or(0);
    if (g.admission) {
      m.admission = AdmissionVerdictName(g.admission->verdict);
      m.predicted = g.admission->predicted;
      m.correction = g.admission->correction;
      m.usable = g.admission->usable;
      m.levers = g.levers;
    }
    return m;
  }

  // User attribute "memory" of a trial that ran: the admission, the estimate of what ran, the
  // measured peak and the allocated memory before and after, read back by calibration.
  Status RecordMemory(TrialHandle& trial, const TrainJob& job, const Guarded& g,
                      const TrainResult& result, const std::vector<OomAttempt>& retries) {
    MemoryAttr m = AdmissionAttr(g, DeviceMemory());
    m.peak = result.peak_memory_bytes;
    m.oom = result.end == TrainResult::End::kOutOfMemory;
    // The formulas estimate the device's peak, context included; a TorchScript model's fit
    // predicts what its probes measured (allocated), which `peak` is compared with.
    if (OnCuda() && !IsTorchScriptModel(job.model)) m.context = DeviceModel().context_bytes;
    MemoryAttr::Run& run = m.run.emplace();
    run.peak_reserved = result.peak_reserved_bytes;
    run.before = result.memory_before_bytes;
    run.after = result.memory_after_bytes;
    run.rss = ProcessResidentBytes();
    run.heap = ProcessHeapInUseBytes();
    run.batch_size = job.hp.batch_size;
    run.grad_accum = job.hp.grad_accum;
    run.gradient_checkpointing = job.hp.gradient_checkpointing;
    run.oom_retries = retries;
    return trial.SetUserAttr(attrs::kMemory, MemoryAttrToJson(m));
  }

  Result<TrialOutcome> Fail(TrialHandle& trial, const std::string& reason) {
    spdlog::warn("Trial {} failed: {}", trial.number(), FirstLine(reason));
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, reason));
    return TrialOutcome{TrialState::kFail, {}, FirstLine(reason)};
  }

  TrainObjectiveOptions options_;
  ModelCatalog catalog_;
  std::unique_ptr<Trainer> trainer_;
  TextSets text_;
  TabularTrainData tabular_;
  TrainHyperparams base_;
  std::map<std::string, int64_t> longest_tokens_;  // per TextSets key, with [CLS] and [SEP]
  std::map<int64_t, Json> plan_json_;  // --jobs: each planned trial's admission, by number
  DeviceNvml nvml_{options_.device};  // utilisation, and this process's memory for the context
  ScriptFitCache script_fits_;         // TorchScript models' measured fits
};

}  // namespace

namespace {

// The models trials may use (they bound the vocabulary and the sequence length).
Result<std::vector<const ModelSpec*>> ModelsOf(const TrainObjectiveOptions& options,
                                               const ModelCatalog& catalog,
                                               const TrainHyperparams& base) {
  std::vector<const ModelSpec*> models;
  for (const auto& name : options.models) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(name));
    models.push_back(m);
  }
  if (!base.model.empty()) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(base.model));
    models.push_back(m);
  }
  return models;
}

Result<TabularTrainData> LoadTabular(const TabularDataOptions& options) {
  TUNE_ASSIGN_OR_RETURN(TabularDataset dataset, LoadTabularDataset(options));
  TabularTrainData tabular;
  tabular.num_features = static_cast<int64_t>(dataset.features.size());
  tabular.num_labels = static_cast<int64_t>(dataset.labels.size());
  tabular.train_x = std::move(dataset.train_x);
  tabular.train_labels = std::move(dataset.train_y);
  tabular.validation_x = std::move(dataset.validation_x);
  tabular.validation_labels = std::move(dataset.validation_y);
  spdlog::info(
      "Train data: {} training rows ({}), {} validation rows ({}), {} features ({}), {} "
      "labels",
      tabular.train_labels.size(), dataset.train_source, tabular.validation_labels.size(),
      dataset.validation_source, tabular.num_features, JoinNames(dataset.features),
      tabular.num_labels);
  return tabular;
}

// The tokenizer of the models under `key` (TokenizerKey): the checkpoint's (each model's with
// "init": "pretrained", else "pretrained"'s; Tokenizer::FromCheckpointDir), the vocabulary
// file's, or one built from the training texts no larger than the smallest model's vocabulary;
// checked against every model's embedding table.
Result<Tokenizer> MakeTokenizer(const TrainObjectiveOptions& options, const std::string& key,
                                const TextDataset& dataset,
                                const std::vector<const ModelSpec*>& models) {
  if (key.empty() && !options.vocab) {
    TokenizerOptions to = options.tokenizer;
    for (const ModelSpec* m : models) {
      if (m->vocab_size > 0) to.vocab_size = std::min(to.vocab_size, m->vocab_size);
    }
    std::vector<std::string> texts;
    texts.reserve(dataset.train.size());
    for (const auto& e : dataset.train) texts.push_back(e.text);
    return Tokenizer::Build(texts, to);
  }
  const bool vocab_key = key.rfind(kVocabKeyPrefix, 0) == 0;
  const std::optional<std::string> dir =
      vocab_key ? std::nullopt : key.empty() ? options.pretrained : key;
  const std::string file = dir          ? PretrainedVocabPath(*dir)
                           : vocab_key ? key.substr(std::string(kVocabKeyPrefix).size())
                                       : *options.vocab;
  TUNE_ASSIGN_OR_RETURN(Tokenizer t,
                        dir ? Tokenizer::FromCheckpointDir(*dir, options.tokenizer)
                            : Tokenizer::FromVocabFile(file, options.tokenizer.lowercase));
  for (const ModelSpec* m : models) {
    if (m->vocab_size > 0 && t.vocab_size() > m->vocab_size) {
      return InvalidArgumentError(fmt::format("{} has {} tokens but model '{}' embeds only {} "
                                              "(vocab_size)",
                                              file, t.vocab_size(), m->name, m->vocab_size));
    }
  }
  return t;
}

// Every text tokenized once by `tokenizer` (TokenizeTextDataset), with a log line.
TextTrainData Tokenize(const TextDataset& dataset, const Tokenizer& tokenizer, int64_t max_length) {
  const auto start = std::chrono::steady_clock::now();
  TrainTokenCounts counts;
  TextTrainData data = TokenizeTextDataset(dataset, tokenizer, max_length, &counts);
  const int64_t tokens = counts.tokens, longest = counts.longest;
  const int64_t cap = std::max<int64_t>(max_length - 2, 0);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info(
      "Train data: {} training examples ({}), {} validation examples ({}), {} labels; "
      "{}; {:.1f} tokens per training text on average{}; prepared in {:.1f}s",
      data.train_ids.size(), dataset.train_source, data.validation_ids.size(),
      dataset.validation_source, data.num_labels, tokenizer.description(),
      data.train_ids.empty()
          ? 0.0
          : static_cast<double>(tokens) / static_cast<double>(data.train_ids.size()),
      longest > cap ? fmt::format(", the longest over {} (truncated)", cap) : "", secs);
  return data;
}

// The data set read once and tokenized by each tokenizer the models need.
Result<TextSets> LoadText(const TrainObjectiveOptions& options,
                          const std::vector<const ModelSpec*>& models) {
  TUNE_ASSIGN_OR_RETURN(TextDataset dataset, LoadTextDataset(options.data));
  std::map<std::string, std::vector<const ModelSpec*>> groups;
  for (const ModelSpec* m : models) groups[TokenizerKey(options, *m)].push_back(m);
  if (groups.empty()) groups[""];
  TextSets sets;
  for (const auto& [key, group] : groups) {
    int64_t max_length = group.empty() ? 512 : 0;
    for (const ModelSpec* m : group) max_length = std::max(max_length, MaxSequenceLength(*m));
    TUNE_ASSIGN_OR_RETURN(Tokenizer tokenizer, MakeTokenizer(options, key, dataset, group));
    sets.data[key] = Tokenize(dataset, tokenizer, max_length);
    if (key.rfind(kVocabKeyPrefix, 0) == 0) {
      sets.vocab_files.emplace(key, std::move(tokenizer));
    } else if (key.empty() && !options.pretrained) {
      sets.built = std::move(tokenizer);
    }
  }
  return sets;
}

// The checked load of every TorchScript model before the first trial (Trainer::
// CheckTorchScriptModel); its parameter count goes into the catalog.
Status CheckTorchScriptModels(const TrainObjectiveOptions& options,
                              const std::vector<const ModelSpec*>& models, const TextSets& text,
                              Trainer& trainer, ModelCatalog& catalog) {
  std::set<std::string> checked;
  for (const ModelSpec* m : models) {
    if (!IsTorchScriptModel(*m) || !checked.insert(m->name).second) continue;
    TrainJob job;
    job.model = *m;
    job.data = &text.data.at(TokenizerKey(options, *m));
    TUNE_ASSIGN_OR_RETURN(int64_t parameters, trainer.CheckTorchScriptModel(job));
    spdlog::info("TorchScript model {}: {} parameters; forward checked at B=1, T=8", m->name,
                 parameters);
    ModelSpec updated = *m;
    updated.num_parameters = parameters;
    catalog.Put(std::move(updated));
  }
  return Status::Ok();
}

}  // namespace

TextTrainData TokenizeTextDataset(const TextDataset& dataset, const Tokenizer& tokenizer,
                                  int64_t max_length, TrainTokenCounts* counts) {
  TextTrainData data;
  data.num_labels = static_cast<int64_t>(dataset.labels.size());
  data.label_names = dataset.labels;
  data.vocab_size = tokenizer.vocab_size();
  data.pad_id = tokenizer.pad_id();
  data.cls_id = tokenizer.cls_id();
  data.sep_id = tokenizer.sep_id();
  const auto cap = static_cast<size_t>(std::max<int64_t>(max_length - 2, 0));
  TrainTokenCounts seen;
  for (const auto& e : dataset.train) {
    data.train_ids.push_back(tokenizer.Encode(e.text, cap + 1));
    const auto n = static_cast<int64_t>(data.train_ids.back().size());
    seen.tokens += n;
    seen.longest = std::max(seen.longest, n);
    if (data.train_ids.back().size() > cap) data.train_ids.back().resize(cap);
    data.train_labels.push_back(e.label);
  }
  for (const auto& e : dataset.validation) {
    data.validation_ids.push_back(tokenizer.Encode(e.text, cap));
    data.validation_labels.push_back(e.label);
  }
  if (counts != nullptr) *counts = seen;
  return data;
}

Result<std::unique_ptr<Objective>> NewTrainObjective(TrainObjectiveOptions options,
                                                     ModelCatalog catalog,
                                                     std::unique_ptr<Trainer> trainer) {
  TrainHyperparams base;
  for (const auto& [key, value] : options.defaults.items()) {
    TUNE_RETURN_IF_ERROR(SetHyperparam(base, key, value));
  }
  TUNE_ASSIGN_OR_RETURN(std::vector<const ModelSpec*> models, ModelsOf(options, catalog, base));
  TextSets text;
  TabularTrainData tabular;
  if (options.task == TrainTask::kTabularClassification) {
    TUNE_ASSIGN_OR_RETURN(tabular, LoadTabular(options.tabular));
  } else {
    TUNE_ASSIGN_OR_RETURN(text, LoadText(options, models));
    if (trainer) {
      TUNE_RETURN_IF_ERROR(CheckTorchScriptModels(options, models, text, *trainer, catalog));
    }
  }
  return std::unique_ptr<Objective>(std::make_unique<TrainObjective>(
      std::move(options), std::move(catalog), std::move(trainer), std::move(text),
      std::move(tabular), std::move(base)));
}

}  // namespace tune

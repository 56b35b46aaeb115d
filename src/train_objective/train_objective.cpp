// The train objective (train_objective.h): one trial from its params to its outcome. Its rooms
// are beside it: the data (text_sets.h), the epochs and outcome (trial_outcome.h), the memory
// guard (memory/train_guard.h) and --save-best (train/save_best.h).
#include "train_objective/train_objective.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>

#include "measure/gpu_process_memory.h"
#include "memory/cards.h"
#include "memory/train_guard.h"
#include "objectives/trial_protocol.h"
#include "train/save_best.h"
#include "train_objective/text_sets.h"
#include "train_objective/trainer_defaults.h"
#include "train_objective/trial_outcome.h"
#include "tune/trial_attrs.h"
#include "util/device.h"
#include "util/interrupt.h"
#include "util/subprocess.h"
#include "util/text.h"

namespace tune {
namespace {

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

std::optional<BestModelSaver> SaverFor(const TrainObjectiveOptions& options, const TextSets& text) {
  if (!options.save_best) return std::nullopt;
  SavedInputs inputs;
  inputs.problem_type = options.data.problem_type;
  inputs.label_column = options.data.label_column;
  inputs.label_separator = options.data.label_separator;
  inputs.text_column = options.data.text_column;
  inputs.text_pair_column = options.data.text_pair_column;
  inputs.truncation = options.data.truncation;
  if (!text.data.empty() && options.data.problem_type == ProblemType::kSingleLabel) {
    const std::vector<std::string>& labels = text.data.begin()->second.label_names;
    if (labels.size() == 2) inputs.positive_label = labels[static_cast<size_t>(text.positive)];
  }
  return BestModelSaver(*options.save_best, options.metric, std::move(inputs));
}

class TrainObjective final : public Objective {
 public:
  // `cards`: a --jobs parent's (Cards::Resolve), which its trials share, with `largest` the one
  // with the largest budget now; else the one card of this process's device (Cards::Device).
  TrainObjective(TrainObjectiveOptions options, ModelCatalog catalog,
                 std::unique_ptr<Trainer> trainer, TextSets text, TabularTrainData tabular,
                 TrainHyperparams base, Cards cards, bool parent, size_t largest)
      : options_(std::move(options)),
        catalog_(std::move(catalog)),
        trainer_(std::move(trainer)),
        text_(std::move(text)),
        tabular_(std::move(tabular)),
        base_(std::move(base)),
        cards_(std::move(cards)),
        guard_(cards_.size() > 1 ? cards_.GuardFor(largest, options_.guard) : options_.guard,
               cards_.size() > 1 ? cards_.device(largest) : options_.device, trainer_.get(),
               options_.planned),
        saver_(SaverFor(options_, text_)) {
    // A --jobs parent plans trials against the largest budget now (tune/cards.h): another
    // process may hold most of the card with the most memory.
    if (parent) guard_.SetBudget([this] { return cards_.LargestNow().budget; });
  }

  std::string name() const override {
    return fmt::format("train ({}, {})", TrainMetricName(options_.metric),
                       trainer_ ? trainer_->name() : "in child processes");
  }

  Result<TrialOutcome> Run(TrialHandle& trial, const Json& params) override {
    if (!trainer_) {
      return FailedPreconditionError("this train objective runs trials in child processes only");
    }
    TUNE_RETURN_IF_ERROR(ApplyTrainerDefaults(trial));
    TrainJob job;
    std::string unfit;  // why this trial's configuration cannot train
    TUNE_RETURN_IF_ERROR(BuildJob(params, job, unfit));
    if (!unfit.empty()) return FailTrial(trial, unfit);
    spdlog::debug("Trial {} memory at trial start: {}", trial.number(),
                  DeviceMemoryStatusText(trainer_->MemoryStatus()));
    TUNE_ASSIGN_OR_RETURN(GuardDecision guarded, guard_.Admit(trial, params, job));
    if (guarded.reject) return *guarded.reject;
    if (saver_) TUNE_RETURN_IF_ERROR(saver_->Prepare(trial.number(), job));
    EpochTracker tracker(trial, options_.metric, job.hp, text_.positive);
    std::vector<OomAttempt> retries;
    TUNE_ASSIGN_OR_RETURN(TrainResult result,
                          TrainWithRetries(trial, job, guarded, tracker, retries));
    TUNE_RETURN_IF_ERROR(guard_.RecordMemory(trial, job, guarded, result, retries));
    spdlog::debug("Trial {} memory at trial end: {}", trial.number(),
                  DeviceMemoryStatusText(trainer_->MemoryStatus()));
    TUNE_RETURN_IF_ERROR(RecordTrainSummary(trial, options_, result, tracker));
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome,
                          Outcome(trial, params, job, guarded, result, retries, tracker));
    TUNE_RETURN_IF_ERROR(StageBest(trial, params, job, outcome));
    return outcome;
  }

  std::vector<Card> CardsNow() const override { return cards_.Now(options_.guard.margin); }

  // --jobs: admission in this process, which holds the study's history; the child runs the
  // admitted configuration within its reservation.
  Result<TrialPlan> Plan(TrialHandle& trial, const Json& params) override {
    TUNE_ASSIGN_OR_RETURN(std::optional<TrialPlan> plan, PlanWithin(trial, params, std::nullopt));
    return std::move(plan).value();
  }

  Result<std::optional<TrialPlan>> PlanToFit(TrialHandle& trial, const Json& params,
                                             int64_t room) override {
    const GuardOptions& g = options_.guard;
    if (!g.admission || !g.shrink_to_start || !g.lever_grad_accum || !guard_.DeviceMemory()) {
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
          plan.params.dump(), std::string("--plan"), plan_json_[trial.number()].dump()}) {
      so.argv.push_back(arg);
    }
    // The child's device_memory: ProcessCap of its reservation (a trial run without admission
    // may reserve more than the device). None: the config's device_memory.
    if (plan.reservation > 0) {
      so.argv.push_back("--device-memory");
      so.argv.push_back(std::to_string(ProcessCap(plan.reservation, options_.guard.margin,
                                                  cards_.DeviceMemory(Index(plan.card)))));
    }
    plan_json_.erase(trial.number());
    so.env = CurrentEnvironment();
    if (cards_.size() > 1) {  // the child sees only its card
      so.argv.push_back("--card");
      so.argv.push_back(std::to_string(plan.card));
      OverrideEnvironment(so.env, cards_.Environment(Index(plan.card)));
    }
    so.kill_grace_seconds = 3.0;
    TUNE_ASSIGN_OR_RETURN(std::unique_ptr<TrialProcess> child,
                          ChildTrialProcess::Start(trial, plan.params, std::move(so)));
    if (!saver_) return child;
    const int64_t number = trial.number();
    const std::optional<double> study_best = BestCompleteValue(trial.history());
    return std::unique_ptr<TrialProcess>(std::make_unique<PromotingProcess>(
        std::move(child), [this, number, study_best](const TrialOutcome& outcome) {
          return saver_->Promote(number, outcome, study_best);
        }));
  }

 private:
  static size_t Index(int64_t card) { return static_cast<size_t>(card); }

  // save_best, after the trial: a COMPLETE trial's staging directory is completed (config,
  // tokenizer, trial.json) and, in this process (not a --jobs child), promoted if best.
  Status StageBest(TrialHandle& trial, const Json& params, const TrainJob& job,
                   const TrialOutcome& outcome) const {
    if (!saver_) return Status::Ok();
    const std::string key = TokenizerKey(options_, job.model);
    const bool scratch = key.empty() && text_.built;
    const Tokenizer* built = scratch ? &*text_.built : nullptr;
    std::string vocab = scratch && options_.vocab ? *options_.vocab : std::string();
    if (auto file = text_.vocab_files.find(key); file != text_.vocab_files.end()) {
      built = &file->second;
      vocab = key.substr(std::string(kVocabKeyPrefix).size());
    }
    TUNE_ASSIGN_OR_RETURN(bool staged, saver_->Stage(trial.study_name(), trial.number(), params,
                                                     job, outcome, built, vocab));
    if (!staged || options_.planned) return Status::Ok();  // a --jobs child: the parent promotes
    return saver_->Promote(trial.number(), outcome, BestCompleteValue(trial.history()));
  }

  // The study's trainer defaults (trainer_defaults.h), read or recorded once per process before
  // the first job is built: what precision "auto" (the default) and an unset "tf32" mean. A --jobs
  // child gets them in its params from the parent instead.
  // A study scored with macro-F1 under the name "f1" (tune read "f1" as macro_f1 until the
  // positive class's F1 took the name) does not switch metric midway: its config must say
  // macro_f1 to continue it.
  Status CheckStudyMetric(TrialHandle& trial) const {
    if (options_.metric != TrainMetric::kF1) return Status::Ok();
    for (const auto& t : trial.history().trials) {
      const Json& summary = t->user_attrs.value(attrs::kTrain, Json::object());
      if (t->state == TrialState::kComplete && summary.is_object() &&
          summary.value("metric", "") == "macro_f1") {
        return InvalidArgumentError(fmt::format(
            "metric 'f1' is now the F1 of the positive class, but study '{}' was scored with "
            "macro_f1 (trial {}: tune read 'f1' as macro_f1 before): set \"metric\": "
            "\"macro_f1\" to continue this study, or start a new one",
            trial.study_name(), t->number));
      }
    }
    return Status::Ok();
  }

  Status ApplyTrainerDefaults(TrialHandle& trial) {
    if (!metric_checked_) {
      TUNE_RETURN_IF_ERROR(CheckStudyMetric(trial));
      metric_checked_ = true;
    }
    if (defaults_applied_ || options_.planned ||
        options_.task == TrainTask::kTabularClassification) {
      return Status::Ok();
    }
    const bool precision_auto =
        !options_.defaults.contains("precision") || options_.defaults["precision"] == "auto";
    const bool tf32_auto = !options_.defaults.contains("tf32");
    const DeviceNvml card(options_.device);
    const std::optional<int> major = card.ComputeMajor();
    const TrainerDefaults current = CurrentTrainerDefaults(options_.device, major);
    TUNE_ASSIGN_OR_RETURN(StudyDefaults kept, StudyTrainerDefaults(trial, current));
    if (precision_auto && major) {  // bf16 kept from a first run on a card with bfloat16
      const std::string name = card.Name().value_or("");
      const Status fits = CheckPrecisionForCard(
          kept.defaults.precision,
          name.empty() ? options_.device : fmt::format("{} ({})", options_.device, name),
          card.ComputeCapability().value_or(std::make_pair(*major, 0)));
      if (!fits.ok()) {
        return InvalidArgumentError(fmt::format(
            "study '{}' keeps the precision \"auto\" chose on its first run's card; {}. To "
            "continue the study on this card, set \"precision\": \"fp16\" in the config (its "
            "trials so far ran in bf16)",
            trial.study_name(), fits.message()));
      }
    }
    defaults_applied_ = true;
    if (precision_auto) base_.precision = kept.defaults.precision;
    if (tf32_auto) base_.tf32 = kept.defaults.tf32;
    const TrainerDefaults& d = kept.defaults;
    const std::string what =
        fmt::format("precision {}{}, TF32 {}{}, attention {}", PrecisionName(base_.precision),
                    precision_auto ? " (auto)" : "", base_.tf32 ? "on" : "off",
                    tf32_auto ? "" : " (set)", d.attention);
    const bool differs = d.precision != current.precision || d.tf32 != current.tf32;
    const auto level = ParseDevice(options_.device).ok() && ParseDevice(options_.device)->is_cuda()
                           ? spdlog::level::info
                           : spdlog::level::debug;
    switch (kept.source) {
      case StudyDefaults::Source::kNew:
        spdlog::log(level, "Trainer defaults of study '{}': {}{}; kept for its later runs",
                    trial.study_name(), what,
                    major ? fmt::format(" (CUDA compute capability {})", *major) : "");
        break;
      case StudyDefaults::Source::kRecorded:
        spdlog::log(
            differs ? spdlog::level::info : level,
            "Trainer defaults kept from study '{}'s first run: {}{}", trial.study_name(), what,
            differs ? fmt::format("; this tune here would choose {} with TF32 {} (set "
                                  "\"precision\" or \"tf32\" to change)",
                                  PrecisionName(current.precision), current.tf32 ? "on" : "off")
                    : "");
        break;
      case StudyDefaults::Source::kLegacy:
        spdlog::info(
            "Study '{}' has trials from before tune kept its trainer defaults: it keeps what they "
            "ran with: {} (set \"precision\" or \"tf32\" to change)",
            trial.study_name(), what);
        break;
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
  Result<TrainResult> TrainWithRetries(TrialHandle& trial, TrainJob& job, GuardDecision& guarded,
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
      spdlog::warn(
          "Trial {}: out of memory at batch_size {} x grad_accum {}; retry {}/{} at "
          "batch_size {} x grad_accum {}",
          trial.number(), job.hp.batch_size, job.hp.grad_accum, retries.size(),
          options_.guard.oom_retry, next.batch_size, next.grad_accum);
      job.hp = next;
      guarded.estimate = guard_.EstimateFor(trial, job);
      tracker.Reset();
    }
  }

  Result<TrialOutcome> Outcome(TrialHandle& trial, const Json& params, const TrainJob& job,
                               const GuardDecision& guarded, const TrainResult& result,
                               const std::vector<OomAttempt>& retries,
                               const EpochTracker& tracker) {
    switch (result.end) {
      case TrainResult::End::kOutOfMemory:
        return RecordRunTimeOom(trial, params, job, guarded, result, retries);
      case TrainResult::End::kFailed:
        return FailTrial(trial, result.message);
      case TrainResult::End::kNonFinite:
        return RecordNonFiniteRun(trial, result);
      case TrainResult::End::kInterrupted:
        spdlog::warn("Trial {} failed: {}", trial.number(), InterruptReason());
        return RecordInterrupted(trial);
      case TrainResult::End::kDeviceLost:
        return RecordDeviceLost(trial, result);
      case TrainResult::End::kCompleted:
      case TrainResult::End::kStopped:
        break;
    }
    if (tracker.nonfinite) {
      spdlog::warn("Trial {} failed: {}", trial.number(), tracker.nonfinite_message);
      return RecordNonFinite(trial, *tracker.nonfinite, tracker.nonfinite_message);
    }
    return FinishedRunOutcome(trial, options_, result, tracker);
  }

  // A loss, outputs or weights that are not finite: FAIL, reason "nonfinite" (trial_attrs.h).
  static Result<TrialOutcome> RecordNonFiniteRun(TrialHandle& trial, const TrainResult& result) {
    spdlog::warn("Trial {} failed: {}", trial.number(), FirstLine(result.message));
    const NonFiniteAttr where =
        NonFiniteAttrFromJson(result.details).value_or(NonFiniteAttr{.where = "training_loss"});
    return RecordNonFinite(trial, where, result.message);
  }

  // A sticky CUDA error: the trial fails with it and where it struck; the DeviceLost status stops
  // this process's study loop (apps/tune continues the study in a fresh process).
  static Result<TrialOutcome> RecordDeviceLost(TrialHandle& trial, const TrainResult& result) {
    spdlog::error("Trial {} failed: {}", trial.number(), FirstLine(result.message));
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kDeviceLost, result.details));
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr(attrs::kFailReason, result.message));
    return Status(StatusCode::kDeviceLost, FirstLine(result.message));
  }

  static Result<TrialOutcome> RecordRunTimeOom(TrialHandle& trial, const Json& params,
                                               const TrainJob& job, const GuardDecision& guarded,
                                               const TrainResult& result,
                                               const std::vector<OomAttempt>& retries) {
    Json details = result.details;
    details.update(JobConfigDetails(job));
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

  // Admission (memory/train_guard.h) as a --jobs plan. Plan() with `room` unset; PlanToFit()
  // with it: admission against the `room` bytes left beside the running trials, and nullopt
  // (nothing recorded) when the trial does not fit there.
  Result<std::optional<TrialPlan>> PlanWithin(TrialHandle& trial, const Json& params,
                                              std::optional<int64_t> room) {
    TUNE_RETURN_IF_ERROR(ApplyTrainerDefaults(trial));
    TrialPlan plan;
    TrainJob job;
    std::string unfit;
    TUNE_RETURN_IF_ERROR(BuildJob(params, job, unfit));
    if (!unfit.empty()) {
      if (room) return std::optional<TrialPlan>();
      TUNE_ASSIGN_OR_RETURN(plan.outcome, FailTrial(trial, unfit));
      return std::optional<TrialPlan>(std::move(plan));
    }
    TUNE_ASSIGN_OR_RETURN(GuardDecision guarded, guard_.Admit(trial, params, job, room));
    if (guarded.unfit_now) return std::optional<TrialPlan>();
    if (guarded.reject) {
      plan.outcome = *guarded.reject;
      return std::optional<TrialPlan>(std::move(plan));
    }
    plan.params = params;
    plan.params["batch_size"] = job.hp.batch_size;
    plan.params["grad_accum"] = job.hp.grad_accum;
    plan.params["gradient_checkpointing"] = job.hp.gradient_checkpointing;
    // The study's trainer defaults, as this process read them: the child does not read them.
    plan.params["precision"] = PrecisionName(job.hp.precision);
    plan.params["tf32"] = job.hp.tf32;
    plan.reservation =
        guarded.admission ? guarded.admission->predicted : guarded.estimate.value_or(0);
    plan.exclusive = !guarded.estimate;
    plan.summary = guarded.admission
                       ? fmt::format("predicted {} (estimate {} x correction {:.3f})",
                                     FormatBytes(guarded.admission->predicted),
                                     FormatBytes(*guarded.estimate), guarded.admission->correction)
                       : "memory unknown: runs alone";
    if (room) plan.summary += ", " + guarded.levers + " to start beside the running trials";
    plan_json_[trial.number()] = TrainGuard::PlanJson(guarded);
    return std::optional<TrialPlan>(std::move(plan));
  }

  TrainObjectiveOptions options_;
  ModelCatalog catalog_;
  std::unique_ptr<Trainer> trainer_;
  TextSets text_;
  TabularTrainData tabular_;
  TrainHyperparams base_;
  bool defaults_applied_ = false;  // ApplyTrainerDefaults ran
  bool metric_checked_ = false;    // CheckStudyMetric ran (once per process)
  Cards cards_;                    // a --jobs parent's cards; else the one of this process's device
  TrainGuard guard_;               // admits against the card (the largest of several)
  std::optional<BestModelSaver> saver_;
  std::map<int64_t, Json> plan_json_;  // --jobs: each planned trial's admission, by number
};

}  // namespace

Result<std::unique_ptr<Objective>> NewTrainObjective(TrainObjectiveOptions options,
                                                     ModelCatalog catalog,
                                                     std::unique_ptr<Trainer> trainer) {
  TrainHyperparams base;
  for (const auto& [key, value] : options.defaults.items()) {
    if (key == "precision" && value == "auto") continue;  // ApplyTrainerDefaults
    TUNE_RETURN_IF_ERROR(SetHyperparam(base, key, value));
  }
  TUNE_ASSIGN_OR_RETURN(std::vector<const ModelSpec*> models,
                        ModelsOf(options, catalog, base.model));
  TextSets text;
  TabularTrainData tabular;
  if (options.task == TrainTask::kTabularClassification) {
    TUNE_ASSIGN_OR_RETURN(tabular, LoadTabular(options.tabular));
    std::vector<std::string> labels(static_cast<size_t>(tabular.num_labels));
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = std::to_string(i);
    if (options.positive_label) {
      return InvalidArgumentError(
          "positive_label applies to text classification; a tabular task's positive class is "
          "its second label");
    }
    TUNE_ASSIGN_OR_RETURN(text.positive, PositiveLabelIndex(options, labels));
  } else {
    TUNE_ASSIGN_OR_RETURN(text, LoadText(options, models));
    if (trainer) {
      TUNE_RETURN_IF_ERROR(CheckTorchScriptModels(options, models, text, *trainer, catalog));
    }
  }
  // A --jobs parent shares its cards between its trials (memory/cards.h); a trial in this
  // process (--jobs 1) or in a child uses its device, one card.
  const bool parent = !options.child_command.empty();
  TUNE_ASSIGN_OR_RETURN(Cards cards, parent ? Cards::Resolve(options.device, options.guard)
                                            : Cards::Device(options.device, options.guard));
  // The guard admits against the card with the largest budget now (at the start; its budget
  // then follows the cards: SetBudget), with that card's device_memory and simulated card.
  const size_t largest = cards.size() > 1 ? cards.LargestNow().card : 0;
  return std::unique_ptr<Objective>(std::make_unique<TrainObjective>(
      std::move(options), std::move(catalog), std::move(trainer), std::move(text),
      std::move(tabular), std::move(base), std::move(cards), parent, largest));
}

}  // namespace tune

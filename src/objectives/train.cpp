#include "tune/objectives/train.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include "tune/memory/estimator.h"
#include "tune/memory/guard.h"
#include "tune/text.h"

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

class TrainObjective final : public Objective {
 public:
  TrainObjective(TrainObjectiveOptions options, ModelCatalog catalog,
                 std::unique_ptr<Trainer> trainer, TextTrainData data, TabularTrainData tabular,
                 TrainHyperparams base)
      : options_(std::move(options)),
        catalog_(std::move(catalog)),
        trainer_(std::move(trainer)),
        data_(std::move(data)),
        tabular_(std::move(tabular)),
        base_(std::move(base)) {
    // Batches are padded to their longest text, so no batch is wider than the longest text.
    for (const auto* set : {&data_.train_ids, &data_.validation_ids}) {
      for (const auto& ids : *set) {
        longest_tokens_ = std::max<int64_t>(longest_tokens_, static_cast<int64_t>(ids.size()) + 2);
      }
    }
  }

  std::string name() const override {
    return fmt::format("train ({}, {})", TrainMetricName(options_.metric), trainer_->name());
  }

  Result<TrialOutcome> Run(Trial& trial, const Json& params) override {
    TrainHyperparams hp = base_;
    for (const auto& [key, value] : params.items()) {
      if (std::find(options_.ignore_params.begin(), options_.ignore_params.end(), key) !=
          options_.ignore_params.end()) {
        continue;
      }
      Status st = SetHyperparam(hp, key, value);
      if (!st.ok()) return st;
    }
    TrainJob job;
    job.hp = hp;
    if (options_.task == TrainTask::kTabularClassification) {
      job.model.name = job.model.model_type = "mlp";
      job.tabular = &tabular_;
    } else {
      if (hp.model.empty()) {
        return InvalidArgumentError(
            "no model: set the objective's \"model\" or a 'model' parameter");
      }
      TUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog_.Find(hp.model));
      if (Status st = CheckModelForTraining(*spec, hp); !st.ok()) return Fail(trial, st.message());
      if (data_.vocab_size > spec->vocab_size) {
        return Fail(trial, fmt::format("the tokenizer has {} tokens but model '{}' embeds only {}",
                                       data_.vocab_size, spec->name, spec->vocab_size));
      }
      job.model = *spec;
      job.data = &data_;
    }
    const auto number = trial.number();
    spdlog::info("Trial {} memory at trial start: {}", number,
                 DeviceMemoryStatusText(trainer_->MemoryStatus()));
    TUNE_ASSIGN_OR_RETURN(Guarded guarded, Admit(trial, params, job));
    if (guarded.reject) return *guarded.reject;
    const StudyDirection direction = TrainMetricDirection(options_.metric);
    std::optional<double> best;
    int64_t best_epoch = -1, since_best = 0;
    bool pruned = false, stopped_early = false;
    EpochCallback on_epoch = [&](const EpochMetrics& m) -> Result<EpochDecision> {
      const double value = TrainMetricValue(options_.metric, m);
      spdlog::info(
          "Trial {} epoch {}/{}: train_loss={:.4f} validation_loss={:.4f} accuracy={:.4f} "
          "macro_f1={:.4f} ({:.1f}s)",
          number, m.epoch + 1, hp.epochs, m.train_loss, m.validation_loss, m.accuracy, m.macro_f1,
          m.seconds);
      TUNE_RETURN_IF_ERROR(trial.Report(value, m.epoch));
      const bool improved =
          !best || (std::isfinite(value) &&
                    (direction == StudyDirection::kMaximize ? value > *best + hp.min_delta
                                                            : value < *best - hp.min_delta));
      if (improved) {
        best = value;
        best_epoch = m.epoch;
        since_best = 0;
      } else {
        ++since_best;
      }
      TUNE_ASSIGN_OR_RETURN(bool prune, trial.ShouldPrune());
      if (prune) {
        pruned = true;
        return EpochDecision::kStop;
      }
      if (hp.patience > 0 && since_best >= hp.patience && m.epoch + 1 < hp.epochs) {
        stopped_early = true;
        return EpochDecision::kStop;
      }
      return EpochDecision::kContinue;
    };

    // Runs the trial; after an out-of-memory error, with oom_retry, again at half the micro-batch
    // and twice the accumulation (the effective batch stays the same).
    Json retries = Json::array();
    TrainResult result;
    for (;;) {
      TUNE_ASSIGN_OR_RETURN(result, trainer_->Train(job, on_epoch));
      if (result.end != TrainResult::End::kOutOfMemory ||
          static_cast<int64_t>(retries.size()) >= options_.guard.oom_retry) {
        break;
      }
      TrainHyperparams next = job.hp;
      if (!HalveMicroBatch(next.batch_size, next.grad_accum)) break;
      Json attempt{{"batch_size", job.hp.batch_size},
                   {"grad_accum", job.hp.grad_accum},
                   {"phase", result.details.value("phase", std::string("training"))},
                   {"error", FirstLine(result.message)},
                   {"peak_memory_bytes", result.peak_memory_bytes}};
      if (guarded.estimate) attempt["estimate"] = *guarded.estimate;
      retries.push_back(std::move(attempt));
      spdlog::warn("Trial {}: out of memory at batch_size {} x grad_accum {}; retry {}/{} at "
                   "batch_size {} x grad_accum {}",
                   number, job.hp.batch_size, job.hp.grad_accum, retries.size(),
                   options_.guard.oom_retry, next.batch_size, next.grad_accum);
      job.hp = next;
      guarded.estimate = EstimateFor(job);
      best.reset();
      best_epoch = -1;
      since_best = 0;
      pruned = stopped_early = false;
    }
    TUNE_RETURN_IF_ERROR(RecordMemory(trial, job, guarded, result, retries));
    spdlog::info("Trial {} memory at trial end: {}", number,
                 DeviceMemoryStatusText(trainer_->MemoryStatus()));

    Json summary{{"end", TrainEndName(result.end)},
                 {"epochs_run", result.epochs.size()},
                 {"num_parameters", result.num_parameters},
                 {"metric", TrainMetricName(options_.metric)}};
    if (best_epoch >= 0) summary["best_epoch"] = best_epoch;
    if (stopped_early) summary["stopped_early"] = true;
    if (result.peak_memory_bytes >= 0) summary["peak_memory_bytes"] = result.peak_memory_bytes;
    Json history = Json::array();
    for (const auto& m : result.epochs) history.push_back(EpochToJson(m));
    summary["history"] = std::move(history);
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr("train", summary));

    switch (result.end) {
      case TrainResult::End::kOutOfMemory: {
        Json details = result.details;
        details.update(ConfigDetails(job));
        if (guarded.estimate) details["estimate"] = *guarded.estimate;
        if (!guarded.levers.empty()) details["levers"] = guarded.levers;
        if (!retries.empty()) details["retries"] = retries;
        details["error"] = FirstLine(result.message);
        if (result.peak_memory_bytes >= 0) details["peak_memory_bytes"] = result.peak_memory_bytes;
        std::string phase = details.value("phase", std::string("training"));
        spdlog::warn("Trial {}: out of memory in {}: {}", number, phase, FirstLine(result.message));
        return RecordOom(trial, params, details, "out of memory in " + phase);
      }
      case TrainResult::End::kFailed:
        return Fail(trial, result.message);
      case TrainResult::End::kInterrupted:
        TUNE_RETURN_IF_ERROR(trial.SetUserAttr("interrupted", true));
        return Fail(trial, "interrupted by the user");
      case TrainResult::End::kCompleted:
      case TrainResult::End::kStopped:
        break;
    }
    if (pruned) {
      return TrialOutcome{
          TrialState::kPruned, {}, fmt::format("pruned after epoch {}", result.epochs.size())};
    }
    if (!best) return Fail(trial, "the run finished without an evaluated epoch");
    return TrialOutcome{TrialState::kComplete, {*best}, ""};
  }

 private:
  // What the memory guard decided before the trial ran.
  struct Guarded {
    std::optional<TrialOutcome> reject;  // set: the trial does not run
    std::optional<int64_t> estimate;     // device_peak of what runs, when it can be estimated
    std::optional<Admission> admission;  // when admission ran
    std::string levers;                  // the levers admission applied
    std::string family;                  // MemoryFamily
  };

  bool OnCuda() const { return options_.device.rfind("cuda", 0) == 0; }

  // CUDA: the caching-allocator model with the context (and other processes' memory) measured
  // now as total - free - reserved; CPU: bytes as the counting allocator counts them.
  DeviceMemoryModel DeviceModel() const {
    if (!OnCuda()) return DeviceMemoryModel::Cpu();
    const DeviceMemoryStatus m = trainer_->MemoryStatus();
    const bool measured = m.total > 0 && m.free >= 0 && m.reserved >= 0;
    return CudaDeviceModel(options_.guard, measured ? m.total - m.free - m.reserved : -1);
  }

  // The memory trials may use: device_memory, at most the card's; unset on CPU without it.
  std::optional<int64_t> DeviceMemory() const {
    std::optional<int64_t> d = options_.guard.device_memory;
    const DeviceMemoryStatus m = trainer_->MemoryStatus();
    if (OnCuda() && m.total > 0) d = d ? std::min(*d, m.total) : m.total;
    return d;
  }

  MemoryRequest RequestFor(const TrainJob& job) const {
    const int64_t labels = job.tabular != nullptr ? tabular_.num_labels : data_.num_labels;
    MemoryRequest r = MemoryRequestFor(job.model, job.hp, labels, tabular_.num_features);
    if (job.tabular == nullptr && job.hp.padding == Padding::kLongest && longest_tokens_ > 0) {
      r.max_length = std::min(r.max_length, longest_tokens_);
    }
    return r;
  }

  std::optional<int64_t> EstimateFor(const TrainJob& job) const {
    auto e = EstimateMemory(RequestFor(job), DeviceModel());
    if (!e.ok()) return std::nullopt;
    return e->device_peak;
  }

  // Admission (guard.h): runs the trial as it is, with levers applied to job.hp, or not at all.
  Result<Guarded> Admit(Trial& trial, const Json& params, TrainJob& job) {
    Guarded g;
    g.family = MemoryFamily(job.model, job.hp.precision);
    const std::optional<int64_t> device_memory = DeviceMemory();
    if (!options_.guard.admission || !device_memory) {
      g.estimate = EstimateFor(job);
      return g;
    }
    const double correction = options_.guard.calibrate
                                  ? CalibrationFromHistory(trial.history()).Correction(g.family)
                                  : 1.0;
    const int64_t usable = UsableMemory(*device_memory, options_.guard.margin);
    auto admitted = AdmitTrial(RequestFor(job), DeviceModel(), usable, correction, options_.guard);
    if (!admitted.ok()) {
      spdlog::warn("Trial {}: no memory estimate ({}); it runs without admission", trial.number(),
                   admitted.status().message());
      return g;
    }
    const Admission& a = *admitted;
    g.admission = a;
    g.estimate = a.estimate.device_peak;
    const std::string sizes =
        fmt::format("predicted {} (estimate {} x correction {:.3f}) of {} usable",
                    FormatBytes(a.predicted), FormatBytes(a.estimate.device_peak), correction,
                    FormatBytes(usable));
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
    Json memory = AdmissionToJson(g, *device_memory);
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr("memory", memory));
    Json details = ConfigDetails(job);
    details["estimate"] = a.requested_estimate;
    details["predicted"] = a.predicted;
    details["usable"] = usable;
    details["correction"] = correction;
    const std::string reason =
        fmt::format("predicted out of memory: {} (estimate {} x correction {:.3f}) > {} usable",
                    FormatBytes(a.predicted), FormatBytes(a.requested_estimate), correction,
                    FormatBytes(usable));
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome,
                          RecordOom(trial, params, details, reason, "predicted"));
    g.reject = std::move(outcome);
    return g;
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

  Json AdmissionToJson(const Guarded& g, std::optional<int64_t> device_memory) const {
    MemoryRecord record;
    record.family = g.family;
    record.estimate = g.estimate.value_or(0);
    record.device_memory = device_memory.value_or(0);
    Json j = MemoryRecordToJson(record);
    if (g.admission) {
      j["admission"] = AdmissionVerdictName(g.admission->verdict);
      j["predicted"] = g.admission->predicted;
      j["correction"] = g.admission->correction;
      j["usable"] = g.admission->usable;
      if (!g.levers.empty()) j["levers"] = g.levers;
    }
    return j;
  }

  // User attribute "memory" of a trial that ran: the admission, the estimate of what ran, the
  // measured peak and the allocated memory before and after, read back by calibration.
  Status RecordMemory(Trial& trial, const TrainJob& job, const Guarded& g,
                      const TrainResult& result, const Json& retries) {
    Json j = AdmissionToJson(g, DeviceMemory());
    j["peak"] = result.peak_memory_bytes;
    j["oom"] = result.end == TrainResult::End::kOutOfMemory;
    if (result.peak_reserved_bytes >= 0) j["peak_reserved"] = result.peak_reserved_bytes;
    j["before"] = result.memory_before_bytes;
    j["after"] = result.memory_after_bytes;
    if (const int64_t rss = ProcessResidentBytes(); rss >= 0) j["rss"] = rss;
    if (const int64_t heap = ProcessHeapInUseBytes(); heap >= 0) j["heap"] = heap;
    j["batch_size"] = job.hp.batch_size;
    j["grad_accum"] = job.hp.grad_accum;
    j["gradient_checkpointing"] = job.hp.gradient_checkpointing;
    if (!retries.empty()) j["oom_retries"] = retries;
    return trial.SetUserAttr("memory", j);
  }

  Result<TrialOutcome> Fail(Trial& trial, const std::string& reason) {
    spdlog::warn("Trial {} failed: {}", trial.number(), FirstLine(reason));
    TUNE_RETURN_IF_ERROR(trial.SetUserAttr("fail_reason", reason));
    return TrialOutcome{TrialState::kFail, {}, FirstLine(reason)};
  }

  TrainObjectiveOptions options_;
  ModelCatalog catalog_;
  std::unique_ptr<Trainer> trainer_;
  TextTrainData data_;
  TabularTrainData tabular_;
  TrainHyperparams base_;
  int64_t longest_tokens_ = 0;  // the longest text with [CLS] and [SEP]
};

}  // namespace

Result<std::unique_ptr<Objective>> NewTrainObjective(TrainObjectiveOptions options,
                                                     ModelCatalog catalog,
                                                     std::unique_ptr<Trainer> trainer) {
  TrainHyperparams base;
  for (const auto& [key, value] : options.defaults.items()) {
    TUNE_RETURN_IF_ERROR(SetHyperparam(base, key, value));
  }
  // The models trials may use bound the vocabulary and the sequence length.
  std::vector<const ModelSpec*> models;
  for (const auto& name : options.models) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(name));
    models.push_back(m);
  }
  if (!base.model.empty()) {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Find(base.model));
    models.push_back(m);
  }
  int64_t max_length = 0;
  int64_t min_vocab = INT64_MAX;
  for (const ModelSpec* m : models) {
    max_length = std::max(max_length, MaxSequenceLength(*m));
    min_vocab = std::min(min_vocab, m->vocab_size);
  }
  if (models.empty()) max_length = 512;

  const auto start = std::chrono::steady_clock::now();
  if (options.task == TrainTask::kTabularClassification) {
    TUNE_ASSIGN_OR_RETURN(TabularDataset dataset, LoadTabularDataset(options.tabular));
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
    return std::unique_ptr<Objective>(
        std::make_unique<TrainObjective>(std::move(options), std::move(catalog), std::move(trainer),
                                         TextTrainData{}, std::move(tabular), std::move(base)));
  }
  TUNE_ASSIGN_OR_RETURN(TextDataset dataset, LoadTextDataset(options.data));
  std::optional<Tokenizer> tokenizer;
  if (options.vocab) {
    TUNE_ASSIGN_OR_RETURN(Tokenizer t,
                          Tokenizer::FromVocabFile(*options.vocab, options.tokenizer.lowercase));
    for (const ModelSpec* m : models) {
      if (t.vocab_size() > m->vocab_size) {
        return InvalidArgumentError(
            fmt::format("{} has {} tokens but model '{}' embeds only {} (vocab_size)",
                        *options.vocab, t.vocab_size(), m->name, m->vocab_size));
      }
    }
    tokenizer = std::move(t);
  } else {
    TokenizerOptions to = options.tokenizer;
    if (!models.empty()) to.vocab_size = std::min(to.vocab_size, min_vocab);
    std::vector<std::string> texts;
    texts.reserve(dataset.train.size());
    for (const auto& e : dataset.train) texts.push_back(e.text);
    tokenizer = Tokenizer::Build(texts, to);
  }

  TextTrainData data;
  data.num_labels = static_cast<int64_t>(dataset.labels.size());
  data.vocab_size = tokenizer->vocab_size();
  data.pad_id = tokenizer->pad_id();
  data.cls_id = tokenizer->cls_id();
  data.sep_id = tokenizer->sep_id();
  const auto cap = static_cast<size_t>(std::max<int64_t>(max_length - 2, 0));
  int64_t tokens = 0, longest = 0;
  for (const auto& e : dataset.train) {
    data.train_ids.push_back(tokenizer->Encode(e.text, cap + 1));
    tokens += static_cast<int64_t>(data.train_ids.back().size());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(data.train_ids.back().size()));
    if (data.train_ids.back().size() > cap) data.train_ids.back().resize(cap);
    data.train_labels.push_back(e.label);
  }
  for (const auto& e : dataset.validation) {
    data.validation_ids.push_back(tokenizer->Encode(e.text, cap));
    data.validation_labels.push_back(e.label);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info(
      "Train data: {} training examples ({}), {} validation examples ({}), {} labels; "
      "{}; {:.1f} tokens per training text on average{}; prepared in {:.1f}s",
      data.train_ids.size(), dataset.train_source, data.validation_ids.size(),
      dataset.validation_source, data.num_labels, tokenizer->description(),
      data.train_ids.empty()
          ? 0.0
          : static_cast<double>(tokens) / static_cast<double>(data.train_ids.size()),
      longest > static_cast<int64_t>(cap) ? fmt::format(", the longest over {} (truncated)", cap)
                                          : "",
      secs);
  return std::unique_ptr<Objective>(
      std::make_unique<TrainObjective>(std::move(options), std::move(catalog), std::move(trainer),
                                       std::move(data), TabularTrainData{}, std::move(base)));
}

}  // namespace tune

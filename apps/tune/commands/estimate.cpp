// `tune estimate`: a configuration's peak memory, term by term; the largest batch that fits; and
// (--measure) the same configuration trained on the device: on CPU under the counting allocator,
// on CUDA under the caching allocator (its max_memory_allocated). A catalog model is estimated
// by the formulas; a TorchScript file by the fit of peaks measured now at small shapes on
// --device (script_fit.h); any other model by the fit of its measured peaks that a study stored
// (--study): each is a MemoryModel (memory_model.h), and everything below asks that.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <random>
#include <tuple>

#include "app.h"
#include "commands.h"
#include "memory/estimator.h"
#include "memory/memory_model.h"
#include "torch_loader.h"
#include "train/memory_probe.h"
#include "train/script_fit.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"
#include "util/device.h"
#include "util/json_file.h"
#include "util/sha256.h"

namespace tune::app {
namespace {

Result<ModelCatalog> LoadCatalog(const EstimateArgs& args) {
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  if (args.catalog) {
    Result<Json> read = ReadJsonFile(*args.catalog);
    if (!read.ok()) {
      return Status(StatusCode::kInvalidArgument, "--catalog: " + read.status().message());
    }
    const Json& doc = *read;
    if (!doc.is_object() || !doc.contains("models")) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: a model catalog needs a \"models\" object", *args.catalog));
    }
    TUNE_RETURN_IF_ERROR(catalog.Merge(doc.at("models"), *args.catalog, "/models"));
  }
  return catalog;
}

// The configuration as a trial's hyperparameters (what --measure trains) and the estimator's
// request made from them with MemoryRequestFor, as the guard will make it for a trial.
struct Configuration {
  TrainHyperparams hp;
  MemoryRequest request;
};

// --model names a TorchScript file: not a catalog model, a name with a TorchScript extension.
bool IsScriptArg(const EstimateArgs& args, const ModelCatalog& catalog) {
  return !catalog.Contains(args.model) && LooksLikeTorchScriptFile(args.model);
}

// The TorchScript model in file `path`; NotFound saying how to export one when it is missing.
Result<ModelSpec> ScriptModel(const std::string& path) {
  ModelSpec m;
  m.name = path;
  m.model_type = kTorchScriptModelType;
  m.torchscript = std::filesystem::absolute(path).lexically_normal().string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(m.torchscript, ec)) {
    return NotFoundError(fmt::format(
        "--model {}: no TorchScript file {} (save one with torch.jit.script(model).save(\"{}\"))",
        path, m.torchscript, std::filesystem::path(path).filename().string()));
  }
  return m;
}

// Sets the hyperparameters `flags` names ({flag, hyperparameter, value}) through the train
// objective's table (hyperparams.h): the ranges, choices and messages of a config's keys, the
// error prefixed with the flag.
Status SetFromFlags(TrainHyperparams& hp,
                    const std::vector<std::tuple<const char*, const char*, Json>>& flags) {
  for (const auto& [flag, name, value] : flags) {
    if (Status s = SetHyperparam(hp, name, value); !s.ok()) {
      return InvalidArgumentError(fmt::format("{}: {}", flag, s.message()));
    }
  }
  return Status::Ok();
}

Result<Configuration> BuildConfiguration(const EstimateArgs& args, const ModelCatalog& catalog) {
  Configuration c;
  TrainHyperparams& hp = c.hp;
  TUNE_RETURN_IF_ERROR(SetFromFlags(
      hp,
      {{"--optimizer", "optimizer", args.optimizer},
       {"--batch-size", "batch_size", args.batch_size},
       {"--eval-batch-size", "eval_batch_size", args.eval_batch_size},
       {"--grad-accum", "grad_accum", args.grad_accum},
       {"--momentum", "momentum", args.momentum},
       {"--weight-decay", "weight_decay", args.weight_decay},
       {"--dropout", "dropout", args.dropout},
       {"--attention-dropout", "attention_dropout", args.attention_dropout.value_or(args.dropout)},
       {"--attention", "attention", args.attention},
       {"--fused-qkv", "fused_qkv", args.fused_qkv},
       {"--gradient-checkpointing", "gradient_checkpointing", args.gradient_checkpointing},
       {"--mlp-layers", "mlp_layers", args.mlp_layers},
       {"--mlp-hidden", "mlp_hidden", args.mlp_hidden}}));
  if (args.model == "mlp") {
    hp.max_length = args.max_length;  // an MLP reads rows, not sequences: shown as given
  } else {
    TUNE_RETURN_IF_ERROR(SetFromFlags(hp, {{"--max-length", "max_length", args.max_length}}));
  }
  // pure_bf16 is the estimator's alone (the table offers what the trainer trains).
  TUNE_ASSIGN_OR_RETURN(hp.precision, ParsePrecision(args.precision));
  ModelSpec model;
  if (IsScriptArg(args, catalog)) {
    TUNE_ASSIGN_OR_RETURN(model, ScriptModel(args.model));
  }
  if (args.study || IsTorchScriptModel(model)) {  // a fit knows only the shape and the precision
    hp.model = model.name = args.model;
    c.request.model = model;
    c.request.batch_size = hp.batch_size;
    c.request.max_length = hp.max_length;
    c.request.grad_accum = hp.grad_accum;
    c.request.precision = hp.precision;
    c.request.gradient_checkpointing = hp.gradient_checkpointing;
    return c;
  }
  if (args.model == "mlp") {
    if (args.num_features <= 0) {
      return Status(StatusCode::kInvalidArgument, "--model mlp needs --num-features N (> 0)");
    }
    model.name = model.model_type = "mlp";
  } else {
    TUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog.Find(args.model));
    model = *spec;
    hp.model = model.name;
    if (args.architecture != "encoder" && args.architecture != "decoder") {
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("unknown --architecture '{}'; valid: encoder, decoder", args.architecture));
    }
    TUNE_RETURN_IF_ERROR(
        SetFromFlags(hp, {{"--classifier-layers", "classifier_layers", args.classifier_layers},
                          {"--classifier-hidden", "classifier_hidden", args.classifier_hidden}}));
  }
  c.request = MemoryRequestFor(model, hp, args.num_labels.value_or(2), args.num_features);
  c.request.train = !args.eval_only;
  if (args.model != "mlp" && args.architecture == "decoder")
    c.request.architecture = Architecture::kDecoder;
  return c;
}

Result<DeviceMemoryModel> BuildDevice(const EstimateArgs& args) {
  auto device = ParseDevice(args.device);
  if (!device.ok()) {
    return InvalidArgumentError(
        fmt::format("unknown --device '{}'; valid: cpu, cuda, cuda:N", args.device));
  }
  return device->is_cuda() ? DeviceMemoryModel::Cuda() : DeviceMemoryModel::Cpu();
}

// The fit of --model's measured peaks at --precision that --study stored (study system
// attribute MeasuredFitKey). NotFound naming the fits the study has.
// A TorchScript file's fit is stored under its content hash.
Result<MeasuredFit> StoredFit(const EstimateArgs& args, const ModelSpec& model) {
  TUNE_ASSIGN_OR_RETURN(StoredStudy study,
                        OpenStoredStudy(args.storage, *args.study, StorageAccess::kReadOnly));
  TUNE_ASSIGN_OR_RETURN(Json attrs, study.storage->GetStudySystemAttrs(study.id));
  std::string name = args.model;
  if (IsTorchScriptModel(model)) {
    TUNE_ASSIGN_OR_RETURN(name, FileContentHash(model.torchscript));
  }
  const std::string key = MeasuredFitKey(name, args.precision);
  std::vector<std::string> fits;
  for (const auto& [k, v] : attrs.items()) {
    if (k.rfind("memory_fit:", 0) == 0) fits.push_back(k.substr(11));
  }
  if (!attrs.contains(key)) {
    const std::string wanted = name + "/" + args.precision;
    return NotFoundError(fmt::format(
        "study '{}' has no memory fit of '{}'{}; {}", *args.study, wanted, DidYouMean(wanted, fits),
        fits.empty() ? "it has none yet (a fit needs 4 measured shapes with 2 values of "
                       "max_length)"
                     : "it has: " + JoinNames(fits)));
  }
  Result<MeasuredFit> fit = MeasuredFitFromJson(attrs.at(key));
  if (!fit.ok()) {
    return InvalidArgumentError(fmt::format("study '{}', system attribute \"{}\": {}", *args.study,
                                            key, fit.status().message()));
  }
  return fit;
}

bool OnCuda(const EstimateArgs& args) {
  auto device = ParseDevice(args.device);
  return device.ok() && device->is_cuda();
}

// The trainer that measures on --device (--measure, a TorchScript model's probes): on CPU under
// the counting allocator, on CUDA the caching allocator's allocated peak. FailedPrecondition
// with the trainer's reason on CUDA without a usable device or a CUDA LibTorch.
Result<std::unique_ptr<Trainer>> MeasuringTrainer(const EstimateArgs& args, Precision precision) {
  if (precision == Precision::kPureBf16) {
    return Status(StatusCode::kInvalidArgument,
                  "--measure and the memory probes train fp32, bf16 or fp16 (autocast), not "
                  "pure_bf16");
  }
  const bool cuda = OnCuda(args);
  TUNE_RETURN_IF_ERROR(CheckPrecisionForDevice(precision, cuda ? args.device : "cpu"));
  auto loaded = LoadTrainer(cuda ? args.device : "cpu", args.threads, std::nullopt);
  if (!loaded.ok() && cuda) {
    return Status(
        loaded.status().code(),
        fmt::format("{}: {} (--device cpu measures on the CPU)",
                    args.measure ? "--measure" : "the memory probes", loaded.status().message()));
  }
  return loaded;
}

// The trainer of --measure and of a TorchScript model's probes; null when neither runs.
Result<std::unique_ptr<Trainer>> TrainerFor(const EstimateArgs& args, const MemoryRequest& r) {
  if (!args.measure && (args.study || !IsTorchScriptModel(r.model))) {
    return std::unique_ptr<Trainer>();
  }
  return MeasuringTrainer(args, r.precision);
}

// The checked load of a TorchScript model (a dry run at B=1, T=8): its number of outputs, which
// must be --num-labels when that is given.
Result<int64_t> CheckedScriptOutputs(const EstimateArgs& args, const Configuration& c,
                                     Trainer& trainer) {
  TextTrainData text;
  text.num_labels = 0;  // whatever the model outputs
  text.vocab_size = 16;
  TrainJob job;
  job.model = c.request.model;
  job.data = &text;
  TUNE_ASSIGN_OR_RETURN(const ScriptModelInfo info, trainer.CheckTorchScriptModel(job));
  if (args.num_labels && *args.num_labels != info.num_labels) {
    return InvalidArgumentError(fmt::format(
        "--num-labels {}, but TorchScript model {} returns {} logit{} per example (forward at "
        "B=1, T=8 returned Tensor[1, {}]); leave --num-labels out to take the model's own number "
        "of outputs",
        *args.num_labels, c.request.model.torchscript, info.num_labels,
        info.num_labels == 1 ? "" : "s", info.num_labels));
  }
  spdlog::info("TorchScript model {}: {} parameters, {} outputs; forward checked at B=1, T=8",
               args.model, info.parameters, info.num_labels);
  return info.num_labels;
}

// A TorchScript model's fit: its probes (after CheckedScriptOutputs).
Result<MeasuredFit> ProbedFit(const EstimateArgs& args, const Configuration& c, Trainer& trainer) {
  ScriptFitRequest request;
  request.model = c.request.model;
  request.hp = c.hp;
  request.num_labels = args.num_labels.value_or(2);
  ScriptFitCache cache;
  return cache.Get(&trainer, request, nullptr);
}

// What estimates the configuration: --study's fit for a measured model, the fit of a TorchScript
// model's probes on `trainer`, else the formulas on --device.
Result<std::unique_ptr<MemoryModel>> BuildMemoryModel(const EstimateArgs& args,
                                                      const Configuration& c, Trainer* trainer) {
  if (args.study || IsTorchScriptModel(c.request.model)) {
    TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, args.study ? StoredFit(args, c.request.model)
                                                      : ProbedFit(args, c, *trainer));
    return std::unique_ptr<MemoryModel>(std::make_unique<FittedMemoryModel>(std::move(fit)));
  }
  TUNE_ASSIGN_OR_RETURN(DeviceMemoryModel device, BuildDevice(args));
  return std::unique_ptr<MemoryModel>(std::make_unique<FormulaMemoryModel>(device));
}

// What --measure compares with the measured peak: the allocated peak, plus on CUDA the cuBLAS
// workspace, which LibTorch takes from the same caching allocator.
int64_t MeasurableEstimate(const EstimateArgs& args, const MemoryEstimate& e) {
  return e.allocated_peak + (OnCuda(args) ? e.workspace : 0);
}

// What --measure measured: the allocated peak (bytes above the level before the run) and, on
// CUDA, the caching allocator's reserved peak (-1 where not measured).
struct Measured {
  int64_t allocated = 0;
  int64_t reserved = -1;
};

// Trains the configuration for a few optimizer steps and one evaluation on --device and returns
// its measured peaks: on CPU under the counting allocator, on CUDA the caching allocator's.
// On CUDA without a usable device or a CUDA LibTorch this fails with the trainer's reason
// (FailedPrecondition).
Result<Measured> Measure(const EstimateArgs& args, const Configuration& c, Trainer& trainer) {
  const MemoryRequest& r = c.request;
  if (IsTorchScriptModel(r.model)) {  // as its probes were measured
    ProbeRequest probe;
    probe.model = r.model;
    probe.hp = c.hp;
    probe.num_labels = args.num_labels.value_or(2);
    probe.steps = args.measure_steps;
    spdlog::info("Measuring: {} optimizer steps and one evaluation ({})",
                 std::max<int64_t>(probe.steps, 2), trainer.name());
    TUNE_ASSIGN_OR_RETURN(int64_t peak, MeasureTrainingPeak(trainer, probe));
    return Measured{peak, -1};
  }

  TrainJob job;
  job.hp = c.hp;
  job.hp.epochs = 1;
  job.hp.bucket_batches = 0;
  job.hp.seed = 1;
  const int64_t steps = std::max<int64_t>(args.measure_steps, 2);
  const int64_t n_train = r.batch_size * r.grad_accum * steps;
  const int64_t n_eval = r.eval_batch_size > 0 ? r.eval_batch_size : r.batch_size;
  std::mt19937 rng(7);
  TextTrainData text;
  TabularTrainData tabular;
  if (r.architecture == Architecture::kMlp) {
    tabular.num_features = r.num_features;
    tabular.num_labels = r.num_labels;
    std::normal_distribution<float> x(0, 1);
    for (int64_t k = 0; k < n_train * r.num_features; ++k) tabular.train_x.push_back(x(rng));
    for (int64_t k = 0; k < n_eval * r.num_features; ++k) tabular.validation_x.push_back(x(rng));
    for (int64_t k = 0; k < n_train; ++k) tabular.train_labels.push_back(k % r.num_labels);
    for (int64_t k = 0; k < n_eval; ++k) tabular.validation_labels.push_back(k % r.num_labels);
    job.tabular = &tabular;
  } else if (r.architecture == Architecture::kEncoder) {
    job.model = r.model;
    TUNE_RETURN_IF_ERROR(CheckModelForTraining(r.model, job.hp));
    text.num_labels = r.num_labels;
    text.vocab_size = r.model.vocab_size;
    std::uniform_int_distribution<int32_t> token(5, static_cast<int32_t>(r.model.vocab_size - 1));
    // Each example fills max_length; with --measure-padded every other one is a token short, so
    // that batches carry padding and the model's mask paths run (the estimate's worst case).
    auto example = [&](int64_t k) {
      const int64_t n = args.measure_padded && k % 2 == 1 ? r.max_length - 3 : r.max_length;
      std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(n, 1)));
      for (auto& id : ids) id = token(rng);
      return ids;
    };
    for (int64_t k = 0; k < n_train; ++k) {
      text.train_ids.push_back(example(k));
      text.train_labels.push_back(k % r.num_labels);
    }
    for (int64_t k = 0; k < n_eval; ++k) {
      text.validation_ids.push_back(example(k));
      text.validation_labels.push_back(k % r.num_labels);
    }
    job.data = &text;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "--measure trains encoder classifiers and MLPs; tune has no decoder trainer");
  }
  spdlog::info("Measuring: {} optimizer steps and one evaluation ({})", steps, trainer.name());
  TUNE_ASSIGN_OR_RETURN(TrainResult result, trainer.Train(job, [](const EpochMetrics&) {
    return Result<EpochDecision>(EpochDecision::kContinue);
  }));
  if (result.end != TrainResult::End::kCompleted) {
    return Status(StatusCode::kInternal, fmt::format("the measuring run ended with {}: {}",
                                                     TrainEndName(result.end), result.message));
  }
  return Measured{result.peak_memory_bytes, result.peak_reserved_bytes};
}

// The rows that explain the estimate (MemoryModel::Explain): term, size, bytes.
std::vector<std::vector<std::string>> BreakdownRows(const MemoryModel& model,
                                                    const MemoryRequest& r,
                                                    const MemoryEstimate& e) {
  std::vector<std::vector<std::string>> rows = {{"term", "size", "bytes"}};
  for (const auto& [label, bytes] : model.Explain(r, e)) {
    rows.push_back({label, FormatBytes(bytes), std::to_string(bytes)});
  }
  return rows;
}

int MaxBatchTable(const EstimateArgs& args, MemoryRequest r, const MemoryModel& model,
                  int64_t usable, Format format) {
  std::vector<int64_t> lengths = args.max_lengths;
  if (lengths.empty()) {
    if (r.architecture == Architecture::kMlp) {
      lengths = {1};
    } else {
      const int64_t limit = r.model.position_buckets > 0 || r.model.max_position_embeddings <= 0
                                ? 4096
                                : r.model.max_position_embeddings;
      for (int64_t t : {64, 128, 256, 384, 512, 1024, 2048}) {
        if (t <= limit) lengths.push_back(t);
      }
    }
  }
  Json out = Json::array();
  std::vector<std::vector<std::string>> rows = {{"max_length", "max_batch_size", "device_peak"}};
  for (int64_t t : lengths) {
    r.max_length = t;
    auto best = MaxBatchSize(model, r, usable, args.batch_limit);
    if (!best.ok()) return Fail(best.status());
    int64_t peak = 0;
    if (*best > 0) {
      r.batch_size = *best;
      auto e = model.Estimate(r);
      if (!e.ok()) return Fail(e.status());
      peak = e->device_peak;
    }
    out.push_back({{"max_length", t}, {"max_batch_size", *best}, {"device_peak", peak}});
    rows.push_back({std::to_string(t), std::to_string(*best), peak ? FormatBytes(peak) : "-"});
  }
  if (format == Format::kJson) {
    std::cout << Json{{"model", args.model},
                      {"usable_bytes", usable},
                      {"precision", PrecisionName(r.precision)},
                      {"grad_accum", r.grad_accum},
                      {"gradient_checkpointing", r.gradient_checkpointing},
                      {"memory_model", model.ToJson()},
                      {"max_batch", out}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << (format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
  }
  return kExitOk;
}

}  // namespace

// --device-memory and --margin: the memory the configuration must fit and the usable part of
// it; both unset without --device-memory.
struct Limit {
  std::optional<int64_t> device_memory;
  std::optional<int64_t> usable;  // device_memory x (1 - margin)
};

Result<Limit> ParseLimit(const EstimateArgs& args) {
  Limit limit;
  if (args.device_memory) {
    auto b = ParseBytes(*args.device_memory);
    if (!b.ok()) return Status(b.status().code(), "--device-memory: " + b.status().message());
    limit.device_memory = *b;
  }
  if (args.margin < 0 || args.margin >= 1) {
    return InvalidArgumentError(fmt::format("--margin {} must be in [0, 1)", args.margin));
  }
  if (limit.device_memory) {
    limit.usable =
        static_cast<int64_t>(static_cast<double>(*limit.device_memory) * (1.0 - args.margin));
  }
  return limit;
}

Json EstimateJson(const EstimateArgs& args, const MemoryModel& model, const MemoryRequest& request,
                  const MemoryEstimate& estimate, const Limit& limit,
                  const std::optional<Measured>& measured) {
  Json out = MemoryEstimateToJson(estimate);
  out["memory_model"] = model.ToJson();
  out["model"] = args.model;
  out["precision"] = PrecisionName(request.precision);
  out["batch_size"] = request.batch_size;
  out["max_length"] = request.max_length;
  out["grad_accum"] = request.grad_accum;
  out["gradient_checkpointing"] = request.gradient_checkpointing;
  if (request.architecture == Architecture::kEncoder) {
    out["attention"] = request.sdpa ? "sdpa" : "eager";  // "auto" is eager today
    out["fused_qkv"] = request.fused_qkv;
  }
  out["device"] = args.device;
  if (limit.usable) {
    out["device_memory"] = *limit.device_memory;
    out["usable"] = *limit.usable;
    out["fits"] = estimate.device_peak <= *limit.usable;
  }
  if (measured) {
    out["measured_peak"] = measured->allocated;
    if (measured->reserved >= 0) out["measured_reserved_peak"] = measured->reserved;
    out["error"] = static_cast<double>(MeasurableEstimate(args, estimate) - measured->allocated) /
                   static_cast<double>(measured->allocated);
  }
  return out;
}

void PrintEstimate(const EstimateArgs& args, Format format, const MemoryModel& model,
                   const MemoryRequest& request, const MemoryEstimate& estimate, const Limit& limit,
                   const std::optional<Measured>& measured) {
  auto rows = BreakdownRows(model, request, estimate);
  if (measured) {
    rows.push_back({fmt::format("measured peak ({})", OnCuda(args) ? args.device : "cpu"),
                    FormatBytes(measured->allocated), std::to_string(measured->allocated)});
    if (measured->reserved >= 0) {
      rows.push_back({"measured reserved peak", FormatBytes(measured->reserved),
                      std::to_string(measured->reserved)});
    }
  }
  std::cout << (format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
  if (format != Format::kTable) return;
  std::cout << fmt::format("Estimated by {}\n", model.Describe());
  if (estimate.num_parameters > 0) {
    std::cout << fmt::format("{} parameters; peak in {}\n", estimate.num_parameters,
                             MemoryPhaseName(estimate.peak_phase));
  }
  if (measured) {
    const int64_t compared = MeasurableEstimate(args, estimate);
    std::cout << fmt::format("estimate {} vs measured {}: {:+.2f}%\n", FormatBytes(compared),
                             FormatBytes(measured->allocated),
                             100.0 * static_cast<double>(compared - measured->allocated) /
                                 static_cast<double>(measured->allocated));
  }
  if (limit.usable) {
    const bool fits = estimate.device_peak <= *limit.usable;
    std::cout << fmt::format("{}: {} of {} usable ({} with a {:.0f}% margin)\n",
                             fits ? "fits" : "does NOT fit", FormatBytes(estimate.device_peak),
                             FormatBytes(*limit.usable), FormatBytes(*limit.device_memory),
                             100 * args.margin);
  }
}

int Estimate(const EstimateArgs& given) {
  EstimateArgs args = given;  // with a TorchScript model's outputs as --num-labels
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto catalog = LoadCatalog(args);
  if (!catalog.ok()) return Fail(catalog.status());
  auto configuration = BuildConfiguration(args, *catalog);
  if (!configuration.ok()) return Fail(configuration.status());
  const MemoryRequest* request = &configuration->request;
  if (args.measure && args.study) {
    return Fail(InvalidArgumentError(
        "--measure trains the model; a measured model's probes are in --study's fit"));
  }
  auto trainer = TrainerFor(args, *request);
  if (!trainer.ok()) return Fail(trainer.status());
  if (IsTorchScriptModel(request->model) && !args.study) {
    auto outputs = CheckedScriptOutputs(args, *configuration, **trainer);
    if (!outputs.ok()) return Fail(outputs.status());
    args.num_labels = *outputs;
  }
  auto model = BuildMemoryModel(args, *configuration, trainer->get());
  if (!model.ok()) return Fail(model.status());
  auto limit = ParseLimit(args);
  if (!limit.ok()) return Fail(limit.status());
  if (args.max_batch) {
    if (!limit->usable) {
      return Fail(Status(StatusCode::kInvalidArgument, "--max-batch needs --device-memory SIZE"));
    }
    return MaxBatchTable(args, *request, **model, *limit->usable, *format);
  }
  auto estimate = (*model)->Estimate(*request);
  if (!estimate.ok()) return Fail(estimate.status());
  std::optional<Measured> measured;
  if (args.measure) {
    auto m = Measure(args, *configuration, **trainer);
    if (!m.ok()) return Fail(m.status());
    measured = *m;
  }
  if (*format == Format::kJson) {
    std::cout << EstimateJson(args, **model, *request, *estimate, *limit, measured).dump(2) << "\n";
  } else {
    PrintEstimate(args, *format, **model, *request, *estimate, *limit, measured);
  }
  if (limit->usable && estimate->device_peak > *limit->usable) return kExitFailure;
  return kExitOk;
}

std::function<int()> DeclareEstimate(CLI::App& command) {
  auto args = std::make_shared<EstimateArgs>();
  command
      .add_option("--model", args->model,
                  "Catalog model (or 'mlp' with --num-features), or with --study a measured "
                  "model")
      ->required();
  command.add_option("--study,--study-name", args->study,
                     "A study that measured --model (a command objective's memory.model outside "
                     "the catalog): estimate by its stored fit");
  command.add_option("--storage", args->storage, kReadOnlyStorageHelp);
  command.add_option("--catalog", args->catalog,
                     "A model catalog file merged into the built-in one");
  command.add_option("--architecture", args->architecture,
                     "encoder (classifier, default) or decoder (GPT-2-style LM)");
  command.add_option("--batch-size", args->batch_size, "Micro-batch size")
      ->check(CLI::PositiveNumber);
  command.add_option("--max-length", args->max_length, "Tokens per example")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--max-lengths", args->max_lengths,
                  "--max-batch: sequence lengths to tabulate (default 64..2048 up to the model's)")
      ->delimiter(',');
  command.add_option("--grad-accum", args->grad_accum, "Micro-batches per optimizer step")
      ->check(CLI::PositiveNumber);
  command.add_option("--eval-batch-size", args->eval_batch_size,
                     "Evaluation batch (default: batch size)");
  command.add_option("--precision", args->precision, "fp32, bf16, fp16 (autocast) or pure_bf16");
  command.add_flag("--gradient-checkpointing", args->gradient_checkpointing,
                   "Recompute each layer in backward");
  command.add_option("--optimizer", args->optimizer, "adamw or sgd");
  command.add_option("--momentum", args->momentum, "SGD momentum (0: no buffer)");
  command.add_option("--weight-decay", args->weight_decay, "Weight decay");
  command.add_option("--dropout", args->dropout, "Dropout probability (0: no dropout masks)");
  command.add_option("--attention-dropout", args->attention_dropout,
                     "Dropout of the attention probabilities (default: --dropout)");
  command.add_option("--attention", args->attention,
                     "auto, sdpa or eager: how the encoder's layers compute attention (the "
                     "attention hyperparameter; auto is eager today)");
  command.add_flag("--fused-qkv", args->fused_qkv,
                   "q, k and v projected as one GEMM (the fused_qkv hyperparameter)");
  command
      .add_option("--num-labels", args->num_labels,
                  "Classifier outputs (default: a TorchScript model's own, else 2)")
      ->check(CLI::PositiveNumber);
  command.add_option("--classifier-layers", args->classifier_layers,
                     "Hidden layers in the head (0-3)");
  command.add_option("--classifier-hidden", args->classifier_hidden,
                     "Their width (default: the model's hidden size)");
  command.add_option("--num-features", args->num_features, "MLP input features");
  command.add_option("--mlp-layers", args->mlp_layers, "MLP hidden layers");
  command.add_option("--mlp-hidden", args->mlp_hidden, "MLP hidden width");
  command.add_flag("--eval-only", args->eval_only, "Evaluation only: no gradients or optimizer");
  command.add_option("--device", args->device,
                     "cuda or cuda:N (caching allocator, context; default) or cpu");
  command.add_option("--device-memory", args->device_memory,
                     "Memory the run may use, e.g. 24GiB: says whether it fits");
  command.add_option("--margin", args->margin,
                     "Safety margin as a share of --device-memory (0.05)");
  command.add_flag("--max-batch", args->max_batch,
                   "Print the largest batch that fits --device-memory per sequence length");
  command.add_option("--batch-limit", args->batch_limit, "--max-batch: largest batch tried (4096)")
      ->check(CLI::PositiveNumber);
  command.add_flag("--measure", args->measure,
                   "Also train the configuration on --device (cpu: the counting allocator; "
                   "cuda: the caching allocator) and print the measured peak");
  command.add_option("--measure-steps", args->measure_steps, "--measure: optimizer steps (>= 2)");
  command.add_flag("--measure-padded", args->measure_padded,
                   "--measure: every other example a token short, so batches carry padding (a "
                   "mask) as the estimate assumes");
  command.add_option("--threads", args->threads, "--measure: CPU threads (0: all)");
  command.add_option("--format", args->format, "table, json or csv");

  return [args] { return Estimate(*args); };
}

}  // namespace tune::app

// Measured memory fits of TorchScript models (script_fit.h).
#include "train/script_fit.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "train/memory_probe.h"
#include "util/sha256.h"
#include "util/text.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

// The probe's hyperparameters: the trial's, at `shape`, with AdamW and without levers.
TrainHyperparams ProbeHyperparams(const TrainHyperparams& trial, const ProbeShape& shape) {
  TrainHyperparams hp = trial;
  hp.batch_size = shape.batch_size;
  hp.max_length = shape.max_length;
  hp.eval_batch_size = 0;
  hp.grad_accum = 1;
  hp.gradient_checkpointing = false;
  hp.optimizer = OptimizerKind::kAdamW;
  return hp;
}

}  // namespace

std::vector<ProbeShape> DefaultScriptProbes() {
  return {{1, 32}, {2, 32}, {4, 32}, {2, 64}, {4, 64}};
}

std::vector<ProbeShape> GrownProbes(const std::vector<ProbeShape>& first, int round) {
  std::vector<ProbeShape> out;
  for (ProbeShape s : first) {
    s.batch_size <<= (round + 1) / 2;
    s.max_length <<= round / 2;
    out.push_back(s);
  }
  return out;
}

namespace {

// Measures the shapes of `round` not in `points` yet and adds them. A failed probe ends the
// round: an error in round 0, else `done` (the growth stops there).
Status MeasureRound(Trainer& trainer, const ScriptFitRequest& request, int round,
                    std::vector<MemoryPoint>& points, bool& done) {
  for (const ProbeShape& shape : GrownProbes(request.probes, round)) {
    if (std::any_of(points.begin(), points.end(), [&](const MemoryPoint& p) {
          return p.batch_size == shape.batch_size && p.max_length == shape.max_length;
        })) {
      continue;
    }
    ProbeRequest probe;
    probe.model = request.model;
    probe.hp = ProbeHyperparams(request.hp, shape);
    probe.num_labels = request.num_labels;
    Result<int64_t> peak = MeasureTrainingPeak(trainer, probe);
    if (!peak.ok() && round == 0) return peak.status();
    if (!peak.ok()) {
      spdlog::warn(
          "Memory probe of {} at batch_size {} x max_length {}: {}; the probes grow no "
          "further",
          request.model.name, shape.batch_size, shape.max_length, peak.status().message());
      done = true;
      return Status::Ok();
    }
    spdlog::debug("Memory probe of {}: batch_size {} x max_length {}: peak {} bytes",
                  request.model.name, shape.batch_size, shape.max_length, *peak);
    points.push_back({shape.batch_size, shape.max_length, *peak});
  }
  return Status::Ok();
}

double SmallestPeak(const std::vector<MemoryPoint>& points) {
  double smallest = 0;
  for (const MemoryPoint& p : points) {
    const auto peak = static_cast<double>(p.peak);
    smallest = smallest == 0 ? peak : std::min(smallest, peak);
  }
  return smallest;
}

}  // namespace

Result<MeasuredFit> ProbeScriptMemory(Trainer& trainer, const ScriptFitRequest& request,
                                      const std::string& model_hash) {
  std::vector<MemoryPoint> points;
  double floor = 0;
  bool done = false;
  for (int round = 0; round <= request.max_rounds && !done; ++round) {
    TUNE_RETURN_IF_ERROR(MeasureRound(trainer, request, round, points, done));
    if (round == 0) floor = SmallestPeak(points);
    if (CanFit(points, floor)) break;
    if (round < request.max_rounds) {
      spdlog::info(
          "Memory probes of {}: fewer than {} shapes peak {:.0f}% above the floor of {} "
          "(the optimizer step's); growing the probes",
          request.model.name, MeasuredFit::kMinPoints, 100 * MeasuredFit::kFloorBand,
          FormatBytes(std::llround(floor)));
    }
  }
  const std::string precision = PrecisionName(request.hp.precision);
  if (!CanFit(points, floor) && CanFit(points, 0)) {
    // Still within the band at the largest probes: the activations stay small beside the floor
    // (on CUDA it holds the cuBLAS workspaces too). Every probe goes into the fit, flat ones
    // included, and the floor still bounds it below.
    spdlog::warn(
        "Memory probes of {}: fewer than {} shapes peak {:.0f}% above the floor of {} even at "
        "the largest probes; fitting all {} (the activations are small beside the floor)",
        request.model.name, MeasuredFit::kMinPoints, 100 * MeasuredFit::kFloorBand,
        FormatBytes(std::llround(floor)), DistinctShapes(points).size());
    TUNE_ASSIGN_OR_RETURN(MeasuredFit fit, FitMeasuredMemory(points, model_hash, precision, 0));
    fit.floor = floor;
    return fit;
  }
  return FitMeasuredMemory(points, model_hash, precision, floor);
}

Result<std::string> ScriptFitCache::ContentHash(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto mtime = ec ? fs::file_time_type() : fs::last_write_time(path, ec);
  if (ec) return NotFoundError(fmt::format("{}: cannot read ({})", path, ec.message()));
  HashedFile now;
  now.size = static_cast<int64_t>(size);
  now.mtime_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
  auto it = hashes_.find(path);
  if (it != hashes_.end() && it->second.size == now.size && it->second.mtime_ns == now.mtime_ns) {
    return it->second.hash;
  }
  TUNE_ASSIGN_OR_RETURN(now.hash, FileContentHash(path));
  hashes_[path] = now;
  return now.hash;
}

Result<MeasuredFit> ScriptFitCache::Get(Trainer* trainer, const ScriptFitRequest& request,
                                        FitStore* store) {
  TUNE_ASSIGN_OR_RETURN(const std::string hash, ContentHash(request.model.torchscript));
  const std::string key = MeasuredFitKey(hash, PrecisionName(request.hp.precision));
  if (auto it = fits_.find(key); it != fits_.end()) return it->second;
  if (store != nullptr) {
    TUNE_ASSIGN_OR_RETURN(std::optional<Json> stored, store->Get(key));
    if (stored) {
      Result<MeasuredFit> fit = MeasuredFitFromJson(*stored);
      if (fit.ok()) return fits_[key] = *fit;
      spdlog::warn("The study's memory fit \"{}\" is unreadable ({}); probing again", key,
                   fit.status().message());
    }
  }
  if (auto failed = failed_.find(key); failed != failed_.end()) return failed->second;
  if (trainer == nullptr) {
    return FailedPreconditionError(
        fmt::format("the memory of {} is not measured yet", request.model.name));
  }
  spdlog::info("Measuring the memory of TorchScript model {} ({}): {} probe(s) of two steps",
               request.model.name, PrecisionName(request.hp.precision), request.probes.size());
  Result<MeasuredFit> probed = ProbeScriptMemory(*trainer, request, hash);
  if (!probed.ok()) {
    failed_[key] = probed.status();
    return probed.status();
  }
  MeasuredFit fit = std::move(probed).value();
  fit.source = request.model.torchscript;
  ++probed_;
  spdlog::info("Memory of {} fitted: {}", request.model.name, MeasuredFitText(fit));
  if (store != nullptr) TUNE_RETURN_IF_ERROR(store->Put(key, MeasuredFitToJson(fit)));
  return fits_[key] = fit;
}

}  // namespace tune

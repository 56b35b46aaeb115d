// Measured-memory fits [tune_core]: the peak memory of a model tune has no formula for (a user's
// own training script, a TorchScript module), fitted from peaks measured at a few shapes. Plain
// data (no LibTorch, no storage), kept as JSON in a study's system attribute (MeasuredFitKey) and
// in trials' memory attributes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/distributions.h"
#include "tune/status.h"
#include "tune/trial_attrs.h"

namespace tune {

// One measured peak: the shape of the step and its peak (bytes).
struct MemoryPoint {
  int64_t batch_size = 0;
  int64_t max_length = 0;
  int64_t peak = 0;
};

// The model: one training step of a sequence model holds what does not depend on the batch
// (weights, gradients, optimizer state, the runtime: a), what grows with the tokens of the batch
// (activations of projections and feed-forward layers: b per token) and what grows with the
// attention matrices (c per token per position: B·T² in all):
//
//   peak(B, T) = a + b·B·T + c·B·T²
struct MeasuredFit {
  // Distinct shapes a fit needs (with at least two values of T): three points determine three
  // unknowns with nothing left to check them.
  static constexpr size_t kMinPoints = 4;
  // The least margin of a prediction, and what a measured shape's peak is raised by to bound one.
  static constexpr double kMinMargin = 0.05;
  // With a floor, only points at least this fraction above it are fitted.
  static constexpr double kFloorBand = 0.10;

  std::string model;           // the model's name; a file: "sha256:<hex>" of its contents
  std::string source;          // a file's path as the study named it when it was probed ("": none)
  std::string precision;       // "fp32", "bf16", ...
  double a = 0, b = 0, c = 0;  // bytes; bytes per token; bytes per token per position
  // Bytes: no shape's peak is below it (0: none). A step's peak is the larger of two phases'
  // peaks, the forward and backward passes (which grow with the shape) and the optimizer step
  // (weights, gradients and optimizer state: a constant); where the activations are small beside
  // the weights (an LSTM or a CNN at small shapes) every small shape's peak is the optimizer
  // step's, and a fit of them sees no growth: a floor (the smallest shape's peak, as script_fit.h
  // measures it) lets the curve be fitted above it.
  double floor = 0;
  // The distinct shapes measured (the largest peak of each); FitMeasuredMemory given a floor fits
  // only those at least kFloorBand above it.
  std::vector<MemoryPoint> points;
  MemoryPoint held_out;       // the point left out to check the fit
  double held_out_error = 0;  // (predicted - measured) / measured for held_out

  // The fitted peak at (B, T), without margin: max(floor, a + b·B·T + c·B·T²).
  double Fitted(int64_t batch_size, int64_t max_length) const;
  // What the fit underestimates (an overestimate needs no margin): max(kMinMargin,
  // -held_out_error, the largest peak / Fitted - 1 of the points).
  double margin() const;
  // The peak to plan for: Fitted × (1 + margin()), rounded up, bounded by the measured shapes,
  // as memory does not shrink when the shape grows: at most the peak × (1 + kMinMargin) of a
  // measured shape at least as large in B and in T, at least that of a measured shape no larger.
  // So predictions grow with the batch, as the binary search of --max-batch assumes.
  int64_t Predict(int64_t batch_size, int64_t max_length) const;
};

// The distinct shapes of `points`, each with its largest peak, in (T, B) order; points with a
// non-positive shape or peak are dropped.
std::vector<MemoryPoint> DistinctShapes(const std::vector<MemoryPoint>& points);

// True when `points` can be fitted: kMinPoints distinct shapes, two values of T (with a floor
// > 0: counting only the points at least kFloorBand above it).
bool CanFit(const std::vector<MemoryPoint>& points, double floor = 0);

// Fits a, b and c to the distinct shapes of `points` (with a floor > 0: those at least
// kFloorBand above it) by least squares, each coefficient kept >= 0 (a negative one would predict
// less memory for larger shapes). The point with the largest B·T² (the shape nearest the boundary
// that matters) is held out: the fit of the others predicts it, and that relative error is
// held_out_error; the stored coefficients use every fitted point. FailedPrecondition, saying what
// is missing, when !CanFit(points, floor).
Result<MeasuredFit> FitMeasuredMemory(const std::vector<MemoryPoint>& points,
                                      const std::string& model, const std::string& precision,
                                      double floor = 0);

// "peak = 1.21 GiB + 3456.0·B·T + 15.2·B·T² bytes; held out (B=16, T=256): -2.1%, margin 5.0%".
std::string MeasuredFitText(const MeasuredFit& fit);

// The study system attribute that holds the fit of (model, precision): "memory_fit:MODEL/PREC".
std::string MeasuredFitKey(const std::string& model, const std::string& precision);

// The calibration family of a measured model in trials' "memory" attributes:
// "measured:MODEL", plus "/PRECISION" when not fp32.
std::string MeasuredFamily(const std::string& model, const std::string& precision);
// The precision of a measured family ("fp32" without a suffix); nullopt for another family.
std::optional<std::string> MeasuredPrecision(const MemoryAttr& m);

// The exact peaks in trials' "memory" attributes: trials that did not run out of memory and
// whose peak is the program's report (peak_source "reported") or, on a CPU device, its resident
// set ("max_rss"). NVML's samples ("device_sampled") miss short peaks and a CUDA program's
// resident set ("host_max_rss") is not its device memory: neither is a point.
std::vector<MemoryPoint> MeasuredPoints(const std::vector<MemoryAttr>& attrs);

Json MeasuredFitToJson(const MeasuredFit& fit);
// InvalidArgument, naming the key, for JSON that is not a fit.
Result<MeasuredFit> MeasuredFitFromJson(const Json& j);

}  // namespace tune

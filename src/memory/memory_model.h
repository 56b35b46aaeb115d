// The memory room is one room [tune_train]: whoever needs a configuration's peak -- the guard's
// admission and levers, --jobs reservations, --max-batch, `tune estimate`, `tune report` -- asks
// a MemoryModel and gets a MemoryEstimate, whichever kind answers:
//
//   FormulaMemoryModel  the estimator's formulas (estimator.h) for the models it knows, on a
//                       device model (CPU bytes, or CUDA's caching allocator and context);
//   FittedMemoryModel   a fit of measured peaks (measured_fit.h) for any other model: its
//                       estimate has the fitted peak, with the fit's margin, as allocated and
//                       device peak, and no breakdown.
//
// A caller may show Describe() to people; it never branches on the kind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "measure/measured_fit.h"
#include "memory/estimator.h"
#include "tune/status.h"

namespace tune {

class MemoryModel {
 public:
  virtual ~MemoryModel() = default;
  // The peak of one step of `request` (its batch_size, max_length, ...). InvalidArgument for a
  // request the model cannot estimate.
  virtual Result<MemoryEstimate> Estimate(const MemoryRequest& request) const = 0;
  // Where the estimates come from, in one line: "formulas (cuda device model)", the fit's text.
  virtual std::string Describe() const = 0;
  // The same as JSON: {"kind": "formula", ...} or {"kind": "fit", "fit": {...}}.
  virtual Json ToJson() const = 0;
  // Rows that explain `estimate` (of `request`), label and bytes, ending with "device peak": the
  // formulas' terms and phases, or the fit's terms, margin and measured probes.
  virtual std::vector<std::pair<std::string, int64_t>> Explain(
      const MemoryRequest& request, const MemoryEstimate& estimate) const = 0;
};

class FormulaMemoryModel : public MemoryModel {
 public:
  explicit FormulaMemoryModel(DeviceMemoryModel device) : device_(device) {}
  Result<MemoryEstimate> Estimate(const MemoryRequest& request) const override;
  std::string Describe() const override;
  Json ToJson() const override;
  std::vector<std::pair<std::string, int64_t>> Explain(
      const MemoryRequest& request, const MemoryEstimate& estimate) const override;
  const DeviceMemoryModel& device() const { return device_; }

 private:
  DeviceMemoryModel device_;
};

// A fit's estimates do not depend on the levers it was not measured with: gradient checkpointing
// and grad_accum leave the fitted peak as it is (the measured steps did not use them).
class FittedMemoryModel : public MemoryModel {
 public:
  explicit FittedMemoryModel(MeasuredFit fit) : fit_(std::move(fit)) {}
  Result<MemoryEstimate> Estimate(const MemoryRequest& request) const override;
  std::string Describe() const override;
  Json ToJson() const override;
  std::vector<std::pair<std::string, int64_t>> Explain(
      const MemoryRequest& request, const MemoryEstimate& estimate) const override;
  const MeasuredFit& fit() const { return fit_; }

 private:
  MeasuredFit fit_;
};

// The largest micro-batch in [1, limit] whose device_peak is at most `budget_bytes`; 0 when
// not even 1 fits. The peak grows with the batch, so this is a binary search.
Result<int64_t> MaxBatchSize(const MemoryModel& model, MemoryRequest request, int64_t budget_bytes,
                             int64_t limit = 4096);

}  // namespace tune

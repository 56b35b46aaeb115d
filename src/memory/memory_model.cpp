// Formula and fitted memory models behind one interface (memory_model.h).
#include "memory/memory_model.h"

#include <fmt/format.h>

#include <cmath>

namespace tune {

Result<MemoryEstimate> FormulaMemoryModel::Estimate(const MemoryRequest& request) const {
  return EstimateMemory(request, device_);
}

std::string FormulaMemoryModel::Describe() const {
  return fmt::format("the estimator's formulas ({} device model)",
                     device_.caching_allocator ? "cuda" : "cpu");
}

Json FormulaMemoryModel::ToJson() const {
  return {{"kind", "formula"}, {"device", device_.caching_allocator ? "cuda" : "cpu"}};
}

std::vector<std::pair<std::string, int64_t>> FormulaMemoryModel::Explain(
    const MemoryRequest& /*request*/, const MemoryEstimate& e) const {
  std::vector<std::pair<std::string, int64_t>> rows;
  for (const auto& terms : {BreakdownTerms(e), PhaseTerms(e), DeviceTerms(e)}) {
    for (const MemoryTerm& t : terms) rows.emplace_back(t.label, t.bytes);
  }
  rows.emplace_back("device peak", e.device_peak);
  return rows;
}

Result<MemoryEstimate> FittedMemoryModel::Estimate(const MemoryRequest& request) const {
  if (request.batch_size < 1 || request.max_length < 1) {
    return InvalidArgumentError(fmt::format("batch_size {} and max_length {} must be >= 1",
                                            request.batch_size, request.max_length));
  }
  MemoryEstimate e;
  e.allocated_peak = e.device_peak = fit_.Predict(request.batch_size, request.max_length);
  e.backward_peak = e.allocated_peak;
  e.peak_phase = MemoryPhase::kBackward;
  return e;
}

std::string FittedMemoryModel::Describe() const {
  return fmt::format("a fit of {} measured peak(s) of '{}' ({}): {}", fit_.points.size(),
                     fit_.model, fit_.precision, MeasuredFitText(fit_));
}

Json FittedMemoryModel::ToJson() const {
  return {{"kind", "fit"}, {"fit", MeasuredFitToJson(fit_)}};
}

std::vector<std::pair<std::string, int64_t>> FittedMemoryModel::Explain(
    const MemoryRequest& request, const MemoryEstimate& e) const {
  const auto bytes = [](double v) { return static_cast<int64_t>(std::llround(v)); };
  const double bt =
      static_cast<double>(request.batch_size) * static_cast<double>(request.max_length);
  std::vector<std::pair<std::string, int64_t>> rows;
  for (const MemoryPoint& p : fit_.points) {
    const bool held =
        p.batch_size == fit_.held_out.batch_size && p.max_length == fit_.held_out.max_length;
    rows.emplace_back(fmt::format("probe B={} T={}: measured{}", p.batch_size, p.max_length,
                                  held ? fmt::format(" (held out; fit of the others {:+.1f}%)",
                                                     100 * fit_.held_out_error)
                                       : ""),
                      p.peak);
  }
  if (fit_.floor > 0) rows.emplace_back("fit: floor (no shape peaks below it)", bytes(fit_.floor));
  rows.emplace_back("fit: a (per step, any shape)", bytes(fit_.a));
  rows.emplace_back(fmt::format("fit: b·B·T (b = {:.1f})", fit_.b), bytes(fit_.b * bt));
  rows.emplace_back(fmt::format("fit: c·B·T² (c = {:.4g})", fit_.c),
                    bytes(fit_.c * bt * static_cast<double>(request.max_length)));
  rows.emplace_back(fmt::format("margin ({:.1f}%)", 100 * fit_.margin()),
                    e.device_peak - bytes(fit_.Fitted(request.batch_size, request.max_length)));
  rows.emplace_back("device peak", e.device_peak);
  return rows;
}

Result<int64_t> MaxBatchSize(const MemoryModel& model, MemoryRequest request, int64_t budget_bytes,
                             int64_t limit) {
  auto fits = [&](int64_t b) -> Result<bool> {
    request.batch_size = b;
    TUNE_ASSIGN_OR_RETURN(MemoryEstimate e, model.Estimate(request));
    return e.device_peak <= budget_bytes;
  };
  TUNE_ASSIGN_OR_RETURN(bool one, fits(1));
  if (!one) return int64_t{0};
  int64_t lo = 1, hi = limit;  // lo fits
  TUNE_ASSIGN_OR_RETURN(bool top, fits(hi));
  if (top) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    TUNE_ASSIGN_OR_RETURN(bool ok, fits(mid));
    (ok ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace tune

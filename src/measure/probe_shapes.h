// Boundary probe shapes [tune_core]: the first trials of a model outside the catalog, whose peak
// memory tune measures and fits (measured_fit.h). The shapes that decide a fit are the large
// ones, and the c·B·T² term shows only at long sequences, so the probes take the longest lengths
// the space asks for at its smallest batches (cheap, and they rarely run out of memory; B enters
// the fit linearly, so it extrapolates in B from them):
//
//   (B_min, T_max), (B_min, T_mid), (B_2nd, T_max), (B_min, T_min)
//
// B_min and B_2nd: the smallest and second-smallest batch sizes of the space's batch_size
// distribution; T_min, T_max: the extremes of its max_length distribution; T_mid: the length of
// that distribution nearest the geometric mean of T_min and T_max. So four shapes with at least
// two lengths, what a fit needs. Where two coincide (only two lengths: the geometric mean lies
// nearer T_min, so T_mid is T_min), (B_2nd, T_mid) and then (B_2nd, T_min) stand in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/distributions.h"
#include "tune/status.h"

namespace tune {

struct ProbeShape {
  int64_t batch_size = 0;
  int64_t max_length = 0;

  friend bool operator==(const ProbeShape&, const ProbeShape&) = default;
};

// The probe shapes (at most four, distinct, in the order above) of a space whose batch sizes
// and lengths are these distributions: int (any step, log or not) or categorical (its positive
// integer choices; others are ignored). InvalidArgument for a float distribution or one without
// a positive integer; FailedPrecondition when max_length has one value (no fit can be made).
Result<std::vector<ProbeShape>> BoundaryProbeShapes(const Distribution& batch_size,
                                                    const Distribution& max_length);

// "(B=1,T=512), (B=1,T=128)".
std::string ProbeShapesText(const std::vector<ProbeShape>& shapes);

}  // namespace tune

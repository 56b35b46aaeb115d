// Boundary probe shapes [tune_core]: the first trials of a model outside the catalog, whose peak
// memory tune measures and fits (measured_fit.h).
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

// The probe shapes of a space whose batch sizes and lengths are these distributions: int (any
// step, log or not) or categorical (its positive integer choices; others are ignored). At most
// four, distinct, in this order:
//
//   (B_min, T_max), (B_min, T_mid), (B_2nd, T_max), (B_min, T_min)
//
// B_min and B_2nd: the smallest and second-smallest batch sizes; T_min, T_max: the extremes of
// the lengths; T_mid: the length nearest the geometric mean of T_min and T_max (the smaller on a
// tie). The shapes that decide a fit are the large ones, and the c·B·T² term shows only at long
// sequences, so the probes take the longest lengths at the smallest batches (cheap, and they
// rarely run out of memory; B enters the fit linearly, so it extrapolates in B from them). Where
// two coincide (only two lengths: T_mid is T_min), (B_2nd, T_mid) and then (B_2nd, T_min) stand
// in. So four shapes with at least two lengths, what a fit needs, when batch_size has two values;
// with one, the two or three shapes at B_min.
// InvalidArgument for a float distribution or one without a positive integer;
// FailedPrecondition when max_length has one value (no fit can be made).
Result<std::vector<ProbeShape>> BoundaryProbeShapes(const Distribution& batch_size,
                                                    const Distribution& max_length);

// "(B=1,T=512), (B=1,T=128)".
std::string ProbeShapesText(const std::vector<ProbeShape>& shapes);

}  // namespace tune

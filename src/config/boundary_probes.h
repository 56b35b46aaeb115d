// Boundary probes [tune_config]: a command study's models outside the catalog are measured
// (measured_fit.h), and each of their trials reserves the whole card until four shapes with two
// lengths are fitted. With memory.boundary_probes (on by default) a run first enqueues, per such
// model, trials at the shapes that decide the fit (probe_shapes.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "measure/probe_shapes.h"
#include "tune/study.h"

namespace tune {

// A measured model of a study and the parameters that set its trials' shape.
struct ProbeTarget {
  std::string model;
  std::optional<std::string> model_param;  // the parameter memory.model names ("{model}")
  std::string batch_size_param, max_length_param;
  std::vector<ProbeShape> shapes;  // BoundaryProbeShapes of the model's distributions
};

// The models of `config` to probe (from the config alone): none for a study that is not a command
// study with a memory section and boundary_probes. A model is left out when the config's
// enqueue_trials fix the shape of trials of that model (the user's own probes), when its batch
// size and length are not each one parameter of the space ("{batch_size}"), or when
// BoundaryProbeShapes refuses their distributions; why is logged at debug.
std::vector<ProbeTarget> BoundaryProbeTargets(const StudyConfig& config);

// What one model's probes enqueue.
struct BoundaryProbes {
  std::string model;
  std::vector<ProbeShape> shapes;  // in order
  std::vector<Json> params;        // the fixed params of each shape
};

// The probes the study still needs: per target whose fit `study_system_attrs` lacks at every
// precision (MeasuredFitKey), the shapes that no trial of `trials` has, in any state (WAITING:
// its fixed params), so a resumed study gets no second set. Each is Optuna's enqueue_trial with
// the model's batch_size and max_length parameters fixed (and the model, when a parameter of
// the space names it), the sampler filling in the others. Models with none are left out.
std::vector<BoundaryProbes> PlanBoundaryProbes(const std::vector<ProbeTarget>& targets,
                                               const std::vector<FrozenTrial>& trials,
                                               const Json& study_system_attrs);

// Enqueues the probes `config`'s study still needs in `study` (WAITING, after the trials already
// waiting) and logs each model's at info. Errors: those of reading the study and of EnqueueTrial.
Status EnqueueBoundaryProbes(const StudyConfig& config, Study& study);

}  // namespace tune

// The memory guard's decisions [tune_train]: what to do with a trial before it runs (admission),
// how to shrink it after an out-of-memory error (retry), and what the study's own trials say
// about the estimator (calibration). No LibTorch here: train_guard.h applies these decisions to
// the train objective's trials around the Trainer, which measures and enforces device_memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memory/estimator.h"
#include "memory/memory_model.h"
#include "train/hyperparams.h"
#include "tune/distributions.h"
#include "tune/model_catalog.h"
#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

struct GuardOptions {
  // The memory trials may use. CPU: the counting allocator's budget (a simulated card); CUDA:
  // the card's memory, or less (the allocator is capped with setMemoryFraction). Unset on CPU:
  // no budget, no admission; unset on CUDA: the card's total memory.
  std::optional<int64_t> device_memory;
  double margin = 0.05;             // share of device_memory kept free
  bool admission = true;            // estimate each trial before it runs
  bool lever_grad_accum = true;     // admission may halve batch_size and double grad_accum
  bool lever_checkpointing = true;  // admission may turn on gradient checkpointing
  // --jobs: a waiting trial that does not fit beside the running ones starts at once at a
  // smaller micro-batch (the grad_accum lever only) when one fits the memory left.
  bool shrink_to_start = true;
  // Shrink to start never goes below this micro-batch (sequences): such a trial waits instead.
  int64_t min_micro_batch = 4;
  int64_t oom_retry = 0;  // run-time OOM: retries at half the micro-batch, ×2 accumulation
  bool calibrate = true;  // fit each model family's correction from the study's trials
  // The CUDA device model's defaults (estimator.h, DeviceMemoryModel::Cuda()), when set. Unset
  // context: measured at each trial start as total - free - reserved.
  std::optional<int64_t> cuda_context;
  std::optional<int64_t> cuda_workspace;
  std::optional<double> fragmentation;
  // Demos and tests: every estimate is multiplied by this before the correction. Below 1 the
  // guard underestimates, so configurations it admits can run out of memory at run time (and
  // calibration then learns the real ratio from the measured peaks).
  double estimate_scale = 1.0;
  // CPU tests and benchmarks: the name of a simulated card of device_memory bytes that every
  // trial process charges (simulated_card.h); unset: none.
  std::optional<std::string> simulate;
  // Several cards (--jobs; memory/cards.h): one device_memory per card (device_memory given as a
  // list; device_memory is then the largest), and the CUDA cards to use (--devices, the
  // objective's "devices"; empty: every visible card with the device "cuda").
  std::vector<int64_t> card_memory;
  std::vector<int> devices;
};

// DeviceMemoryModel::Cuda() with the options' overrides, and `measured_context` (bytes, -1:
// none) where the options set no context.
DeviceMemoryModel CudaDeviceModel(const GuardOptions& options, int64_t measured_context);

// The device model the guard estimates with: CudaDeviceModel on CUDA, else the CPU's (bytes as
// the counting allocator counts them), its estimates scaled by options.estimate_scale.
DeviceMemoryModel GuardDeviceModel(const GuardOptions& options, bool cuda,
                                   int64_t measured_context);

// "grad_accum", "gradient_checkpointing".
const std::vector<std::string>& GuardLeverNames();

// usable = device_memory × (1 − margin).
int64_t UsableMemory(int64_t device_memory, double margin);

// --jobs: what a trial's process may use for its reservation: reservation × (1 + margin), never
// more than `device_memory` when known. Reservations stay within UsableMemory, so the caps
// together stay within the device ((1 − margin)(1 + margin) < 1): the margin the card keeps free
// is each trial's slack for the prediction's small errors.
int64_t ProcessCap(int64_t reservation, double margin, std::optional<int64_t> device_memory);

// True (and logged) when the trial was enqueued with the user attribute "admission": false
// (enqueue_trials' user_attrs): it runs as configured, without admission.
bool RunsWithoutAdmission(const TrialHandle& trial);

// What one trial's run taught about memory: user attribute "memory" of a trial.
struct MemoryRecord {
  std::string family;         // MemoryFamily(): "bert", "deberta-v2/bf16", "mlp", ...
  int64_t estimate = 0;       // device_peak estimated for the configuration that ran
  int64_t device_memory = 0;  // the budget it ran under
  int64_t peak = -1;          // measured peak; -1: not measured
  bool oom = false;           // ran out of memory at run time
  std::string model;          // the model's name; "": only the family learns
  int64_t cap = 0;            // --jobs: the reservation it was capped at (0: device_memory)
  // CUDA: the caching allocator's reserved peak plus the context the estimate counted, what
  // the estimate (a device peak) predicts and a cap limits; -1: unknown (then `peak` counts).
  int64_t footprint = -1;
};

// The calibration key of a configuration: the model's model_type, plus "/<precision>" when not
// fp32 (the estimator's error differs between the two).
std::string MemoryFamily(const ModelSpec& model, Precision precision);

// Per-family correction factors fitted from records: every trial the guard ran records user
// attribute "memory" (MemoryAttr in trial_attrs.h, read back as MemoryRecords): the estimate, the
// measured peak and whether it ran out of memory. A family's correction is the largest of
// measured/estimate over its last kWindow measured trials (measured: the footprint when known,
// else the peak), and every run-time OOM at estimate E under a budget D (the cap, else
// device_memory) raises it to at least D/E × kOomStep (kCappedOomStep under a cap), so a
// configuration like the one that failed is no longer admitted; the result is clamped to
// [kMin, kMax].
class MemoryCalibration {
 public:
  static constexpr double kMin = 0.875;  // never trust an estimate to be more than 1/8 high
  static constexpr double kMax = 4.0;    // a correction above this means a broken estimate
  static constexpr double kOomStep = 1.02;
  // An OOM under a --jobs cap (the trial's own prediction): the prediction was low by an unknown
  // amount, so the next one grows by this step rather than creeping up.
  static constexpr double kCappedOomStep = 1.15;
  // A model with no record yet reserves this much more than its family's correction (at least
  // 1): the estimator has not been checked on it, and an OOM costs a whole trial.
  static constexpr double kUnmeasuredHeadroom = 1.15;
  static constexpr size_t kWindow = 64;  // measured records per family that count

  void Add(const MemoryRecord& record);
  // 1.0 for a family with no records. With `model`: the model's own correction once it has
  // records (the estimator's error differs between sizes of one family), else the family's, at
  // least 1.0, times kUnmeasuredHeadroom (a model never measured is not trusted to be
  // overestimated like its relatives).
  double Correction(const std::string& family, const std::string& model = "") const;
  int64_t records(const std::string& family) const;
  Json ToJson() const;

 private:
  struct Family {
    std::vector<double> ratios;  // measured / estimate, newest last
    double oom_floor = 0.0;      // from run-time OOMs
    int64_t n = 0;
  };
  static void AddTo(Family& f, const MemoryRecord& r);
  static double CorrectionOf(const Family& f);
  std::map<std::string, Family> families_;
  std::map<std::pair<std::string, std::string>, Family> models_;  // (family, model)
};

// The records of the finished trials in `history` (user attribute "memory").
MemoryCalibration CalibrationFromHistory(const TrialHistory& history);
Json MemoryRecordToJson(const MemoryRecord& r);
// A trial's user attribute "memory": its record, and one OOM record per entry of "oom_retries"
// that has an "estimate" (the attempts oom_retry shrank). Empty for malformed input.
std::vector<MemoryRecord> MemoryRecordsFromJson(const Json& j);

enum class AdmissionVerdict { kRun, kRunWithLevers, kReject };
const char* AdmissionVerdictName(AdmissionVerdict v);

struct Admission {
  AdmissionVerdict verdict = AdmissionVerdict::kRun;
  MemoryRequest request;           // what will run (levers applied)
  MemoryEstimate estimate;         // of `request`
  int64_t predicted = 0;           // estimate.device_peak × correction
  int64_t requested_estimate = 0;  // device_peak of the trial's own configuration
  double correction = 1.0;
  int64_t usable = 0;
  std::string levers;  // "" or e.g. "batch_size 32 -> 16, grad_accum 1 -> 2"
};

// Decides whether `request` fits `usable` bytes (UsableMemory): each configuration is estimated
// by `model` (formulas or a measured fit) and its device_peak × `correction` compared with
// `usable`. If the trial's own does not fit, the levers `options` allow are tried, cheapest
// first: halving the micro-batch while doubling gradient accumulation (the effective batch stays
// the same; only while the micro-batch is even), then gradient checkpointing (not for an MLP)
// with each of those micro-batches. The first configuration that fits runs (kRunWithLevers); if
// none does, kReject: the trial is pruned without running. InvalidArgument when a configuration
// cannot be estimated.
Result<Admission> AdmitTrial(const MemoryRequest& request, const MemoryModel& model, int64_t usable,
                             double correction, const GuardOptions& options);

// Half the micro-batch and twice the accumulation, keeping the effective batch. False (nothing
// changed) when the micro-batch is odd or 1.
bool HalveMicroBatch(int64_t& batch_size, int64_t& grad_accum);

}  // namespace tune

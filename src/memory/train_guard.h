// The memory guard around the train objective's trials [tune_train]: admission before a trial
// runs, with calibration from the study's trials (guard.h's rules), and the record of what ran.
//
// The train objective asks TrainGuard and applies its answers; the guard never runs a trial. Per
// trial: Admit() estimates the job (the estimator's formulas on the trial's device, or for a
// TorchScript model the fit of its measured peaks, probed on the trainer when there is none) and
// runs it as it is, with levers applied to job.hp, or rejects it (PRUNED with reason "predicted",
// recorded). After the run, RecordMemory() writes user attribute "memory", which calibration
// reads back on later trials. Under --jobs the parent admits (it holds the study's history) and
// hands the decision to the child as JSON (PlanJson / the objective's `planned`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/gpu_process_memory.h"
#include "memory/card_others.h"
#include "memory/guard.h"
#include "memory/memory_model.h"
#include "train/script_fit.h"
#include "train/trainer.h"
#include "tune/status.h"
#include "tune/trial.h"
#include "tune/trial_attrs.h"

namespace tune {

// What the memory guard decided before a trial ran.
struct GuardDecision {
  std::optional<TrialOutcome> reject;  // set: the trial does not run
  std::optional<int64_t> estimate;     // device_peak of what runs, when it can be estimated
  std::optional<Admission> admission;  // when admission ran
  // The budget admission used: device_memory, less what other processes held (card_others.h).
  std::optional<int64_t> budget;
  int64_t others = 0;      // what other processes held on the card then
  std::string levers;      // the levers admission applied
  std::string family;      // MemoryFamily
  bool unfit_now = false;  // Admit with a room: no micro-batch fits the room left
  Json memory_model;       // MemoryModel::ToJson of what estimated it, or null
};

// The configuration of a job, as an out-of-memory record shows it (oom_config and details).
Json JobConfigDetails(const TrainJob& job);

class TrainGuard {
 public:
  // `device`: the trials' ("cpu", "cuda", "cuda:N"); `trainer`: this process's, or null (a
  // --jobs parent: it neither measures nor probes); `planned`: in a --jobs child, the parent's
  // decision (PlanJson), used instead of admitting again.
  TrainGuard(GuardOptions options, std::string device, Trainer* trainer,
             std::optional<Json> planned);

  const GuardOptions& options() const { return options_; }

  // The memory trials may use: device_memory, at most the card's; unset on CPU without it.
  std::optional<int64_t> DeviceMemory() const;
  // DeviceMemory(), less what other processes hold on the card now (card_others.h), re-read at
  // each call; in a --jobs child, whose parent counted them, DeviceMemory(). With several cards
  // (a --jobs parent), what `budget` (SetBudget) says: the largest of the cards' budgets.
  std::optional<int64_t> Budget() const;
  void SetBudget(std::function<std::optional<int64_t>()> budget) { budget_ = std::move(budget); }
  // The device's utilisation as its driver reports it (NVML); nullopt when unknown.
  std::optional<double> Utilization() const { return nvml_.Utilization(); }

  // Admission: the trial runs as it is, with levers applied to job.hp, or not at all (the
  // decision's `reject`, recorded). With `room` (--jobs, shrink to start): admission against
  // the `room` bytes left beside the running trials, with the micro-batch lever only, and
  // `unfit_now` (nothing recorded) when the trial does not fit there.
  Result<GuardDecision> Admit(TrialHandle& trial, const Json& params, TrainJob& job,
                              std::optional<int64_t> room = std::nullopt);

  // The estimated device peak of `job` as it is now (after an out-of-memory retry shrank it);
  // nullopt when it cannot be estimated.
  std::optional<int64_t> EstimateFor(TrialHandle& trial, const TrainJob& job);

  // User attribute "memory" of a trial that ran: the admission, the estimate of what ran, the
  // measured peak and the allocated memory before and after, read back by calibration.
  Status RecordMemory(TrialHandle& trial, const TrainJob& job, const GuardDecision& decision,
                      const TrainResult& result, const std::vector<OomAttempt>& retries) const;

  // The decision as the parent hands it to a --jobs child (its `planned`).
  static Json PlanJson(const GuardDecision& decision);

 private:
  bool OnCuda() const;
  // CUDA: the caching-allocator model with this process's context measured; CPU: bytes as the
  // counting allocator counts them.
  DeviceMemoryModel DeviceModel() const;
  int64_t MeasuredContext(const DeviceMemoryStatus& m) const;
  MemoryRequest RequestFor(const TrainJob& job);
  // The calibration's correction for `family` (at least 1 for a TorchScript model's fit).
  double CorrectionFor(TrialHandle& trial, const TrainJob& job, const std::string& family) const;
  Result<MeasuredFit> ScriptFitFor(TrialHandle& trial, const TrainJob& job, bool probe);
  Result<std::unique_ptr<MemoryModel>> MemoryModelFor(TrialHandle& trial, const TrainJob& job,
                                                      bool probe = false);
  Result<TrialOutcome> Reject(TrialHandle& trial, const Json& params, const TrainJob& job,
                              const GuardDecision& g, int64_t device_memory) const;
  bool AdmitsHere(const TrainJob& job) const;
  Result<GuardDecision> PlannedDecision(const TrainJob& job);
  static GuardDecision DecisionFromJson(const Json& j, const TrainJob& job);
  static MemoryAttr AdmissionAttr(const GuardDecision& g, std::optional<int64_t> device_memory);

  GuardOptions options_;
  std::string device_;
  Trainer* trainer_;
  std::optional<Json> planned_;
  std::function<std::optional<int64_t>()> budget_;  // SetBudget's; empty: this card's
  DeviceNvml nvml_;             // utilisation, and this process's memory for the context
  mutable CardOthers others_;   // other processes on the card (its window of readings)
  ScriptFitCache script_fits_;  // TorchScript models' measured fits
  // The longest example of each data set (tokens, with [CLS] and [SEP]): batches are padded to
  // their longest text, so no batch is wider.
  std::map<const TextTrainData*, int64_t> longest_;
};

}  // namespace tune

// The MLflow sink [tune_tracking]: the study is an MLflow experiment (named as the study, or
// `experiment`), each trial a run in it, through MLflow's REST API (api/2.0/mlflow/...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tracking/http.h"
#include "tracking/sink.h"
#include "tracking/tracking_options.h"
#include "tune/json.h"

namespace tune {

// The MLflow run status of a finished trial state ("FINISHED", "FAILED", "KILLED").
const char* MlflowRunStatus(TrialState state);

// Every call is retried twice (0.1 s, then 0.3 s later) on no answer or a 5xx; after that the
// server counts as down for 5 s, in which calls fail at once with Unavailable (the tracker counts
// the trials they missed). Thread-safe: up to options.concurrency trials are recorded at once,
// each call over a connection of its own (made when none is idle, kept for the next call).
class MlflowSink : public TrackingSink {
 public:
  // `connect` makes a connection (NewCurlHttpClient; tests fake the server).
  MlflowSink(MlflowOptions options, TrackedStudy study,
             std::function<std::unique_ptr<HttpClient>()> connect);

  std::string name() const override { return "MLflow at " + options_.uri; }
  // The trial as a run named by its number, holding
  //   params    the trial's params (as Optuna's MLflowCallback logs them: Python's str of each)
  //   metrics   trial_scalars.h's histories at their steps (intermediate_value, value,
  //             train/loss, eval/<metric>, ...) and the guard's memory figures (memory/estimate,
  //             ...; step 0)
  //   tags      number, state, direction, datetime_start, datetime_complete (MLflowCallback's),
  //             reason (oom, predicted, nonfinite, timeout, interrupted, or the pruner's name),
  //             fail_reason, tune.study, tune.trial_number
  //   status    COMPLETE -> FINISHED, FAIL -> FAILED, PRUNED -> KILLED
  // `tally` is not used (RecordTally writes it). Internal when runs/create answers without a run
  // id.
  Status Record(const FrozenTrial& trial, const StudyTally& tally) override;
  // The study's counts by outcome and best value as the experiment's tags (tune.trials.COMPLETE,
  // ..., tune.trials.oom, tune.trials.predicted, tune.best_value, tune.best_trial).
  Status RecordTally(const StudyTally& tally) override;
  std::string MissedHint() const override;
  int concurrency() const override { return options_.concurrency; }

  // The study's runs already in the experiment: trial number -> (run id, status).
  Result<std::map<int64_t, std::pair<std::string, std::string>>> RecordedTrials();
  // Deletes a run (a half-written one, still RUNNING, before `tune export` writes it again).
  Status DeleteRun(const std::string& run_id);
  // The experiment's id, made when missing.
  Result<std::string> ExperimentId();

 private:
  // POST (or GET without a body) api/2.0/mlflow/<path>: the answer's JSON. For a 4xx or an
  // answer that is not JSON, MLflow's error_code and message: NotFound for
  // RESOURCE_DOES_NOT_EXIST, AlreadyExists for RESOURCE_ALREADY_EXISTS, else InvalidArgument.
  // Unavailable when the server is down.
  Result<Json> Call(const std::string& method, const std::string& path, const Json& body);
  Status LogBatch(const std::string& run_id, const FrozenTrial& trial, int64_t timestamp_ms);

  // An idle connection, or a new one; Release gives it back for the next call.
  std::unique_ptr<HttpClient> Acquire();
  void Release(std::unique_ptr<HttpClient> http);

  MlflowOptions options_;
  TrackedStudy study_;
  std::function<std::unique_ptr<HttpClient>()> connect_;
  std::string base_;  // <uri>/api/2.0/mlflow/

  std::mutex experiment_mu_;   // held while the experiment is looked up (or made)
  std::string experiment_id_;  // "" until known; guarded by experiment_mu_

  std::mutex mu_;  // guards the members below
  std::vector<std::unique_ptr<HttpClient>> idle_;
  double down_until_ = 0;  // steady seconds: the server counts as down until then
  std::string down_error_;
};

std::unique_ptr<TrackingSink> NewMlflowSink(const MlflowOptions& options,
                                            const TrackedStudy& study);

}  // namespace tune

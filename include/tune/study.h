// Study and Trial: Optuna's ask/tell interface over a Storage.
//
// A Study binds a storage, a sampler and a pruner to one named study. Ask() starts a trial (a
// WAITING, enqueued trial first, else a new one), Tell() finishes it. A Trial is the live handle
// of one running trial: Suggest() draws a parameter (define-by-run, as Optuna's suggest_*),
// Report() stores an intermediate value, ShouldPrune() asks the pruner.
//
// Thread safety: a Study may be used from several threads (the storage is thread-safe; sampler
// calls are serialised by the study). A Trial belongs to one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/pruners/pruner.h"
#include "tune/samplers/sampler.h"
#include "tune/status.h"
#include "tune/storages/storage.h"
#include "tune/trial.h"

namespace tune {

class Study;

class Trial : public TrialHandle {
 public:
  int64_t number() const override { return number_; }
  int64_t trial_id() const { return trial_id_; }
  const std::string& study_name() const override;

  // Optuna's Trial._suggest: returns the external value of `name`. In order: a value this trial
  // already has; an enqueued (fixed) value; the only value of a single() distribution; the
  // relative sample; else the sampler's independent sample. The value is stored at once.
  Result<Json> Suggest(const std::string& name, const Distribution& distribution);
  Result<double> SuggestFloat(const std::string& name, double low, double high, bool log = false,
                              std::optional<double> step = std::nullopt);
  Result<int64_t> SuggestInt(const std::string& name, int64_t low, int64_t high, bool log = false,
                             int64_t step = 1);
  Result<Json> SuggestCategorical(const std::string& name, std::vector<Json> choices);

  // Optuna's trial.report(value, step). A step reported twice keeps the first value (Optuna
  // warns and ignores the repeat).
  Status Report(double value, int64_t step) override;
  // Asks the study's pruner, given the latest report.
  Result<bool> ShouldPrune() override;

  Status SetUserAttr(const std::string& key, const Json& value) override;
  std::optional<Json> UserAttr(const std::string& key) const override;
  Status SetSystemAttr(const std::string& key, const Json& value) override;
  Status SetStudySystemAttr(const std::string& key, const Json& value) override;
  Result<std::optional<Json>> GetStudySystemAttr(const std::string& key) override;

  // The params suggested so far (external representation).
  const Json& params() const { return params_; }
  // The trial as stored now.
  Result<FrozenTrial> Snapshot() const;
  // The study's trials when this one started (what the sampler saw).
  const TrialHistory& history() const override { return *history_; }

 private:
  friend class Study;
  Trial(Study* study, FrozenTrial frozen, std::shared_ptr<const TrialHistory> history,
        uint64_t rng_seed);
  // The sampler's value of `name` (relative if the joint sample has it, else independent).
  Result<double> Sample(const std::string& name, const Distribution& distribution);
  // Once per trial, under the sampler lock: BeforeSample (its records stored), then the
  // relative search space and the joint sample.
  Status SampleRelative();

  Study* study_;
  int64_t trial_id_;
  int64_t number_;
  FrozenTrial frozen_;  // params as stored so far; used as the sampler's view of the trial
  std::shared_ptr<const TrialHistory> history_;
  Rng rng_;
  Json params_ = Json::object();
  Json fixed_params_ = Json::object();
  SearchSpace relative_space_;
  std::map<std::string, double> relative_params_;
  bool relative_done_ = false;
  std::map<int64_t, double> reported_;
};

class Study {
 public:
  // Creates the study, or loads it if it exists (Optuna: load_if_exists=True). Loading checks
  // that the stored directions equal `directions`. `seed`: reproducible sampling (per trial, the
  // RNG is seeded from the seed and the trial number); unset: nondeterministic.
  static Result<std::unique_ptr<Study>> CreateOrLoad(std::shared_ptr<Storage> storage,
                                                     const std::string& name,
                                                     std::vector<StudyDirection> directions,
                                                     std::unique_ptr<Sampler> sampler,
                                                     std::unique_ptr<Pruner> pruner,
                                                     std::optional<uint64_t> seed = std::nullopt);
  // Loads an existing study (NotFound suggests existing names).
  static Result<std::unique_ptr<Study>> Load(std::shared_ptr<Storage> storage,
                                             const std::string& name,
                                             std::unique_ptr<Sampler> sampler,
                                             std::unique_ptr<Pruner> pruner,
                                             std::optional<uint64_t> seed = std::nullopt);

  const std::string& name() const { return name_; }
  int64_t study_id() const { return study_id_; }
  const std::vector<StudyDirection>& directions() const { return directions_; }
  StudyDirection direction() const { return directions_.at(0); }
  Storage& storage() { return *storage_; }
  Sampler& sampler() { return *sampler_; }
  Pruner& pruner() { return *pruner_; }

  // Starts a trial: claims the oldest WAITING trial if any, else creates a RUNNING one.
  Result<std::unique_ptr<Trial>> Ask();
  // The same in one storage transaction (Storage::StartTrial): nullptr once the study holds
  // options.max_started trials that are not WAITING; options.heartbeat records the trial's
  // first heartbeat with it.
  Result<std::unique_ptr<Trial>> Ask(const StartTrialOptions& options);
  // Finishes a trial (Optuna's study.tell). COMPLETE requires one finite-or-infinite value per
  // objective (a NaN value turns the trial into FAIL, as Optuna does). PRUNED stores the last
  // intermediate value, if any. FAIL stores no value.
  Result<FrozenTrial> Tell(Trial& trial, TrialState state, std::vector<double> values = {});
  // Optuna's study.tell(trial_number, ...): finishes the RUNNING trial `number`, which another
  // process may have asked for (`tune ask`). As Tell above; PRUNED stores the trial's last
  // stored intermediate value. NotFound for an unknown number, FailedPrecondition for a trial
  // that is not RUNNING (Optuna's message for a finished one).
  Result<FrozenTrial> TellNumber(int64_t number, TrialState state, std::vector<double> values = {});

  // Optuna's enqueue_trial: a WAITING trial whose params are fixed to `params` (a JSON object).
  Result<FrozenTrial> EnqueueTrial(const Json& params, const Json& user_attrs = Json::object());
  // A new study's enqueue_trials: each (params, user_attrs) enqueued as EnqueueTrial does, all in
  // one transaction and only while the study has no trial (Storage::CreateTrialsIfEmpty), so that
  // workers starting a new study together enqueue them once. Returns how many it enqueued.
  Result<int64_t> EnqueueTrialsIfEmpty(const std::vector<std::pair<Json, Json>>& trials);

  // Optuna's fail_stale_trials with RetryFailedTrialCallback(max_retry): fails the RUNNING
  // trials whose last heartbeat is more than grace_period_seconds old and, while max_retry
  // allows (0: never), re-enqueues each as a WAITING trial with the same params (system attrs
  // failed_trial, retry_history). Each stale trial is handled by one caller only.
  Result<std::vector<FailedStaleTrial>> FailStaleTrials(double grace_period_seconds,
                                                        int64_t max_retry = 0);

  Result<std::vector<FrozenTrial>> Trials(const std::vector<TrialState>& states = {});
  // The COMPLETE trial with the best value (single objective). NotFound if none is complete.
  Result<FrozenTrial> BestTrial();
  // BestTrial() among `trials`, this study's trials read before (for a summary, say).
  Result<FrozenTrial> BestTrialOf(const std::vector<FrozenTrial>& trials) const;
  // A snapshot of all trials for samplers and pruners. Finished trials are read from the
  // storage once and shared afterwards; each call re-reads only new and unfinished trials.
  Result<std::shared_ptr<const TrialHistory>> History();

 private:
  friend class Trial;
  Study(std::shared_ptr<Storage> storage, std::string name, int64_t study_id,
        std::vector<StudyDirection> directions, std::unique_ptr<Sampler> sampler,
        std::unique_ptr<Pruner> pruner, std::optional<uint64_t> seed);
  // Tell's work on a stored trial: `last_reported` is the value PRUNED stores.
  Result<FrozenTrial> Finish(int64_t trial_id, int64_t number, TrialState state,
                             std::vector<double> values, std::optional<double> last_reported);
  // The live handle of a trial just started: history snapshot, pruner view, RNG.
  Result<std::unique_ptr<Trial>> MakeTrial(FrozenTrial frozen);

  std::shared_ptr<Storage> storage_;
  std::string name_;
  int64_t study_id_;
  std::vector<StudyDirection> directions_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Pruner> pruner_;
  std::optional<uint64_t> seed_;
  std::mutex sampler_mu_;  // serialises sampler and pruner calls

  std::mutex cache_mu_;                                    // guards the two members below
  std::vector<std::shared_ptr<const FrozenTrial>> cache_;  // by number
  std::vector<int64_t> unfinished_;                        // numbers not finished when read
};

// The best COMPLETE trial among `trials` (single objective), or nullopt.
std::optional<FrozenTrial> FindBestTrial(const std::vector<FrozenTrial>& trials,
                                         StudyDirection direction);

// Optuna's study.best_trials: the COMPLETE trials that no other COMPLETE trial dominates (the
// Pareto front; trials with equal values are all kept), in order of number. A trial dominates
// another when it is no worse in every objective and better in at least one. Trials whose
// number of values differs from `directions` are left out.
std::vector<FrozenTrial> FindBestTrials(const std::vector<FrozenTrial>& trials,
                                        const std::vector<StudyDirection>& directions);

}  // namespace tune

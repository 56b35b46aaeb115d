// A place a study's finished trials are recorded besides its storage (MLflow, TensorBoard), and
// what every such place is told about the study. The tracker (tracker.h) calls a sink from
// threads of its own: Record from up to concurrency() at once, RecordTally alone after them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// The study a sink records.
struct TrackedStudy {
  std::string name;
  std::vector<StudyDirection> directions;
  std::string pruner;  // the pruner's name: the reason tag of a trial it pruned
};

// The study's trials by outcome, and its best value (one objective), over the trials a tracker
// has seen: the stored ones when it started, then each one it is given.
struct StudyTally {
  std::map<std::string, int64_t> by_state;  // "COMPLETE", "PRUNED", "FAIL"
  int64_t oom = 0;                          // PRUNED, reason oom
  int64_t predicted = 0;                    // PRUNED, reason predicted
  std::optional<double> best_value;
  int64_t best_trial = -1;

  // Counts a finished trial; returns true when it is the new best (one objective, COMPLETE).
  bool Add(const FrozenTrial& trial, const std::vector<StudyDirection>& directions);
};

class TrackingSink {
 public:
  virtual ~TrackingSink() = default;
  // "MLflow at http://...", "TensorBoard in DIR": for messages.
  virtual std::string name() const = 0;
  // Records one finished trial, given the tally with it counted. An error leaves the trial
  // unrecorded; the tracker counts it and goes on.
  virtual Status Record(const FrozenTrial& trial, const StudyTally& tally) = 0;
  // Records the study's counts by outcome and best value (end of a run, `tune export`).
  virtual Status RecordTally(const StudyTally& tally) = 0;
  // Writes out what Record buffered. The tracker calls it whenever it has recorded every trial
  // queued so far (so at least once per batch), never during another Flush, and during a Record
  // only in a sink of concurrency() > 1 (a trial that arrived meanwhile).
  virtual Status Flush() { return Status::Ok(); }
  // How to record the trials it missed later ("`tune export --mlflow` records them"), or "".
  virtual std::string MissedHint() const { return ""; }
  // How many Record calls may run at once, each on its own thread (> 1 only where Record is
  // thread-safe); with 1, trials are recorded in the order they finished.
  virtual int concurrency() const { return 1; }
};

}  // namespace tune

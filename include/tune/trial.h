// Trial records shared by the study, samplers, pruners and storages, and TrialHandle: what an
// objective sees of a running trial.
//
// FrozenTrial is Optuna's FrozenTrial: a plain value describing one trial as stored. Params are
// kept in internal representation next to their distributions (see distributions.h). Trials in a
// finished state (COMPLETE, PRUNED, FAIL) never change again. Plain data: not synchronised.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tune/distributions.h"
#include "tune/status.h"

namespace tune {

// Optuna's TrialState, in Optuna's order (RUNNING=0 ... WAITING=4).
enum class TrialState { kRunning = 0, kComplete = 1, kPruned = 2, kFail = 3, kWaiting = 4 };

// "RUNNING", "COMPLETE", "PRUNED", "FAIL", "WAITING" (the names Optuna stores).
const char* TrialStateName(TrialState s);
Result<TrialState> ParseTrialState(std::string_view name);
// The states a trial ends in, and the test for them.
inline const std::vector<TrialState> kFinishedStates = {TrialState::kComplete, TrialState::kPruned,
                                                        TrialState::kFail};
inline bool IsFinished(TrialState s) {
  return s == TrialState::kComplete || s == TrialState::kPruned || s == TrialState::kFail;
}

// Optuna's StudyDirection.
enum class StudyDirection { kNotSet = 0, kMinimize = 1, kMaximize = 2 };
const char* StudyDirectionName(StudyDirection d);                       // "MINIMIZE", ...
std::string StudyDirectionsText(const std::vector<StudyDirection>& d);  // "MINIMIZE, MAXIMIZE"
// Accepts "minimize"/"maximize" in any case.
Result<StudyDirection> ParseStudyDirection(std::string_view name);

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;

struct FrozenTrial {
  int64_t trial_id = -1;  // storage-wide id
  int64_t number = -1;    // 0-based, contiguous within the study
  TrialState state = TrialState::kRunning;
  std::vector<double> values;  // one per objective; set when COMPLETE (PRUNED: last report)
  std::optional<TimePoint> datetime_start;
  std::optional<TimePoint> datetime_complete;
  std::map<std::string, double> params;  // internal representation
  std::map<std::string, Distribution> distributions;
  std::map<int64_t, double> intermediate_values;  // step -> value
  Json user_attrs = Json::object();
  Json system_attrs = Json::object();

  // The single objective value. REQUIRES: values.size() == 1.
  double value() const { return values.at(0); }
  // External representation of one parameter. REQUIRES: params has `name`.
  Json param(const std::string& name) const;
  // All params, external representation, as a JSON object.
  Json ExternalParams() const;
  std::optional<int64_t> last_step() const {
    if (intermediate_values.empty()) return std::nullopt;
    return intermediate_values.rbegin()->first;
  }
  // Wall-clock seconds between start and completion (or nullopt).
  std::optional<double> duration_seconds() const;
};

// A read-only snapshot of a study's trials handed to samplers and pruners (they never see the
// study or its storage). Finished trials are shared, immutable objects: a snapshot costs one
// pointer per trial, and a sampler may cache what it derived from a finished trial by number.
struct TrialHistory {
  std::string study_name;
  std::vector<StudyDirection> directions;
  std::vector<std::shared_ptr<const FrozenTrial>> trials;  // ordered by number
  // Unique per snapshot within a process (0 = unknown): lets a sampler skip re-scanning the
  // same snapshot for each parameter of a trial.
  uint64_t snapshot_id = 0;

  StudyDirection direction() const { return directions.at(0); }
};

// True if `a` is better than `b` under `direction` (single objective).
inline bool IsBetter(StudyDirection direction, double a, double b) {
  return direction == StudyDirection::kMaximize ? a > b : a < b;
}

// Formats a time point as Optuna shows it: "YYYY-MM-DD HH:MM:SS.ffffff" (local time).
std::string FormatDatetime(TimePoint t);
// The same in UTC (what the database backends store: naive UTC, as Optuna 5.0).
std::string FormatDatetimeUtc(TimePoint t);
// "YYYY-MM-DD HH:MM:SS[.ffffff]" (or with a "T") read as local time, or as UTC.
Result<TimePoint> ParseDatetime(std::string_view text);
Result<TimePoint> ParseDatetimeUtc(std::string_view text);

// What a trial ended with, as an objective or the memory guard returns it.
struct TrialOutcome {
  TrialState state = TrialState::kComplete;  // kComplete, kPruned or kFail
  std::vector<double> values;                // kComplete: one per objective
  std::string reason;                        // kPruned / kFail: why (also in user attrs)
};

// What computes on the device the trials share, when an objective can see it (a simulated card:
// each trial's own busy share, docs/benchmarks.md "packing"): the trials computing now and
// their summed busy share alone.
struct DeviceBusy {
  int64_t busy = 0;
  double sum_busy = 0.0;
};

// How a trial will run when several run at once (--jobs), decided before it starts.
struct TrialPlan {
  // Set: the trial does not run; its outcome is already recorded (for example the memory guard
  // predicted that it does not fit even alone).
  std::optional<TrialOutcome> outcome;
  Json params = Json::object();  // what it runs with (memory levers applied)
  int64_t reservation = 0;       // bytes of the device it holds while it runs (0: none)
  bool exclusive = false;        // its memory is unknown: it runs only on an idle device
  // The memory the trial was capped at while it ran (--jobs: its reservation); 0: the device's.
  // An out-of-memory error under a cap tells calibration about that cap, not the device.
  int64_t cap = 0;
  std::string summary;  // how the reservation was reached, for the log
  // Several cards (Objective::CardsNow()): the index of the card it runs on, chosen when it
  // starts.
  int64_t card = 0;
};

// What an objective sees of a running trial: its number, its intermediate values and the pruner,
// and its attributes. Trial implements it over the study; a trial that runs in a child process
// (--jobs) sees one that forwards each call to the parent, which owns the study.
class TrialHandle {
 public:
  virtual ~TrialHandle() = default;
  virtual int64_t number() const = 0;
  virtual const std::string& study_name() const = 0;
  // Optuna's trial.report(value, step).
  virtual Status Report(double value, int64_t step) = 0;
  // Asks the study's pruner, given the latest report.
  virtual Result<bool> ShouldPrune() = 0;
  virtual Status SetUserAttr(const std::string& key, const Json& value) = 0;
  // One of the trial's user attributes (those it was enqueued with included); nullopt when it
  // is unset or not at hand (a child process sees only what its parent sends it).
  virtual std::optional<Json> UserAttr(const std::string& key) const {
    (void)key;
    return std::nullopt;
  }
  // Optuna's trial system attributes (e.g. "constraints", read by samplers).
  virtual Status SetSystemAttr(const std::string& key, const Json& value) = 0;
  // The study's system attributes (e.g. a measured memory fit, "memory_fit:MODEL/PRECISION").
  virtual Status SetStudySystemAttr(const std::string& key, const Json& value) = 0;
  // One of the study's system attributes; nullopt when it is unset or the study is not at hand
  // (a child process sees only what its parent sends it).
  virtual Result<std::optional<Json>> GetStudySystemAttr(const std::string& key) {
    (void)key;
    return std::optional<Json>();
  }
  // The study's trials when this one started (what the sampler saw); empty in a child process.
  virtual const TrialHistory& history() const = 0;
};

}  // namespace tune

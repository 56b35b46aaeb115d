// Running an objective's trial in a child process (--jobs) [tune_core, private]: the child is
// `tune run-trial`, which runs the objective in process against a RemoteTrialHandle; the parent,
// which alone owns the study, drives it through a ChildTrialProcess. One JSON object per line.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/objectives/objective.h"
#include "util/subprocess.h"

namespace tune {

// The child's side: every call goes to the parent as one line on stdout:
//   {"report": {"step": 3, "value": 0.81}}      an intermediate value (Report)
//   {"should_prune": true}                      a question (ShouldPrune); the parent answers on
//                                               the child's stdin with {"prune": false}
//   {"user_attr": {"key": "memory", "value": {...}}}
//   {"system_attr": {"key": "constraints", "value": [...]}}
//   {"study_system_attr": {"key": "memory_fit:m/fp32", "value": {...}}}
//   {"outcome": {"state": "COMPLETE", "values": [0.9], "reason": ""}}   the last line
// The child logs on its stderr as "[info] message". Unavailable once the parent is gone (stdout
// or stdin closed); ShouldPrune returns Internal for an answer that is not {"prune": bool}.
class RemoteTrialHandle : public TrialHandle {
 public:
  RemoteTrialHandle(int64_t number, std::string study_name, std::istream& in, std::ostream& out);

  int64_t number() const override { return number_; }
  const std::string& study_name() const override { return study_name_; }
  Status Report(double value, int64_t step) override;
  Result<bool> ShouldPrune() override;
  Status SetUserAttr(const std::string& key, const Json& value) override;
  Status SetSystemAttr(const std::string& key, const Json& value) override;
  Status SetStudySystemAttr(const std::string& key, const Json& value) override;
  // Empty: the parent keeps the study's history (and plans the trial with it).
  const TrialHistory& history() const override { return history_; }

  // The last line of the child's output.
  Status SendOutcome(const TrialOutcome& outcome);

 private:
  Status Send(const Json& message);

  int64_t number_;
  std::string study_name_;
  std::istream& in_;
  std::ostream& out_;
  TrialHistory history_;
};

// The parent's side: a trial running in a child process started from `options` (whose argv
// names the child command). Starting it needs options.stdin_pipe; Start sets it. It applies each
// message to `trial` and logs each stderr line at its "[level]" (info without one); other stdout
// lines go to the debug log, and a protocol line of the wrong types is Internal. A child that ends
// without an outcome (a crash, a signal, the kernel's OOM killer) fails its trial with its exit
// status or signal and the end of its stderr, or prunes it as out of memory when stderr says so;
// one tune stopped (Interrupt, Ctrl-C) is recorded as interrupted.
class ChildTrialProcess : public TrialProcess {
 public:
  // `params`: the trial's params, for the oom_config of a child that ran out of memory.
  static Result<std::unique_ptr<TrialProcess>> Start(TrialHandle& trial, Json params,
                                                     SubprocessOptions options);

  Status Poll(std::chrono::milliseconds wait) override;
  bool finished() const override { return program_->finished(); }
  void Interrupt() override;
  Result<TrialOutcome> Finish() override;

 private:
  ChildTrialProcess(TrialHandle& trial, Json params, std::unique_ptr<Subprocess> program);
  Status OnStdout(const std::string& line);
  Status OnMessage(const Json& message, const std::string& line);  // OnStdout's, one member
  void OnStderr(const std::string& line);
  // The outcome of a child that ended without sending one.
  Result<TrialOutcome> OutcomeOfDeath();

  TrialHandle& trial_;
  Json params_;
  std::unique_ptr<Subprocess> program_;
  std::optional<TrialOutcome> outcome_;
  bool interrupted_ = false;
  std::string oom_line_;
};

}  // namespace tune

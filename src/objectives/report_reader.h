// What a command objective's program prints, read [tune_core, private]: the report protocol of
// docs/config.md ("Command objectives") on its stdout, one line at a time, and the result file
// it may write instead. These are a user program's bytes: any line is accepted; one that is not a
// protocol object is logged at debug level, a protocol object with a bad value is ignored with a
// warning naming the line, and nothing a line holds throws.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tune/status.h"
#include "tune/trial.h"

namespace tune {

// The report protocol on the program's stdout: intermediate values go to the trial and its
// pruner, the final value is kept.
class ReportReader {
 public:
  // `earlier`: the steps earlier attempts of the trial reported (an out-of-memory retry), whose
  // first values the trial keeps; the steps this one reports are added. `pruner_file`: where each
  // pruning decision is appended for the program ($TUNE_PRUNER_FILE).
  ReportReader(TrialHandle& trial, std::filesystem::path pruner_file, std::set<int64_t>& earlier)
      : trial_(trial), pruner_file_(std::move(pruner_file)), reported_(earlier) {}

  // One line of stdout: {"value": x}, {"values": [...]}, {"step": n, "value": x},
  // {"constraints": {...}}, {"memory_peak": BYTES}, {"out_of_memory": "message"}, or anything
  // else (logged). NaN / Infinity / nan / inf are read where a value goes. An error only from
  // the trial (its storage) or writing the pruner file.
  Status OnStdoutLine(const std::string& line);
  // {"value": x} (or a bare number) written to $TUNE_RESULT_FILE, when stdout gave no value; a
  // missing file is no value.
  Status ReadResultFile(const std::filesystem::path& file);

  std::optional<std::vector<double>> final_values;
  std::optional<int64_t> pruned_step;  // the step at which the pruner stopped the trial
  std::optional<int64_t> memory_peak;  // {"memory_peak": BYTES}, when the program reports it
  std::optional<int64_t> memory_peak_reserved;  // its "memory_peak_reserved" (CUDA's cache)
  std::optional<std::string> out_of_memory;     // {"out_of_memory": "message"}

 private:
  // {"constraints": {"name": value, ...}}: each a trial system attribute "constraints:<name>".
  Status OnConstraints(const Json& c, const std::string& shown);
  // A report object; `shown` names it in warnings.
  Status OnReport(const Json& j, const std::string& shown);
  // The pruner's decision at `step`, appended to the pruner file.
  Status Answer(int64_t step, bool prune) const;

  TrialHandle& trial_;
  std::filesystem::path pruner_file_;
  std::set<int64_t>& reported_;                 // every attempt's steps
  const std::set<int64_t> earlier_{reported_};  // the earlier attempts'
};

}  // namespace tune

// The subcommands of `tune` as one table, the way ninja keeps its tools: each row names a
// subcommand, gives its one line of help and declares its options; main() builds the command
// line from the table and runs the row the user chose. A new subcommand is one row plus its
// file under commands/.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace tune::app {

// Declares a command's options on `command` (binding them to state the returned function owns)
// and returns what runs it, once the command line is parsed, with its exit code.
using DeclareCommand = std::function<int()> (*)(CLI::App& command);

struct Command {
  const char* name;  // "" for the study run itself (the top-level options)
  const char* help;  // "": hidden from --help (internal commands)
  DeclareCommand declare;
};

// The study run first (no subcommand), then the subcommands in --help order.
const std::vector<Command>& Commands();

// One per row (commands/*.cpp).
std::function<int()> DeclareRun(CLI::App& app);
std::function<int()> DeclareStudies(CLI::App& command);
std::function<int()> DeclareTrials(CLI::App& command);
std::function<int()> DeclareBestTrial(CLI::App& command);
std::function<int()> DeclareBestTrials(CLI::App& command);
std::function<int()> DeclareCreateStudy(CLI::App& command);
std::function<int()> DeclareAsk(CLI::App& command);
std::function<int()> DeclareTell(CLI::App& command);
std::function<int()> DeclareSummary(CLI::App& command);
std::function<int()> DeclareReport(CLI::App& command);
std::function<int()> DeclareDeleteStudy(CLI::App& command);
std::function<int()> DeclareEnqueue(CLI::App& command);
std::function<int()> DeclareExport(CLI::App& command);
std::function<int()> DeclareEstimate(CLI::App& command);
std::function<int()> DeclarePlan(CLI::App& command);
std::function<int()> DeclareRunTrial(CLI::App& command);
std::function<int()> DeclarePredict(CLI::App& command);
std::function<int()> DeclareInit(CLI::App& command);
std::function<int()> DeclarePythonPath(CLI::App& command);
std::function<int()> DeclareCompletion(CLI::App& command);
std::function<int()> DeclareManPage(CLI::App& command);

// The --storage help of the read-only management commands.
inline constexpr const char* kReadOnlyStorageHelp =
    "Storage URL: sqlite:///PATH, postgresql://USER@HOST[:PORT]/DB or memory (default: "
    "sqlite:///tune.db); opened read-only";

}  // namespace tune::app

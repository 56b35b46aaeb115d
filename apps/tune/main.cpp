// tune: hyperparameter studies with an in-process GPU memory guard.
//
// The commands are the rows of apps/tune/commands.cpp; `tune --help` lists them and
// `tune COMMAND --help` gives each one's options (docs/cli.md documents them all).
//
// Exit codes: 0 ok, 1 runtime failure, 2 usage or config error, 130 interrupted.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "app.h"
#include "commands.h"
#include "torch_loader.h"
#include "util/text.h"

namespace {

int SetLogLevel(const std::string& level) {
  const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
  auto lvl = spdlog::level::from_str(level);
  if (std::find(levels.begin(), levels.end(), level) == levels.end()) {
    std::cerr << "tune: unknown --log-level '" << level << "'" << tune::DidYouMean(level, levels)
              << "; valid: " << tune::JoinNames(levels) << "\n";
    return tune::app::kExitUsage;
  }
  spdlog::set_level(lvl);
  return tune::app::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  tune::app::StartRunClock();
  auto logger = spdlog::stderr_color_mt("tune");
  spdlog::set_default_logger(logger);
  tune::app::SetLogPattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");

  CLI::App app{
      "tune: hyperparameter studies with an in-process GPU memory guard.\n"
      "Runs the study NAME from configs/NAME.json (or --config), or manages stored "
      "studies with a subcommand.",
      "tune"};
  app.set_version_flag("--version", [] {
    return std::string("tune ") + TUNE_VERSION + "\n" + tune::app::TorchVersionText();
  });
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  // The table's rows: the study run on the top-level command, then one subcommand each.
  std::string log_level = "info";
  std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
  for (const tune::app::Command& c : tune::app::Commands()) {
    CLI::App* command = *c.name == '\0' ? &app : app.add_subcommand(c.name, c.help);
    if (*c.help == '\0') command->group("");  // internal: not in --help
    commands.emplace_back(command, c.declare(*command));
    command->add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tune: " << e.what() << "\nRun 'tune --help' for usage.\n";
    return tune::app::kExitUsage;
  }
  if (int rc = SetLogLevel(log_level); rc != 0) return rc;

  try {
    for (size_t i = 1; i < commands.size(); ++i) {
      if (commands[i].first->parsed()) return commands[i].second();
    }
    const int rc = commands.front().second();  // no subcommand: run the study
    // Everything of the run (storage, trainer) is released by now.
    return rc == tune::app::kExitRestart ? tune::app::Restart(argv) : rc;
  } catch (const std::exception& e) {
    spdlog::critical("internal error: {}", e.what());
    return tune::app::kExitFailure;
  }
}

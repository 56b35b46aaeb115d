// `tune run-trial` (hidden): one trial of a train study in a child process, for a parent `tune`
// running several trials at once (--jobs). The parent alone owns the study: this process runs
// the objective against a RemoteTrialHandle that forwards reports, pruning questions and
// attributes over stdout/stdin (objectives/trial_protocol.h), within the device_memory the
// parent reserved for it. Its logs go to stderr, which the parent logs.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>

#include "app.h"
#include "commands.h"
#include "config/config.h"
#include "memory/cards.h"
#include "memory/simulated_card.h"
#include "objectives/trial_protocol.h"
#include "torch_loader.h"
#include "util/interrupt.h"

namespace tune::app {
namespace {

struct RunTrialArgs {
  std::string config;
  std::string study;
  int64_t trial_number = 0;
  std::string params;                    // JSON object
  std::string plan;                      // JSON object: the parent's admission
  std::optional<int64_t> device_memory;  // bytes: the parent's reservation; unset: none
  std::string device = "cpu";
  int64_t oom_retry = 0;
  std::string save_best;        // the parent's --save-best (staged here, promoted by the parent)
  std::optional<int64_t> card;  // --jobs over several cards: this trial's (memory/cards.h)
};

extern "C" void OnChildSignal(int sig) { RequestInterrupt(sig); }

Result<StudyConfig> ChildConfig(const RunTrialArgs& args) {
  TUNE_ASSIGN_OR_RETURN(StudyConfig config, LoadStudyConfig(args.config));
  if (config.objective.type != ObjectiveType::kTrain) {
    return InvalidArgumentError(args.config + ": run-trial runs train objectives only");
  }
  TrainObjectiveOptions& train = config.objective.train;
  if (args.card) {
    // The parent narrowed CUDA_VISIBLE_DEVICES to the card; a simulated card is named here.
    GuardOptions& guard = train.guard;
    if (guard.simulate) {
      TUNE_ASSIGN_OR_RETURN(Cards cards, Cards::Resolve(train.device, guard));
      if (*args.card < 0 || static_cast<size_t>(*args.card) >= cards.size()) {
        return InvalidArgumentError(
            fmt::format("--card {}: the config has {} card(s)", *args.card, cards.size()));
      }
      guard = cards.GuardFor(static_cast<size_t>(*args.card), guard);
    } else if (!guard.card_memory.empty()) {
      guard.device_memory = guard.card_memory.at(static_cast<size_t>(*args.card));
    }
    guard.card_memory.clear();
    guard.devices.clear();
  }
  if (train.guard.simulate) {  // the whole card, before device_memory becomes this trial's budget
    TUNE_RETURN_IF_ERROR(
        SetProcessSimulatedCard(*train.guard.simulate, *train.guard.device_memory));
  }
  train.device = args.device;
  train.guard.oom_retry = args.oom_retry;
  if (!args.save_best.empty()) train.save_best = args.save_best;
  if (args.device_memory) train.guard.device_memory = args.device_memory;
  TUNE_ASSIGN_OR_RETURN(Json plan, ParseJsonArgument("--plan", args.plan));
  train.planned = plan;
  return config;
}

int RunTrial(const RunTrialArgs& args) {
  SetLogPattern("[%l] %v");
  std::signal(SIGINT, OnChildSignal);
  std::signal(SIGTERM, OnChildSignal);
  auto config = ChildConfig(args);
  if (!config.ok()) return Fail(config.status());
  auto params = ParseJsonArgument("--params", args.params);
  if (!params.ok()) return Fail(params.status());
  auto trainer = LoadTrainer(config->objective.train.device, config->objective.train.threads,
                             args.device_memory);
  if (!trainer.ok()) return Fail(trainer.status());
  auto objective = MakeObjective(*config, std::move(trainer).value());
  if (!objective.ok()) return Fail(objective.status());
  RemoteTrialHandle trial(args.trial_number, args.study, std::cin, std::cout);
  auto outcome = (*objective)->Run(trial, *params);
  if (!outcome.ok() && outcome.status().code() == StatusCode::kDeviceLost) {
    // The trial fails with its error; this process, whose CUDA context it poisoned, ends with it
    // and the parent's study goes on.
    outcome = TrialOutcome{TrialState::kFail, {}, outcome.status().message()};
  }
  if (!outcome.ok()) return Fail(outcome.status());
  if (Status s = trial.SendOutcome(*outcome); !s.ok()) return Fail(s);
  return kExitOk;
}

}  // namespace

std::function<int()> DeclareRunTrial(CLI::App& command) {
  auto args = std::make_shared<RunTrialArgs>();
  command.add_option("--config", args->config, "Study config file")->required();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--trial-number", args->trial_number, "The trial's number")->required();
  command.add_option("--params", args->params, "The trial's params (JSON)")->required();
  command.add_option("--plan", args->plan, "The parent's admission (JSON)")->required();
  command.add_option("--device-memory", args->device_memory,
                     "The memory this trial may use, in bytes (its reservation)");
  command.add_option("--device", args->device, "cpu, cuda or cuda:N");
  command.add_option("--oom-retry", args->oom_retry, "Retries after an out-of-memory error");
  command.add_option("--save-best", args->save_best, "The study's best-model directory");
  command.add_option("--card", args->card, "The card of several it runs on (--jobs)");
  return [args] { return RunTrial(*args); };
}

}  // namespace tune::app

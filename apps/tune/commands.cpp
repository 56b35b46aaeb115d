#include "commands.h"

namespace tune::app {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"", "Run (or resume) the study NAME", DeclareRun},
      {"studies", "List the studies in a storage", DeclareStudies},
      {"trials", "List the trials of a study", DeclareTrials},
      {"best-trial", "Show the best trial of a study", DeclareBestTrial},
      {"delete-study", "Delete a study and all its trials", DeclareDeleteStudy},
      {"enqueue", "Add a WAITING trial with fixed params; workers run it before new ones",
       DeclareEnqueue},
      {"export", "Write every trial of a study as CSV (Optuna's trials_dataframe) or JSON",
       DeclareExport},
      {"estimate",
       "Predict a configuration's peak memory; --max-batch: the largest batch that fits",
       DeclareEstimate},
      {"plan",
       "Will these models and N parallel requests fit on the device? --suggest: what to change",
       DeclarePlan},
      {"init", "Write a study config for the checkpoints in the Hugging Face cache (--from-cache)",
       DeclareInit},
      {"predict", "Label texts with a model saved by --save-best; prints the metric when labelled",
       DeclarePredict},
      {"best-trials", "Show the trials on the Pareto front of a (multi-objective) study",
       DeclareBestTrials},
      {"create-study", "Create a new study (Optuna's create-study)", DeclareCreateStudy},
      {"ask", "Start a trial and print its number and params as JSON (Optuna's ask)", DeclareAsk},
      {"tell", "Finish a trial started by ask with its values or state (Optuna's tell)",
       DeclareTell},
      {"summary", "Trials by outcome and time, memory estimate error, levers, best trial",
       DeclareSummary},
      {"report", "Write one self-contained HTML page of a study's charts (offline)", DeclareReport},
      {"python-path", "Print the directory of tune_trial.py, the module for training scripts",
       DeclarePythonPath},
      {"completion", "Print the bash completion script: source <(tune completion bash)",
       DeclareCompletion},
      {"man", "", DeclareManPage},         // hidden: writes tune.1 at build time
      {"run-trial", "", DeclareRunTrial},  // hidden: a child of --jobs
  };
  return kCommands;
}

}  // namespace tune::app

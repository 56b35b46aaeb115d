// tune: hyperparameter studies with an in-process GPU memory guard.
//
//   tune --study NAME [--config FILE] [--n-trials N] [--timeout S] [--storage URL]
//        [--sampler NAME] [--seed N] [--log-level L] [--format table|json|csv]
//   tune studies    [--storage URL] [--format ...]
//   tune trials     --study NAME [--storage URL] [--state S]... [--format ...]
//   tune best-trial --study NAME [--storage URL] [--format ...]
//   tune delete-study --study NAME [--storage URL]
//   tune enqueue    --study NAME --params JSON [--storage URL] [--format ...]
//   tune export     --study NAME [--format csv|json] [--output FILE] [--storage URL]
//   tune estimate   --model M [--batch-size B --max-length T ...] [--device-memory SIZE]
//                   [--max-batch] [--measure] [--format ...]
//
// Exit codes: 0 ok, 1 runtime failure, 2 usage or config error, 130 interrupted.
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "app.h"
#include "tune/text.h"

namespace {

int SetLogLevel(const std::string& level) {
  const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
  auto lvl = spdlog::level::from_str(level);
  if (std::find(levels.begin(), levels.end(), level) == levels.end()) {
    std::cerr << "tune: unknown --log-level '" << level << "'"
              << tune::DidYouMean(level, levels) << "; valid: " << tune::JoinNames(levels) << "\n";
    return tune::app::kExitUsage;
  }
  spdlog::set_level(lvl);
  return tune::app::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  auto logger = spdlog::stderr_color_mt("tune");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");

  CLI::App app{"tune: hyperparameter studies with an in-process GPU memory guard.\n"
               "Runs the study NAME from configs/NAME.json (or --config), or manages stored "
               "studies with a subcommand.",
               "tune"};
  app.set_version_flag("--version", "tune 0.1.0");
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  tune::app::RunArgs run;
  std::string log_level = "info";
  app.add_option("--study", run.study, "Study name (and configs/NAME.json by default)");
  app.add_option("--config", run.config, "Study config file (default: configs/NAME.json)");
  app.add_option("--n-trials", run.n_trials,
                 "Stop when the study holds N finished trials (resumes count earlier runs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", run.timeout, "Stop starting trials after S seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--storage", run.storage,
                 "Storage URL: sqlite:///PATH[?schema=v3.0.0.d], "
                 "postgresql://USER[:PASSWORD]@HOST[:PORT]/DB or memory (default: the "
                 "config's storage, else sqlite:///tune.db)");
  app.add_option("--sampler", run.sampler, "Sampler name (random, tpe)");
  app.add_option("--seed", run.seed, "Sampler seed (reproducible runs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heartbeat-interval", run.heartbeat_interval,
                 "Seconds between heartbeats of a running trial; 0: off (default: the config's "
                 "heartbeat_interval, else 60)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--grace-period", run.grace_period,
                 "RUNNING trials without a heartbeat for this long are failed as stale "
                 "(default: the config's grace_period, else 2 x the heartbeat interval)")
      ->check(CLI::PositiveNumber);
  app.add_option("--retry-failed", run.retry_failed,
                 "Re-enqueue a stale trial with the same params up to K times (default: the "
                 "config's retry_failed, else 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", run.device,
                 "train objective: the device trials train on, cpu, cuda or cuda:N (default: the "
                 "config's objective.device, else cpu)");
  app.add_option("--device-memory", run.device_memory,
                 "train objective: the memory trials may use, e.g. 24GiB (on CPU a simulated "
                 "card; on CUDA at most the card); default: the config's memory.device_memory");
  app.add_option("--oom-retry", run.oom_retry,
                 "train objective: retry a trial that runs out of memory up to K times at half "
                 "the micro-batch and twice the accumulation (default: the config's "
                 "memory.oom_retry, else 0)")
      ->check(CLI::Range(0, 10));
  app.add_option("--format", run.format, "Output of the best trial: table, json or csv");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off");

  tune::app::ShowArgs studies_args, trials_args, best_args;
  const std::string storage_help =
      "Storage URL: sqlite:///PATH, postgresql://USER@HOST[:PORT]/DB or memory (default: "
      "sqlite:///tune.db); opened read-only";
  auto* studies = app.add_subcommand("studies", "List the studies in a storage");
  studies->add_option("--storage", studies_args.storage, storage_help);
  studies->add_option("--format", studies_args.format, "table, json or csv");

  auto* trials = app.add_subcommand("trials", "List the trials of a study");
  trials->add_option("--study", trials_args.study, "Study name")->required();
  trials->add_option("--storage", trials_args.storage, storage_help);
  trials->add_option("--state", trials_args.states,
                     "Only trials in this state (RUNNING, COMPLETE, PRUNED, FAIL, WAITING)");
  trials->add_option("--format", trials_args.format, "table, json or csv");

  auto* best = app.add_subcommand("best-trial", "Show the best trial of a study");
  best->add_option("--study", best_args.study, "Study name")->required();
  best->add_option("--storage", best_args.storage, storage_help);
  best->add_option("--format", best_args.format, "table, json or csv");

  tune::app::DeleteStudyArgs delete_args;
  auto* del = app.add_subcommand("delete-study", "Delete a study and all its trials");
  del->add_option("--study", delete_args.study, "Study name")->required();
  del->add_option("--storage", delete_args.storage,
                  "Storage URL: sqlite:///PATH (default: sqlite:///tune.db); never created");

  tune::app::EnqueueArgs enqueue_args;
  auto* enqueue = app.add_subcommand(
      "enqueue", "Add a WAITING trial with fixed params; workers run it before new ones");
  enqueue->add_option("--study", enqueue_args.study, "Study name")->required();
  enqueue
      ->add_option("--params", enqueue_args.params,
                   "The parameter values, a JSON object: '{\"x\": 1.5, \"opt\": \"adam\"}'")
      ->required();
  enqueue->add_option("--storage", enqueue_args.storage,
                      "Storage URL: sqlite:///PATH (default: sqlite:///tune.db); never created");
  enqueue->add_option("--format", enqueue_args.format, "table, json or csv");

  tune::app::ExportArgs export_args;
  auto* exp = app.add_subcommand(
      "export", "Write every trial of a study as CSV (Optuna's trials_dataframe) or JSON");
  exp->add_option("--study", export_args.study, "Study name")->required();
  exp->add_option("--format", export_args.format, "csv (default) or json");
  exp->add_option("--output", export_args.output, "Write to FILE instead of stdout");
  exp->add_option("--storage", export_args.storage, storage_help);

  tune::app::EstimateArgs est;
  auto* estimate = app.add_subcommand(
      "estimate", "Predict a configuration's peak memory; --max-batch: the largest batch that fits");
  estimate->add_option("--model", est.model, "Catalog model (or 'mlp' with --num-features)")
      ->required();
  estimate->add_option("--catalog", est.catalog, "A model catalog file merged into the built-in one");
  estimate->add_option("--architecture", est.architecture,
                       "encoder (classifier, default) or decoder (GPT-2-style LM)");
  estimate->add_option("--batch-size", est.batch_size, "Micro-batch size")->check(CLI::PositiveNumber);
  estimate->add_option("--max-length", est.max_length, "Tokens per example")
      ->check(CLI::PositiveNumber);
  estimate->add_option("--max-lengths", est.max_lengths,
                       "--max-batch: sequence lengths to tabulate (default 64..2048 up to the model's)")
      ->delimiter(',');
  estimate->add_option("--grad-accum", est.grad_accum, "Micro-batches per optimizer step")
      ->check(CLI::PositiveNumber);
  estimate->add_option("--eval-batch-size", est.eval_batch_size, "Evaluation batch (default: batch size)");
  estimate->add_option("--precision", est.precision, "fp32, bf16, fp16 (autocast) or pure_bf16");
  estimate->add_flag("--gradient-checkpointing", est.gradient_checkpointing,
                     "Recompute each layer in backward");
  estimate->add_option("--optimizer", est.optimizer, "adamw or sgd");
  estimate->add_option("--momentum", est.momentum, "SGD momentum (0: no buffer)");
  estimate->add_option("--weight-decay", est.weight_decay, "Weight decay");
  estimate->add_option("--dropout", est.dropout, "Dropout probability (0: no dropout masks)");
  estimate->add_option("--num-labels", est.num_labels, "Classifier outputs")->check(CLI::PositiveNumber);
  estimate->add_option("--classifier-layers", est.classifier_layers, "Hidden layers in the head (0-3)");
  estimate->add_option("--classifier-hidden", est.classifier_hidden,
                       "Their width (default: the model's hidden size)");
  estimate->add_option("--num-features", est.num_features, "MLP input features");
  estimate->add_option("--mlp-layers", est.mlp_layers, "MLP hidden layers");
  estimate->add_option("--mlp-hidden", est.mlp_hidden, "MLP hidden width");
  estimate->add_flag("--eval-only", est.eval_only, "Evaluation only: no gradients or optimizer");
  estimate->add_option("--device", est.device, "cuda (caching allocator, context; default) or cpu");
  estimate->add_option("--device-memory", est.device_memory,
                       "Memory the run may use, e.g. 24GiB: says whether it fits");
  estimate->add_option("--margin", est.margin, "Safety margin as a share of --device-memory (0.05)");
  estimate->add_flag("--max-batch", est.max_batch,
                     "Print the largest batch that fits --device-memory per sequence length");
  estimate->add_option("--batch-limit", est.batch_limit, "--max-batch: largest batch tried (4096)")
      ->check(CLI::PositiveNumber);
  estimate->add_flag("--measure", est.measure,
                     "Also run the configuration on CPU under the counting allocator and print "
                     "the measured peak");
  estimate->add_option("--measure-steps", est.measure_steps, "--measure: optimizer steps (>= 2)");
  estimate->add_option("--threads", est.threads, "--measure: CPU threads (0: all)");
  estimate->add_option("--format", est.format, "table, json or csv");

  for (auto* sub : {studies, trials, best, del, enqueue, exp, estimate}) {
    sub->add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
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
    if (studies->parsed()) return tune::app::ListStudies(studies_args);
    if (trials->parsed()) return tune::app::ListTrials(trials_args);
    if (best->parsed()) return tune::app::ShowBestTrial(best_args);
    if (del->parsed()) return tune::app::DeleteStudy(delete_args);
    if (estimate->parsed()) return tune::app::Estimate(est);
    if (enqueue->parsed()) return tune::app::Enqueue(enqueue_args);
    if (exp->parsed()) return tune::app::ExportStudy(export_args);
    if (run.study.empty()) {
      std::cerr << "tune: --study NAME is required to run a study\nRun 'tune --help' for usage.\n";
      return tune::app::kExitUsage;
    }
    return tune::app::RunStudy(run);
  } catch (const std::exception& e) {
    spdlog::critical("internal error: {}", e.what());
    return tune::app::kExitFailure;
  }
}

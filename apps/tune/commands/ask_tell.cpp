// Optuna's shell verbs: `tune create-study`, `tune ask`, `tune tell`. A shell script or a
// Makefile drives a study with them, one process per step, on a shared storage:
//
//   tune create-study --study-name s --storage sqlite:///s.db --direction minimize
//   trial=$(tune ask --study-name s --storage sqlite:///s.db --search-space '{...}')
//   ... run something with the params ...
//   tune tell --study-name s --storage sqlite:///s.db --trial-number N --values 0.25
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>
#include <random>

#include "app.h"
#include "commands.h"
#include "config/config.h"
#include "study/study_defaults.h"
#include "tune/study.h"
#include "util/text.h"

namespace tune::app {
namespace {

struct CreateStudyArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  std::optional<std::string> direction;
  std::vector<std::string> directions;
  bool skip_if_exists = false;
};

struct AskArgs {
  std::string storage = kDefaultStorage;
  bool storage_given = false;
  std::string study;
  std::optional<std::string> search_space;
  std::optional<std::string> config;
  std::optional<std::string> sampler;
  std::optional<std::string> sampler_kwargs;
  std::optional<int64_t> seed;
  std::string format = "json";
};

struct TellArgs {
  std::string storage = kDefaultStorage;
  std::string study;
  int64_t trial_number = -1;
  std::vector<std::string> values;
  std::optional<std::string> state;
  bool skip_if_finished = false;
};

// Optuna's default study name: "no-name-" and a random UUID.
std::string NoNameStudy() {
  std::random_device rd;
  std::string hex;
  for (int i = 0; i < 4; ++i) hex += fmt::format("{:08x}", rd());
  return fmt::format("no-name-{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4),
                     hex.substr(12, 4), hex.substr(16, 4), hex.substr(20, 12));
}

Result<std::vector<StudyDirection>> ParseDirections(const CreateStudyArgs& args) {
  if (args.direction && !args.directions.empty()) {
    return InvalidArgumentError("give --direction or --directions, not both");
  }
  std::vector<std::string> names = args.directions;
  if (args.direction) names = {*args.direction};
  if (names.empty()) names = {"minimize"};
  std::vector<StudyDirection> out;
  for (const std::string& n : names) {
    auto d = ParseStudyDirection(n);
    if (!d.ok() || *d == StudyDirection::kNotSet) {
      return InvalidArgumentError(
          fmt::format("--direction: unknown direction '{}'{}; valid: "
                      "minimize, maximize",
                      n, DidYouMean(n, {"minimize", "maximize"})));
    }
    out.push_back(*d);
  }
  return out;
}

int CreateStudy(CreateStudyArgs args) {
  auto directions = ParseDirections(args);
  if (!directions.ok()) return Fail(directions.status());
  if (args.study.empty()) args.study = NoNameStudy();
  auto storage = OpenStorage(args.storage, StorageAccess::kReadWrite);
  if (!storage.ok()) return Fail(storage.status());
  auto created = (*storage)->CreateStudy(args.study, *directions);
  if (!created.ok() && created.status().code() == StatusCode::kAlreadyExists &&
      args.skip_if_exists) {
    auto id = (*storage)->GetStudyId(args.study);
    if (!id.ok()) return Fail(id.status());
    auto info = (*storage)->GetStudy(*id);
    if (!info.ok()) return Fail(info.status());
    if (info->directions != *directions) {
      return Fail(InvalidArgumentError(
          fmt::format("study '{}' exists with direction(s) {}, not {}", args.study,
                      StudyDirectionsText(info->directions), StudyDirectionsText(*directions))));
    }
    spdlog::info("Study '{}' exists in {}; skipped (--skip-if-exists)", args.study,
                 (*storage)->url());
  } else if (!created.ok()) {
    return Fail(created.status().code() == StatusCode::kAlreadyExists
                    ? AlreadyExistsError(created.status().message() +
                                         " (--skip-if-exists: use it as it is)")
                    : created.status());
  } else {
    spdlog::info("Created study '{}' ({}) in {}", args.study, StudyDirectionsText(*directions),
                 (*storage)->url());
  }
  std::cout << args.study << "\n";
  return kExitOk;
}

// Optuna's sampler class names for --sampler, besides tune's own names.
std::string SamplerName(const std::string& name) {
  if (name == "TPESampler") return "tpe";
  if (name == "RandomSampler") return "random";
  if (name == "NSGAIISampler") return "nsgaii";
  return name;
}

// --search-space: Optuna's form (each value a distribution_to_json object, as `optuna ask`
// takes) or tune's config form ({"x": {"type": "float", "low": 0, "high": 1}}).
Result<ConditionalSpace> ParseAskSpace(const std::string& text) {
  TUNE_ASSIGN_OR_RETURN(Json j, ParseJsonArgument("--search-space", text));
  if (!j.is_object()) {
    return InvalidArgumentError("--search-space must be a JSON object of parameter names");
  }
  bool optuna_form = !j.empty();
  for (const auto& [name, v] : j.items()) {
    optuna_form = optuna_form && v.is_object() && v.contains("name") && v.contains("attributes");
  }
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  if (!optuna_form) return ParseSearchSpace(j, Json(), std::move(catalog), "--search-space");
  SpaceBlock root;
  for (const auto& [name, v] : j.items()) {
    auto d = DistributionFromJson(v.dump());
    if (!d.ok()) return d.status().WithContext("--search-space: '" + name + "'");
    root.params.push_back(ParamSpec{name, *d, false});
  }
  return ConditionalSpace(std::move(root), std::move(catalog));
}

struct AskSetup {
  std::string storage;
  SamplerConfig sampler;
  ConditionalSpace space;
  std::optional<std::vector<StudyDirection>> directions;  // --config: create the study
};

Result<AskSetup> PrepareAsk(const AskArgs& args) {
  if (args.config && args.search_space) {
    return InvalidArgumentError("give --search-space or --config, not both");
  }
  AskSetup setup;
  setup.storage = args.storage;
  setup.sampler.name = "tpe";  // Optuna's default sampler, tune ask's always
  setup.sampler.named = true;
  setup.sampler.source = "--sampler";
  if (args.config) {
    TUNE_ASSIGN_OR_RETURN(StudyConfig config, LoadStudyConfig(*args.config));
    if (!args.storage_given) setup.storage = config.storage;
    setup.sampler = config.sampler;
    setup.space = config.space;
    setup.directions = config.directions;
  } else if (args.search_space) {
    TUNE_ASSIGN_OR_RETURN(setup.space, ParseAskSpace(*args.search_space));
  }
  if (args.sampler) {
    setup.sampler.name = SamplerName(*args.sampler);
    setup.sampler.named = true;
    setup.sampler.options = Json::object();
    setup.sampler.source = "--sampler";
  }
  if (args.sampler_kwargs) {
    TUNE_ASSIGN_OR_RETURN(Json kwargs, ParseJsonArgument("--sampler-kwargs", *args.sampler_kwargs));
    if (!kwargs.is_object()) return InvalidArgumentError("--sampler-kwargs must be a JSON object");
    if (kwargs.contains("seed") && kwargs["seed"].is_number_unsigned()) {
      setup.sampler.seed = kwargs["seed"].get<uint64_t>();
    }
    kwargs.erase("seed");
    setup.sampler.options.update(kwargs);
    setup.sampler.source = "--sampler-kwargs";
  }
  if (args.seed) setup.sampler.seed = static_cast<uint64_t>(*args.seed);
  return setup;
}

// The study's rules (study_defaults.h) complete the sampler; recorded on the study once it opens.
Result<std::unique_ptr<Study>> OpenAskStudy(const AskArgs& args, AskSetup setup) {
  std::shared_ptr<Storage> storage;
  if (setup.directions) {
    TUNE_ASSIGN_OR_RETURN(storage, OpenStorage(setup.storage));
  } else {
    TUNE_ASSIGN_OR_RETURN(storage, OpenStorage(setup.storage, StorageAccess::kExisting));
  }
  TUNE_ASSIGN_OR_RETURN(StudyDefaults rules,
                        ResolveStudyDefaults(*storage, args.study, setup.sampler));
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler, MakeSampler(setup.sampler));
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Pruner> pruner, MakePruner(PrunerConfig{}));
  Result<std::unique_ptr<Study>> study =
      setup.directions
          ? Study::CreateOrLoad(storage, args.study, *setup.directions, std::move(sampler),
                                std::move(pruner), setup.sampler.seed)
          : Study::Load(storage, args.study, std::move(sampler), std::move(pruner),
                        setup.sampler.seed);
  if (!study.ok() && study.status().code() == StatusCode::kNotFound) {
    return NotFoundError(study.status().message() + "; create it first with 'tune create-study'");
  }
  if (study.ok()) {
    TUNE_RETURN_IF_ERROR(RecordStudyDefaults(*storage, (*study)->study_id(), rules));
  }
  return study;
}

int Ask(const AskArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto setup = PrepareAsk(args);
  if (!setup.ok()) return Fail(setup.status());
  auto study = OpenAskStudy(args, *setup);
  if (!study.ok()) return Fail(study.status());
  auto trial = (*study)->Ask();
  if (!trial.ok()) return Fail(trial.status());
  auto params = setup->space.Sample(**trial);
  if (!params.ok()) {
    // Leave no RUNNING trial behind that nobody will tell.
    (void)(*study)->Tell(**trial, TrialState::kFail);
    return Fail(params.status());
  }
  spdlog::info("Asked trial {} of study '{}' with params {}", (*trial)->number(), args.study,
               (*trial)->params().dump());
  const Json out = {{"number", (*trial)->number()}, {"params", (*trial)->params()}};
  if (*format == Format::kJson) {
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"number"}, {std::to_string((*trial)->number())}};
  for (const auto& [name, v] : out["params"].items()) {
    rows[0].push_back("params_" + name);
    rows[1].push_back(v.is_string() ? v.get<std::string>() : v.dump());
  }
  std::cout << (*format == Format::kCsv ? RenderCsv(rows) : RenderTable(rows));
  return kExitOk;
}

Result<double> ParseValue(const std::string& text) {
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "+inf" || lower == "infinity") return HUGE_VAL;
  if (lower == "-inf" || lower == "-infinity") return -HUGE_VAL;
  if (lower == "nan") return std::nan("");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    return InvalidArgumentError(fmt::format("--values: '{}' is not a number", text));
  }
  return v;
}

// The state and values `tune tell` was given, checked as Optuna's tell checks them.
Result<std::pair<TrialState, std::vector<double>>> ParseTell(const TellArgs& args) {
  TrialState state = TrialState::kComplete;
  if (args.state) {
    const std::vector<std::string> valid = {"complete", "pruned", "fail"};
    auto s = ParseTrialState(*args.state);
    if (!s.ok() || !IsFinished(*s)) {
      return InvalidArgumentError(fmt::format("--state: unknown state '{}'{}; valid: {}",
                                              *args.state, DidYouMean(*args.state, valid),
                                              JoinNames(valid)));
    }
    state = *s;
  }
  std::vector<double> values;
  for (const std::string& v : args.values) {
    TUNE_ASSIGN_OR_RETURN(double d, ParseValue(v));
    values.push_back(d);
  }
  if (state == TrialState::kComplete && values.empty()) {
    return InvalidArgumentError(
        "--values V... is required for a COMPLETE trial (or give "
        "--state pruned or --state fail)");
  }
  if (state != TrialState::kComplete && !values.empty()) {
    return InvalidArgumentError(fmt::format(
        "--values is for COMPLETE trials; a {} trial takes none (PRUNED stores its last "
        "intermediate value)",
        TrialStateName(state)));
  }
  return std::make_pair(state, values);
}

int Tell(const TellArgs& args) {
  auto parsed = ParseTell(args);
  if (!parsed.ok()) return Fail(parsed.status());
  auto [state, values] = *parsed;
  auto opened = OpenStoredStudy(args.storage, args.study, StorageAccess::kExisting);
  if (!opened.ok()) return Fail(opened.status());
  auto study = LoadStoredStudy(*opened, args.study);
  if (!study.ok()) return Fail(study.status());
  auto told = (*study)->TellNumber(args.trial_number, state, values);
  if (!told.ok()) {
    if (args.skip_if_finished && told.status().code() == StatusCode::kFailedPrecondition) {
      spdlog::info("Trial {} is already finished; skipped (--skip-if-finished)", args.trial_number);
      return kExitOk;
    }
    // Telling a finished or unknown trial is the caller's mistake: a usage error.
    return Fail(told.status().code() == StatusCode::kFailedPrecondition
                    ? InvalidArgumentError(told.status().message())
                    : told.status());
  }
  spdlog::info("Told trial {} of study '{}': {}{}", told->number, args.study,
               TrialStateName(told->state),
               told->values.empty() ? "" : " value(s) " + ValueText(*told));
  return kExitOk;
}

}  // namespace

std::function<int()> DeclareCreateStudy(CLI::App& command) {
  auto args = std::make_shared<CreateStudyArgs>();
  command.add_option("--study,--study-name", args->study,
                     "Study name (default: Optuna's 'no-name-' and a UUID)");
  command.add_option("--storage", args->storage,
                     "Storage URL: sqlite:///PATH, postgresql://... or memory (default: "
                     "sqlite:///tune.db); created if missing");
  command.add_option("--direction", args->direction, "minimize (default) or maximize");
  command.add_option("--directions", args->directions,
                     "One direction per objective, for a multi-objective study");
  command.add_flag("--skip-if-exists", args->skip_if_exists,
                   "A study of that name (with the same directions) is used as it is");
  return [args] { return CreateStudy(*args); };
}

std::function<int()> DeclareAsk(CLI::App& command) {
  auto args = std::make_shared<AskArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage,
                     "Storage URL (default: the --config's storage, else sqlite:///tune.db); "
                     "never created");
  command.add_option(
      "--search-space", args->search_space,
      "The parameters, a JSON object: Optuna's distribution JSON per name, or "
      "tune's config form ({\"x\": {\"type\": \"float\", \"low\": 0, \"high\": 1}})");
  command.add_option("--config", args->config,
                     "A study config: its search space (conditional blocks included), sampler, "
                     "storage and directions (the study is created if missing)");
  command.add_option("--sampler", args->sampler,
                     "Sampler: " + JoinNames(SamplerNames()) +
                         ", or Optuna's TPESampler, RandomSampler, NSGAIISampler (default: tpe)");
  command.add_option("--sampler-kwargs", args->sampler_kwargs,
                     "The sampler's options as a JSON object, e.g. '{\"n_startup_trials\": 5}'");
  command
      .add_option("--seed", args->seed,
                  "Sampler seed (each trial's draw depends on it and "
                  "the trial number)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--format", args->format, "json (default: one line), table or csv");
  return [args, &command] {
    args->storage_given = command.count("--storage") > 0;
    return Ask(*args);
  };
}

std::function<int()> DeclareTell(CLI::App& command) {
  auto args = std::make_shared<TellArgs>();
  command.add_option("--study,--study-name", args->study, "Study name")->required();
  command.add_option("--storage", args->storage,
                     "Storage URL (default: sqlite:///tune.db); never created");
  command.add_option("--trial-number", args->trial_number, "The trial `tune ask` started")
      ->required()
      ->check(CLI::NonNegativeNumber);
  command.add_option(
      "--values", args->values,
      "Objective values (one per objective; inf, -inf allowed; nan fails the trial)");
  command.add_option("--state", args->state, "complete (default with --values), pruned or fail");
  command.add_flag("--skip-if-finished", args->skip_if_finished,
                   "A trial that is already finished is left as it is, without an error");
  return [args] { return Tell(*args); };
}

}  // namespace tune::app

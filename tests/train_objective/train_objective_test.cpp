// The train objective with a scripted trainer: params, reports, early stopping, pruning, OOM and
// failure outcomes, and the config keys. The LibTorch trainer is tested in tests/torch/.
#include "train_objective/train_objective.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "config/config.h"
#include "testing/scripted_trainer.h"
#include "testing/temp_dir.h"
#include "train_objective/trainer_defaults.h"
#include "tune/pruners/threshold.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

using testing::ScriptedTrainer;

class TrainObjectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream train(dir_.path() / "train.jsonl");
    for (int i = 0; i < 20; ++i) {
      train << Json{{"text", i % 2 ? "good fine great" : "bad awful poor"},
                    {"label", i % 2 ? "pos" : "neg"}}
                   .dump()
            << "\n";
    }
    std::ofstream val(dir_.path() / "val.jsonl");
    val << R"({"text": "great", "label": "pos"})"
        << "\n"
        << R"({"text": "poor", "label": "neg"})"
        << "\n";
  }

  // A config with the given objective keys and search space.
  Result<StudyConfig> Config(const Json& objective, const Json& space,
                             const std::string& direction = "maximize") {
    Json doc = {{"direction", direction}, {"search_space", space}, {"objective", objective}};
    return ParseStudyConfig(doc, "study.json", dir_.path());
  }
  Json TrainJson(Json extra = Json::object()) {
    Json o = {{"type", "train"},
              {"data", {{"train", "train.jsonl"}, {"validation", "val.jsonl"}}},
              {"model", "prajjwal1/bert-tiny"},
              {"init", "scratch"}};
    for (const auto& [k, v] : extra.items()) o[k] = v;
    return o;
  }

  std::unique_ptr<Study> NewStudy(std::unique_ptr<Pruner> pruner = std::make_unique<NopPruner>()) {
    return std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMaximize},
                                         std::make_unique<RandomSampler>(), std::move(pruner), 1))
        .value();
  }

  // Runs one trial with `params`; returns the outcome and the finished trial.
  std::pair<TrialOutcome, FrozenTrial> RunTrial(Study& study, Objective& objective,
                                                const Json& params) {
    auto trial = std::move(study.Ask()).value();
    for (const auto& [k, v] : params.items()) {
      std::vector<Json> choice = {v};
      EXPECT_TRUE(trial->Suggest(k, *MakeCategoricalDistribution(choice)).ok());
    }
    auto outcome = objective.Run(*trial, trial->params());
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    auto frozen = study.Tell(*trial, outcome->state, outcome->values);
    EXPECT_TRUE(frozen.ok()) << frozen.status().ToString();
    return {*outcome, *frozen};
  }

  testing::TempDir dir_;
};

TEST_F(TrainObjectiveTest, MemoryGuardOptionsParseWithUnitsAndRanges) {
  const Json space = {{"learning_rate", {{"type", "float"}, {"low", 1e-4}, {"high", 1e-2}}}};
  const Json memory = {{"device_memory", "24GiB"},
                       {"margin", 0.1},
                       {"levers", {"gradient_checkpointing"}},
                       {"oom_retry", 2},
                       {"calibrate", false},
                       {"cuda_context", "600MiB"},
                       {"cuda_workspace", 4194304},
                       {"fragmentation", 0.2}};
  auto c = Config(TrainJson({{"memory", memory}}), space);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const GuardOptions& g = c->objective.train.guard;
  EXPECT_EQ(g.device_memory, int64_t{24} << 30);
  EXPECT_EQ(g.margin, 0.1);
  EXPECT_FALSE(g.lever_grad_accum);
  EXPECT_TRUE(g.lever_checkpointing);
  EXPECT_EQ(g.oom_retry, 2);
  EXPECT_FALSE(g.calibrate);
  const DeviceMemoryModel d = CudaDeviceModel(g, 123);
  EXPECT_EQ(d.context_bytes, 600 << 20);  // the config's, not the measurement
  EXPECT_EQ(d.workspace_bytes, 4194304);
  EXPECT_EQ(d.fragmentation, 0.2);
  EXPECT_EQ(CudaDeviceModel(GuardOptions{}, 123).context_bytes, 123);  // measured
  EXPECT_EQ(CudaDeviceModel(GuardOptions{}, -1).context_bytes,
            DeviceMemoryModel::Cuda().context_bytes);

  // estimate_scale: the guard's estimates (CPU and CUDA) are that share of the estimator's.
  auto scaled = Config(TrainJson({{"memory", {{"estimate_scale", 0.7}}}}), space);
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  const GuardOptions& sg = scaled->objective.train.guard;
  EXPECT_EQ(sg.estimate_scale, 0.7);
  MemoryRequest request;
  const ModelCatalog catalog = ModelCatalog::Builtin().value();
  request.model = *catalog.Find("tiny-bert").value();
  const int64_t plain = EstimateMemory(request, DeviceMemoryModel::Cpu())->allocated_peak;
  const int64_t low = EstimateMemory(request, GuardDeviceModel(sg, false, -1))->allocated_peak;
  EXPECT_NEAR(static_cast<double>(low), 0.7 * static_cast<double>(plain), 1.0);
  EXPECT_EQ(GuardDeviceModel(sg, true, 123).correction, 0.7);
  EXPECT_EQ(GuardDeviceModel(sg, true, 123).context_bytes, 123);

  for (const auto& [bad_memory, message] : std::vector<std::pair<Json, std::string>>{
           {{{"device_memory", 0}}, "/objective/memory/device_memory: must be > 0"},
           {{{"device_memory", true}}, "expected a size such as \"24GiB\""},
           {{{"fragmentation", 1.5}}, "/objective/memory/fragmentation: 1.5 must be in [0, 1]"},
           {{{"oom_retry", 11}}, "/objective/memory/oom_retry: 11 must be in [0, 10]"},
           {{{"estimate_scale", 0.1}},
            "/objective/memory/estimate_scale: 0.1 must be in [0.25, 4]"},
           {{{"cuda_context", "-5MiB"}}, "/objective/memory/cuda_context"}}) {
    auto bad = Config(TrainJson({{"memory", bad_memory}}), space);
    ASSERT_FALSE(bad.ok()) << bad_memory.dump();
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status().message();
  }
}

TEST_F(TrainObjectiveTest, TrialParamsOverrideTheObjectivesKeys) {
  auto c = Config(
      TrainJson({{"epochs", 3}, {"lr", 1e-3}, {"batch_size", 4}}),
      {{"learning_rate", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}, {"log", true}}}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.7, 0.6});
  ScriptedTrainer* trainer = scripted.get();
  auto objective = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective.ok()) << objective.status().ToString();
  auto study = NewStudy();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"learning_rate", 3e-4}});
  ASSERT_EQ(trainer->jobs.size(), 1u);
  const TrainJob& job = trainer->jobs[0];
  EXPECT_EQ(job.hp.learning_rate, 3e-4);  // the trial's
  EXPECT_EQ(job.hp.batch_size, 4);        // the objective's
  EXPECT_EQ(job.hp.epochs, 3);
  EXPECT_EQ(job.model.name, "prajjwal1/bert-tiny");
  EXPECT_EQ(job.data->num_labels, 2);
  EXPECT_EQ(job.data->train_ids.size(), 20u);
  EXPECT_EQ(job.data->validation_ids.size(), 2u);
  // The best epoch's value; one report per epoch.
  EXPECT_EQ(outcome.state, TrialState::kComplete);
  EXPECT_EQ(trial.values, std::vector<double>{0.7});
  EXPECT_EQ(trial.intermediate_values.size(), 3u);
  EXPECT_EQ(trial.intermediate_values.at(1), 0.7);
  const Json& train = trial.user_attrs.at("train");
  EXPECT_EQ(train["best_epoch"], 1);
  EXPECT_EQ(train["epochs_run"], 3);
  EXPECT_EQ(train["history"].size(), 3u);
}

// The trainer's defaults a study keeps (trainer_defaults.h): a new study records what precision
// "auto" (the default) and TF32 mean here (on the CPU: fp32); a study that recorded bf16 keeps it
// on resume; explicit keys win; a study with trials from before the record keeps fp32 without
// TF32.
TEST_F(TrainObjectiveTest, AStudyKeepsItsTrainerDefaults) {
  const Json space = {
      {"learning_rate", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}, {"log", true}}}};
  auto run = [&](Study& study, const Json& extra) {
    auto c = Config(TrainJson(extra), space);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return TrainHyperparams{};
    }
    auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5});
    ScriptedTrainer* trainer = scripted.get();
    auto objective = MakeObjective(*c, std::move(scripted));
    EXPECT_TRUE(objective.ok()) << objective.status().ToString();
    RunTrial(study, **objective, {{"learning_rate", 1e-3}});
    EXPECT_EQ(trainer->jobs.size(), 1u);
    return trainer->jobs.empty() ? TrainHyperparams{} : trainer->jobs[0].hp;
  };
  auto record = [](Study& study) {
    auto r = study.storage().GetStudySystemAttr(study.study_id(), "trainer_defaults");
    EXPECT_TRUE(r.ok());
    return r.ok() && *r ? **r : Json();
  };
  // A new study on the CPU: fp32 and TF32 on (TF32 means nothing on the CPU), recorded.
  auto fresh = NewStudy();
  TrainHyperparams hp = run(*fresh, Json::object());
  EXPECT_EQ(hp.precision, Precision::kFp32);
  EXPECT_TRUE(hp.tf32);
  EXPECT_EQ(record(*fresh), (Json{{"precision", "fp32"}, {"tf32", true}, {"attention", "eager"}}));
  // "auto" written out is the default.
  EXPECT_EQ(run(*fresh, {{"precision", "auto"}}).precision, Precision::kFp32);

  // A study whose first run chose bf16 (a card with bf16) keeps it when resumed here.
  auto resumed = NewStudy();
  ASSERT_TRUE(resumed->storage()
                  .SetStudySystemAttr(resumed->study_id(), "trainer_defaults",
                                      Json{{"precision", "bf16"}, {"tf32", false}})
                  .ok());
  hp = run(*resumed, Json::object());
  EXPECT_EQ(hp.precision, Precision::kBf16);
  EXPECT_FALSE(hp.tf32);
  // Explicit keys win over the record.
  hp = run(*resumed, {{"precision", "fp32"}, {"allow_tf32", true}});
  EXPECT_EQ(hp.precision, Precision::kFp32);
  EXPECT_TRUE(hp.tf32);
  EXPECT_EQ(record(*resumed)["precision"], "bf16");  // the record stays

  // Trials from before the record: fp32 without TF32, recorded.
  auto legacy = NewStudy();
  {
    auto trial = std::move(legacy->Ask()).value();
    ASSERT_TRUE(legacy->Tell(*trial, TrialState::kComplete, {0.5}).ok());
  }
  hp = run(*legacy, Json::object());
  EXPECT_EQ(hp.precision, Precision::kFp32);
  EXPECT_FALSE(hp.tf32);
  EXPECT_EQ(record(*legacy)["tf32"], false);

  // "auto" is no choice of a search space, and a typo names it.
  auto bad = Config(TrainJson({{"precision", "fp33"}}), space);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("valid: auto, fp32, bf16, fp16"), std::string::npos)
      << bad.status().message();
}

// bf16 asked of a CUDA card without bfloat16 (compute capability below 8.0: a T4 is 7.5, a V100
// 7.0), as the objective's precision or as a choice of the space, is a config error naming the
// key, the card, its capability and the fix; fp16, fp32 and "auto" pass there, and bf16 passes on
// 8.0. (tune reads the card from NVML before the study starts: cli/train_cli_test.cpp.)
TEST_F(TrainObjectiveTest, Bf16OnACardWithoutBfloat16IsAConfigError) {
  const Json space = {{"learning_rate", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-3}}}};
  const std::pair<int, int> t4{7, 5};
  auto bf16 = Config(TrainJson({{"device", "cuda"}, {"precision", "bf16"}}), space);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  const Status st = CheckTrainPrecisionOnCard(*bf16, "cuda:0 (Tesla T4)", t4);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "study.json: /objective/precision: precision 'bf16' needs a card with bfloat16, "
            "which CUDA cards have from compute capability 8.0 (A100, RTX 30xx, H100 and newer), "
            "and cuda:0 (Tesla T4) has compute capability 7.5: use \"precision\": \"fp16\" "
            "(autocast to float16 with loss scaling, which this card has) or \"auto\" (fp16 on "
            "such a card, bf16 on cards with bfloat16)");
  EXPECT_TRUE(CheckTrainPrecisionOnCard(*bf16, "cuda:0 (NVIDIA A100-SXM4-40GB)", {8, 0}).ok());
  for (const char* fits : {"fp16", "fp32", "auto"}) {
    auto c = Config(TrainJson({{"device", "cuda"}, {"precision", fits}}), space);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(CheckTrainPrecisionOnCard(*c, "cuda:0 (Tesla T4)", t4).ok()) << fits;
  }
  Json choices = space;
  choices["precision"] = {"fp16", "bf16"};
  auto chosen = Config(TrainJson({{"device", "cuda"}}), choices);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  const Status choice = CheckTrainPrecisionOnCard(*chosen, "cuda:1 (Tesla V100-SXM2-16GB)", {7, 0});
  EXPECT_NE(choice.message().find("study.json: /objective: search-space parameter 'precision', "
                                  "choice \"bf16\": precision 'bf16' needs a card with "
                                  "bfloat16"),
            std::string::npos)
      << choice.message();
  EXPECT_NE(choice.message().find("cuda:1 (Tesla V100-SXM2-16GB) has compute capability 7.0: "
                                  "remove the choice"),
            std::string::npos)
      << choice.message();
}

// On a card without bfloat16 (NVML's compute capability 7.5: the stand-in library), "auto" is
// fp16 for a new study; a study whose first run chose bf16 on a card with it stops with the fix
// instead of training in bf16 here.
TEST_F(TrainObjectiveTest, AutoIsFp16OnACardWithoutBfloat16AndAKeptBf16Stops) {
  setenv("TUNE_NVML_LIBRARY", TUNE_FAKE_NVML, 1);
  setenv("TUNE_FAKE_NVML_CC", "7.5", 1);
  setenv("TUNE_FAKE_NVML_NAME", "Tesla T4", 1);
  const Json space = {{"learning_rate", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-3}}}};
  auto c = Config(TrainJson({{"device", "cuda"}}), space);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5});
  ScriptedTrainer* trainer = scripted.get();
  auto objective = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective.ok()) << objective.status().ToString();
  auto fresh = NewStudy();
  RunTrial(*fresh, **objective, {{"learning_rate", 1e-4}});
  ASSERT_EQ(trainer->jobs.size(), 1u);
  EXPECT_EQ(trainer->jobs[0].hp.precision, Precision::kFp16);

  auto resumed = NewStudy();
  ASSERT_TRUE(resumed->storage()
                  .SetStudySystemAttr(resumed->study_id(), "trainer_defaults",
                                      Json{{"precision", "bf16"}, {"tf32", true}})
                  .ok());
  auto again = MakeObjective(*c, std::make_unique<ScriptedTrainer>(std::vector<double>{0.5}));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto trial = std::move(resumed->Ask()).value();
  auto outcome = (*again)->Run(*trial, Json{{"learning_rate", 1e-4}});
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outcome.status().message().find(
                "study 's' keeps the precision \"auto\" chose on its first run's card; precision "
                "'bf16' needs a card with bfloat16"),
            std::string::npos)
      << outcome.status().message();
  EXPECT_NE(outcome.status().message().find("cuda (Tesla T4) has compute capability 7.5. To "
                                            "continue the study on this card, set "
                                            "\"precision\": \"fp16\""),
            std::string::npos)
      << outcome.status().message();
  unsetenv("TUNE_FAKE_NVML_NAME");
  unsetenv("TUNE_FAKE_NVML_CC");
  unsetenv("TUNE_NVML_LIBRARY");
}

// What "auto" means: fp32 on the CPU and where the card's capability is unknown; bf16 from
// compute capability 8 (Ampere), fp16 below.
TEST(AutoPrecision, FollowsTheDeviceAndItsComputeCapability) {
  EXPECT_EQ(AutoPrecision("cpu", 9), Precision::kFp32);
  EXPECT_EQ(AutoPrecision("cuda", 9), Precision::kBf16);
  EXPECT_EQ(AutoPrecision("cuda:1", 8), Precision::kBf16);
  EXPECT_EQ(AutoPrecision("cuda", 7), Precision::kFp16);
  EXPECT_EQ(AutoPrecision("cuda", std::nullopt), Precision::kFp32);
  EXPECT_EQ(TrainerDefaultsFromJson(Json{{"precision", "bf16"}}), std::nullopt);  // no tf32
  EXPECT_EQ(TrainerDefaultsFromJson(Json{{"precision", "fp64"}, {"tf32", true}}), std::nullopt);
}

TEST_F(TrainObjectiveTest, EarlyStoppingAfterPatienceEpochsWithoutImprovement) {
  auto c = Config(TrainJson({{"epochs", 10}, {"patience", 2}, {"min_delta", 0.01}}),
                  {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // 0.6 at epoch 1; 0.605 is not better by more than min_delta; 0.59 neither: stop after epoch 3.
  auto objective = MakeObjective(
      *c, std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.6, 0.605, 0.59, 0.9}));
  ASSERT_TRUE(objective.ok());
  auto study = NewStudy();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"lr", 1e-3}});
  EXPECT_EQ(outcome.state, TrialState::kComplete);
  EXPECT_EQ(trial.values, std::vector<double>{0.6});
  EXPECT_EQ(trial.intermediate_values.size(), 4u);
  EXPECT_EQ(trial.user_attrs.at("train")["stopped_early"], true);
  EXPECT_EQ(trial.user_attrs.at("train")["end"], "stopped");
}

TEST_F(TrainObjectiveTest, LossMetricIsMinimized) {
  auto c = Config(TrainJson({{"epochs", 3}, {"metric", "loss"}}),
                  {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}}, "minimize");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto objective =
      MakeObjective(*c, std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.8, 0.7}));
  ASSERT_TRUE(objective.ok());
  auto study = std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMinimize},
                                             std::make_unique<RandomSampler>(),
                                             std::make_unique<NopPruner>(), 1))
                   .value();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"lr", 1e-3}});
  EXPECT_NEAR(trial.values.at(0), 0.2, 1e-12);  // validation_loss = 1 - 0.8
}

// Several objectives: the metric, then the run's costs, and one constraint attribute per bound
// ("constraints:<cost>", Optuna 5.0's trial.set_constraint), which TPE reads by default.
TEST_F(TrainObjectiveTest, ObjectivesReturnTheMetricThenTheCosts) {
  const Json space = {{"batch_size", {{"type", "categorical"}, {"choices", {8, 16}}}}};
  Json doc = {
      {"directions", {"maximize", "minimize", "minimize", "minimize"}},
      {"sampler", {{"name", "tpe"}}},
      {"search_space", space},
      {"objective",
       TrainJson({{"epochs", 2},
                  {"objectives", {"macro_f1", "peak_memory", "num_parameters", "train_seconds"}},
                  {"constraints", {{"peak_memory", 10000}}}})}};
  auto c = ParseStudyConfig(doc, "study.json", dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto trainer = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.7});
  trainer->peak_per_example = 1000;
  trainer->epoch_seconds = 1.5;
  auto objective = MakeObjective(*c, std::move(trainer));
  ASSERT_TRUE(objective.ok());
  auto study = std::move(Study::CreateOrLoad(NewInMemoryStorage(), "s", c->directions,
                                             std::make_unique<RandomSampler>(),
                                             std::make_unique<NopPruner>(), 1))
                   .value();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"batch_size", 16}});
  EXPECT_EQ(trial.values, (std::vector<double>{0.7, 16000.0, 1234.0, 3.0}));
  EXPECT_EQ(trial.system_attrs.at("constraints:peak_memory"), 6000.0);  // over the budget
  EXPECT_FALSE(trial.system_attrs.contains("constraints"));
  EXPECT_EQ(TrialConstraints(trial), (std::map<std::string, double>{{"peak_memory", 6000.0}}));
  EXPECT_EQ(trial.user_attrs.at("train")["objectives"],
            Json({"macro_f1", "peak_memory", "num_parameters", "train_seconds"}));
  auto [outcome8, trial8] = RunTrial(*study, **objective, {{"batch_size", 8}});
  EXPECT_EQ(trial8.system_attrs.at("constraints:peak_memory"), -2000.0);

  auto error = [&](Json change) {
    Json d = doc;
    for (const auto& [k, v] : change.items()) {
      if (k == "directions" || k == "sampler") {
        d[k] = v;
      } else {
        d["objective"][k] = v;
      }
    }
    auto r = ParseStudyConfig(d, "study.json", dir_.path());
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(error({{"directions", {"maximize", "minimize"}}}),
            "study.json: /directions: the train objective returns 4 value(s) (macro_f1, then the "
            "costs, each minimized); set \"directions\": [\"maximize\", \"minimize\", "
            "\"minimize\", \"minimize\"]");
  EXPECT_EQ(
      error({{"objectives", {"macro_f1", "peak_mem"}}, {"directions", {"maximize", "minimize"}}}),
      "study.json: /objective/objectives/1: unknown cost 'peak_mem' (did you mean "
      "'peak_memory'?); valid: peak_memory, train_seconds, num_parameters");
  EXPECT_NE(error({{"objectives", {"peak_memory"}}})
                .find("/objective/objectives/0: the first "
                      "objective is the metric"),
            std::string::npos);
  // Samplers that do not read constraints unless told: an error names the key.
  for (const Json& sampler : {Json{{"name", "tpe"}, {"preset", "optuna-4.9"}},
                              Json{{"name", "tpe"}, {"constraints", false}},
                              Json{{"name", "nsgaii"}, {"constraints", false}}}) {
    EXPECT_NE(
        error({{"sampler", sampler}}).find("the sampler ignores them: set \"constraints\": true"),
        std::string::npos)
        << sampler.dump();
  }
  EXPECT_EQ(
      error({{"sampler", {{"name", "tpe"}, {"preset", "optuna-4.9"}, {"constraints", true}}}}),
      "ok");
  EXPECT_NE(error({{"save_best", "best"}}).find("no single best trial"), std::string::npos);
}

TEST_F(TrainObjectiveTest, ThePrunerStopsATrialAfterAReport) {
  auto c = Config(TrainJson({{"epochs", 5}}),
                  {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}});
  ASSERT_TRUE(c.ok());
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.2, 0.9});
  auto objective = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective.ok());
  ThresholdOptions t;
  t.lower = 0.3;
  auto study = NewStudy(std::make_unique<ThresholdPruner>(t));
  auto [outcome, trial] = RunTrial(*study, **objective, {{"lr", 1e-3}});
  EXPECT_EQ(outcome.state, TrialState::kPruned);
  EXPECT_EQ(outcome.reason, "pruned after epoch 2");
  EXPECT_EQ(trial.state, TrialState::kPruned);
  EXPECT_EQ(trial.intermediate_values.size(), 2u);
  EXPECT_EQ(trial.values, std::vector<double>{0.2});  // Optuna keeps the last report
}

TEST_F(TrainObjectiveTest, OutOfMemoryIsPrunedWithItsConfig) {
  auto c = Config(TrainJson({{"epochs", 3}}),
                  {{"batch_size", Json::array({64})}, {"grad_accum", Json::array({2})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5});
  scripted->EndAt(1, TrainResult::End::kOutOfMemory,
                  "CPU out of memory: tried to allocate 4 MiB\nmore",
                  {{"phase", "backward"}, {"epoch", 1}, {"step", 3}});
  auto objective = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective.ok());
  auto study = NewStudy();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"batch_size", 64}, {"grad_accum", 2}});
  EXPECT_EQ(outcome.state, TrialState::kPruned);
  EXPECT_EQ(outcome.reason, "out of memory in backward");
  EXPECT_EQ(trial.user_attrs.at("oom"), true);
  EXPECT_EQ(trial.user_attrs.at("reason"), "oom");
  const Json& oom = trial.user_attrs.at("oom_config");
  EXPECT_EQ(oom["batch_size"], 64);
  EXPECT_EQ(oom["effective_batch_size"], 128.0);
  EXPECT_EQ(oom["phase"], "backward");
  EXPECT_EQ(oom["model"], "prajjwal1/bert-tiny");
  EXPECT_EQ(oom["error"], "CPU out of memory: tried to allocate 4 MiB");
}

TEST_F(TrainObjectiveTest, FailuresFailTheTrialOnly) {
  auto c = Config(TrainJson({{"epochs", 3}}), {{"max_length", Json::array({64, 1024})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5});
  scripted->EndAt(0, TrainResult::End::kFailed, "training loss is nan at epoch 1, step 3");
  auto objective = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective.ok());
  auto study = NewStudy();
  auto [failed, t1] = RunTrial(*study, **objective, {{"max_length", 64}});
  EXPECT_EQ(failed.state, TrialState::kFail);
  EXPECT_EQ(t1.user_attrs.at("fail_reason"), "training loss is nan at epoch 1, step 3");
  // A max_length the model cannot take fails before training.
  auto [too_long, t2] = RunTrial(*study, **objective, {{"max_length", 1024}});
  EXPECT_EQ(too_long.state, TrialState::kFail);
  EXPECT_EQ(t2.user_attrs.at("fail_reason"),
            "max_length 1024 is longer than model 'prajjwal1/bert-tiny' allows (512 positions)");
}

TEST_F(TrainObjectiveTest, AnInterruptedRunFailsTheTrialAsInterrupted) {
  auto c = TrainJson({{"epochs", 3}});
  auto config = Config(c, {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}});
  ASSERT_TRUE(config.ok());
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5});
  scripted->EndAt(1, TrainResult::End::kInterrupted, "");
  auto objective = MakeObjective(*config, std::move(scripted));
  ASSERT_TRUE(objective.ok());
  auto study = NewStudy();
  auto [outcome, trial] = RunTrial(*study, **objective, {{"lr", 1e-3}});
  EXPECT_EQ(outcome.state, TrialState::kFail);
  EXPECT_EQ(trial.user_attrs.at("interrupted"), true);
  EXPECT_EQ(trial.user_attrs.at("fail_reason"), "interrupted by the user");
}

TEST_F(TrainObjectiveTest, WithoutATrainerTheObjectiveCannotBeMade) {
  auto c = Config(TrainJson(), {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}});
  ASSERT_TRUE(c.ok());
  auto objective = MakeObjective(*c);
  EXPECT_EQ(objective.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(objective.status().message().find("built without it"), std::string::npos);
}

TEST_F(TrainObjectiveTest, DataErrorsSurfaceWhenTheObjectiveIsMade) {
  std::ofstream(dir_.path() / "val.jsonl") << R"({"text": "x", "label": "neutral"})"
                                           << "\n";
  auto c = Config(TrainJson(), {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}});
  ASSERT_TRUE(c.ok());
  auto objective = MakeObjective(*c, std::make_unique<ScriptedTrainer>(std::vector<double>{0.5}));
  EXPECT_EQ(objective.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(objective.status().message().find("val.jsonl:1: unknown label 'neutral'"),
            std::string::npos)
      << objective.status().message();
}

TEST_F(TrainObjectiveTest, TabularTaskTrainsAnMlpOnFeatureColumns) {
  std::ofstream(dir_.path() / "rows.csv") << "x,y,label\n1,2,a\n2,1,b\n3,4,a\n4,3,b\n5,6,a\n";
  Json objective = {{"type", "train"},
                    {"task", "tabular_classification"},
                    {"data", {{"train", "rows.csv"}, {"validation_fraction", 0.4}}},
                    {"epochs", 2}};
  auto c = Config(objective, {{"mlp_hidden", Json::array({8, 16})}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto scripted = std::make_unique<ScriptedTrainer>(std::vector<double>{0.5, 0.6});
  ScriptedTrainer* trainer = scripted.get();
  auto objective_or = MakeObjective(*c, std::move(scripted));
  ASSERT_TRUE(objective_or.ok()) << objective_or.status().ToString();
  auto study = NewStudy();
  auto [outcome, trial] = RunTrial(*study, **objective_or, {{"mlp_hidden", 16}});
  EXPECT_EQ(outcome.state, TrialState::kComplete);
  ASSERT_EQ(trainer->jobs.size(), 1u);
  const TrainJob& job = trainer->jobs[0];
  EXPECT_EQ(job.data, nullptr);
  ASSERT_NE(job.tabular, nullptr);
  EXPECT_EQ(job.tabular->num_features, 2);
  EXPECT_EQ(job.tabular->num_labels, 2);
  EXPECT_EQ(job.tabular->train_labels.size() + job.tabular->validation_labels.size(), 5u);
  EXPECT_EQ(job.hp.mlp_hidden, 16);
  EXPECT_EQ(job.model.name, "mlp");

  Json with_model = objective;
  with_model["model"] = "tiny-bert";
  auto bad = Config(with_model, {{"mlp_hidden", Json::array({8})}});
  EXPECT_NE(bad.status().message().find("/objective/model: tabular_classification trains an MLP"),
            std::string::npos)
      << bad.status().message();
  Json bad_task = objective;
  bad_task["task"] = "tabular";
  EXPECT_NE(Config(bad_task, {{"mlp_hidden", Json::array({8})}})
                .status()
                .message()
                .find("unknown task 'tabular' (did you mean 'tabular_classification'?)"),
            std::string::npos);
  Json text_key = objective;
  text_key["data"]["text_column"] = "x";
  EXPECT_NE(Config(text_key, {{"mlp_hidden", Json::array({8})}})
                .status()
                .message()
                .find("/objective/data/text_column: unknown key 'text_column'"),
            std::string::npos);
}

// The demo's config (make demo) parses, with the guard on a simulated small card told to
// underestimate; its data is read only when the objective is made.
TEST(TrainObjectiveConfig, FortunesFrontConfigParses) {
  auto c = LoadStudyConfig(std::string(TUNE_SOURCE_DIR) + "/configs/fortunes-front.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->directions,
            (std::vector<StudyDirection>{StudyDirection::kMaximize, StudyDirection::kMinimize}));
  EXPECT_EQ(c->objective.train.costs, std::vector<TrainCost>{TrainCost::kPeakMemory});
}

TEST(TrainObjectiveConfig, FortunesDemoConfigParses) {
  auto c = LoadStudyConfig(std::string(TUNE_SOURCE_DIR) + "/configs/fortunes.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->objective.type, ObjectiveType::kTrain);
  EXPECT_EQ(c->objective.train.metric, TrainMetric::kMacroF1);
  EXPECT_EQ(c->objective.train.models,
            (std::vector<std::string>{"mini-bert", "tiny-bert", "tiny-roberta"}));  // sorted
  EXPECT_EQ(c->objective.train.guard.device_memory, int64_t{64} << 20);
  // The estimator as it is (the demo's out-of-memory error comes from a trial that skips
  // admission, not from an estimator told to be wrong).
  EXPECT_EQ(c->objective.train.guard.estimate_scale, 1.0);
  EXPECT_EQ(c->objective.train.guard.oom_retry, 1);
  ASSERT_EQ(c->enqueue_trials.size(), 1u);
  EXPECT_EQ(c->enqueue_trials[0].params["batch_size"], 32);
  EXPECT_EQ(c->enqueue_trials[0].user_attrs, (Json{{"admission", false}}));
  EXPECT_EQ(c->objective.train.threads, 1);
  EXPECT_NE(c->objective.train.data.train.find("build/data/fortunes/train.jsonl"),
            std::string::npos);
}

// Config errors: strict keys, parameters, values, models, direction.
TEST_F(TrainObjectiveTest, ConfigErrors) {
  const Json lr = {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-2}}}};
  auto error = [&](const Json& objective, const Json& space, const std::string& dir = "maximize") {
    auto c = Config(objective, space, dir);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_EQ(error(TrainJson({{"learning_rat", 0.1}}), lr).substr(0, 95),
            "study.json: /objective/learning_rat: unknown key 'learning_rat' (did you mean "
            "'learning_rate'?)");
  EXPECT_EQ(error(TrainJson({{"batch_size", 0}}), lr),
            "study.json: /objective/batch_size: batch_size must be >= 1, got 0");
  EXPECT_EQ(error(TrainJson(), {{"batch_sise", Json::array({8, 16})}}),
            "study.json: /objective: search-space parameter 'batch_sise' is not a training "
            "parameter (did you mean 'batch_size'?); list it in \"ignore_params\" if only "
            "conditions read it");
  EXPECT_TRUE(
      Config(TrainJson({{"ignore_params", {"tier"}}}), {{"tier", Json::array({"a", "b"})}}).ok());
  EXPECT_EQ(error(TrainJson(), {{"batch_size", Json::array({8, 0})}}),
            "study.json: /objective: search-space parameter 'batch_size': batch_size must be >= 1, "
            "got 0");
  EXPECT_EQ(error(TrainJson(), {{"optimizer", Json::array({"adamw", "adam"})}}),
            "study.json: /objective: search-space parameter 'optimizer': unknown optimizer 'adam' "
            "(did you mean 'adamw'?); valid: adamw, sgd");
  EXPECT_EQ(error(TrainJson({{"precision", "fp16"}}), lr),
            "study.json: /objective/precision: precision 'fp16' needs a CUDA device (autocast to "
            "float16 with loss scaling), and the device is 'cpu'; use \"precision\": \"bf16\" on "
            "CPU");
  EXPECT_EQ(error(TrainJson(), {{"precision", Json::array({"fp32", "fp16"})}}),
            "study.json: /objective: search-space parameter 'precision': precision 'fp16' needs a "
            "CUDA device (autocast to float16 with loss scaling), and the device is 'cpu'; use "
            "\"precision\": \"bf16\" on CPU");
  EXPECT_EQ(error(TrainJson({{"precision", "fp8"}}), lr),
            "study.json: /objective/precision: unknown precision 'fp8' (did you mean 'fp32'?); "
            "valid: auto, fp32, bf16, fp16");
  EXPECT_TRUE(Config(TrainJson({{"precision", "bf16"}}), lr).ok());
  EXPECT_TRUE(Config(TrainJson({{"precision", "fp16"}, {"device", "cuda:0"}}), lr).ok());
  EXPECT_EQ(error(TrainJson(), lr, "minimize"),
            "study.json: /direction: the train objective's metric 'macro_f1' is maximized; set "
            "\"direction\": \"maximize\"");
  Json no_model = TrainJson();
  no_model.erase("model");
  EXPECT_EQ(
      error(no_model, lr),
      "study.json: /objective: no model: set \"model\" here or add a 'model' parameter to the "
      "search space");
  // DeBERTa-v3 trains now; a model_type the trainer cannot build is still refused at load.
  const Json deberta_or_bert = {
      {"model",
       {{"type", "model"}, {"choices", {"bert-base-uncased", "microsoft/deberta-v3-base"}}}}};
  EXPECT_TRUE(Config(no_model, deberta_or_bert).ok());
  Json gpt = {{"direction", "maximize"},
              {"models",
               {{"gpt-ish",
                 {{"model_type", "gpt2"},
                  {"num_hidden_layers", 1},
                  {"hidden_size", 8},
                  {"num_attention_heads", 2},
                  {"intermediate_size", 8},
                  {"vocab_size", 64},
                  {"max_position_embeddings", 32}}}}},
              {"search_space", lr},
              {"objective", TrainJson({{"model", "gpt-ish"}})}};
  auto c = ParseStudyConfig(gpt, "study.json", dir_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("model 'gpt-ish': model_type 'gpt2' is not supported by the "
                                      "trainer; valid: bert, roberta, xlm-roberta, camembert, "
                                      "deberta-v2"),
            std::string::npos)
      << c.status().message();
  EXPECT_EQ(error(TrainJson({{"device", "gpu"}}), lr),
            "study.json: /objective/device: unknown device 'gpu'; valid: cpu, cuda, cuda:N");
  Json no_data = TrainJson();
  no_data.erase("data");
  EXPECT_NE(error(no_data, lr).find("missing required key 'data'"), std::string::npos);
  EXPECT_EQ(
      error(TrainJson({{"data", {{"train", "t.jsonl"}, {"text_col", "x"}}}}), lr).substr(0, 90),
      "study.json: /objective/data/text_col: unknown key 'text_col' (did you mean "
      "'text_column'?)");
  EXPECT_NE(
      error(TrainJson({{"data", {{"train", "t.txt"}}}}), lr)
          .find("/objective/data/train: " + (dir_.path() / "t.txt").string() + ": cannot tell"),
      std::string::npos);
  EXPECT_EQ(error(TrainJson({{"lr", 0.1}, {"learning_rate", 0.2}}), lr),
            "study.json: /objective/lr: 'learning_rate' is set twice (as 'lr' too)");
}

}  // namespace
}  // namespace tune

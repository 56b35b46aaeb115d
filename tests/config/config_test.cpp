#include "config/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"

namespace tune {
namespace {

Json Base() {
  return Json::parse(R"({
    "direction": "maximize",
    "search_space": {
      "model": {"type": "model", "choices": ["bert-base-uncased", "roberta-large"]},
      "lr": {"type": "float", "low": 1e-6, "high": 1e-3, "log": true}
    },
    "conditional": [
      {"when": {"model.heavy": true}, "search_space": {"batch_size": [8, 12, 16]}}
    ],
    "objective": {"type": "function", "name": "mixed"}
  })");
}

// Parses `doc` and expects an InvalidArgument whose message contains every piece of `parts`.
void ExpectError(const Json& doc, std::vector<std::string> parts) {
  auto r = ParseStudyConfig(doc, "study.json", ".");
  ASSERT_FALSE(r.ok()) << "expected an error containing " << parts[0];
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  for (const auto& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "missing '" << p << "' in: " << r.status().message();
  }
}

TEST(Config, ParsesTheDemoConfig) {
  auto c = LoadStudyConfig(std::string(TUNE_SOURCE_DIR) + "/configs/demo.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_trials, 60);
  EXPECT_EQ(c->sampler.seed, 42u);
  EXPECT_EQ(c->objective.function.name, "mixed");
  EXPECT_EQ(c->space.root().children.size(), 2u);
  const ParamSpec* model = c->space.FindParam("model");
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->is_model);
}

TEST(Config, ValidConfigDefaults) {
  auto c = ParseStudyConfig(Base(), "study.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->directions, std::vector<StudyDirection>{StudyDirection::kMaximize});
  EXPECT_EQ(c->sampler.name, "tpe");  // Optuna 5.0's default
  EXPECT_FALSE(c->sampler.named);
  EXPECT_EQ(c->pruner.name, "nop");
  EXPECT_EQ(c->storage, "sqlite:///tune.db");  // a file in the working directory
  EXPECT_FALSE(c->n_trials.has_value());
}

TEST(Config, HeartbeatKeys) {
  auto defaults = ParseStudyConfig(Base(), "study.json", ".");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->heartbeat_interval, 60.0);
  EXPECT_FALSE(defaults->grace_period.has_value());  // twice the interval
  EXPECT_EQ(defaults->retry_failed, 0);
  Json d = Base();
  d["heartbeat_interval"] = 5;
  d["grace_period"] = 12.5;
  d["retry_failed"] = 3;
  auto c = ParseStudyConfig(d, "study.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->heartbeat_interval, 5.0);
  EXPECT_EQ(c->grace_period, 12.5);
  EXPECT_EQ(c->retry_failed, 3);
  EXPECT_TRUE(CheckHeartbeatSettings(*c, "flags").ok());
  d["grace_period"] = 5;
  ExpectError(d, {"study.json: /grace_period", "greater than heartbeat_interval (5s)"});
  d = Base();
  d["heartbeat_interval"] = -1;
  ExpectError(d, {"/heartbeat_interval", "must be >= 0"});
  d = Base();
  d["retry_failed"] = 1.5;
  ExpectError(d, {"/retry_failed", "expected an integer"});
  d = Base();
  d["grace_periods"] = 1;
  ExpectError(d, {"/grace_periods", "did you mean 'grace_period'"});
  // Flags can make a valid config invalid: run.cpp checks the result again.
  c->heartbeat_interval = 20;
  Status s = CheckHeartbeatSettings(*c, "--heartbeat-interval");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--heartbeat-interval: the grace period (12.5s) must be greater"),
            std::string::npos)
      << s.message();
}

TEST(Config, UnknownKeyNamesPathAndClosestKey) {
  Json d = Base();
  d["n_trails"] = 10;
  ExpectError(d, {"study.json", "/n_trails", "did you mean 'n_trials'"});
  d = Base();
  d["search_space"]["lr"]["lgo"] = true;
  ExpectError(d, {"study.json: /search_space/lr/lgo", "did you mean 'log'"});
  d = Base();
  d["sampler"] = {{"name", "randm"}};
  ExpectError(d, {"/sampler/name", "did you mean 'random'"});
  d = Base();
  d["sampler"] = {{"type", "random"}};  // "type" chooses a parameter's kind, not a sampler
  ExpectError(d, {"/sampler/type", "chosen by \"name\"", "did you mean \"name\": \"random\""});
  d = Base();
  d["pruner"] = {{"type", "median"}};
  ExpectError(d, {"/pruner/type", "a pruner is chosen by \"name\""});
  d = Base();
  d["search_space"]["lr"]["type"] = "flaot";
  ExpectError(d, {"/search_space/lr/type", "did you mean 'float'"});
}

// enqueue_trials: params objects, or Optuna's enqueue_trial(params, user_attrs) as
// {"params": {...}, "user_attrs": {...}}; errors name the entry's key.
TEST(Config, EnqueuedTrialsWithUserAttrs) {
  Json d = Base();
  d["enqueue_trials"] = Json::parse(R"([{"lr": 0.001},
      {"params": {"lr": 0.002}, "user_attrs": {"admission": false, "note": "by hand"}}])");
  auto c = ParseStudyConfig(d, "study.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->enqueue_trials.size(), 2u);
  EXPECT_EQ(c->enqueue_trials[0].params, (Json{{"lr", 0.001}}));
  EXPECT_EQ(c->enqueue_trials[0].user_attrs, Json::object());
  EXPECT_EQ(c->enqueue_trials[1].params, (Json{{"lr", 0.002}}));
  EXPECT_EQ(c->enqueue_trials[1].user_attrs, (Json{{"admission", false}, {"note", "by hand"}}));

  d["enqueue_trials"] = Json::parse(R"([{"params": {"lr": 0.002}, "user_attr": {}}])");
  ExpectError(d, {"/enqueue_trials/0", "user_attr", "did you mean 'user_attrs'"});
  d["enqueue_trials"] = Json::parse(R"([{"params": {"lrr": 0.002}}])");
  ExpectError(d, {"/enqueue_trials/0/params/lrr", "unknown parameter", "did you mean 'lr'"});
  d["enqueue_trials"] = Json::parse(R"([{"params": {"lr": 0.002}, "user_attrs": [1]}])");
  ExpectError(d, {"/enqueue_trials/0/user_attrs"});
}

TEST(Config, FunctionObjectivesNeedAsManyDirections) {
  Json d = {{"objective", {{"type", "function"}, {"name", "zdt1"}}}};
  ExpectError(d, {"/objective/name", "function 'zdt1' returns 2 values",
                  "the study has 1 direction", "[\"minimize\", \"minimize\"]"});
  d["directions"] = {"minimize", "minimize", "minimize"};
  ExpectError(d, {"/objective/name", "has 3 directions"});
  d["directions"] = {"minimize", "maximize"};
  EXPECT_TRUE(ParseStudyConfig(d, "study.json", ".").ok());
  d = {{"objective", {{"type", "function"}, {"name", "sphere"}}},
       {"directions", {"minimize", "minimize"}}};
  ExpectError(d, {"function 'sphere' returns 1 value,", "has 2 directions"});
}

TEST(Config, WrongType) {
  Json d = Base();
  d["search_space"]["lr"]["low"] = "small";
  ExpectError(d, {"/search_space/lr/low", "expected a number", "string"});
  d = Base();
  d["n_trials"] = 2.5;
  ExpectError(d, {"/n_trials", "expected an integer"});
}

// Found by fuzzing (tests/fuzz/corpus/config/finding-objective-type-not-a-string.json): without a
// search space, an objective "type" that is not a string threw nlohmann's type_error out of the
// config loader (std::terminate).
TEST(Config, AnObjectiveTypeOfAnotherKindIsAnError) {
  auto r = ParseStudyConfig(Json::parse(R"({"objective": {"type": 0}})"), "study.json", ".");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("study.json", 0), 0u) << r.status().message();
}

// The same kind of key read before its own check, found by reading after the fuzzing: a train
// objective's "task" of another kind is an error, not an exception.
TEST(Config, ATrainTaskOfAnotherKindIsAnError) {
  auto r = ParseStudyConfig(Json::parse(R"({"objective": {"type": "train", "task": 0}})"),
                            "study.json", ".");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("study.json", 0), 0u) << r.status().message();
}

// Found by fuzzing (tests/fuzz/corpus/config/finding-int-past-int64.json): a whole number past
// int64_t's range ("high": 1.2e65) was cast to int64_t, which is undefined behaviour (UBSan).
TEST(Config, AnIntegerPastInt64IsAnErrorNamingThePath) {
  Json d = Base();
  d["search_space"]["n"] = Json::parse(R"({"type": "int", "low": 1, "high": 1.2e65})");
  ExpectError(d, {"study.json: /search_space/n/high",
                  "expected an integer from -2^63 to 2^63 - 1, got ", "(1.2e+65)"});
  d = Base();
  d["n_trials"] = Json::parse("18446744073709551615");
  ExpectError(d, {"/n_trials", "expected an integer from -2^63 to 2^63 - 1, got ",
                  "(18446744073709551615)"});
  d = Base();
  d["n_trials"] = Json::parse("-9.3e18");
  ExpectError(d, {"/n_trials", "expected an integer from -2^63 to 2^63 - 1"});
  d = Base();
  d["n_trials"] = Json::parse("1e3");  // a whole number in range still counts
  auto c = ParseStudyConfig(d, "study.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_trials, 1000);
}

TEST(Config, EmptyChoices) {
  Json d = Base();
  d["search_space"]["bs"] = {{"type", "categorical"}, {"choices", Json::array()}};
  ExpectError(d, {"/search_space/bs/choices", "must not be empty"});
  d = Base();
  d["search_space"]["bs"] = Json::array();
  ExpectError(d, {"/search_space/bs", "must not be empty"});
}

TEST(Config, LowAboveHigh) {
  Json d = Base();
  d["search_space"]["wd"] = {{"type", "float"}, {"low", 0.5}, {"high", 0.1}};
  ExpectError(d, {"/search_space/wd", "low (0.5) must be <= high (0.1)"});
}

TEST(Config, LogWithNonPositiveLow) {
  Json d = Base();
  d["search_space"]["lr"]["low"] = 0.0;
  ExpectError(d, {"/search_space/lr/low", "log=true needs low > 0"});
  d = Base();
  d["search_space"]["n"] = {{"type", "int"}, {"low", 0}, {"high", 8}, {"log", true}};
  ExpectError(d, {"/search_space/n/low", "low >= 1"});
}

TEST(Config, StepNotDividingTheRange) {
  Json d = Base();
  d["search_space"]["max_length"] = {{"type", "int"}, {"low", 128}, {"high", 500}, {"step", 32}};
  ExpectError(d, {"/search_space/max_length/step", "does not divide", "480 or 512"});
  d = Base();
  d["search_space"]["f"] = {{"type", "float"}, {"low", 0}, {"high", 1}, {"step", 0.3}};
  ExpectError(d, {"/search_space/f/step", "does not divide"});
}

TEST(Config, ConditionOnUnknownParameter) {
  Json d = Base();
  d["conditional"][0]["when"] = {{"modle.heavy", true}};
  ExpectError(
      d, {"/conditional/0/when/modle.heavy", "unknown parameter", "did you mean 'model.heavy'"});
  d = Base();
  d["conditional"][0]["when"] = {{"model.heavvy", true}};
  ExpectError(d, {"unknown model attribute 'heavvy'", "did you mean 'heavy'"});
  // A parameter declared only later cannot be read.
  d = Base();
  d["conditional"].push_back({{"when", {{"batch_size", 8}}}, {"search_space", {{"z", {1, 2}}}}});
  d["conditional"].insert(d["conditional"].begin(),
                          Json{{"when", {{"batch_size", 8}}}, {"search_space", {{"y", {1, 2}}}}});
  ExpectError(d, {"/conditional/0/when/batch_size", "unknown parameter"});
  d = Base();
  d["conditional"][0]["when"] = {{"lr", {{"~", 1}}}};
  ExpectError(d, {"unknown operator '~'"});
}

TEST(Config, UnknownModel) {
  Json d = Base();
  d["search_space"]["model"]["choices"][1] = "roberta-larg";
  ExpectError(d, {"/search_space/model/choices/1", "unknown model 'roberta-larg'",
                  "did you mean 'roberta-large'"});
}

TEST(Config, ObjectiveErrors) {
  Json d = Base();
  d["objective"] = {{"type", "comand"}};
  ExpectError(d, {"/objective/type", "did you mean 'command'"});
  d = Base();
  d["objective"] = {{"type", "command"}, {"argv", {"train", "--lr={lrr}"}}};
  ExpectError(d, {"/objective/argv/1", "unknown placeholder '{lrr}'", "did you mean 'lr'"});
  d = Base();
  d["objective"] = {{"type", "command"}, {"argv", {"train", "--x={lr"}}};
  ExpectError(d, {"/objective/argv/1", "unbalanced"});
  d = Base();
  d["objective"] = {{"type", "function"}, {"name", "brannin"}};
  ExpectError(d, {"/objective/name", "did you mean 'branin'"});
}

TEST(Config, UserModelsInTheConfig) {
  Json d = Base();
  d["models"] = {{"my-bert",
                  {{"num_hidden_layers", 2},
                   {"hidden_size", 64},
                   {"num_attention_heads", 2},
                   {"intermediate_size", 128},
                   {"vocab_size", 1000},
                   {"max_position_embeddings", 128},
                   {"heavy", true}}}};
  d["search_space"]["model"]["choices"].push_back("my-bert");
  auto c = ParseStudyConfig(d, "study.json", ".");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c->space.catalog().Find("my-bert"))->heavy);
}

// A sampler that records the order in which parameters are asked for (and samples at random).
class RecordingSampler : public RandomSampler {
 public:
  explicit RecordingSampler(std::vector<std::string>* names) : names_(names) {}
  double SampleIndependent(const TrialHistory& history, const FrozenTrial& trial,
                           const std::string& name, const Distribution& distribution,
                           Rng& rng) override {
    names_->push_back(name);
    return RandomSampler::SampleIndependent(history, trial, name, distribution, rng);
  }

 private:
  std::vector<std::string>* names_;
};

// Parameters are suggested in the order the file writes them (issue 19), as Optuna's
// define-by-run code does, not in name order; conditional blocks keep theirs.
TEST(Config, SearchSpaceKeepsTheFileOrder) {
  testing::TempDir dir;
  auto path = dir.path() / "order.json";
  std::ofstream(path) << R"({
    "search_space": {"z_lr": {"type": "float", "low": 1e-5, "high": 1e-2, "log": true},
                     "m_optimizer": ["sgd", "adamw"],
                     "a_batch": [8, 16]},
    "conditional": [{"when": {"m_optimizer": "sgd"},
                     "search_space": {"y_momentum": {"type": "float", "low": 0, "high": 0.9},
                                      "b_nesterov": [true, false]}}],
    "objective": {"type": "function", "name": "mixed"}
  })";
  auto c = LoadStudyConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->space.ParamNames(), (std::vector<std::string>{"z_lr", "m_optimizer", "a_batch",
                                                             "y_momentum", "b_nesterov"}));
  std::vector<std::string> asked;
  auto study = Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMinimize},
                                   std::make_unique<RecordingSampler>(&asked),
                                   std::make_unique<NopPruner>(), 1)
                   .value();
  auto trial = study->Ask().value();
  ASSERT_TRUE(c->space.Sample(*trial).ok());
  ASSERT_GE(asked.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(asked.begin(), asked.begin() + 3),
            (std::vector<std::string>{"z_lr", "m_optimizer", "a_batch"}));
  if (asked.size() == 5) {
    EXPECT_EQ(asked[3], "y_momentum");
  }

  // The same document as a Json object alone has no file order: name order.
  std::ifstream in(path);
  auto sorted = ParseStudyConfig(Json::parse(in), "order.json", dir.path());
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(sorted->space.root().params[0].name, "a_batch");
  // SearchSpaceKeyOrder is what LoadStudyConfig passes: one entry per search_space object.
  std::ifstream again(path);
  std::string text((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  const SpaceKeyOrder order = SearchSpaceKeyOrder(text);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order.at("/conditional/0/search_space"),
            (std::vector<std::string>{"y_momentum", "b_nesterov"}));
  EXPECT_TRUE(SearchSpaceKeyOrder("{not json").empty());
}

TEST(Config, FileErrors) {
  EXPECT_EQ(LoadStudyConfig("/nonexistent/x.json").status().code(), StatusCode::kNotFound);
  testing::TempDir dir;
  auto path = dir.path() / "bad.json";
  std::ofstream(path) << "{\n  \"direction\": \"minimize\",\n  oops\n}\n";
  auto r = LoadStudyConfig(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.json:3:"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

TEST(Config, CatalogFileThresholdRederivesHeavy) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "catalog.json") << R"({"heavy_threshold_parameters": 100000000,
             "models": {"roberta-large": {"heavy": false}}})";
  Json d = Base();
  d["model_catalog"] = "catalog.json";
  auto c = ParseStudyConfig(d, "study.json", dir.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c->space.catalog().Find("bert-base-uncased"))->heavy);  // 109M >= 100M
  EXPECT_FALSE((*c->space.catalog().Find("roberta-large"))->heavy);     // stated
  EXPECT_FALSE((*c->space.catalog().Find("prajjwal1/bert-tiny"))->heavy);
}

}  // namespace
}  // namespace tune

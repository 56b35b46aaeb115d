#include "tune/objectives/command.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "testing/temp_dir.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/study.h"
#include "util/templates.h"

namespace tune {
namespace {

const std::string kScript = std::string(TUNE_TEST_DATA_DIR) + "/objective.py";

class CommandObjectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    study_ = std::move(Study::CreateOrLoad(storage_, "cmd", {StudyDirection::kMinimize},
                                           std::make_unique<RandomSampler>(),
                                           std::make_unique<NopPruner>(), 1))
                 .value();
  }

  // Runs one trial of `argv` with params; returns the outcome and the stored trial.
  std::pair<TrialOutcome, FrozenTrial> RunTrial(CommandOptions options, const Json& params) {
    auto objective = NewCommandObjective(std::move(options));
    auto trial = study_->Ask().value();
    for (const auto& [k, v] : params.items()) {
      EXPECT_TRUE(trial->Suggest(k, *MakeCategoricalDistribution({v})).ok());
    }
    auto outcome = objective->Run(*trial, trial->params());
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    auto frozen = *study_->Tell(*trial, outcome->state, outcome->values);
    return {*outcome, frozen};
  }

  CommandOptions Opts(std::vector<std::string> args) {
    CommandOptions o;
    o.argv = {"/usr/bin/python3", kScript};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    return o;
  }

  std::shared_ptr<Storage> storage_ = NewInMemoryStorage();
  std::unique_ptr<Study> study_;
};

TEST_F(CommandObjectiveTest, SuccessReadsTheValueFromStdout) {
  auto [outcome, t] = RunTrial(Opts({"ok"}), {{"x", 3.0}});
  EXPECT_EQ(outcome.state, TrialState::kComplete);
  EXPECT_EQ(t.values, std::vector<double>{9.0});
}

TEST_F(CommandObjectiveTest, IntermediateValuesAreReported) {
  auto [outcome, t] = RunTrial(Opts({"steps"}), {{"x", 1}});
  EXPECT_EQ(outcome.state, TrialState::kComplete);
  EXPECT_EQ(t.values, std::vector<double>{0.25});
  ASSERT_EQ(t.intermediate_values.size(), 3u);
  EXPECT_DOUBLE_EQ(t.intermediate_values.at(2), 1.0 / 3);
}

TEST_F(CommandObjectiveTest, ResultFileAndInfinity) {
  auto [o1, t1] = RunTrial(Opts({"resultfile"}), {{"x", 1}});
  EXPECT_EQ(o1.state, TrialState::kComplete);
  EXPECT_EQ(t1.values, std::vector<double>{7.5});
  auto [o2, t2] = RunTrial(Opts({"inf"}), {{"x", 1}});
  EXPECT_EQ(o2.state, TrialState::kComplete);
  EXPECT_TRUE(std::isinf(t2.values.at(0)));
}

// docs/config.md "Non-finite values": a NaN final value, however the program writes it, fails
// the trial as Optuna does (system attribute fail_reason) with tune's reason "nonfinite"; NaN and
// infinite intermediate values are stored as written and the trial goes on.
TEST_F(CommandObjectiveTest, ANanValueFailsTheTrialWithReasonNonfinite) {
  for (const char* mode : {"nan", "nan_str", "nan_file"}) {
    auto [outcome, t] = RunTrial(Opts({mode}), {{"x", 1}});
    EXPECT_EQ(t.state, TrialState::kFail) << mode;
    EXPECT_EQ(t.system_attrs.value("fail_reason", ""), "objective returned NaN") << mode;
    EXPECT_EQ(t.user_attrs.value("reason", ""), "nonfinite") << mode << t.user_attrs.dump();
    EXPECT_EQ(t.user_attrs["nonfinite"]["where"], "value") << mode;
    EXPECT_TRUE(t.values.empty());
  }
  auto [outcome, t] = RunTrial(Opts({"nan_steps"}), {{"x", 1}});
  EXPECT_EQ(t.state, TrialState::kComplete);
  ASSERT_EQ(t.intermediate_values.size(), 3u);
  EXPECT_EQ(t.intermediate_values.at(0), 0.5);
  EXPECT_TRUE(std::isinf(t.intermediate_values.at(1)));
  EXPECT_TRUE(std::isnan(t.intermediate_values.at(2)));
}

// A program that writes bytes that are not UTF-8 (binary junk, a character cut in half): the
// trial fails as usual and its stderr_tail keeps the bytes escaped (\xNN), valid UTF-8 that JSON,
// the storages and Optuna can hold; it used to stop the study with a JSON exception.
TEST_F(CommandObjectiveTest, BytesThatAreNotUtf8AreKeptEscaped) {
  auto [outcome, t] = RunTrial(Opts({"badbytes"}), {{"x", 1}});
  EXPECT_EQ(t.state, TrialState::kFail);
  EXPECT_EQ(t.user_attrs["exit_status"], 3);
  const std::string tail = t.user_attrs["stderr_tail"].get<std::string>();
  EXPECT_NE(tail.find("bad \\xff\\xfe bytes \\xc3"), std::string::npos) << tail;
  EXPECT_NO_THROW((void)t.user_attrs.dump());
}

TEST_F(CommandObjectiveTest, CrashIsFailWithStatusAndStderr) {
  auto [outcome, t] = RunTrial(Opts({"crash"}), {{"x", 1}});
  EXPECT_EQ(outcome.state, TrialState::kFail);
  EXPECT_EQ(t.state, TrialState::kFail);
  EXPECT_EQ(t.user_attrs["exit_status"], 3);
  EXPECT_EQ(t.user_attrs["fail_reason"], "exit status 3");
  EXPECT_NE(t.user_attrs["stderr_tail"].get<std::string>().find("ValueError: boom"),
            std::string::npos);
  auto [o2, t2] = RunTrial(Opts({"segv"}), {{"x", 1}});
  EXPECT_EQ(o2.state, TrialState::kFail);
  EXPECT_NE(t2.user_attrs["fail_reason"].get<std::string>().find("signal 11"), std::string::npos);
}

TEST_F(CommandObjectiveTest, NothingReportedIsFail) {
  auto [outcome, t] = RunTrial(Opts({"silent"}), {{"x", 1}});
  EXPECT_EQ(outcome.state, TrialState::kFail);
  EXPECT_NE(t.user_attrs["fail_reason"].get<std::string>().find("no value reported"),
            std::string::npos);
}

TEST_F(CommandObjectiveTest, TimeoutKillsTheProgramAndFails) {
  CommandOptions o = Opts({"sleep"});
  o.timeout_seconds = 0.5;
  auto start = std::chrono::steady_clock::now();
  auto [outcome, t] = RunTrial(o, {{"x", 1}});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(outcome.state, TrialState::kFail);
  EXPECT_EQ(t.user_attrs["timeout"], true);
  EXPECT_LT(secs, 10.0);  // the 30 s sleep was cut short
}

TEST_F(CommandObjectiveTest, OutOfMemoryTextPrunesWithOomConfig) {
  auto [outcome, t] = RunTrial(Opts({"oom"}), {{"model", "bert-large-uncased"},
                                               {"batch_size", 48},
                                               {"grad_accum", 4},
                                               {"max_length", 480}});
  EXPECT_EQ(outcome.state, TrialState::kPruned);
  EXPECT_EQ(t.state, TrialState::kPruned);
  EXPECT_EQ(t.user_attrs["oom"], true);
  EXPECT_EQ(t.user_attrs["reason"], "oom");
  const Json& cfg = t.user_attrs["oom_config"];
  EXPECT_EQ(cfg["model"], "bert-large-uncased");
  EXPECT_EQ(cfg["batch_size"], 48);
  EXPECT_EQ(cfg["effective_batch_size"], 192);
  EXPECT_NE(cfg["error"].get<std::string>().find("CUDA out of memory"), std::string::npos);
}

// A hostile value reaches the program verbatim as one argument; nothing is run by a shell.
TEST_F(CommandObjectiveTest, HostileParameterValuesStayOneArgument) {
  testing::TempDir work;
  testing::TempDir canary;
  const std::string canary_file = (canary.path() / "alive").string();
  std::ofstream(canary_file) << "x";
  const std::string hostile =
      "; rm -rf " + canary.path().string() + " $(touch /tmp/pwned) `id` '\"";
  CommandOptions o = Opts({"args", "--name={name}", "{name}", "--lit={{x}}"});
  o.work_dir = work.path().string();
  auto [outcome, t] = RunTrial(o, {{"name", hostile}});
  ASSERT_EQ(outcome.state, TrialState::kComplete);
  std::ifstream in(work.path() / "trial_0" / "argv.json");
  Json rec = Json::parse(in);
  EXPECT_EQ(rec["argv"], (Json{"--name=" + hostile, hostile, "--lit={x}"}));
  EXPECT_EQ(rec["params"]["name"], hostile);
  EXPECT_TRUE(std::filesystem::exists(canary_file));
}

TEST_F(CommandObjectiveTest, InactiveParameterArgumentsAreLeftOut) {
  testing::TempDir work;
  CommandOptions o = Opts({"args", "--x={x}", "--momentum={momentum}"});
  o.work_dir = work.path().string();
  auto [outcome, t] = RunTrial(o, {{"x", 2}});
  ASSERT_EQ(outcome.state, TrialState::kComplete);
  Json rec = Json::parse(std::ifstream(work.path() / "trial_0" / "argv.json"));
  EXPECT_EQ(rec["argv"], (Json{"--x=2"}));
}

TEST_F(CommandObjectiveTest, MissingProgramIsAnError) {
  CommandOptions o;
  o.argv = {"/nonexistent/train"};
  auto objective = NewCommandObjective(o);
  auto trial = study_->Ask().value();
  auto r = objective->Run(*trial, Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot start '/nonexistent/train'"), std::string::npos);
}

TEST(CommandTemplates, NamesAndEnv) {
  EXPECT_EQ(*TemplateNames("--lr={lr} {{x}} {trial.number}"),
            (std::vector<std::string>{"lr", "trial.number"}));
  EXPECT_FALSE(TemplateNames("{oops").ok());
  EXPECT_FALSE(TemplateNames("oops}").ok());
  EXPECT_EQ(ParamEnvName("tok.max-length"), "TUNE_PARAM_TOK_MAX_LENGTH");
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// Templates are validated when a config is read; an objective built directly from the API with an
// unbalanced brace passes it through literally instead of hanging.
TEST_F(CommandObjectiveTest, UnbalancedBraceFromTheApiIsLiteral) {
  testing::TempDir work;
  CommandOptions o = Opts({"args", "{oops", "--x={x}"});
  o.work_dir = work.path().string();
  auto [outcome, t] = RunTrial(o, {{"x", 2}});
  ASSERT_EQ(outcome.state, TrialState::kComplete);
  Json rec = Json::parse(std::ifstream(work.path() / "trial_0" / "argv.json"));
  EXPECT_EQ(rec["argv"], (Json{"{oops", "--x=2"}));
}

}  // namespace
}  // namespace tune

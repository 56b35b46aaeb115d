// The Storage contract (include/tune/storages/storage.h), run against every backend. A backend
// joins with one line in Backends() below.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "testing/temp_dir.h"
#include "tune/storages/in_memory.h"
#include "tune/storages/sqlite.h"
#ifdef TUNE_TEST_WITH_POSTGRES
#include "testing/postgres_server.h"
#include "tune/storages/postgres.h"
#endif

namespace tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Backend {
  std::string name;
  // Opens a fresh, empty storage whose files (if any) live in `dir`.
  std::function<Result<std::unique_ptr<Storage>>(const std::filesystem::path& dir)> open;
  // Opens a second storage (its own connection) on the database `open` created in `dir`; unset
  // for a backend whose storages share nothing.
  std::function<Result<std::unique_ptr<Storage>>(const std::filesystem::path& dir)> open_again;
  // Set for a backend that needs a server: why the tests must skip ("" = run them).
  std::function<std::string()> skip_reason;
};

void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

std::vector<Backend> Backends() {
  auto sqlite_again = [](const std::filesystem::path& dir) {
    return OpenSqliteStorage((dir / "study.db").string());
  };
  return {
      {"InMemory",
       [](const std::filesystem::path&) -> Result<std::unique_ptr<Storage>> {
         return NewInMemoryStorage();
       }},
      {"Sqlite",
       [](const std::filesystem::path& dir) {
         return OpenSqliteStorage((dir / "study.db").string());
       },
       sqlite_again},
      {"SqliteV300d",
       [](const std::filesystem::path& dir) {
         SqliteOptions o;
         o.schema_revision = "v3.0.0.d";
         return OpenSqliteStorage((dir / "study.db").string(), o);
       },
       sqlite_again},
#ifdef TUNE_TEST_WITH_POSTGRES
      // The database's URL is kept in `dir` for open_again.
      {"Postgres",
       [](const std::filesystem::path& dir) -> Result<std::unique_ptr<Storage>> {
         std::string error;
         std::string url =
             testing::TestPostgres::Get().NewDatabase(dir.filename().string(), &error);
         if (url.empty()) return InternalError("CREATE DATABASE: " + error);
         std::ofstream(dir / "postgres_url") << url;
         return OpenPostgresStorage(url);
       },
       [](const std::filesystem::path& dir) -> Result<std::unique_ptr<Storage>> {
         std::string url;
         std::ifstream in(dir / "postgres_url");
         std::getline(in, url);
         return OpenPostgresStorage(url);
       },
       [] { return testing::TestPostgres::Get().skip_reason(); }},
#endif
  };
}

class StorageConformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam().skip_reason) {
      const std::string reason = GetParam().skip_reason();
      if (!reason.empty()) GTEST_SKIP() << GetParam().name << ": " << reason;
    }
    auto opened = GetParam().open(dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    storage_ = std::move(opened).value();
  }

  int64_t NewStudy(const std::string& name = "s",
                   std::vector<StudyDirection> d = {StudyDirection::kMinimize}) {
    auto id = storage_->CreateStudy(name, d);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or(-1);
  }

  testing::TempDir dir_;
  std::unique_ptr<Storage> storage_;
};

bool SameNumber(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// --- studies --------------------------------------------------------------------------------

TEST_P(StorageConformance, StudiesAreUniqueByNameAndMissingOnesListTheExisting) {
  auto empty = storage_->GetStudyId("s");
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("(the storage has no studies)"), std::string::npos);
  int64_t id = NewStudy("s");
  int64_t other = NewStudy("other");
  EXPECT_NE(id, other);
  auto dup = storage_->CreateStudy("s", {StudyDirection::kMaximize});
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*storage_->GetStudyId("s"), id);
  auto missing = storage_->GetStudyId("ss");
  ASSERT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("did you mean 's'"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("existing studies: "), std::string::npos);
  EXPECT_NE(missing.status().message().find("other"), std::string::npos);
  // The duplicate left nothing behind.
  EXPECT_EQ(storage_->GetStudy(id)->directions,
            std::vector<StudyDirection>{StudyDirection::kMinimize});
  EXPECT_EQ(storage_->GetAllStudies()->size(), 2u);
}

TEST_P(StorageConformance, StudyInfoAndAttributes) {
  int64_t sid = NewStudy("mo", {StudyDirection::kMaximize, StudyDirection::kMinimize});
  ASSERT_TRUE(storage_->SetStudyUserAttr(sid, "owner", "m\u00e9").ok());
  ASSERT_TRUE(storage_->SetStudyUserAttr(sid, "owner", "me").ok());  // overwritten
  ASSERT_TRUE(storage_->SetStudyUserAttr(sid, "cfg", {{"a", {1, 2.5, nullptr}}}).ok());
  ASSERT_TRUE(storage_->SetStudySystemAttr(sid, "k", 1).ok());
  StudyInfo before = *storage_->GetStudy(sid);
  EXPECT_EQ(before.n_trials, 0);
  EXPECT_FALSE(before.datetime_start.has_value());
  FrozenTrial t = *storage_->CreateTrial(sid);
  (void)storage_->CreateTrial(sid);
  StudyInfo info = *storage_->GetStudy(sid);
  EXPECT_EQ(info.study_id, sid);
  EXPECT_EQ(info.name, "mo");
  EXPECT_EQ(info.directions,
            (std::vector<StudyDirection>{StudyDirection::kMaximize, StudyDirection::kMinimize}));
  EXPECT_EQ(info.user_attrs, (Json{{"owner", "me"}, {"cfg", {{"a", {1, 2.5, nullptr}}}}}));
  EXPECT_EQ(info.system_attrs, (Json{{"k", 1}}));
  EXPECT_EQ(*storage_->GetStudySystemAttrs(sid), (Json{{"k", 1}}));
  EXPECT_EQ(storage_->GetStudySystemAttrs(sid + 100).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(**storage_->GetStudySystemAttr(sid, "k"), 1);
  EXPECT_FALSE(storage_->GetStudySystemAttr(sid, "missing")->has_value());
  EXPECT_EQ(storage_->GetStudySystemAttr(sid + 100, "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(info.n_trials, 2);
  ASSERT_TRUE(info.datetime_start.has_value());
  EXPECT_EQ(*info.datetime_start, *t.datetime_start);
  auto all = *storage_->GetAllStudies();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "mo");
  EXPECT_EQ(all[0].n_trials, 2);
  EXPECT_EQ(all[0].user_attrs, info.user_attrs);
  EXPECT_EQ(storage_->SetStudyUserAttr(sid + 100, "k", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetStudy(sid + 100).status().code(), StatusCode::kNotFound);
}

TEST_P(StorageConformance, DeleteStudyRemovesItsTrialsOnly) {
  int64_t a = NewStudy("a");
  int64_t b = NewStudy("b");
  FrozenTrial ta = *storage_->CreateTrial(a);
  ASSERT_TRUE(storage_->SetTrialParam(ta.trial_id, "x", 0.5, *MakeFloatDistribution(0, 1)).ok());
  ASSERT_TRUE(storage_->SetTrialUserAttr(ta.trial_id, "k", "v").ok());
  FrozenTrial tb = *storage_->CreateTrial(b);
  ASSERT_TRUE(storage_->DeleteStudy(a).ok());
  EXPECT_EQ(storage_->GetStudyId("a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetTrial(ta.trial_id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetAllTrials(a).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->DeleteStudy(a).code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetTrial(tb.trial_id)->number, 0);
  // The name is free again, and numbering starts over.
  int64_t a2 = NewStudy("a");
  EXPECT_EQ(storage_->CreateTrial(a2)->number, 0);
  EXPECT_EQ(storage_->CreateTrial(b)->number, 1);
}

// --- numbering ------------------------------------------------------------------------------

TEST_P(StorageConformance, NumbersAreContiguousPerStudy) {
  int64_t a = NewStudy("a");
  int64_t b = NewStudy("b");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(storage_->CreateTrial(a)->number, i);
    EXPECT_EQ(storage_->CreateTrial(b)->number, i);
  }
  EXPECT_EQ(storage_->CreateTrial(a + b + 100).status().code(), StatusCode::kNotFound);
}

TEST_P(StorageConformance, NumbersAreContiguousUnderConcurrency) {
  int64_t sid = NewStudy();
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) {
        auto t = storage_->CreateTrial(sid);
        if (!t.ok()) {
          ++errors;
          continue;
        }
        if (!storage_->SetTrialUserAttr(t->trial_id, "worker", w).ok()) ++errors;
        if (!storage_->SetTrialStateValues(t->trial_id, TrialState::kComplete, {1.0 * w}).ok()) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  auto trials = *storage_->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), 400u);
  std::set<int64_t> ids;
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].number, static_cast<int64_t>(i));
    EXPECT_EQ(trials[i].state, TrialState::kComplete);
    EXPECT_EQ(trials[i].values,
              std::vector<double>{1.0 * trials[i].user_attrs["worker"].get<int>()});
    ids.insert(trials[i].trial_id);
  }
  EXPECT_EQ(ids.size(), 400u);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kComplete}), 400);
}

// --- trial state ----------------------------------------------------------------------------

TEST_P(StorageConformance, FinishedTrialsAreImmutable) {
  int64_t sid = NewStudy();
  FrozenTrial t = *storage_->CreateTrial(sid);
  EXPECT_EQ(t.state, TrialState::kRunning);
  EXPECT_TRUE(t.datetime_start.has_value());
  EXPECT_FALSE(t.datetime_complete.has_value());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "x", 1.5, *MakeFloatDistribution(0, 2)).ok());
  ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, 0, 0.5).ok());
  ASSERT_TRUE(*storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {2.0}));
  Status s = storage_->SetTrialParam(t.trial_id, "y", 1.0, *MakeFloatDistribution(0, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("Trial#0 has already finished and can not be updated"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(storage_->SetTrialParam(t.trial_id, "x", 0.1, *MakeFloatDistribution(0, 2)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->SetTrialIntermediateValue(t.trial_id, 1, 0.1).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->SetTrialUserAttr(t.trial_id, "k", 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->SetTrialSystemAttr(t.trial_id, "k", 1).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->SetTrialStateValues(t.trial_id, TrialState::kFail, {}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {3.0}).status().code(),
            StatusCode::kFailedPrecondition);
  FrozenTrial back = *storage_->GetTrial(t.trial_id);
  EXPECT_EQ(back.state, TrialState::kComplete);
  EXPECT_EQ(back.values, std::vector<double>{2.0});
  EXPECT_EQ(back.params, (std::map<std::string, double>{{"x", 1.5}}));
  EXPECT_EQ(back.intermediate_values, (std::map<int64_t, double>{{0, 0.5}}));
  EXPECT_TRUE(back.user_attrs.empty());
  EXPECT_EQ(back.datetime_start, t.datetime_start);
  ASSERT_TRUE(back.datetime_complete.has_value());
  EXPECT_GE(*back.datetime_complete, *back.datetime_start);
  EXPECT_EQ(storage_->SetTrialUserAttr(t.trial_id + 100, "k", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetTrial(t.trial_id + 100).status().code(), StatusCode::kNotFound);
}

TEST_P(StorageConformance, EveryFinishedStateIsFinal) {
  int64_t sid = NewStudy();
  for (TrialState s : {TrialState::kComplete, TrialState::kPruned, TrialState::kFail}) {
    FrozenTrial t = *storage_->CreateTrial(sid);
    std::vector<double> values;
    if (s == TrialState::kComplete) values = {1.0};
    ASSERT_TRUE(*storage_->SetTrialStateValues(t.trial_id, s, values));
    EXPECT_EQ(storage_->SetTrialStateValues(t.trial_id, TrialState::kRunning, {}).status().code(),
              StatusCode::kFailedPrecondition)
        << TrialStateName(s);
    EXPECT_EQ(storage_->GetTrial(t.trial_id)->state, s);
  }
}

TEST_P(StorageConformance, NaNIsNotATrialValue) {
  int64_t sid = NewStudy();
  FrozenTrial t = *storage_->CreateTrial(sid);
  auto r = storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {kNaN});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(storage_->GetTrial(t.trial_id)->state, TrialState::kRunning);
  FrozenTrial templ;
  templ.state = TrialState::kComplete;
  templ.values = {kNaN};
  EXPECT_EQ(storage_->CreateTrial(sid, &templ).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*storage_->CountTrials(sid), 1);
}

TEST_P(StorageConformance, WaitingTrialsAreClaimedOnceOldestFirst) {
  int64_t sid = NewStudy();
  EXPECT_FALSE(storage_->ClaimWaitingTrial(sid)->has_value());
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  templ.system_attrs["fixed_params"] = {{"x", 1}};
  std::vector<FrozenTrial> waiting;
  for (int i = 0; i < 3; ++i) {
    (void)storage_->CreateTrial(sid);  // a RUNNING trial in between
    waiting.push_back(*storage_->CreateTrial(sid, &templ));
    EXPECT_FALSE(waiting.back().datetime_start.has_value());
    EXPECT_EQ(waiting.back().state, TrialState::kWaiting);
  }
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kWaiting}), 3);
  auto first = *storage_->ClaimWaitingTrial(sid);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->number, waiting[0].number);
  EXPECT_EQ(first->state, TrialState::kRunning);
  EXPECT_TRUE(first->datetime_start.has_value());
  EXPECT_EQ(first->system_attrs["fixed_params"], (Json{{"x", 1}}));

  std::atomic<int> claimed{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<int64_t> numbers;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto c = storage_->ClaimWaitingTrial(sid);
      if (c.ok() && c->has_value()) {
        ++claimed;
        std::lock_guard lock(mu);
        numbers.insert((*c)->number);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(claimed.load(), 2);
  EXPECT_EQ(numbers, (std::set<int64_t>{waiting[1].number, waiting[2].number}));
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kWaiting}), 0);
  // A RUNNING trial cannot be "claimed" again through the state API either.
  EXPECT_FALSE(*storage_->SetTrialStateValues(first->trial_id, TrialState::kRunning, {}));
  EXPECT_EQ(storage_->ClaimWaitingTrial(sid + 100).status().code(), StatusCode::kNotFound);
}

// A config's enqueue_trials: created only in an empty study, all or none, numbered from 0, once
// however many workers start the study together.
TEST_P(StorageConformance, TrialsAreCreatedIfEmptyOnceAcrossThreads) {
  int64_t sid = NewStudy();
  std::vector<FrozenTrial> templates(3);
  for (int i = 0; i < 3; ++i) {
    templates[static_cast<size_t>(i)].state = TrialState::kWaiting;
    templates[static_cast<size_t>(i)].system_attrs["fixed_params"] = {{"i", i}};
  }
  std::atomic<int> created{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto c = storage_->CreateTrialsIfEmpty(sid, templates);
      if (!c.ok()) ++errors;
      if (c.ok()) created += static_cast<int>(c->size());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(created.load(), 3);
  auto trials = *storage_->GetAllTrials(sid);
  ASSERT_EQ(trials.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(trials[static_cast<size_t>(i)].number, i);
    EXPECT_EQ(trials[static_cast<size_t>(i)].state, TrialState::kWaiting);
    EXPECT_EQ(trials[static_cast<size_t>(i)].system_attrs["fixed_params"], (Json{{"i", i}}));
  }
  EXPECT_TRUE(storage_->CreateTrialsIfEmpty(sid, templates)->empty());  // not empty now
  EXPECT_EQ(storage_->CreateTrialsIfEmpty(sid + 100, templates).status().code(),
            StatusCode::kNotFound);
}

TEST_P(StorageConformance, SetStateToRunningClaimsOnlyAWaitingTrial) {
  int64_t sid = NewStudy();
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  FrozenTrial w = *storage_->CreateTrial(sid, &templ);
  EXPECT_TRUE(*storage_->SetTrialStateValues(w.trial_id, TrialState::kRunning, {}));
  FrozenTrial back = *storage_->GetTrial(w.trial_id);
  EXPECT_EQ(back.state, TrialState::kRunning);
  EXPECT_TRUE(back.datetime_start.has_value());
  EXPECT_FALSE(*storage_->SetTrialStateValues(w.trial_id, TrialState::kRunning, {}));
  EXPECT_FALSE(storage_->ClaimWaitingTrial(sid)->has_value());
}

// --- round trips ----------------------------------------------------------------------------

TEST_P(StorageConformance, ParamsAttrsValuesAndIntermediatesRoundTrip) {
  int64_t sid = NewStudy("s", {StudyDirection::kMinimize, StudyDirection::kMaximize});
  FrozenTrial t = *storage_->CreateTrial(sid);
  const Distribution lr = *MakeFloatDistribution(1e-6, 1e-3, /*log=*/true);
  const Distribution wd = *MakeFloatDistribution(0, 1, false, 0.25);
  const Distribution bs = *MakeIntDistribution(128, 512, false, 32);
  const Distribution n = *MakeIntDistribution(1, 1024, true);
  const Distribution c = *MakeCategoricalDistribution({nullptr, true, 1.5, "x", 8});
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "lr", 3.3e-5, lr).ok());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "wd", 0.75, wd).ok());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "bs", 288, bs).ok());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "n", 7, n).ok());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "c", 0, c).ok());
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "c", 3, c).ok());  // the last write wins
  const std::map<int64_t, double> iv = {{0, kInf},  {1, -kInf},  {2, kNaN},
                                        {3, 0.125}, {4, -1e300}, {10, 0.0}};
  for (const auto& [step, v] : iv) {
    ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, step, v).ok());
  }
  ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, 3, 0.25).ok());
  const Json nested = {{"list", {1, 2.5, "x", nullptr, true}},
                       {"obj", {{"k", "\u00fc\u65e5\"quote\"\\"}}},
                       {"big", 1234567890123LL}};
  ASSERT_TRUE(storage_->SetTrialUserAttr(t.trial_id, "nested", nested).ok());
  ASSERT_TRUE(storage_->SetTrialUserAttr(t.trial_id, "nan", kNaN).ok());
  ASSERT_TRUE(storage_->SetTrialUserAttr(t.trial_id, "str_nan", "NaN").ok());
  ASSERT_TRUE(storage_->SetTrialSystemAttr(t.trial_id, "fixed_params", {{"lr", 1e-4}}).ok());
  ASSERT_TRUE(*storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {kInf, -kInf}));

  FrozenTrial back = *storage_->GetTrial(t.trial_id);
  EXPECT_EQ(back.trial_id, t.trial_id);
  EXPECT_EQ(back.number, 0);
  EXPECT_EQ(back.params, (std::map<std::string, double>{
                             {"lr", 3.3e-5}, {"wd", 0.75}, {"bs", 288}, {"n", 7}, {"c", 3}}));
  EXPECT_EQ(back.distributions.at("lr"), lr);
  EXPECT_EQ(back.distributions.at("wd"), wd);
  EXPECT_EQ(back.distributions.at("bs"), bs);
  EXPECT_EQ(back.distributions.at("n"), n);
  EXPECT_EQ(back.distributions.at("c"), c);
  EXPECT_EQ(back.param("c"), "x");
  EXPECT_EQ(back.param("bs"), 288);
  ASSERT_EQ(back.intermediate_values.size(), iv.size());
  for (const auto& [step, v] : iv) {
    double want = step == 3 ? 0.25 : v;
    EXPECT_TRUE(SameNumber(back.intermediate_values.at(step), want)) << "step " << step;
  }
  EXPECT_EQ(back.values, (std::vector<double>{kInf, -kInf}));
  EXPECT_EQ(back.user_attrs["nested"], nested);
  ASSERT_TRUE(back.user_attrs["nan"].is_number_float());
  EXPECT_TRUE(std::isnan(back.user_attrs["nan"].get<double>()));
  EXPECT_EQ(back.user_attrs["str_nan"], "NaN");
  EXPECT_EQ(back.system_attrs, (Json{{"fixed_params", {{"lr", 1e-4}}}}));
  // The same through the bulk readers.
  auto all = *storage_->GetAllTrials(sid);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].params, back.params);
  EXPECT_EQ(all[0].user_attrs["nested"], nested);
  EXPECT_EQ(all[0].values, back.values);
}

TEST_P(StorageConformance, CreateTrialCopiesATemplate) {
  int64_t sid = NewStudy();
  FrozenTrial templ;
  templ.state = TrialState::kComplete;
  templ.values = {0.5};
  templ.params["x"] = 2;
  templ.distributions["x"] = *MakeIntDistribution(0, 10);
  templ.intermediate_values = {{0, 1.0}, {1, kNaN}};
  templ.user_attrs = {{"u", 1}};
  templ.system_attrs = {{"s", "v"}};
  FrozenTrial created = *storage_->CreateTrial(sid, &templ);
  EXPECT_EQ(created.number, 0);
  EXPECT_TRUE(created.datetime_complete.has_value());
  FrozenTrial back = *storage_->GetTrial(created.trial_id);
  EXPECT_EQ(back.state, TrialState::kComplete);
  EXPECT_EQ(back.values, std::vector<double>{0.5});
  EXPECT_EQ(back.params, templ.params);
  EXPECT_EQ(back.distributions, templ.distributions);
  EXPECT_EQ(back.intermediate_values.at(0), 1.0);
  EXPECT_TRUE(std::isnan(back.intermediate_values.at(1)));
  EXPECT_EQ(back.user_attrs, templ.user_attrs);
  EXPECT_EQ(back.system_attrs, templ.system_attrs);
  EXPECT_EQ(back.datetime_complete, created.datetime_complete);
  // Finished on arrival: immutable.
  EXPECT_EQ(storage_->SetTrialUserAttr(created.trial_id, "k", 1).code(),
            StatusCode::kFailedPrecondition);
}

// --- reading --------------------------------------------------------------------------------

TEST_P(StorageConformance, GetTrialsSinceReadsNewAndListedTrials) {
  int64_t sid = NewStudy();
  int64_t other = NewStudy("other");
  std::vector<FrozenTrial> made;
  for (int i = 0; i < 30; ++i) {
    FrozenTrial t = *storage_->CreateTrial(sid);
    (void)storage_->CreateTrial(other);  // interleaved ids
    ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "x", i, *MakeIntDistribution(0, 100)).ok());
    ASSERT_TRUE(storage_->SetTrialUserAttr(t.trial_id, "i", i).ok());
    ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, 0, i).ok());
    if (i % 3 != 0) {
      ASSERT_TRUE(*storage_->SetTrialStateValues(t.trial_id, TrialState::kComplete, {1.0 * i}));
    }
    made.push_back(t);
  }
  auto check = [&](const std::vector<FrozenTrial>& got, const std::vector<int64_t>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const int64_t i = want[k];
      EXPECT_EQ(got[k].number, i);
      EXPECT_EQ(got[k].trial_id, made[static_cast<size_t>(i)].trial_id);
      EXPECT_EQ(got[k].params.at("x"), static_cast<double>(i));
      EXPECT_EQ(got[k].user_attrs["i"], i);
      EXPECT_EQ(got[k].intermediate_values.at(0), static_cast<double>(i));
      EXPECT_EQ(got[k].state, i % 3 ? TrialState::kComplete : TrialState::kRunning);
    }
  };
  // Everything, then a few listed ones with the new ones.
  std::vector<int64_t> all(30);
  for (int i = 0; i < 30; ++i) all[static_cast<size_t>(i)] = i;
  check(*storage_->GetTrialsSince(sid, 0, {}), all);
  check(*storage_->GetTrialsSince(sid, 27, {9, 3, 40, -1, 28}), {3, 9, 27, 28, 29});
  check(*storage_->GetTrialsSince(sid, 30, {0}), {0});
  check(*storage_->GetTrialsSince(sid, 31, {}), {});
  // A new trial after a read is found by the next one.
  FrozenTrial late = *storage_->CreateTrial(sid);
  auto got = *storage_->GetTrialsSince(sid, 30, {});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trial_id, late.trial_id);
  EXPECT_EQ(got[0].number, 30);
  EXPECT_EQ(storage_->GetTrialsSince(sid + other + 100, 0, {}).status().code(),
            StatusCode::kNotFound);
}

// Every field of `got` as `want` has it; `want`'s datetimes come from another read.
void ExpectSameTrial(const FrozenTrial& got, const FrozenTrial& want) {
  SCOPED_TRACE("trial " + std::to_string(want.number));
  EXPECT_EQ(got.trial_id, want.trial_id);
  EXPECT_EQ(got.number, want.number);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.datetime_start, want.datetime_start);
  EXPECT_EQ(got.datetime_complete, want.datetime_complete);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.distributions, want.distributions);
  EXPECT_EQ(got.intermediate_values, want.intermediate_values);
  EXPECT_EQ(got.user_attrs, want.user_attrs);
  EXPECT_EQ(got.system_attrs, want.system_attrs);
}

// A History read of a study with many trials, a quarter of them unfinished, with every kind of
// child row (or none), and another study's trials and rows between them: the listed and the new
// trials come back each once, with exactly the rows written for them; also from a second
// storage that knows only some of the trials' ids.
TEST_P(StorageConformance, GetTrialsSinceReturnsExactlyTheRowsOfTheTrialsRead) {
  int64_t sid = NewStudy("s", {StudyDirection::kMinimize, StudyDirection::kMaximize});
  int64_t other = NewStudy("other");
  const Distribution f = *MakeFloatDistribution(0, 1);
  const Distribution c = *MakeCategoricalDistribution({"a", "b", nullptr});
  constexpr int kTrials = 64;
  std::vector<FrozenTrial> want;
  for (int i = 0; i < kTrials; ++i) {
    FrozenTrial templ;
    templ.state = i % 8 == 7 ? TrialState::kWaiting : TrialState::kRunning;
    FrozenTrial w = *storage_->CreateTrial(sid, &templ);
    FrozenTrial o = *storage_->CreateTrial(other);  // interleaved ids, with rows of its own
    ASSERT_TRUE(storage_->SetTrialParam(o.trial_id, "x", 0.5, f).ok());
    ASSERT_TRUE(storage_->SetTrialParam(o.trial_id, "o", 0.5, f).ok());
    ASSERT_TRUE(storage_->SetTrialIntermediateValue(o.trial_id, 0, -1).ok());
    ASSERT_TRUE(storage_->SetTrialUserAttr(o.trial_id, "i", -i).ok());
    ASSERT_TRUE(storage_->SetTrialSystemAttr(o.trial_id, "o", -i).ok());
    ASSERT_TRUE(*storage_->SetTrialStateValues(o.trial_id, TrialState::kComplete, {-1.0, -2.0}));
    if (i % 5 != 4) {  // else no child rows at all
      w.params["x"] = i / 100.0;
      w.distributions["x"] = f;
      if (i % 2) {
        w.params["c"] = i % 3;
        w.distributions["c"] = c;
      }
      w.intermediate_values[0] = i;
      if (i % 3 == 0) w.intermediate_values[7] = i + 0.5;
      w.user_attrs["i"] = i;
      if (i % 2 == 0) w.user_attrs["even"] = {{"half", i / 2}};
      w.system_attrs["s"] = {i, "x"};
      for (const auto& [name, v] : w.params) {
        ASSERT_TRUE(storage_->SetTrialParam(w.trial_id, name, v, w.distributions.at(name)).ok());
      }
      for (const auto& [step, v] : w.intermediate_values) {
        ASSERT_TRUE(storage_->SetTrialIntermediateValue(w.trial_id, step, v).ok());
      }
      for (const auto& [k, v] : w.user_attrs.items()) {
        ASSERT_TRUE(storage_->SetTrialUserAttr(w.trial_id, k, v).ok());
      }
      for (const auto& [k, v] : w.system_attrs.items()) {
        ASSERT_TRUE(storage_->SetTrialSystemAttr(w.trial_id, k, v).ok());
      }
    }
    if (i % 4 == 0) w.values = {1.0 * i, -1.0 * i};
    const TrialState finals[] = {TrialState::kComplete, TrialState::kPruned, TrialState::kFail};
    if (i % 4 != 3) {
      w.state = finals[i % 4];
      ASSERT_TRUE(*storage_->SetTrialStateValues(w.trial_id, w.state, w.values));
    }
    want.push_back(std::move(w));
  }
  // The datetimes as GetAllTrials reads them (their round trip is tested above).
  auto all = *storage_->GetAllTrials(sid);
  ASSERT_EQ(all.size(), want.size());
  for (size_t k = 0; k < all.size(); ++k) {
    want[k].datetime_start = all[k].datetime_start;
    want[k].datetime_complete = all[k].datetime_complete;
    ExpectSameTrial(all[k], want[k]);
  }
  std::vector<int64_t> unfinished;
  for (const FrozenTrial& w : want) {
    if (!IsFinished(w.state)) unfinished.push_back(w.number);
  }
  ASSERT_EQ(unfinished.size(), static_cast<size_t>(kTrials / 4));
  // Every unfinished trial before 40, one twice, a finished one, numbers out of range, and
  // the trials from 40 on.
  auto expect_since = [&](Storage& storage, int64_t first, const std::vector<int64_t>& listed) {
    auto got = storage.GetTrialsSince(sid, first, listed);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<int64_t> numbers;
    for (const FrozenTrial& t : *got) numbers.push_back(t.number);
    std::vector<int64_t> expected;
    for (const FrozenTrial& w : want) {
      if (w.number >= first || std::count(listed.begin(), listed.end(), w.number)) {
        expected.push_back(w.number);
      }
    }
    ASSERT_EQ(numbers, expected);
    for (const FrozenTrial& t : *got) ExpectSameTrial(t, want[static_cast<size_t>(t.number)]);
  };
  std::vector<int64_t> listed = unfinished;
  listed.insert(listed.end(), {unfinished[2], 4, -1, kTrials + 5});
  expect_since(*storage_, 40, listed);
  expect_since(*storage_, kTrials, listed);
  expect_since(*storage_, kTrials, {unfinished[1]});
  if (!GetParam().open_again) return;
  // A second storage that has read the trials from 24 on only: the listed ones before 24 it
  // finds by number, the others by id.
  auto again = GetParam().open_again(dir_.path());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  expect_since(**again, 24, {});
  expect_since(**again, 40, listed);
}

TEST_P(StorageConformance, GetAllTrialsAndCountTrialsFilterByState) {
  int64_t sid = NewStudy();
  const std::vector<TrialState> finals = {TrialState::kComplete, TrialState::kPruned,
                                          TrialState::kFail, TrialState::kComplete};
  for (TrialState s : finals) {
    FrozenTrial t = *storage_->CreateTrial(sid);
    ASSERT_TRUE(*storage_->SetTrialStateValues(
        t.trial_id, s,
        s == TrialState::kComplete ? std::vector<double>{1} : std::vector<double>{}));
  }
  (void)storage_->CreateTrial(sid);  // RUNNING
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  (void)storage_->CreateTrial(sid, &templ);
  EXPECT_EQ(*storage_->CountTrials(sid), 6);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kComplete}), 2);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kPruned, TrialState::kFail}), 2);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kWaiting}), 1);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kRunning}), 1);
  auto complete = *storage_->GetAllTrials(sid, {TrialState::kComplete});
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0].number, 0);
  EXPECT_EQ(complete[1].number, 3);
  EXPECT_EQ(storage_->GetAllTrials(sid)->size(), 6u);
  int64_t empty = NewStudy("empty");
  EXPECT_EQ(*storage_->CountTrials(empty), 0);
  EXPECT_TRUE(storage_->GetAllTrials(empty)->empty());
  EXPECT_EQ(storage_->CountTrials(sid + empty + 100).status().code(), StatusCode::kNotFound);
}

// --- starting trials -------------------------------------------------------------------------

TEST_P(StorageConformance, StartTrialClaimsWaitingFirstAndStopsAtItsLimit) {
  int64_t sid = NewStudy();
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  templ.system_attrs["fixed_params"] = {{"x", 1}};
  FrozenTrial waiting = *storage_->CreateTrial(sid, &templ);
  StartTrialOptions limit;
  limit.max_started = 2;
  auto first = *storage_->StartTrial(sid, limit);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->trial_id, waiting.trial_id);
  EXPECT_EQ(first->state, TrialState::kRunning);
  EXPECT_TRUE(first->datetime_start.has_value());
  EXPECT_EQ(first->system_attrs["fixed_params"], (Json{{"x", 1}}));
  auto second = *storage_->StartTrial(sid, limit);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->number, 1);
  EXPECT_EQ(second->state, TrialState::kRunning);
  // Two started (one RUNNING, one finished): the limit is reached; WAITING trials don't count.
  ASSERT_TRUE(*storage_->SetTrialStateValues(first->trial_id, TrialState::kComplete, {1.0}));
  (void)storage_->CreateTrial(sid, &templ);
  EXPECT_FALSE(storage_->StartTrial(sid, limit)->has_value());
  EXPECT_EQ(*storage_->CountTrials(sid), 3);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kWaiting}), 1);
  limit.max_started = 3;
  auto third = *storage_->StartTrial(sid, limit);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->number, 2);  // the WAITING one
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kWaiting}), 0);
  // No limit: always starts.
  EXPECT_EQ((*storage_->StartTrial(sid, {}))->number, 3);
  EXPECT_EQ(storage_->StartTrial(sid + 100, {}).status().code(), StatusCode::kNotFound);
}

TEST_P(StorageConformance, StartTrialLimitIsExactUnderConcurrency) {
  int64_t sid = NewStudy();
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  for (int i = 0; i < 5; ++i) (void)storage_->CreateTrial(sid, &templ);
  StartTrialOptions limit;
  limit.max_started = 30;
  std::atomic<int> started{0}, errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&] {
      while (true) {
        auto t = storage_->StartTrial(sid, limit);
        if (!t.ok()) {
          ++errors;
          return;
        }
        if (!t->has_value()) return;
        ++started;
        if (!storage_->SetTrialStateValues((*t)->trial_id, TrialState::kComplete, {0.5}).ok()) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(started.load(), 30);
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kComplete}), 30);
  EXPECT_EQ(*storage_->CountTrials(sid), 30);  // the 5 WAITING ones were claimed, 25 created
}

// --- heartbeats ---------------------------------------------------------------------------

TEST_P(StorageConformance, OnlyRunningTrialsHeartbeat) {
  int64_t sid = NewStudy();
  FrozenTrial running = *storage_->CreateTrial(sid);
  EXPECT_TRUE(storage_->RecordHeartbeat(running.trial_id).ok());
  EXPECT_TRUE(storage_->RecordHeartbeat(running.trial_id).ok());  // again: updated
  FrozenTrial templ;
  templ.state = TrialState::kWaiting;
  FrozenTrial waiting = *storage_->CreateTrial(sid, &templ);
  Status w = storage_->RecordHeartbeat(waiting.trial_id);
  EXPECT_EQ(w.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(w.message().find("Trial#1 is WAITING"), std::string::npos) << w.message();
  ASSERT_TRUE(*storage_->SetTrialStateValues(running.trial_id, TrialState::kComplete, {1.0}));
  Status done = storage_->RecordHeartbeat(running.trial_id);
  EXPECT_EQ(done.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(done.message().find("Trial#0 has already finished"), std::string::npos)
      << done.message();
  EXPECT_EQ(storage_->RecordHeartbeat(waiting.trial_id + 100).code(), StatusCode::kNotFound);
  // A finished trial with an old heartbeat is not stale.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(storage_->FailStaleTrials(sid, 0.1, nullptr)->empty());
  EXPECT_EQ(storage_->GetTrial(running.trial_id)->state, TrialState::kComplete);
}

TEST_P(StorageConformance, StaleTrialsAreFailedOnceAndOthersAreLeftAlone) {
  int64_t sid = NewStudy();
  int64_t other = NewStudy("other");
  FrozenTrial stale = *storage_->CreateTrial(sid);
  ASSERT_TRUE(
      storage_->SetTrialParam(stale.trial_id, "x", 0.25, *MakeFloatDistribution(0, 1)).ok());
  ASSERT_TRUE(storage_->RecordHeartbeat(stale.trial_id).ok());
  FrozenTrial silent = *storage_->CreateTrial(sid);  // never heartbeats: never stale
  StartTrialOptions with_heartbeat;
  with_heartbeat.heartbeat = true;
  FrozenTrial started = **storage_->StartTrial(sid, with_heartbeat);  // first heartbeat at start
  FrozenTrial elsewhere = *storage_->CreateTrial(other);
  ASSERT_TRUE(storage_->RecordHeartbeat(elsewhere.trial_id).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // Heartbeats 0.4 s old are not stale with an hour of grace.
  EXPECT_TRUE(storage_->FailStaleTrials(sid, 3600, nullptr)->empty());
  FrozenTrial fresh = *storage_->CreateTrial(sid);
  ASSERT_TRUE(storage_->RecordHeartbeat(fresh.trial_id).ok());
  auto failed = *storage_->FailStaleTrials(sid, 0.2, nullptr);
  std::set<int64_t> numbers;
  for (const FailedStaleTrial& f : failed) {
    numbers.insert(f.failed.number);
    EXPECT_EQ(f.failed.state, TrialState::kFail);
    EXPECT_TRUE(f.failed.datetime_complete.has_value());
    EXPECT_GT(f.heartbeat_age_seconds, 0.2);
    EXPECT_FALSE(f.retry.has_value());
    ASSERT_TRUE(f.failed.user_attrs.contains("fail_reason"));
    EXPECT_EQ(f.failed.user_attrs["fail_reason"].get<std::string>().rfind("stale: no heartbeat", 0),
              0u);
  }
  // The fresh trial may be failed too if this thread was descheduled for 0.2 s; the others are
  // decided.
  numbers.erase(fresh.number);
  EXPECT_EQ(numbers, (std::set<int64_t>{stale.number, started.number}));
  FrozenTrial back = *storage_->GetTrial(stale.trial_id);
  EXPECT_EQ(back.state, TrialState::kFail);
  EXPECT_EQ(back.params, (std::map<std::string, double>{{"x", 0.25}}));
  EXPECT_EQ(storage_->GetTrial(silent.trial_id)->state, TrialState::kRunning);
  EXPECT_EQ(storage_->GetTrial(elsewhere.trial_id)->state, TrialState::kRunning);
  EXPECT_EQ(storage_->RecordHeartbeat(stale.trial_id).code(), StatusCode::kFailedPrecondition);
  // Each trial is failed once: a second call finds nothing more.
  auto again = storage_->FailStaleTrials(sid, 0.2, nullptr);
  ASSERT_TRUE(again.ok());
  for (const FailedStaleTrial& f : *again) {
    EXPECT_EQ(f.failed.number, fresh.number);
  }
  EXPECT_TRUE(storage_->FailStaleTrials(sid, 0.2, nullptr)->empty());
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kFail}) +
                *storage_->CountTrials(sid, {TrialState::kRunning}),
            4);
  EXPECT_EQ(storage_->FailStaleTrials(sid + other + 100, 1, nullptr).status().code(),
            StatusCode::kNotFound);
}

TEST_P(StorageConformance, StaleTrialsAreRetriedWithTheirParamsAtMostMaxRetryTimes) {
  int64_t sid = NewStudy();
  FrozenTrial t = *storage_->CreateTrial(sid);
  const Distribution d = *MakeCategoricalDistribution({"a", "b"});
  ASSERT_TRUE(storage_->SetTrialParam(t.trial_id, "opt", 1, d).ok());
  ASSERT_TRUE(storage_->SetTrialUserAttr(t.trial_id, "note", "kept").ok());
  ASSERT_TRUE(storage_->SetTrialSystemAttr(t.trial_id, "fixed_params", {{"opt", "b"}}).ok());
  ASSERT_TRUE(storage_->SetTrialIntermediateValue(t.trial_id, 0, 0.5).ok());
  ASSERT_TRUE(storage_->RecordHeartbeat(t.trial_id).ok());
  auto retry = [](const FrozenTrial& failed) { return RetryOfStaleTrial(failed, 2); };
  std::vector<int64_t> chain = {t.number};
  StartTrialOptions with_heartbeat;
  with_heartbeat.heartbeat = true;
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto failed = *storage_->FailStaleTrials(sid, 0.1, retry);
    ASSERT_EQ(failed.size(), 1u) << "round " << round;
    EXPECT_EQ(failed[0].failed.number, chain.back());
    if (round == 2) {
      EXPECT_FALSE(failed[0].retry.has_value());  // two retries were the most
      break;
    }
    ASSERT_TRUE(failed[0].retry.has_value());
    const FrozenTrial& r = *failed[0].retry;
    EXPECT_EQ(r.state, TrialState::kWaiting);
    EXPECT_EQ(r.number, chain.back() + 1);
    EXPECT_FALSE(r.datetime_start.has_value());
    FrozenTrial stored = *storage_->GetTrial(r.trial_id);
    EXPECT_EQ(stored.number, r.number);
    EXPECT_EQ(stored.state, TrialState::kWaiting);
    EXPECT_EQ(stored.params, r.params);
    EXPECT_EQ(stored.system_attrs, r.system_attrs);
    EXPECT_EQ(r.params, (std::map<std::string, double>{{"opt", 1}}));
    EXPECT_EQ(r.distributions.at("opt"), d);
    EXPECT_EQ(r.user_attrs, (Json{{"note", "kept"}}));  // without fail_reason
    EXPECT_TRUE(r.intermediate_values.empty());
    EXPECT_EQ(r.system_attrs["fixed_params"], (Json{{"opt", "b"}}));
    EXPECT_EQ(r.system_attrs["failed_trial"], t.number);  // always the original
    chain.push_back(r.number);
    EXPECT_EQ(r.system_attrs["retry_history"],
              Json(std::vector<int64_t>(chain.begin(), chain.end() - 1)));
    // The retry runs (first heartbeat at its start) and its worker dies too.
    auto claimed = *storage_->StartTrial(sid, with_heartbeat);
    ASSERT_TRUE(claimed.has_value());
    EXPECT_EQ(claimed->trial_id, r.trial_id);
  }
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kFail}), 3);
  EXPECT_EQ(*storage_->CountTrials(sid), 3);
}

TEST_P(StorageConformance, ConcurrentStaleChecksFailAndRetryEachTrialOnce) {
  int64_t sid = NewStudy();
  std::vector<FrozenTrial> zombies;
  for (int i = 0; i < 6; ++i) {
    zombies.push_back(*storage_->CreateTrial(sid));
    ASSERT_TRUE(storage_->RecordHeartbeat(zombies.back().trial_id).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto retry = [](const FrozenTrial& failed) { return RetryOfStaleTrial(failed, 1); };
  std::mutex mu;
  std::vector<int64_t> failed_numbers;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 6; ++w) {
    threads.emplace_back([&] {
      auto failed = storage_->FailStaleTrials(sid, 0.1, retry);
      if (!failed.ok()) {
        ++errors;
        return;
      }
      std::lock_guard lock(mu);
      for (const auto& f : *failed) failed_numbers.push_back(f.failed.number);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::sort(failed_numbers.begin(), failed_numbers.end());
  EXPECT_EQ(failed_numbers, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(*storage_->CountTrials(sid, {TrialState::kFail}), 6);
  auto retries = *storage_->GetAllTrials(sid, {TrialState::kWaiting});
  ASSERT_EQ(retries.size(), 6u);
  std::set<int64_t> originals;
  for (const FrozenTrial& r : retries)
    originals.insert(r.system_attrs["failed_trial"].get<int64_t>());
  EXPECT_EQ(originals, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageConformance, ::testing::ValuesIn(Backends()),
                         [](const ::testing::TestParamInfo<Backend>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace tune

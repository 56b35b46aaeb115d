// The tracking library without a server: TensorBoard's framing and events byte for byte, what a
// trial shows (trial_scalars.h), the MLflow sink's requests, retries and outage over a fake
// HTTP client, the tracker's counts, and the config's "tracking" errors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "config/config.h"
#include "tracking/event_file.h"
#include "tracking/mlflow.h"
#include "tracking/tracker.h"
#include "tracking/trial_scalars.h"
#include "tune/trial_attrs.h"

namespace tune {
namespace {

TEST(EventFileTest, Crc32cOfKnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // RFC 3720's check value
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720, 32 bytes of zeros
}

TEST(EventFileTest, FramesAsTfRecord) {
  const std::string record = FrameRecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(record.substr(12, 3), "abc");
  uint32_t data_crc = 0;
  for (int i = 0; i < 4; ++i)
    data_crc |= static_cast<uint32_t>(static_cast<unsigned char>(record[15 + i])) << (8 * i);
  EXPECT_EQ(data_crc, MaskCrc32c(Crc32c("abc")));
}

TEST(EventFileTest, ScalarEventIsTheProtocolBuffer) {
  // wall_time 1.0 (field 1, fixed64), step 5 (field 2, varint), summary (field 5) holding one
  // value (field 1) with tag "a" (field 1) and simple_value 1.0f (field 2, fixed32).
  const std::string expected(
      "\x09\x00\x00\x00\x00\x00\x00\xf0\x3f"
      "\x10\x05"
      "\x2a\x0a\x0a\x08\x0a\x01"
      "a"
      "\x15\x00\x00\x80\x3f",
      23);
  EXPECT_EQ(ScalarEvent(1.0, 5, "a", 1.0f), expected);
}

FrozenTrial TrainTrial() {
  FrozenTrial t;
  t.number = 3;
  t.state = TrialState::kComplete;
  t.values = {0.75};
  t.user_attrs[attrs::kTrain] = {{"history",
                                  {{{"epoch", 0},
                                    {"train_loss", 0.9},
                                    {"validation_loss", 0.8},
                                    {"macro_f1", 0.5},
                                    {"optimizer_steps", 10},
                                    {"learning_rate", 1e-4},
                                    {"seconds", 2.0}},
                                   {{"epoch", 1},
                                    {"train_loss", 0.4},
                                    {"validation_loss", 0.6},
                                    {"macro_f1", 0.75},
                                    {"optimizer_steps", 20},
                                    {"learning_rate", 5e-5},
                                    {"seconds", 2.0}}}}};
  t.user_attrs[attrs::kMemory] = {{"family", "bert"}, {"estimate", 1000}, {"peak", 900}};
  return t;
}

TEST(TrialScalarsTest, TrainHistoryUnderTrainerNames) {
  const auto scalars = TrialScalars(TrainTrial());
  ASSERT_EQ(scalars.at("train/loss").size(), 2u);
  EXPECT_EQ(scalars.at("train/loss")[1].step, 20);
  EXPECT_DOUBLE_EQ(scalars.at("train/loss")[1].value, 0.4);
  EXPECT_DOUBLE_EQ(scalars.at("eval/loss")[0].value, 0.8);
  EXPECT_DOUBLE_EQ(scalars.at("eval/macro_f1")[1].value, 0.75);
  EXPECT_DOUBLE_EQ(scalars.at("train/epoch")[1].value, 2);
  EXPECT_DOUBLE_EQ(scalars.at("train/learning_rate")[0].value, 1e-4);
  EXPECT_EQ(scalars.at("value")[0].step, 20);
  EXPECT_EQ(scalars.count("seconds") + scalars.count("eval/seconds"), 0u);
  const auto memory = TrialMemoryFigures(TrainTrial());
  EXPECT_EQ(memory.at("memory/estimate"), 1000);
  EXPECT_EQ(memory.at("memory/peak"), 900);
}

TEST(TrialScalarsTest, IntermediateValuesAndNoValueWhenPruned) {
  FrozenTrial t;
  t.state = TrialState::kPruned;
  t.values = {0.5};
  t.intermediate_values = {{0, 1.0}, {1, std::nan("")}, {2, 0.5}};
  const auto scalars = TrialScalars(t);
  ASSERT_EQ(scalars.at("intermediate_value").size(), 2u);  // the NaN is left out
  EXPECT_EQ(scalars.count("value"), 0u);
  EXPECT_EQ(TrialReasonTag(t, "median"), "median");
  // The pruner tune recorded on the trial comes before the caller's guess (tune export passes
  // "pruner": a stored study does not keep its pruner).
  t.system_attrs[attrs::kPrunedBy] = "hyperband";
  EXPECT_EQ(TrialReasonTag(t, "pruner"), "hyperband");
  t.user_attrs[attrs::kReason] = "oom";
  EXPECT_EQ(TrialReasonTag(t, "median"), "oom");
  t.state = TrialState::kComplete;
  t.user_attrs.erase(attrs::kReason);
  EXPECT_EQ(TrialReasonTag(t, "median"), "");
}

// A fake MLflow server: answers each request by path, records them; every connection made by
// Connect() shares them. `delay`: each request's time; in_flight/max_in_flight: how many ran at
// once.
class FakeHttp : public HttpClient {
 public:
  struct Call {
    std::string method, url;
    Json body;
  };
  struct Shared {
    std::mutex mu;
    std::vector<Call> calls;
    bool down = false;
    std::chrono::milliseconds delay{0};
    int in_flight = 0, max_in_flight = 0, connections = 0;
  };
  explicit FakeHttp(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  static std::function<std::unique_ptr<HttpClient>()> Connect(std::shared_ptr<Shared> shared) {
    return [shared] {
      std::lock_guard<std::mutex> lock(shared->mu);
      ++shared->connections;
      return std::make_unique<FakeHttp>(shared);
    };
  }
  Result<HttpResponse> Request(const std::string& method, const std::string& url,
                               const std::string& body) override {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->calls.push_back({method, url, body.empty() ? Json() : Json::parse(body)});
      shared_->max_in_flight = std::max(shared_->max_in_flight, ++shared_->in_flight);
    }
    std::this_thread::sleep_for(shared_->delay);
    std::lock_guard<std::mutex> lock(shared_->mu);
    --shared_->in_flight;
    if (shared_->down) return UnavailableError("connection refused");
    if (url.find("get-by-name") != std::string::npos) {
      return HttpResponse{200, R"({"experiment": {"experiment_id": "7"}})"};
    }
    if (url.find("runs/create") != std::string::npos) {
      return HttpResponse{200, R"({"run": {"info": {"run_id": "r1"}}})"};
    }
    return HttpResponse{200, "{}"};
  }

 private:
  std::shared_ptr<Shared> shared_;
};

TEST(MlflowSinkTest, OneRunPerTrialWithParamsMetricsTagsAndStatus) {
  auto server = std::make_shared<FakeHttp::Shared>();
  const std::vector<FakeHttp::Call>* calls = &server->calls;
  MlflowSink sink({"http://127.0.0.1:5000/", ""}, {"s", {StudyDirection::kMaximize}, "median"},
                  FakeHttp::Connect(server));
  FrozenTrial t = TrainTrial();
  t.params = {{"lr", 0.001}};
  t.distributions = {{"lr", FloatDistribution{1e-5, 1e-1, true}}};
  ASSERT_TRUE(sink.Record(t, StudyTally{}).ok());
  ASSERT_EQ(calls->size(), 4u);  // get-by-name, create, log-batch, update
  EXPECT_EQ((*calls)[0].url,
            "http://127.0.0.1:5000/api/2.0/mlflow/experiments/get-by-name?experiment_name=s");
  const Json& create = (*calls)[1].body;
  EXPECT_EQ(create["experiment_id"], "7");
  EXPECT_EQ(create["run_name"], "3");
  bool has_state = false;
  for (const Json& tag : create["tags"]) {
    if (tag["key"] == "state") has_state = tag["value"] == "COMPLETE";
  }
  EXPECT_TRUE(has_state);
  const Json& batch = (*calls)[2].body;
  EXPECT_EQ(batch["params"][0]["key"], "lr");
  EXPECT_EQ(batch["params"][0]["value"], "0.001");
  EXPECT_EQ(batch["metrics"].size(), 2u * 5 + 1 + 2);  // 5 histories of 2, value, memory x2
  EXPECT_EQ((*calls)[3].body["status"], "FINISHED");
  EXPECT_STREQ(MlflowRunStatus(TrialState::kPruned), "KILLED");
  EXPECT_STREQ(MlflowRunStatus(TrialState::kFail), "FAILED");
}

TEST(MlflowSinkTest, ADownServerIsRetriedThenSkippedForAWhile) {
  auto server = std::make_shared<FakeHttp::Shared>();
  const std::vector<FakeHttp::Call>* calls = &server->calls;
  server->down = true;
  MlflowSink sink({"http://127.0.0.1:1", "e"}, {"s", {StudyDirection::kMinimize}, "median"},
                  FakeHttp::Connect(server));
  FrozenTrial t = TrainTrial();
  const Status first = sink.Record(t, StudyTally{});
  EXPECT_EQ(first.code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls->size(), 3u);  // one call, retried twice
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sink.Record(t, StudyTally{}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls->size(), 3u);  // down: no call at all
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

class CountingSink : public TrackingSink {
 public:
  std::string name() const override { return "counting"; }
  Status Record(const FrozenTrial& trial, const StudyTally& tally) override {
    if (trial.number % 2 == 1) return UnavailableError("odd");
    last_best = tally.best_value.value_or(-1);
    return Status::Ok();
  }
  Status RecordTally(const StudyTally& tally) override {
    complete = tally.by_state.count("COMPLETE") ? tally.by_state.at("COMPLETE") : 0;
    return Status::Ok();
  }
  double last_best = -1;
  int64_t complete = -1;
};

TEST(TrackerTest, CountsRecordedAndMissedAndNeverBlocks) {
  auto sink = std::make_unique<CountingSink>();
  CountingSink* raw = sink.get();
  std::vector<std::unique_ptr<TrackingSink>> sinks;
  sinks.push_back(std::move(sink));
  FrozenTrial stored;
  stored.number = 0;
  stored.state = TrialState::kComplete;
  stored.values = {5.0};
  Tracker tracker(std::move(sinks), {"s", {StudyDirection::kMinimize}, "median"}, {stored});
  for (int i = 1; i <= 6; ++i) {
    FrozenTrial t;
    t.number = i;
    t.state = TrialState::kComplete;
    t.values = {10.0 - i};
    tracker.Add(t);
  }
  const std::vector<SinkCounts> counts = tracker.Finish(10);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].recorded, 3);
  EXPECT_EQ(counts[0].missed, 3);
  EXPECT_EQ(raw->last_best, 4.0);
  EXPECT_EQ(raw->complete, 7);  // the stored trial and the six
}

// A tracker over one MLflow sink of `concurrency` on the fake server.
std::unique_ptr<Tracker> MlflowTracker(const std::shared_ptr<FakeHttp::Shared>& server,
                                       int concurrency) {
  const TrackedStudy study{"s", {StudyDirection::kMinimize}, "median"};
  MlflowOptions options{"http://127.0.0.1:5000", "e"};
  options.concurrency = concurrency;
  std::vector<std::unique_ptr<TrackingSink>> sinks;
  sinks.push_back(std::make_unique<MlflowSink>(options, study, FakeHttp::Connect(server)));
  return std::make_unique<Tracker>(std::move(sinks), study, std::vector<FrozenTrial>());
}

FrozenTrial CompleteTrial(int64_t number, double value) {
  FrozenTrial t;
  t.number = number;
  t.state = TrialState::kComplete;
  t.values = {value};
  return t;
}

TEST(TrackerTest, RecordsUpToTheSinksConcurrencyAtOnceAndTheFinalTallyGiven) {
  auto server = std::make_shared<FakeHttp::Shared>();
  server->delay = std::chrono::milliseconds(20);
  std::unique_ptr<Tracker> tracker = MlflowTracker(server, 4);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) tracker->Add(CompleteTrial(i, 1.0 * i));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));  // no wait
  StudyTally storage_view;  // what another worker's trials add
  storage_view.by_state["COMPLETE"] = 55;
  storage_view.by_state["PRUNED"] = 3;
  const std::vector<SinkCounts> counts =
      tracker->Finish(10, [&] { return std::optional<StudyTally>(storage_view); });
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].recorded, 40);
  EXPECT_EQ(counts[0].missed, 0);
  std::lock_guard<std::mutex> lock(server->mu);
  EXPECT_EQ(server->max_in_flight, 4);  // never more than the concurrency, and that many
  EXPECT_LE(server->connections, 4);    // a connection is kept for the next call
  // 1 experiment lookup + 3 requests per trial, then the counts as the final tally says.
  std::map<std::string, std::string> tags;
  int runs = 0;
  for (const FakeHttp::Call& call : server->calls) {
    if (call.url.find("runs/create") != std::string::npos) ++runs;
    if (call.url.find("set-experiment-tag") != std::string::npos) {
      tags[call.body["key"]] = call.body["value"];
    }
  }
  EXPECT_EQ(runs, 40);
  EXPECT_EQ(tags["tune.trials.COMPLETE"], "55");
  EXPECT_EQ(tags["tune.trials.PRUNED"], "3");
}

TEST(TrackerTest, FinishGivesUpWhenNothingReturnsForTheStallTime) {
  auto server = std::make_shared<FakeHttp::Shared>();
  server->delay = std::chrono::milliseconds(300);
  std::unique_ptr<Tracker> tracker = MlflowTracker(server, 1);
  for (int i = 0; i < 20; ++i) tracker->Add(CompleteTrial(i, 1.0));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<SinkCounts> counts = tracker->Finish(0.1);
  // A trial takes 4 requests of 0.3 s: none returns within 0.1 s, so Finish leaves the queue
  // once the trial in flight returns.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2000));
  EXPECT_EQ(counts[0].recorded + counts[0].missed, 20);
  EXPECT_GE(counts[0].missed, 18);
  EXPECT_EQ(tracker->Finish(10)[0].missed, counts[0].missed);  // idempotent
}

// A sink that notes its Record and Flush calls (thread-safe: the test reads while it records).
class FlushCountingSink : public TrackingSink {
 public:
  std::string name() const override { return "flush-counting"; }
  Status Record(const FrozenTrial& trial, const StudyTally& tally) override {
    (void)tally;
    std::lock_guard<std::mutex> lock(mu);
    recorded.push_back(trial.number);
    return Status::Ok();
  }
  Status RecordTally(const StudyTally& tally) override {
    (void)tally;
    return Status::Ok();
  }
  Status Flush() override {
    std::lock_guard<std::mutex> lock(mu);
    ++flushes;
    flushed = recorded.size();
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<int64_t> recorded;
  int flushes = 0;
  size_t flushed = 0;  // Records written out by the last Flush
};

// A tracker over one FlushCountingSink; `raw` is set to the sink (the tracker owns it).
Tracker FlushCountingTracker(FlushCountingSink*& raw) {
  auto sink = std::make_unique<FlushCountingSink>();
  raw = sink.get();
  std::vector<std::unique_ptr<TrackingSink>> sinks;
  sinks.push_back(std::move(sink));
  return Tracker(std::move(sinks), {"s", {StudyDirection::kMinimize}, "median"}, {});
}

TEST(TrackerTest, RecordsInBatchesFlushedOncePerBatch) {
  FlushCountingSink* raw = nullptr;
  Tracker tracker = FlushCountingTracker(raw);
  const int n = 10 * static_cast<int>(kTrackingBatch);
  for (int i = 0; i < n; ++i) tracker.Add(CompleteTrial(i, 1.0));
  const std::vector<SinkCounts> counts = tracker.Finish(10);
  EXPECT_EQ(counts[0].recorded, n);
  std::lock_guard<std::mutex> lock(raw->mu);
  ASSERT_EQ(raw->recorded.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(raw->recorded[i], i);  // in order (concurrency 1)
  EXPECT_EQ(raw->flushed, raw->recorded.size());               // written out before Finish returned
  EXPECT_GE(raw->flushes, 1);
  EXPECT_LE(raw->flushes, n / static_cast<int>(kTrackingBatch) + 1);  // not once per trial
}

TEST(TrackerTest, ALoneTrialIsRecordedAndFlushedWithinTheBatchDelay) {
  FlushCountingSink* raw = nullptr;
  Tracker tracker = FlushCountingTracker(raw);
  for (int i = 0; i < 3; ++i) {  // trials slower than the delay: each written out on its own
    tracker.Add(CompleteTrial(i, 1.0));
    const auto deadline = std::chrono::steady_clock::now() + 20 * kTrackingBatchDelay;
    bool seen = false;
    while (!seen && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::lock_guard<std::mutex> lock(raw->mu);
      seen = raw->flushed == static_cast<size_t>(i + 1);
    }
    EXPECT_TRUE(seen) << "trial " << i << " not written out without Finish";
  }
  EXPECT_EQ(tracker.Finish(10)[0].recorded, 3);
}

Result<StudyConfig> ParseTracking(const Json& tracking) {
  Json doc = {{"search_space", {{"x", {{"type", "float"}, {"low", 0}, {"high", 1}}}}},
              {"objective", {{"type", "function"}, {"name", "sphere"}, {"dims", 1}}},
              {"tracking", tracking}};
  return ParseStudyConfig(doc, "study.json", "/base");
}

TEST(TrackingConfigTest, ReadsMlflowAndTensorBoard) {
  auto config = ParseTracking(
      {{"mlflow", {{"uri", "http://localhost:5000"}, {"experiment", "e"}}}, {"tensorboard", "tb"}});
  if (!CheckMlflowSupported().ok()) {  // built without libcurl: refused, saying so
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("/tracking/mlflow/uri: this tune was built without "
                                             "libcurl"),
              std::string::npos)
        << config.status().message();
    return;
  }
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->tracking.mlflow->uri, "http://localhost:5000");
  EXPECT_EQ(config->tracking.mlflow->experiment, "e");
  EXPECT_EQ(config->tracking.mlflow->concurrency, 4);
  EXPECT_EQ(*config->tracking.tensorboard, "/base/tb");
}

TEST(TrackingConfigTest, BadInputNamesFileKeyValueAndChoice) {
  auto unknown = ParseTracking({{"mlfow", {{"uri", "http://x"}}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "study.json: /tracking/mlfow: unknown key 'mlfow' (did you mean 'mlflow'?); valid "
            "keys: mlflow, tensorboard");
  auto uri = ParseTracking({{"mlflow", {{"uri", "localhost:5000"}}}});
  ASSERT_FALSE(uri.ok());
  EXPECT_NE(uri.status().message().find("study.json: /tracking/mlflow/uri: 'localhost:5000' is "
                                        "not an MLflow tracking server's address"),
            std::string::npos)
      << uri.status().message();
  EXPECT_NE(uri.status().message().find("did you mean 'http://localhost:5000'?"),
            std::string::npos);
  auto file = ParseTracking({{"mlflow", {{"uri", "file:///tmp/mlruns"}}}});
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("a file store is not written by tune"), std::string::npos);
  auto concurrency = ParseTracking({{"mlflow", {{"uri", "http://x"}, {"concurrency", 0}}}});
  ASSERT_FALSE(concurrency.ok());
  EXPECT_EQ(concurrency.status().message(),
            "study.json: /tracking/mlflow/concurrency: must be 1 to 64 (got 0)");
  auto key = ParseTracking({{"mlflow", {{"uri", "http://x"}, {"experiment_name", "e"}}}});
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("did you mean 'experiment'?"), std::string::npos);
}

}  // namespace
}  // namespace tune

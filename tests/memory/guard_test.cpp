// The memory guard's decisions: admission with levers, the micro-batch halving of oom_retry, and
// the per-family calibration read back from trials' "memory" user attributes.
#include "memory/guard.h"

#include <gtest/gtest.h>

#include <memory>

namespace tune {
namespace {

MemoryRequest BertBase(int64_t batch, int64_t length) {
  static const ModelCatalog catalog = ModelCatalog::Builtin().value();
  MemoryRequest r;
  r.model = *catalog.Find("bert-base-uncased").value();
  r.batch_size = batch;
  r.max_length = length;
  return r;
}

int64_t Peak(const MemoryRequest& r) {
  auto e = EstimateMemory(r, DeviceMemoryModel::Cpu());
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? e->device_peak : 0;
}

Admission Admit(const MemoryRequest& r, int64_t usable, double correction = 1.0,
                const GuardOptions& options = {}) {
  auto a = AdmitTrial(r, FormulaMemoryModel(DeviceMemoryModel::Cpu()), usable, correction, options);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? *a : Admission{};
}

TEST(MemoryGuard, UsableMemoryKeepsTheMargin) {
  EXPECT_EQ(UsableMemory(1000, 0.05), 950);
  EXPECT_EQ(UsableMemory(int64_t{24} << 30, 0.0), int64_t{24} << 30);
}

TEST(MemoryGuard, AConfigurationThatFitsRunsAsItIs) {
  const MemoryRequest r = BertBase(8, 128);
  const Admission a = Admit(r, Peak(r));
  EXPECT_EQ(a.verdict, AdmissionVerdict::kRun);
  EXPECT_EQ(a.request.batch_size, 8);
  EXPECT_EQ(a.predicted, Peak(r));
  EXPECT_TRUE(a.levers.empty());
}

TEST(MemoryGuard, TheCorrectionScalesThePrediction) {
  const MemoryRequest r = BertBase(8, 128);
  // Fits exactly at correction 1; 10% more needed than estimated no longer fits as it is.
  const Admission a = Admit(r, Peak(r), 1.1);
  EXPECT_NE(a.verdict, AdmissionVerdict::kRun);
  EXPECT_EQ(Admit(r, Peak(r), 1.1).requested_estimate, Peak(r));
}

TEST(MemoryGuard, HalvesTheMicroBatchFirstKeepingTheEffectiveBatch) {
  const MemoryRequest r = BertBase(32, 256);
  MemoryRequest half = r;
  half.batch_size = 16;
  half.grad_accum = 2;
  // Room for batch 16 but not for 32.
  const int64_t usable = Peak(half);
  ASSERT_LT(usable, Peak(r));
  const Admission a = Admit(r, usable);
  EXPECT_EQ(a.verdict, AdmissionVerdict::kRunWithLevers);
  EXPECT_EQ(a.request.batch_size, 16);
  EXPECT_EQ(a.request.grad_accum, 2);
  EXPECT_FALSE(a.request.gradient_checkpointing);
  EXPECT_EQ(a.request.batch_size * a.request.grad_accum, 32);
  EXPECT_EQ(a.estimate.device_peak, Peak(half));
  EXPECT_EQ(a.levers, "batch_size 32 -> 16, grad_accum 1 -> 2");
}

TEST(MemoryGuard, TurnsOnCheckpointingWhenHalvingIsNotAllowedOrNotEnough) {
  const MemoryRequest r = BertBase(32, 512);
  MemoryRequest ckpt = r;
  ckpt.gradient_checkpointing = true;
  GuardOptions no_halving;
  no_halving.lever_grad_accum = false;
  Admission a = Admit(r, Peak(ckpt), 1.0, no_halving);
  EXPECT_EQ(a.verdict, AdmissionVerdict::kRunWithLevers);
  EXPECT_TRUE(a.request.gradient_checkpointing);
  EXPECT_EQ(a.request.batch_size, 32);
  EXPECT_EQ(a.levers, "gradient_checkpointing on");

  // Both levers: below batch 1 without checkpointing, checkpointing at batch 4 still fits.
  MemoryRequest one = r;
  one.batch_size = 1;
  one.grad_accum = 32;
  MemoryRequest ckpt4 = ckpt;
  ckpt4.batch_size = 4;
  ckpt4.grad_accum = 8;
  ASSERT_LT(Peak(ckpt4), Peak(one));
  a = Admit(r, Peak(ckpt4));
  EXPECT_EQ(a.verdict, AdmissionVerdict::kRunWithLevers);
  EXPECT_TRUE(a.request.gradient_checkpointing);
  EXPECT_EQ(a.request.batch_size, 4);
  EXPECT_EQ(a.request.grad_accum, 8);
}

TEST(MemoryGuard, RejectsWhatNoLeverMakesFit) {
  const MemoryRequest r = BertBase(16, 128);
  // Less than the weights and AdamW state alone (16 bytes per parameter).
  const Admission a = Admit(r, int64_t{1} << 30);
  EXPECT_EQ(a.verdict, AdmissionVerdict::kReject);
  EXPECT_EQ(a.request.batch_size, 16);
  EXPECT_EQ(a.requested_estimate, Peak(r));

  GuardOptions no_levers;
  no_levers.lever_grad_accum = no_levers.lever_checkpointing = false;
  MemoryRequest half = r;
  half.batch_size = 8;
  EXPECT_EQ(Admit(r, Peak(half), 1.0, no_levers).verdict, AdmissionVerdict::kReject);
}

TEST(MemoryGuard, HalveMicroBatchKeepsTheEffectiveBatchOrRefuses) {
  int64_t b = 12, g = 1;
  EXPECT_TRUE(HalveMicroBatch(b, g));
  EXPECT_EQ(b, 6);
  EXPECT_EQ(g, 2);
  EXPECT_TRUE(HalveMicroBatch(b, g));
  EXPECT_EQ(b * g, 12);
  EXPECT_FALSE(HalveMicroBatch(b, g));  // 3 is odd
  EXPECT_EQ(b, 3);
  EXPECT_EQ(g, 4);
  b = 1;
  EXPECT_FALSE(HalveMicroBatch(b, g));
}

TEST(MemoryGuard, FamiliesKeyOnModelTypeAndPrecision) {
  ModelSpec m;
  m.name = "microsoft/deberta-v3-base";
  m.model_type = "deberta-v2";
  EXPECT_EQ(MemoryFamily(m, Precision::kFp32), "deberta-v2");
  EXPECT_EQ(MemoryFamily(m, Precision::kBf16), "deberta-v2/bf16");
}

TEST(MemoryCalibration, FitsTheLargestMeasuredRatioAndLearnsFromOoms) {
  MemoryCalibration c;
  EXPECT_EQ(c.Correction("bert"), 1.0);
  c.Add({"bert", 1000, 10000, 1100, false});
  c.Add({"bert", 1000, 10000, 1050, false});
  EXPECT_DOUBLE_EQ(c.Correction("bert"), 1.1);
  EXPECT_EQ(c.Correction("roberta"), 1.0);  // other families are untouched
  // Overestimates lower the correction, but not below kMin.
  c.Add({"roberta", 1000, 10000, 500, false});
  EXPECT_DOUBLE_EQ(c.Correction("roberta"), MemoryCalibration::kMin);
  // A run-time OOM at estimate 4000 under a 5000-byte budget: the estimate was at least
  // 5000/4000 too low.
  c.Add({"bert", 4000, 5000, -1, true});
  EXPECT_DOUBLE_EQ(c.Correction("bert"), 1.25 * MemoryCalibration::kOomStep);
  // Records without a measurement (predicted OOMs) teach nothing.
  c.Add({"mlp", 1000, 10000, -1, false});
  EXPECT_EQ(c.Correction("mlp"), 1.0);
  EXPECT_EQ(c.records("bert"), 3);
}

TEST(MemoryCalibration, ModelsLearnTheirOwnCorrectionAndUnseenOnesTheFamilysAtLeastOne) {
  MemoryCalibration c;
  c.Add({"bert", 1000, 10000, 900, false, "bert-base-uncased"});
  c.Add({"bert", 1000, 10000, 1150, false, "bert-large-uncased"});
  EXPECT_DOUBLE_EQ(c.Correction("bert", "bert-base-uncased"), 0.9);
  EXPECT_DOUBLE_EQ(c.Correction("bert", "bert-large-uncased"), 1.15);
  EXPECT_DOUBLE_EQ(c.Correction("bert"), 1.15);  // the family: the largest of its models
  // A model never measured: the family's, at least 1, with headroom.
  EXPECT_DOUBLE_EQ(c.Correction("bert", "prajjwal1/bert-mini"),
                   1.15 * MemoryCalibration::kUnmeasuredHeadroom);
  c = MemoryCalibration();
  c.Add({"roberta", 1000, 10000, 900, false, "roberta-base"});
  EXPECT_DOUBLE_EQ(c.Correction("roberta", "roberta-large"),
                   MemoryCalibration::kUnmeasuredHeadroom);
  EXPECT_DOUBLE_EQ(c.Correction("deberta-v2", "microsoft/deberta-v3-base"),
                   MemoryCalibration::kUnmeasuredHeadroom);
}

TEST(MemoryCalibration, AnOomUnderAJobsCapRaisesThatModelByTheCappedStep) {
  MemoryCalibration c;
  // Reserved (and capped at) 1100 for an estimate of 1000: it needed more than 1100.
  c.Add({"bert", 1000, 24000, -1, true, "bert-large-uncased", 1100});
  EXPECT_DOUBLE_EQ(c.Correction("bert", "bert-large-uncased"),
                   1.1 * MemoryCalibration::kCappedOomStep);
  // The device's size does not enter: the cap was the budget.
  EXPECT_LT(c.Correction("bert"), 2.0);
  const MemoryRecord r{"bert", 1000, 24000, -1, true, "bert-large-uncased", 1100};
  const auto back = MemoryRecordsFromJson(MemoryRecordToJson(r));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].model, "bert-large-uncased");
  EXPECT_EQ(back[0].cap, 1100);
}

TEST(MemoryCalibration, OnlyTheLatestWindowOfMeasurementsCounts) {
  MemoryCalibration c;
  c.Add({"bert", 1000, 10000, 2000, false});
  for (size_t k = 0; k < MemoryCalibration::kWindow; ++k) c.Add({"bert", 1000, 10000, 1010, false});
  EXPECT_DOUBLE_EQ(c.Correction("bert"), 1.01);
}

TEST(MemoryCalibration, ReadsTheMemoryAttributesOfFinishedTrials) {
  TrialHistory history;
  auto add = [&](TrialState state, Json memory) {
    auto t = std::make_shared<FrozenTrial>();
    t->number = static_cast<int64_t>(history.trials.size());
    t->state = state;
    t->user_attrs["memory"] = std::move(memory);
    history.trials.push_back(t);
  };
  add(TrialState::kComplete,
      {{"family", "bert"}, {"estimate", 1000}, {"device_memory", 5000}, {"peak", 1200}});
  // A retried trial: the first attempt (estimate 3000) ran out of memory under 5000 bytes.
  add(TrialState::kComplete, {{"family", "bert"},
                              {"estimate", 1500},
                              {"device_memory", 5000},
                              {"peak", 1500},
                              {"oom_retries", Json::array({{{"estimate", 3000}}})}});
  // RUNNING trials and malformed attributes are skipped.
  add(TrialState::kRunning, {{"family", "bert"}, {"estimate", 1000}, {"peak", 9000}});
  add(TrialState::kComplete, {{"family", "bert"}, {"estimate", "lots"}, {"peak", 9000}});
  add(TrialState::kComplete, Json("not an object"));
  const MemoryCalibration c = CalibrationFromHistory(history);
  EXPECT_EQ(c.records("bert"), 3);
  EXPECT_DOUBLE_EQ(c.Correction("bert"), 5000.0 / 3000.0 * MemoryCalibration::kOomStep);
}

// On CUDA the estimate is a device peak (allocated peak, fragmentation, workspaces, context): the
// trial's counterpart is the caching allocator's reserved peak plus that context, not its
// allocated peak. Comparing with the allocated peak alone drove corrections to their floor and
// predictions below what the allocator reserves (run-time OOMs under --jobs caps on an H200).
TEST(MemoryCalibration, CudaTrialsCompareTheirReservedPeakAndContext) {
  Json memory = {{"family", "xlm-roberta/bf16"},
                 {"estimate", 8000},
                 {"peak", 6000},  // allocated
                 {"context", 500},
                 {"peak_reserved", 7100},  // the run's fields
                 {"before", 0},
                 {"after", 0}};
  auto calibrated = [](const Json& m) {
    TrialHistory history;
    auto t = std::make_shared<FrozenTrial>();
    t->state = TrialState::kComplete;
    t->user_attrs["memory"] = m;
    history.trials.push_back(t);
    return CalibrationFromHistory(history).Correction("xlm-roberta/bf16");
  };
  EXPECT_DOUBLE_EQ(calibrated(memory), 7600.0 / 8000.0);
  // Records written before the context was (and CPU records) compare the peak.
  memory.erase("context");
  EXPECT_DOUBLE_EQ(calibrated(memory), MemoryCalibration::kMin);  // 6000 / 8000, at the floor
}

TEST(MemoryCalibration, RecordsRoundTripThroughJson) {
  const MemoryRecord r{"deberta-v2/bf16", 123456789, 24000000000, 130000000, false};
  const auto back = MemoryRecordsFromJson(MemoryRecordToJson(r));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].family, r.family);
  EXPECT_EQ(back[0].estimate, r.estimate);
  EXPECT_EQ(back[0].device_memory, r.device_memory);
  EXPECT_EQ(back[0].peak, r.peak);
  EXPECT_EQ(back[0].oom, r.oom);
}

}  // namespace
}  // namespace tune

// Loading a Hugging Face-style safetensors checkpoint into the LibTorch model
// (src/torch/torch_pretrained.h): the tests write their own checkpoints from a model with known
// weights, load them into a differently initialised model, and check every parameter, the forward
// pass, and the errors for checkpoints that do not fit.
#include "torch/torch_pretrained.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>

#include "checkpoints/safetensors.h"
#include "config/config.h"
#include "study/study_summary.h"
#include "testing/temp_dir.h"
#include "testing/tiny_encoders.h"
#include "tokenizers/byte_bpe.h"
#include "tokenizers/tokenizer.h"
#include "torch/torch_trainer.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"

namespace tune::internal {
namespace {

using testing::TinyBertConfig;
using testing::TinyDebertaConfig;

TransformerClassifier Build(const EncoderConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  HeadConfig head;
  head.num_labels = 3;
  return TransformerClassifier(c, head);
}

// The model's encoder parameters under Hugging Face names: `prefix` before each, the pooler
// renamed by `pooler_name`, a tensor dropped or reshaped by `edit`.
std::vector<SafetensorsWriteTensor> Export(
    TransformerClassifier& model, const std::string& prefix, TensorDtype dtype = TensorDtype::kF32,
    const std::function<bool(SafetensorsWriteTensor&)>& edit = nullptr) {
  std::vector<SafetensorsWriteTensor> out;
  for (const auto& p : model->named_parameters()) {
    if (p.key().rfind("classifier.", 0) == 0) continue;
    torch::Tensor t = p.value().detach().contiguous();
    SafetensorsWriteTensor w;
    w.name = (p.key().rfind("pooler.", 0) == 0 && prefix == "deberta." ? "" : prefix) + p.key();
    w.shape = t.sizes().vec();
    w.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    w.dtype = dtype;
    if (edit && !edit(w)) continue;
    out.push_back(std::move(w));
  }
  return out;
}

torch::Tensor Hidden(TransformerClassifier& model) {
  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor ids = torch::tensor({{2, 7, 9, 11, 3, 0}, {2, 5, 3, 0, 0, 0}}, torch::kLong);
  torch::Tensor mask = (ids != 0).to(torch::kLong);
  mask[0][0] = 1;
  return model->Encode(ids, mask);
}

class PretrainedTest : public ::testing::Test {
 protected:
  std::string Path() const { return (dir_.path() / "model.safetensors").string(); }
  void Write(const std::vector<SafetensorsWriteTensor>& tensors) {
    ASSERT_TRUE(WriteSafetensors(Path(), tensors, {{"format", "pt"}}).ok());
  }
  testing::TempDir dir_;
};

TEST_F(PretrainedTest, BertWeightsRoundTripAndDriveTheForwardPass) {
  TransformerClassifier source = Build(TinyBertConfig(), 1);
  std::vector<SafetensorsWriteTensor> tensors = Export(source, "bert.");
  // What a BertForPreTraining checkpoint carries besides the encoder.
  tensors.push_back({"cls.predictions.bias", {40}, std::vector<float>(40, 0.5f)});
  Write(tensors);

  TransformerClassifier target = Build(TinyBertConfig(), 2);
  const torch::Tensor head_before = target->named_parameters()["classifier.out.weight"].clone();
  ASSERT_FALSE(torch::equal(Hidden(source), Hidden(target)));
  auto report = LoadPretrainedWeights(*target, Path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->prefix, "bert.");
  EXPECT_EQ(report->loaded, static_cast<int64_t>(tensors.size()) - 1);
  EXPECT_EQ(report->unexpected, (std::vector<std::string>{"cls.predictions.bias"}));
  EXPECT_EQ(report->fresh,
            (std::vector<std::string>{"classifier.out.weight", "classifier.out.bias"}));
  auto want = source->named_parameters();
  for (const auto& p : target->named_parameters()) {
    if (p.key().rfind("classifier.", 0) == 0) continue;
    EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << p.key();
  }
  EXPECT_TRUE(torch::equal(target->named_parameters()["classifier.out.weight"], head_before));
  // The forward pass runs on the loaded weights: the same hidden states as the source model.
  EXPECT_TRUE(torch::allclose(Hidden(source), Hidden(target), 1e-6, 1e-6));
}

TEST_F(PretrainedTest, Bf16WithoutPrefixAndOldLayerNormNames) {
  TransformerClassifier source = Build(TinyBertConfig(), 1);
  Write(Export(source, "", TensorDtype::kBF16, [](SafetensorsWriteTensor& w) {
    const std::string ln = "LayerNorm.weight";
    if (w.name.size() > ln.size() &&
        w.name.compare(w.name.size() - ln.size(), ln.size(), ln) == 0) {
      w.name = w.name.substr(0, w.name.size() - 6) + "gamma";
    }
    return true;
  }));
  TransformerClassifier target = Build(TinyBertConfig(), 2);
  auto report = LoadPretrainedWeights(*target, Path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->prefix, "");
  EXPECT_TRUE(report->unexpected.empty());
  auto want = source->named_parameters();
  for (const auto& p : target->named_parameters()) {
    if (p.key().rfind("classifier.", 0) == 0) continue;
    // Stored as bfloat16: equal to the source rounded to bfloat16, not to the source itself.
    torch::Tensor rounded = want[p.key()].to(torch::kBFloat16).to(torch::kFloat);
    EXPECT_TRUE(torch::equal(p.value(), rounded)) << p.key();
  }
  EXPECT_FALSE(torch::equal(target->named_parameters()["encoder.layer.0.output.dense.weight"],
                            want["encoder.layer.0.output.dense.weight"]));
}

TEST_F(PretrainedTest, DebertaWithATopLevelPooler) {
  TransformerClassifier source = Build(TinyDebertaConfig(), 1);
  Write(Export(source, "deberta.", TensorDtype::kF16));
  TransformerClassifier target = Build(TinyDebertaConfig(), 2);
  auto report = LoadPretrainedWeights(*target, Path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->prefix, "deberta.");
  EXPECT_EQ(report->fresh.size(), 2u);  // only the head: the pooler came from "pooler.dense.*"
  EXPECT_TRUE(torch::allclose(target->named_parameters()["encoder.rel_embeddings.weight"],
                              source->named_parameters()["encoder.rel_embeddings.weight"], 1e-3,
                              1e-3));
  EXPECT_TRUE(torch::allclose(Hidden(source), Hidden(target), 2e-2, 2e-2));
}

TEST_F(PretrainedTest, APretrainingCheckpointWithoutPoolerLeavesItFresh) {
  TransformerClassifier source = Build(TinyBertConfig(), 1);
  Write(Export(source, "roberta.", TensorDtype::kF32, [](SafetensorsWriteTensor& w) {
    return w.name.find("pooler") == std::string::npos;
  }));
  TransformerClassifier target = Build(TinyBertConfig(), 2);
  auto report = LoadPretrainedWeights(*target, Path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->prefix, "roberta.");
  EXPECT_EQ(report->fresh,
            (std::vector<std::string>{"pooler.dense.weight", "pooler.dense.bias",
                                      "classifier.out.weight", "classifier.out.bias"}));
}

TEST_F(PretrainedTest, AMissingTensorIsAnErrorNamingItAndItsShape) {
  TransformerClassifier source = Build(TinyBertConfig(), 1);
  Write(Export(source, "bert.", TensorDtype::kF32, [](SafetensorsWriteTensor& w) {
    return w.name != "bert.encoder.layer.1.output.dense.weight";
  }));
  TransformerClassifier target = Build(TinyBertConfig(), 2);
  const torch::Tensor before =
      target->named_parameters()["embeddings.word_embeddings.weight"].clone();
  Status st = LoadPretrainedWeights(*target, Path()).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(Path()), std::string::npos) << st.message();
  EXPECT_NE(
      st.message().find(
          "missing tensor 'bert.encoder.layer.1.output.dense.weight' (expected shape [16, 24])"),
      std::string::npos)
      << st.message();
  // Nothing was copied.
  EXPECT_TRUE(
      torch::equal(target->named_parameters()["embeddings.word_embeddings.weight"], before));
}

TEST_F(PretrainedTest, AWrongShapeIsAnErrorWithExpectedAndFound) {
  TransformerClassifier source = Build(TinyBertConfig(), 1);
  Write(Export(source, "bert.", TensorDtype::kF32, [](SafetensorsWriteTensor& w) {
    if (w.name == "bert.encoder.layer.0.intermediate.dense.weight")
      std::swap(w.shape[0], w.shape[1]);
    return true;
  }));
  TransformerClassifier target = Build(TinyBertConfig(), 2);
  Status st = LoadPretrainedWeights(*target, Path()).status();
  EXPECT_NE(st.message().find("tensor 'bert.encoder.layer.0.intermediate.dense.weight': expected "
                              "shape [24, 16] (parameter 'encoder.layer.0.intermediate.dense."
                              "weight'), found [16, 24]"),
            std::string::npos)
      << st.message();
}

TEST_F(PretrainedTest, NotAnEncoderCheckpointOrNotSafetensors) {
  Write({{"transformer.h.0.attn.weight", {2}, {1, 2}}});
  TransformerClassifier target = Build(TinyBertConfig(), 2);
  Status st = LoadPretrainedWeights(*target, Path()).status();
  EXPECT_NE(st.message().find("no tensor 'embeddings.word_embeddings.weight'"), std::string::npos)
      << st.message();
  std::ofstream(Path(), std::ios::trunc) << "not safetensors at all";
  st = LoadPretrainedWeights(*target, Path()).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not a valid safetensors file"), std::string::npos) << st.message();
}

// The train objective's "pretrained" key end to end: config.json builds the model, vocab.txt the
// tokenizer, and every trial starts from model.safetensors.
class PretrainedObjectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> texts;
    std::ofstream train(dir_.path() / "train.jsonl");
    for (int i = 0; i < 400; ++i) {
      const std::string label = i % 2 ? "pos" : "neg";
      texts.push_back(fmt::format("{} word{} filler{} {}", i % 2 ? "good great" : "bad awful",
                                  i % 7, i % 5, i % 2 ? "fine" : "poor"));
      train << Json{{"text", texts.back()}, {"label", label}}.dump() << "\n";
    }
    Tokenizer tok = Tokenizer::Build(texts, TokenizerOptions{});
    std::filesystem::create_directories(ckpt_);
    std::ofstream vocab(ckpt_ / "vocab.txt");
    for (int32_t id = 0; id < tok.vocab_size(); ++id) vocab << tok.TokenText(id) << "\n";
    Json config = {
        {"model_type", "bert"},          {"hidden_size", 16},       {"num_hidden_layers", 2},
        {"num_attention_heads", 2},      {"intermediate_size", 24}, {"vocab_size", 40},
        {"max_position_embeddings", 20}, {"type_vocab_size", 2},    {"layer_norm_eps", 1e-12}};
    config["vocab_size"] = std::max<int64_t>(40, tok.vocab_size());
    vocab_size_ = config["vocab_size"].get<int64_t>();
    std::ofstream(ckpt_ / "config.json") << config.dump();
  }
  // Turns the checkpoint into a RoBERTa one as published: model_type roberta, a byte-level BPE
  // vocab.json (the 4 specials, then GPT-2's 256-symbol byte alphabet) and merges.txt, no
  // vocab.txt; the weights under "roberta.".
  void MakeRoberta() {
    std::filesystem::remove(ckpt_ / "vocab.txt");
    Json vocab = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
    for (int b = 0; b < 256; ++b) {
      vocab[ByteLevel(std::string(1, static_cast<char>(b)))] = 4 + b;
    }
    // Two merges: "go" and "Ġgo" (the space before a word is "Ġ").
    vocab["go"] = 260;
    vocab["\u0120go"] = 261;
    std::ofstream(ckpt_ / "vocab.json") << vocab.dump();
    std::ofstream(ckpt_ / "merges.txt") << "#version: 0.2\ng o\n\u0120 go\n";
    std::ifstream in(ckpt_ / "config.json");
    Json config = Json::parse(in);
    config["model_type"] = "roberta";
    config["vocab_size"] = vocab_size_ = 262;
    std::ofstream(ckpt_ / "config.json", std::ios::trunc) << config.dump();
    prefix_ = "roberta.";
  }
  void WriteWeights(float poison = 0.0f) { WriteWeightsTo(ckpt_, poison); }
  void WriteWeightsTo(const std::filesystem::path& dir, float poison) {
    EncoderConfig c = TinyBertConfig();
    c.vocab_size = vocab_size_;
    c.roberta_positions = prefix_ == "roberta.";
    TransformerClassifier source = Build(c, 7);
    ASSERT_TRUE(WriteSafetensors((dir / "model.safetensors").string(),
                                 Export(source, prefix_, TensorDtype::kF32,
                                        [&](SafetensorsWriteTensor& w) {
                                          if (poison != 0.0f &&
                                              w.name.find("word_embeddings") != std::string::npos) {
                                            for (float& v : w.values) v = poison;
                                          }
                                          return true;
                                        }))
                    .ok());
  }
  Result<FrozenTrial> RunOneTrial() {
    Json doc = {{"direction", "maximize"},
                {"search_space", {{"learning_rate", Json::array({3e-3})}}},
                {"objective",
                 {{"type", "train"},
                  {"data", {{"train", "train.jsonl"}, {"validation_fraction", 0.25}}},
                  {"pretrained", "ckpt"},
                  {"threads", 1},
                  {"epochs", 6},
                  {"max_length", 16},
                  {"dropout", 0.0}}}};
    TUNE_ASSIGN_OR_RETURN(StudyConfig c, ParseStudyConfig(doc, "study.json", dir_.path()));
    TorchTrainerOptions o;
    o.threads = 1;
    TUNE_ASSIGN_OR_RETURN(auto trainer, NewTorchTrainer(o));
    TUNE_ASSIGN_OR_RETURN(auto objective, MakeObjective(c, std::move(trainer)));
    TUNE_ASSIGN_OR_RETURN(
        auto study,
        Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMaximize},
                            std::make_unique<RandomSampler>(), std::make_unique<NopPruner>(), 1));
    TUNE_ASSIGN_OR_RETURN(auto trial, study->Ask());
    std::vector<Json> choice = {3e-3};
    TUNE_RETURN_IF_ERROR(
        trial->Suggest("learning_rate", *MakeCategoricalDistribution(choice)).status());
    TUNE_ASSIGN_OR_RETURN(TrialOutcome outcome, objective->Run(*trial, trial->params()));
    return study->Tell(*trial, outcome.state, outcome.values);
  }
  testing::TempDir dir_;
  std::filesystem::path ckpt_ = dir_.path() / "ckpt";
  int64_t vocab_size_ = 0;
  std::string prefix_ = "bert.";
};

TEST_F(PretrainedObjectiveTest, TrialsStartFromTheCheckpoint) {
  WriteWeights();
  auto t = RunOneTrial();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->state, TrialState::kComplete) << t->user_attrs.dump();
  EXPECT_GT(t->value(), 0.8) << t->user_attrs.dump();
  EXPECT_EQ(t->user_attrs["train"]["num_parameters"].get<int64_t>(), [&] {
    ModelSpec m;
    m.hidden_size = 16;
    m.intermediate_size = 24;
    m.num_hidden_layers = 2;
    m.vocab_size = vocab_size_;
    m.max_position_embeddings = 20;
    m.type_vocab_size = 2;
    return EncoderParameterCount(m) + 16 * 2 + 2;
  }());
  // Proof that the weights reach the trainer: NaN word embeddings fail the run before its first
  // step, naming the tensor.
  WriteWeights(std::nanf(""));
  t = RunOneTrial();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state, TrialState::kFail);
  EXPECT_NE(t->user_attrs["fail_reason"].get<std::string>().find("diverged"), std::string::npos);
  EXPECT_NE(t->user_attrs["fail_reason"].get<std::string>().find("bert.embeddings.word_embeddings"),
            std::string::npos);
}

// Wraps a trainer: the Train() calls listed in `poisoned` (0-based) get evaluation outputs made
// NaN (through TrainJob::on_eval_outputs) while their training loss stays finite, as an fp16
// forward that overflows only at evaluation would.
class PoisoningTrainer : public Trainer {
 public:
  PoisoningTrainer(std::unique_ptr<Trainer> inner, std::set<int> poisoned)
      : inner_(std::move(inner)), poisoned_(std::move(poisoned)) {}
  std::string name() const override { return inner_->name(); }
  Result<TrainResult> Train(const TrainJob& job, const EpochCallback& on_epoch) override {
    TrainJob copy = job;
    if (poisoned_.count(calls_++)) {
      copy.on_eval_outputs = [](int64_t, std::vector<float>& out) {
        for (size_t i = 0; i < out.size(); i += 3) out[i] = std::nanf("");
      };
    }
    return inner_->Train(copy, on_epoch);
  }

 private:
  std::unique_ptr<Trainer> inner_;
  std::set<int> poisoned_;
  int calls_ = 0;
};

// docs/config.md "Non-finite values": a checkpoint with NaN weights and a run whose evaluation
// outputs are NaN (its training loss finite) each end FAIL with reason "nonfinite" and where it
// was found; the study goes on, the other trials COMPLETE, and the summary counts them.
TEST_F(PretrainedObjectiveTest, NonFiniteWeightsAndOutputsFailTheirTrialsAndTheStudyGoesOn) {
  WriteWeights();
  const std::filesystem::path bad = dir_.path() / "ckpt-nan";
  std::filesystem::create_directories(bad);
  for (const char* f : {"config.json", "vocab.txt"}) std::filesystem::copy_file(ckpt_ / f, bad / f);
  WriteWeightsTo(bad, std::nanf(""));
  Json doc = {
      {"direction", "maximize"},
      {"search_space",
       {{"model", Json::array({"ckpt", "ckpt-nan"})}, {"learning_rate", Json::array({3e-3})}}},
      {"objective",
       {{"type", "train"},
        {"data", {{"train", "train.jsonl"}, {"validation_fraction", 0.25}}},
        {"threads", 1},
        {"epochs", 2},
        {"max_length", 16},
        {"dropout", 0.0}}}};
  auto c = ParseStudyConfig(doc, "study.json", dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  TorchTrainerOptions o;
  o.threads = 1;
  auto trainer = NewTorchTrainer(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  // Train() calls: 0 ckpt, 1 ckpt-nan (fails before training), 2 ckpt poisoned, 3 ckpt.
  auto objective =
      MakeObjective(*c, std::make_unique<PoisoningTrainer>(std::move(*trainer), std::set<int>{2}));
  ASSERT_TRUE(objective.ok()) << objective.status().ToString();
  auto study =
      Study::CreateOrLoad(NewInMemoryStorage(), "s", {StudyDirection::kMaximize},
                          std::make_unique<RandomSampler>(), std::make_unique<NopPruner>(), 1);
  ASSERT_TRUE(study.ok());
  for (const char* model : {"ckpt", "ckpt-nan", "ckpt", "ckpt"}) {
    auto trial = (*study)->Ask();
    ASSERT_TRUE(trial.ok());
    auto outcome = (*objective)->Run(**trial, {{"model", model}, {"learning_rate", 3e-3}});
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    ASSERT_TRUE((*study)->Tell(**trial, outcome->state, outcome->values).ok());
  }
  auto trials = (*study)->Trials();
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 4u);
  const FrozenTrial& weights = (*trials)[1];
  const FrozenTrial& logits = (*trials)[2];
  for (const FrozenTrial* t : {&weights, &logits}) {
    EXPECT_EQ(t->state, TrialState::kFail) << t->user_attrs.dump();
    EXPECT_EQ(t->user_attrs.value("reason", ""), "nonfinite") << t->user_attrs.dump();
    EXPECT_EQ(TrialCategoryOf(*t), TrialCategory::kNonFinite);
  }
  const Json w = weights.user_attrs["nonfinite"];
  EXPECT_EQ(w["where"], "weights") << w.dump();
  EXPECT_NE(w["name"].get<std::string>().find("word_embeddings"), std::string::npos) << w.dump();
  EXPECT_EQ(w["value"], "NaN");
  EXPECT_GT(w["count"].get<int64_t>(), 0);
  const std::string why = weights.user_attrs["fail_reason"].get<std::string>();
  EXPECT_NE(why.find("ckpt-nan/model.safetensors"), std::string::npos) << why;
  EXPECT_NE(why.find("diverged"), std::string::npos) << why;
  const Json l = logits.user_attrs["nonfinite"];
  EXPECT_EQ(l["where"], "logits") << l.dump();
  EXPECT_EQ(l["epoch"], 1);    // the first evaluation
  EXPECT_EQ(l["total"], 100);  // 25 % of 400 examples
  EXPECT_GT(l["count"].get<int64_t>(), 0);
  EXPECT_GT(l["step"].get<int64_t>(), 0);
  EXPECT_NE(logits.user_attrs["fail_reason"].get<std::string>().find("the training loss was"),
            std::string::npos);
  for (size_t i : {size_t{0}, size_t{3}}) {
    EXPECT_EQ((*trials)[i].state, TrialState::kComplete) << (*trials)[i].user_attrs.dump();
    EXPECT_GT((*trials)[i].value(), 0.8);
  }
  const StudySummary summary = SummarizeTrials(*trials, {StudyDirection::kMaximize}, Json());
  EXPECT_EQ(summary.categories.at(TrialCategory::kNonFinite).trials, 2);
  EXPECT_EQ(summary.categories.at(TrialCategory::kComplete).trials, 2);
  EXPECT_EQ(summary.categories.count(TrialCategory::kFailed), 0u);
}

TEST_F(PretrainedObjectiveTest, ARobertaCheckpointWithABpeVocabularyTrains) {
  MakeRoberta();  // no vocab.txt: the trial can only run on vocab.json + merges.txt
  WriteWeights();
  auto t = RunOneTrial();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->state, TrialState::kComplete) << t->user_attrs.dump();
  // "good great" vs "bad awful", byte by byte (and "Ġgo" merged), within 16 tokens.
  EXPECT_GT(t->value(), 0.8) << t->user_attrs.dump();
  // The weights reach the trainer under "roberta.": NaN word embeddings diverge.
  WriteWeights(std::nanf(""));
  t = RunOneTrial();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state, TrialState::kFail);
}

TEST_F(PretrainedObjectiveTest, ACheckpointThatDoesNotFitStopsTheStudyWithTheReason) {
  WriteWeights();
  // config.json now says 3 layers; the weights have 2.
  std::ifstream in(ckpt_ / "config.json");
  Json config = Json::parse(in);
  config["num_hidden_layers"] = 3;
  std::ofstream(ckpt_ / "config.json", std::ios::trunc) << config.dump();
  auto t = RunOneTrial();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(
                "missing tensor 'bert.encoder.layer.2.attention.self.query.weight' (expected "
                "shape [16, 16])"),
            std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace tune::internal

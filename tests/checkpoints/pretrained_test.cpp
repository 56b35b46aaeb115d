#include "checkpoints/pretrained.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "checkpoints/safetensors.h"
#include "config/config.h"
#include "testing/scripted_trainer.h"
#include "testing/temp_dir.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

Json BertConfig() {
  return {{"model_type", "bert"},
          {"hidden_size", 16},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"intermediate_size", 24},
          {"vocab_size", 40},
          {"max_position_embeddings", 20},
          {"type_vocab_size", 2},
          {"hidden_act", "gelu"},
          {"layer_norm_eps", 1e-12},
          {"architectures", {"BertForMaskedLM"}}};
}

Json DebertaV3Config() {
  return {{"model_type", "deberta-v2"},     {"hidden_size", 16},
          {"num_hidden_layers", 2},         {"num_attention_heads", 2},
          {"intermediate_size", 24},        {"vocab_size", 40},
          {"max_position_embeddings", 20},  {"type_vocab_size", 0},
          {"relative_attention", true},     {"position_buckets", 8},
          {"max_relative_positions", -1},   {"pos_att_type", "p2c|c2p"},
          {"share_att_key", true},          {"norm_rel_ebd", "layer_norm"},
          {"position_biased_input", false}, {"layer_norm_eps", 1e-7}};
}

class PretrainedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(ckpt_); }
  void WriteCheckpoint(const Json& config) {
    std::ofstream(ckpt_ / "config.json") << config.dump(2);
    std::ofstream vocab(ckpt_ / "vocab.txt");
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s"}) {
      vocab << t << "\n";
    }
    ASSERT_TRUE(WriteSafetensors((ckpt_ / "model.safetensors").string(),
                                 {{"bert.embeddings.word_embeddings.weight", {2, 2}, {1, 2, 3, 4}}})
                    .ok());
  }
  Status ReadStatus() { return ReadPretrainedCheckpoint(ckpt_.string(), "ckpt").status(); }

  testing::TempDir dir_;
  fs::path ckpt_ = dir_.path() / "ckpt";
};

TEST_F(PretrainedCheckpointTest, ReadsABertConfig) {
  WriteCheckpoint(BertConfig());
  auto c = ReadPretrainedCheckpoint(ckpt_.string(), "my-bert");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.name, "my-bert");
  EXPECT_EQ(c->model.model_type, "bert");
  EXPECT_EQ(c->model.hidden_size, 16);
  EXPECT_EQ(c->model.num_hidden_layers, 2);
  EXPECT_EQ(c->model.vocab_size, 40);
  EXPECT_EQ(c->model.type_vocab_size, 2);
  EXPECT_EQ(c->model.position_buckets, 0);
  EXPECT_EQ(c->model.extra["layer_norm_eps"], 1e-12);
  EXPECT_EQ(c->model.pretrained, (ckpt_ / "model.safetensors").string());
  EXPECT_EQ(c->vocab_path, (ckpt_ / "vocab.txt").string());
  EXPECT_EQ(c->model.num_parameters, EncoderParameterCount(c->model));
}

TEST_F(PretrainedCheckpointTest, ReadsADebertaV3Config) {
  WriteCheckpoint(DebertaV3Config());
  auto c = ReadPretrainedCheckpoint(ckpt_.string(), "d");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model.model_type, "deberta-v2");
  EXPECT_EQ(c->model.position_buckets, 8);
  EXPECT_EQ(c->model.type_vocab_size, 0);
}

TEST_F(PretrainedCheckpointTest, MissingFilesAreNamed) {
  EXPECT_EQ(ReadPretrainedCheckpoint((dir_.path() / "nope").string(), "x").status().code(),
            StatusCode::kNotFound);
  WriteCheckpoint(BertConfig());
  fs::remove(ckpt_ / "vocab.txt");
  Status st = ReadStatus();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find((ckpt_ / "vocab.txt").string() + ": not found"), std::string::npos)
      << st.message();
  WriteCheckpoint(BertConfig());
  fs::remove(ckpt_ / "model.safetensors");
  st = ReadStatus();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("model.safetensors: not found; the checkpoint directory has no "
                              "weights: tune reads model.safetensors, pytorch_model.bin"),
            std::string::npos)
      << st.message();
  // pytorch_model.bin is read (pytorch_bin_test.cpp); one that is not a checkpoint is named.
  std::ofstream(ckpt_ / "pytorch_model.bin") << "pickle";
  st = ReadStatus();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      st.message().find((ckpt_ / "pytorch_model.bin").string() + ": not a PyTorch checkpoint"),
      std::string::npos)
      << st.message();
  // A tokenizer larger than the model's embedding table does not belong to it.
  WriteCheckpoint(BertConfig());
  {
    std::ofstream vocab(ckpt_ / "vocab.txt", std::ios::app);
    for (int i = 0; i < 40; ++i) vocab << "w" << i << "\n";
  }
  st = ReadStatus();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      st.message().find((ckpt_ / "vocab.txt").string() + ": the tokenizer has 48 tokens but " +
                        (ckpt_ / "config.json").string() + " says vocab_size 40"),
      std::string::npos)
      << st.message();
}

// Where a model name resolves (docs/config.md "Checkpoints"): a path, the catalog entry's
// "checkpoint", models_dir, the Hugging Face cache (refs/main picks the snapshot).
TEST_F(PretrainedCheckpointTest, ResolvesNamesInOrder) {
  CheckpointSearch s;
  s.base_dir = dir_.path();
  s.hub_cache = (dir_.path() / "hub").string();
  auto missing = ResolveCheckpoint("org/model", s);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find((dir_.path() / "org" / "model").string()),
            std::string::npos);
  EXPECT_NE(missing.status().message().find(
                (dir_.path() / "hub" / "models--org--model" / "snapshots").string()),
            std::string::npos)
      << missing.status().message();
  const fs::path repo = dir_.path() / "hub" / "models--org--model";
  fs::create_directories(repo / "snapshots" / "aaa");
  fs::create_directories(repo / "snapshots" / "bbb");
  EXPECT_FALSE(ResolveCheckpoint("org/model", s).ok());  // two snapshots, no refs/main
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "bbb";
  EXPECT_EQ(*ResolveCheckpoint("org/model", s), (repo / "snapshots" / "bbb").string());
  fs::create_directories(dir_.path() / "models" / "org" / "model");
  s.models_dir = (dir_.path() / "models").string();
  EXPECT_EQ(*ResolveCheckpoint("org/model", s),
            (dir_.path() / "models" / "org" / "model").string());
  s.catalog_checkpoint = "ckpt";
  EXPECT_EQ(*ResolveCheckpoint("org/model", s), ckpt_.string());
  fs::create_directories(dir_.path() / "org" / "model");
  EXPECT_EQ(*ResolveCheckpoint("org/model", s), (dir_.path() / "org" / "model").string());
}

// `tune init --from-cache`'s scan: every models--ORG--NAME whose snapshot is a checkpoint, by
// name; the others skipped with the reason; datasets and names matching no pattern left alone.
TEST_F(PretrainedCheckpointTest, FindsTheCheckpointsOfAHubCache) {
  WriteCheckpoint(BertConfig());
  const fs::path hub = dir_.path() / "hub";
  auto place = [&](const std::string& folder, const std::string& rev, bool ref) {
    const fs::path repo = hub / folder;
    fs::create_directories(repo / "snapshots");
    fs::copy(ckpt_, repo / "snapshots" / rev, fs::copy_options::recursive);
    if (ref) {
      fs::create_directories(repo / "refs");
      std::ofstream(repo / "refs" / "main") << rev;
    }
    return repo / "snapshots" / rev;
  };
  place("models--org--bert", "aaa", true);
  place("models--plain-bert", "only", false);
  fs::remove(place("models--org--no-weights", "bbb", true) / "model.safetensors");
  place("datasets--org--data", "ccc", true);
  fs::create_directories(hub / "models--org--empty");
  auto found = FindHubCheckpoints(hub.string());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->found.size(), 2u);
  EXPECT_EQ(found->found[0].model.name, "org/bert");
  EXPECT_EQ(found->found[0].dir, (hub / "models--org--bert" / "snapshots" / "aaa").string());
  EXPECT_EQ(found->found[0].model.num_parameters, EncoderParameterCount(found->found[0].model));
  EXPECT_EQ(found->found[1].model.name, "plain-bert");
  ASSERT_EQ(found->skipped.size(), 2u);
  EXPECT_EQ(found->skipped[0].path, (hub / "models--org--empty").string());
  EXPECT_NE(found->skipped[0].reason.find("no snapshot"), std::string::npos);
  EXPECT_EQ(found->skipped[1].path, (hub / "models--org--no-weights").string());
  EXPECT_NE(found->skipped[1].reason.find("model.safetensors: not found"), std::string::npos)
      << found->skipped[1].reason;
  auto only = FindHubCheckpoints(hub.string(), {"org/*", "nothing"});
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->found.size(), 1u);
  EXPECT_EQ(only->found[0].model.name, "org/bert");
  EXPECT_EQ(FindHubCheckpoints((dir_.path() / "nowhere").string()).status().code(),
            StatusCode::kNotFound);
}

TEST_F(PretrainedCheckpointTest, HubCacheFromTheEnvironment) {
  const char* keep_hub = std::getenv("HF_HUB_CACHE");
  const char* keep_home = std::getenv("HF_HOME");
  const std::string saved_hub = keep_hub ? keep_hub : "", saved_home = keep_home ? keep_home : "";
  setenv("HF_HUB_CACHE", "/x/hub", 1);
  EXPECT_EQ(HuggingFaceHubCache(), "/x/hub");
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", "/y", 1);
  EXPECT_EQ(HuggingFaceHubCache(), "/y/hub");
  unsetenv("HF_HOME");
  EXPECT_NE(HuggingFaceHubCache().find(".cache/huggingface/hub"), std::string::npos);
  if (keep_hub) setenv("HF_HUB_CACHE", saved_hub.c_str(), 1);
  if (keep_home) setenv("HF_HOME", saved_home.c_str(), 1);
}

// A RoBERTa checkpoint as published: vocab.json + merges.txt (byte-level BPE), no vocab.txt.
TEST_F(PretrainedCheckpointTest, RobertaBpeVocabularyWithoutVocabTxt) {
  Json c = BertConfig();
  c["model_type"] = "roberta";
  WriteCheckpoint(c);
  fs::remove(ckpt_ / "vocab.txt");
  std::ofstream(ckpt_ / "vocab.json") << R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3})";
  Status st = ReadStatus();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find((ckpt_ / "merges.txt").string() + ": not found"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("vocab.json + merges.txt (byte-level BPE)"), std::string::npos);
  std::ofstream(ckpt_ / "merges.txt") << "#version: 0.2\nc a\n";
  auto read = ReadPretrainedCheckpoint(ckpt_.string(), "my-roberta");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->vocab_path, (ckpt_ / "vocab.json").string());
  EXPECT_EQ(PretrainedVocabPath(ckpt_.string()), (ckpt_ / "vocab.json").string());
  // vocab.txt wins when both are there; SentencePiece models are tokenizers too.
  std::ofstream(ckpt_ / "vocab.txt") << "[PAD]\n";
  EXPECT_EQ(PretrainedVocabPath(ckpt_.string()), (ckpt_ / "vocab.txt").string());
  fs::remove(ckpt_ / "vocab.txt");
  fs::remove(ckpt_ / "vocab.json");
  std::ofstream(ckpt_ / "sentencepiece.bpe.model") << "protobuf";
  // The tokenizer is loaded with the checkpoint: a corrupt one is an error there.
  EXPECT_NE(ReadStatus().message().find((ckpt_ / "sentencepiece.bpe.model").string() +
                                        ": not a valid SentencePiece model"),
            std::string::npos)
      << ReadStatus().ToString();
  EXPECT_EQ(PretrainedVocabPath(ckpt_.string()), (ckpt_ / "sentencepiece.bpe.model").string());
  fs::remove(ckpt_ / "sentencepiece.bpe.model");
  fs::remove(ckpt_ / "merges.txt");
  EXPECT_NE(ReadStatus().message().find("spm.model (DeBERTa), sentencepiece.bpe.model "
                                        "(XLM-RoBERTa) or tokenizer.json"),
            std::string::npos)
      << ReadStatus().message();
}

TEST_F(PretrainedCheckpointTest, ConfigsTheTrainerCannotBuildAreRefusedByKey) {
  auto error = [&](Json config) {
    WriteCheckpoint(config);
    return ReadStatus().message();
  };
  const std::string file = (ckpt_ / "config.json").string();
  Json c = BertConfig();
  c["hidden_act"] = "relu";
  EXPECT_EQ(error(c), file +
                          ": /hidden_act: 'relu' is not supported; the trainer's encoders use "
                          "'gelu'");
  c = BertConfig();
  c["model_type"] = "gpt2";
  EXPECT_NE(error(c).find("/model_type: 'gpt2' is not supported"), std::string::npos);
  c = BertConfig();
  c.erase("hidden_size");
  EXPECT_NE(error(c).find("missing required key 'hidden_size'"), std::string::npos);
  c = BertConfig();
  c["num_attention_heads"] = 3;
  EXPECT_NE(error(c).find("hidden_size 16 is not divisible by num_attention_heads 3"),
            std::string::npos);
  c = DebertaV3Config();
  c["share_att_key"] = false;
  EXPECT_NE(error(c).find("/share_att_key: must be true"), std::string::npos);
  c = DebertaV3Config();
  c["pos_att_type"] = "c2p";
  EXPECT_NE(error(c).find("/pos_att_type: must contain c2p and p2c"), std::string::npos);
  c = DebertaV3Config();
  c.erase("position_buckets");
  EXPECT_NE(error(c).find("/position_buckets: must be > 0"), std::string::npos);
  // A broken weights file is found when the config is read, not in the first trial.
  WriteCheckpoint(BertConfig());
  std::ofstream(ckpt_ / "model.safetensors", std::ios::trunc) << "garbage!";
  EXPECT_NE(ReadStatus().message().find("not a valid safetensors file"), std::string::npos);
}

// The objective key: the checkpoint becomes the model, its vocab.txt the vocabulary.
TEST_F(PretrainedCheckpointTest, ObjectiveKeyPretrained) {
  WriteCheckpoint(BertConfig());
  std::ofstream(dir_.path() / "train.jsonl") << R"({"text": "the cat", "label": "a"})"
                                             << "\n";
  auto config = [&](Json objective_extra, Json space = Json()) {
    Json objective = {
        {"type", "train"}, {"data", {{"train", "train.jsonl"}}}, {"pretrained", "ckpt"}};
    for (const auto& [k, v] : objective_extra.items()) objective[k] = v;
    if (space.is_null()) space = {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-3}}}};
    Json doc = {{"direction", "maximize"}, {"search_space", space}, {"objective", objective}};
    return ParseStudyConfig(doc, "study.json", dir_.path());
  };
  auto c = config(Json::object());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const TrainObjectiveOptions& t = c->objective.train;
  EXPECT_EQ(t.defaults["model"], "ckpt");
  EXPECT_EQ(t.models, (std::vector<std::string>{"ckpt"}));
  ASSERT_TRUE(t.vocab.has_value());
  EXPECT_EQ(*t.vocab, (ckpt_ / "vocab.txt").string());
  auto spec = c->space.catalog().Find("ckpt");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)->hidden_size, 16);
  EXPECT_EQ((*spec)->pretrained, (ckpt_ / "model.safetensors").string());

  auto message = [&](Json extra, Json space = Json()) {
    auto r = config(extra, space);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(message({{"model", "tiny-bert"}}),
            "study.json: /objective/model: \"pretrained\" is the model (its config.json); remove "
            "\"model\"");
  EXPECT_NE(message({{"tokenizer", {{"vocab", "other.txt"}}}})
                .find("the checkpoint brings its own vocabulary"),
            std::string::npos);
  EXPECT_NE(message(Json::object(), {{"model", Json::array({"tiny-bert"})}})
                .find("the objective trains its \"pretrained\" checkpoint"),
            std::string::npos);
  EXPECT_NE(message({{"pretrained", "missing-dir"}})
                .find("study.json: /objective/pretrained: pretrained checkpoint"),
            std::string::npos);
  std::ofstream(ckpt_ / "config.json", std::ios::trunc) << "{";
  EXPECT_NE(message(Json::object()).find("config.json:1:2: invalid JSON: syntax error"),
            std::string::npos);
}

// A DeBERTa-v3 checkpoint brings spm.model: the objective loads it when it is made, and a corrupt
// one is an error naming the file (InvalidArgument: exit 2) before any trial.
TEST_F(PretrainedCheckpointTest, SentencePieceCheckpointsAreUsable) {
  Json config = DebertaV3Config();
  config["vocab_size"] = 128;
  WriteCheckpoint(config);
  fs::remove(ckpt_ / "vocab.txt");
  std::ofstream train(dir_.path() / "train.jsonl");
  for (int i = 0; i < 10; ++i) {
    train << Json{{"text", i % 2 ? "the quick fox" : "a lazy dog"}, {"label", i % 2 ? "a" : "b"}}
                 .dump()
          << "\n";
  }
  train.close();
  Json doc = {{"direction", "maximize"},
              {"search_space", {{"lr", {{"type", "float"}, {"low", 1e-5}, {"high", 1e-3}}}}},
              {"objective",
               {{"type", "train"}, {"data", {{"train", "train.jsonl"}}}, {"pretrained", "ckpt"}}}};
  auto make = [&]() -> Status {
    auto c = ParseStudyConfig(doc, "study.json", dir_.path());
    if (!c.ok()) return c.status();
    return MakeObjective(*c, std::make_unique<testing::ScriptedTrainer>(std::vector<double>{0.5}))
        .status();
  };
  std::ofstream(ckpt_ / "spm.model") << "truncated";
  Status corrupt = make();
  EXPECT_EQ(corrupt.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      corrupt.message().find((ckpt_ / "spm.model").string() + ": not a valid SentencePiece model"),
      std::string::npos)
      << corrupt.message();

  std::ofstream(dir_.path() / "corpus.txt") << "the quick brown fox jumps over a lazy dog\n";
  const std::string train_spm =
      "/usr/bin/python3 -c \"import sentencepiece as s; s.SentencePieceTrainer.train(input='" +
      (dir_.path() / "corpus.txt").string() + "', model_prefix='" + (ckpt_ / "spm").string() +
      "', vocab_size=40, hard_vocab_limit=False, minloglevel=2, pad_id=0, pad_piece='[PAD]', "
      "bos_id=1, "
      "bos_piece='[CLS]', eos_id=2, eos_piece='[SEP]', unk_id=3, unk_piece='[UNK]')\" 2>/dev/null";
  if (std::system(train_spm.c_str()) != 0) {
    GTEST_SKIP() << "python3-sentencepiece cannot train a model (Debian: python3-sentencepiece)";
  }
  Status ok = make();
  EXPECT_TRUE(ok.ok()) << ok.ToString();
}

}  // namespace
}  // namespace tune

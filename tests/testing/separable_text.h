// A separable text classification task and tiny models that learn it in seconds, shared by the
// LibTorch trainer's tests on CPU (torch_trainer_test.cpp) and on CUDA (torch_cuda_test.cpp).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"
#include "train/hyperparams.h"
#include "train/trainer.h"
#include "tune/model_catalog.h"

namespace tune::testing {

// A separable topic task: each text mixes filler words shared by all classes with two or three
// keywords of its class. Chance accuracy is 1/num_classes.
struct Synthetic {
  std::vector<std::string> texts;
  std::vector<int64_t> labels;
};

inline Synthetic MakeSynthetic(int n, int num_classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int k) { return static_cast<int>(rng() % static_cast<uint64_t>(k)); };
  Synthetic s;
  for (int i = 0; i < n; ++i) {
    const int label = i % num_classes;
    std::vector<std::string> words;
    const int length = 6 + pick(14);
    for (int w = 0; w < length; ++w) words.push_back("filler" + std::to_string(pick(40)));
    const int keywords = 2 + pick(2);
    for (int k = 0; k < keywords; ++k) {
      words[static_cast<size_t>(pick(length))] = "topic" +
                                                 std::string(1, static_cast<char>('a' + label)) +
                                                 "word" + std::to_string(pick(5));
    }
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    s.texts.push_back(text);
    s.labels.push_back(label);
  }
  return s;
}

inline TextTrainData Tokenize(const Synthetic& train, const Synthetic& validation,
                              int64_t num_labels) {
  Tokenizer tok = Tokenizer::Build(train.texts, TokenizerOptions{});
  TextTrainData d;
  for (const auto& t : train.texts) d.train_ids.push_back(tok.Encode(t, 62));
  for (const auto& t : validation.texts) d.validation_ids.push_back(tok.Encode(t, 62));
  d.train_labels = train.labels;
  d.validation_labels = validation.labels;
  d.num_labels = num_labels;
  d.vocab_size = tok.vocab_size();
  d.pad_id = tok.pad_id();
  d.cls_id = tok.cls_id();
  d.sep_id = tok.sep_id();
  return d;
}

inline ModelSpec TinyModel(const std::string& type = "bert") {
  ModelSpec m;
  m.name = "test-" + type;
  m.model_type = type;
  m.num_hidden_layers = 1;
  m.hidden_size = 32;
  m.num_attention_heads = 2;
  m.intermediate_size = 64;
  m.vocab_size = 512;
  m.max_position_embeddings = type == "bert" ? 64 : 66;
  m.type_vocab_size = type == "bert" ? 2 : 1;
  return m;
}

// DeBERTa-v3 in small: 16 relative-position buckets (mid 8) so that sequences of up to 32 tokens
// reach the log buckets.
inline ModelSpec TinyDeberta() {
  ModelSpec m = TinyModel("deberta-v2");
  m.max_position_embeddings = 64;
  m.type_vocab_size = 0;
  m.position_buckets = 16;
  return m;
}

inline TrainHyperparams FastHyperparams() {
  TrainHyperparams hp;
  hp.learning_rate = 3e-3;
  hp.batch_size = 16;
  hp.max_length = 32;
  hp.epochs = 4;
  hp.warmup_ratio = 0.1;
  hp.dropout = 0.0;
  hp.attention_dropout = 0.0;
  return hp;
}

}  // namespace tune::testing

#include "train/hyperparams.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

TEST(Hyperparams, SetsValuesByNameAndAlias) {
  TrainHyperparams hp;
  ASSERT_TRUE(SetHyperparam(hp, "lr", 2e-5).ok());
  ASSERT_TRUE(SetHyperparam(hp, "gradient_accumulation_steps", 4).ok());
  ASSERT_TRUE(SetHyperparam(hp, "batch_size", 16.0).ok());  // integral floats are accepted
  ASSERT_TRUE(SetHyperparam(hp, "optimizer", "sgd").ok());
  ASSERT_TRUE(SetHyperparam(hp, "scheduler", "cosine").ok());
  ASSERT_TRUE(SetHyperparam(hp, "classifier_layers", 2).ok());
  ASSERT_TRUE(SetHyperparam(hp, "classifier_hidden_2", 48).ok());
  ASSERT_TRUE(SetHyperparam(hp, "padding", "max_length").ok());
  ASSERT_TRUE(SetHyperparam(hp, "classifier_dropout", 0.2).ok());
  EXPECT_EQ(hp.learning_rate, 2e-5);
  EXPECT_EQ(hp.grad_accum, 4);
  EXPECT_EQ(hp.batch_size, 16);
  EXPECT_EQ(hp.optimizer, OptimizerKind::kSgd);
  EXPECT_EQ(hp.scheduler, Schedule::kCosine);
  EXPECT_EQ(hp.padding, Padding::kMaxLength);
  EXPECT_EQ(hp.classifier_dropout, 0.2);
  EXPECT_EQ(hp.ClassifierWidth(0, 128), 128);
  EXPECT_EQ(hp.ClassifierWidth(1, 128), 48);
  EXPECT_EQ(CanonicalHyperparam("num_train_epochs"), "epochs");
  EXPECT_FALSE(CanonicalHyperparam("nope"));
  Json j = HyperparamsToJson(hp);
  EXPECT_EQ(j["optimizer"], "sgd");
  EXPECT_EQ(j["scheduler"], "cosine");
  EXPECT_EQ(j["classifier_hidden_2"], 48);
}

TEST(Hyperparams, RejectsValuesOutOfRange) {
  TrainHyperparams hp;
  auto msg = [&](const std::string& name, const Json& v) {
    Status st = SetHyperparam(hp, name, v);
    EXPECT_FALSE(st.ok()) << name;
    return st.message();
  };
  EXPECT_EQ(msg("batch_size", 0), "batch_size must be >= 1, got 0");
  EXPECT_EQ(msg("batch_size", 8.5), "batch_size must be an integer, got 8.5");
  EXPECT_EQ(msg("lr", -1), "lr must be in (0.0, inf), got -1");
  EXPECT_EQ(msg("dropout", 1.0), "dropout must be in [0.0, 1.0), got 1.0");
  EXPECT_EQ(msg("classifier_layers", 4), "classifier_layers must be in 0..3, got 4");
  EXPECT_EQ(msg("optimizer", "adam"),
            "unknown optimizer 'adam' (did you mean 'adamw'?); valid: adamw, sgd");
  EXPECT_EQ(msg("nesterov", 1), "nesterov must be true or false, got 1");
  EXPECT_EQ(msg("learning_rat", 1),
            "unknown training parameter 'learning_rat' (did you mean 'learning_rate'?)");
}

TEST(Hyperparams, ChecksModelsForTraining) {
  auto catalog = *ModelCatalog::Builtin();
  TrainHyperparams hp;
  hp.max_length = 512;
  EXPECT_TRUE(CheckModelForTraining(**catalog.Find("bert-base-uncased"), hp).ok());
  EXPECT_TRUE(CheckModelForTraining(**catalog.Find("roberta-base"), hp).ok());
  hp.max_length = 513;
  Status st = CheckModelForTraining(**catalog.Find("roberta-base"), hp);
  EXPECT_EQ(st.message(),
            "max_length 513 is longer than model 'roberta-base' allows (512 positions, 2 of its "
            "max_position_embeddings are reserved)");
  hp.max_length = 128;
  EXPECT_TRUE(CheckModelForTraining(**catalog.Find("microsoft/deberta-v3-base"), hp).ok());
  EXPECT_TRUE(UsesRelativePositions(**catalog.Find("tiny-deberta-v3")));
  EXPECT_FALSE(UsesRelativePositions(**catalog.Find("roberta-base")));
  ModelSpec no_buckets = **catalog.Find("microsoft/deberta-v3-base");
  no_buckets.position_buckets = 0;
  st = CheckModelForTraining(no_buckets, hp);
  EXPECT_NE(st.message().find("set position_buckets (256 for DeBERTa-v3)"), std::string::npos)
      << st.message();
  ModelSpec mixed = **catalog.Find("roberta-base");
  mixed.position_buckets = 256;
  EXPECT_FALSE(CheckModelForTraining(mixed, hp).ok());
  ModelSpec unknown = **catalog.Find("bert-base-uncased");
  unknown.model_type = "gpt2";
  st = CheckModelForTraining(unknown, hp);
  EXPECT_NE(st.message().find("model_type 'gpt2' is not supported"), std::string::npos);
  EXPECT_TRUE(UsesRobertaPositions(**catalog.Find("xlm-roberta-base")));
  EXPECT_FALSE(UsesRobertaPositions(**catalog.Find("bert-base-uncased")));
}

}  // namespace
}  // namespace tune

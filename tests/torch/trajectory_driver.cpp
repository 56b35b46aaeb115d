// The trajectory test's driver (tests/torch/trajectory_test.py): trains one model with tune's
// LibTorch trainer and prints, as JSON, what a reference needs to train the same model on the same
// batches: the tokenized texts, the hyperparameters as run, every optimizer step (its loss,
// learning rate and micro-batches) and every epoch's validation metrics.
//
//   tune_trajectory_driver SPEC.json
//
// SPEC: {"model": {"checkpoint": DIR} | {"torchscript": FILE, "tokenizer": DIR},
//        "train": FILE, "validation": FILE, "labels": [...], "hyperparams": {...}}
#include <fmt/format.h>

#include <iostream>

#include "checkpoints/pretrained.h"
#include "torch/torch_trainer.h"
#include "train/text_data.h"
#include "train_objective/train_objective.h"
#include "util/json_file.h"

namespace tune {
namespace {

Result<ModelSpec> ModelOf(const Json& m) {
  if (m.contains("checkpoint")) {
    const std::string dir = m["checkpoint"].get<std::string>();
    TUNE_ASSIGN_OR_RETURN(PretrainedCheckpoint c, ReadPretrainedCheckpoint(dir, dir));
    return c.model;
  }
  ModelSpec spec;
  spec.name = spec.torchscript = m["torchscript"].get<std::string>();
  spec.model_type = kTorchScriptModelType;
  return spec;
}

Json DataToJson(const TextTrainData& d) {
  return Json{{"train_ids", d.train_ids},
              {"train_labels", d.train_labels},
              {"validation_ids", d.validation_ids},
              {"validation_labels", d.validation_labels},
              {"pad_id", d.pad_id},
              {"cls_id", d.cls_id},
              {"sep_id", d.sep_id},
              {"num_labels", d.num_labels}};
}

Status Run(const std::string& spec_path) {
  TUNE_ASSIGN_OR_RETURN(Json spec, ReadJsonFile(spec_path));
  TUNE_ASSIGN_OR_RETURN(ModelSpec model, ModelOf(spec["model"]));
  TrainJob job;
  job.model = model;
  for (const auto& [key, value] : spec["hyperparams"].items()) {
    TUNE_RETURN_IF_ERROR(SetHyperparam(job.hp, key, value));
  }
  TextDataOptions data_options;
  data_options.train = spec["train"].get<std::string>();
  data_options.validation = spec["validation"].get<std::string>();
  data_options.labels = spec["labels"].get<std::vector<std::string>>();
  TUNE_ASSIGN_OR_RETURN(TextDataset dataset, LoadTextDataset(data_options));
  const std::string tokenizer_dir = spec["model"].value("tokenizer", model.checkpoint);
  TUNE_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                        Tokenizer::FromCheckpointDir(tokenizer_dir, TokenizerOptions{}));
  const TextTrainData data = TokenizeTextDataset(dataset, tokenizer, job.hp.max_length);
  job.data = &data;
  Json steps = Json::array(), epochs = Json::array();
  job.on_step = [&](const StepRecord& s) {
    steps.push_back({{"step", s.step},
                     {"loss", s.loss},
                     {"learning_rate", s.learning_rate},
                     {"micro_batches", s.micro_batches}});
  };
  TorchTrainerOptions options;
  options.threads = 1;
  options.count_cpu_memory = false;
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, NewTorchTrainer(options));
  TUNE_ASSIGN_OR_RETURN(TrainResult result,
                        trainer->Train(job, [&](const EpochMetrics& m) -> Result<EpochDecision> {
                          epochs.push_back({{"epoch", m.epoch},
                                            {"train_loss", m.train_loss},
                                            {"validation_loss", m.validation_loss},
                                            {"accuracy", m.classification.accuracy},
                                            {"macro_f1", m.classification.macro_f1}});
                          return EpochDecision::kContinue;
                        }));
  if (result.end != TrainResult::End::kCompleted) {
    return InternalError(
        fmt::format("training ended {}: {}", TrainEndName(result.end), result.message));
  }
  std::cout << Json{{"data", DataToJson(data)},
                    {"hyperparams", HyperparamsToJson(job.hp)},
                    {"steps", steps},
                    {"epochs", epochs},
                    {"num_parameters", result.num_parameters}}
                   .dump()
            << "\n";
  return Status::Ok();
}

}  // namespace
}  // namespace tune

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tune_trajectory_driver SPEC.json\n";
    return 2;
  }
  const tune::Status st = tune::Run(argv[1]);
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  return 0;
}

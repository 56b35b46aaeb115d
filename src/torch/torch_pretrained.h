// Pretrained weights from a safetensors file into a TransformerClassifier (private to tune_torch).
//
// Names map as Hugging Face's from_pretrained does for BertModel / RobertaModel / DebertaV2Model:
// a parameter "encoder.layer.0.attention.self.query.weight" is read from
// "<prefix>encoder.layer.0.attention.self.query.weight", where the prefix is "bert.", "roberta.",
// "deberta." or none, whichever the file uses. The pooler is read from "<prefix>pooler.dense.*" or
// "pooler.dense.*" (DeBERTa's ContextPooler sits outside the base model); old "LayerNorm.gamma /
// beta" names are accepted. The classifier head is read from "classifier.*" (tune's names, as
// SavePretrainedWeights writes them, or BERT's classifier.weight/bias for a head without hidden
// layers) when the checkpoint has one of the same shape, else newly initialised (another
// num_labels: listed in `resized`); so is the pooler when the checkpoint has none
// (RoBERTa/DeBERTa pretraining checkpoints).
#pragma once

#include <string>
#include <vector>

#include "torch/torch_models.h"
#include "tune/status.h"

namespace tune::internal {

struct PretrainedLoadReport {
  std::string prefix;                   // "bert.", "roberta.", "deberta." or ""
  int64_t loaded = 0;                   // parameters read from the file
  std::vector<std::string> fresh;       // model parameters left as initialised
  std::vector<std::string> unexpected;  // file tensors no parameter uses
  std::vector<std::string> resized;     // head tensors of another shape (num_labels differ)
};

// Copies the checkpoint's tensors into `model`'s parameters. InvalidArgument naming the file, each
// missing tensor with its expected shape and each shape mismatch (expected vs found), or a tensor
// that is not F32/F16/BF16; the model is left unchanged then.
Result<PretrainedLoadReport> LoadPretrainedWeights(torch::nn::Module& model,
                                                   const std::string& weights_path);

// The prefix a model_type's base model uses in Hugging Face checkpoints: "bert.", "roberta."
// (also XLM-R, CamemBERT), "deberta.".
std::string PretrainedPrefix(const std::string& model_type);

// Writes `model`'s parameters as F32 safetensors under the names LoadPretrainedWeights reads:
// the encoder under `prefix` (DeBERTa's pooler without it), the head as "classifier.*". Written
// to path + ".tmp", then renamed over `path`.
Status SavePretrainedWeights(torch::nn::Module& model, const std::string& prefix,
                             const std::string& path);

}  // namespace tune::internal

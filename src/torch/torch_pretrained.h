// Pretrained weights from a checkpoint's weights file (model.safetensors, pytorch_model.bin, or
// either sharded: checkpoint_weights.h) into a TransformerClassifier [tune_torch, private], and
// the trained model back out under Hugging Face's names.
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
  // Loaded tensors holding values that are not finite (NaN, +inf, -inf), in file order: a
  // checkpoint that loads but cannot train or predict (the caller decides what that means).
  struct NonFinite {
    std::string name;   // the tensor's name in the file
    int64_t count = 0;  // its non-finite values
    int64_t total = 0;  // ... of its values
    double example = 0;
  };
  std::vector<NonFinite> nonfinite;
};

// "tensor 'bert.embeddings.word_embeddings.weight' has 3 non-finite values of 1024 (e.g. NaN)",
// for the first `shown` entries joined by "; ", then "; and N more tensors".
std::string NonFiniteWeightsText(const std::vector<PretrainedLoadReport::NonFinite>& tensors,
                                 size_t shown = 4);

// Copies the checkpoint's tensors into `model`'s parameters, naming them as Hugging Face's
// from_pretrained does for BertModel / RobertaModel / DebertaV2Model: a parameter
// "encoder.layer.0.attention.self.query.weight" is read from "<prefix>encoder.layer.0...", where
// the prefix is "bert.", "roberta.", "deberta." or none, whichever the file's word embeddings
// use. The pooler is read from RoBERTa's "classifier.dense.*" (RobertaClassificationHead's dense
// + tanh), "<prefix>pooler.dense.*" or "pooler.dense.*" (DeBERTa's ContextPooler sits outside the
// base model); old "LayerNorm.gamma / beta" names are accepted. The output layer is read from
// tune's "classifier.out.*" (older saved models), "classifier.*" (BERT, DeBERTa) or
// "classifier.out_proj.*" (RoBERTa) when the checkpoint has one of the same shape, else newly
// initialised (another num_labels: listed in `resized`); so is the pooler when the checkpoint
// has none (RoBERTa/DeBERTa pretraining checkpoints).
// Errors: CheckpointWeights::Open's; InvalidArgument naming the file for one without
// "embeddings.word_embeddings.weight" under any of those prefixes, and naming each missing
// tensor with its expected shape and each shape mismatch (expected vs found), or a tensor that
// is not F32/F16/BF16; the model is left unchanged then. Tensors with non-finite values load as
// they are and are listed in `nonfinite`.
Result<PretrainedLoadReport> LoadPretrainedWeights(torch::nn::Module& model,
                                                   const std::string& weights_path);

// The prefix a model_type's base model uses in Hugging Face checkpoints: "bert.", "roberta."
// (also XLM-R, CamemBERT), "deberta."; "roberta." for a model_type of no known family.
std::string PretrainedPrefix(const std::string& model_type);

// The name of a TransformerClassifier parameter in the family's Hugging Face
// *ForSequenceClassification, so that from_pretrained loads every tensor: the encoder under
// `prefix`; the pooler as BERT's bert.pooler.dense, DeBERTa's pooler.dense (ContextPooler) or
// RoBERTa's classifier.dense; the output layer as classifier (BERT, DeBERTa) or
// classifier.out_proj (RoBERTa, XLM-R, CamemBERT). With `extra_head_layers` (classifier_layers
// > 0, which Hugging Face's heads do not have) the head keeps tune's names: classifier.hidden.N.*
// and classifier.out.*.
std::string HuggingFaceName(const std::string& name, const std::string& prefix,
                            bool extra_head_layers);

// Writes `model`'s parameters as F32 safetensors under their HuggingFaceName (which
// LoadPretrainedWeights reads back, as it reads tune's older layout). Written to path + ".tmp",
// then renamed over `path`.
Status SavePretrainedWeights(torch::nn::Module& model, const std::string& prefix,
                             const std::string& path);

}  // namespace tune::internal

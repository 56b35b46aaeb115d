// A local Hugging Face-style checkpoint directory to fine-tune from (plain C++, no LibTorch):
//
//   config.json        the architecture (model_type, hidden_size, num_hidden_layers, ...)
//   model.safetensors  the weights (safetensors.h), F32, F16 or BF16
//   vocab.txt          the WordPiece vocabulary the tokenizer uses (BERT), or
//   vocab.json + merges.txt   a byte-level BPE vocabulary (RoBERTa), used when there is no
//                      vocab.txt
//
// ReadPretrainedCheckpoint turns config.json into a ModelSpec the trainer can build (BERT, RoBERTa,
// XLM-RoBERTa, CamemBERT, DeBERTa-v2/v3 with the settings of the published v3 checkpoints) and
// checks that the weights file is valid safetensors; which tensors fill which parameter is decided
// when the model is built (tune_torch, torch_pretrained.cpp).
#pragma once

#include <string>

#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

struct PretrainedCheckpoint {
  std::string dir;
  std::string config_path;   // dir/config.json
  std::string weights_path;  // dir/model.safetensors
  std::string vocab_path;    // dir/vocab.txt, or dir/vocab.json (PretrainedVocabPath)
  // The architecture; model.pretrained = weights_path, model.name = `name`;
  // model.extra["layer_norm_eps"] from config.json when given.
  ModelSpec model;
};

// The vocabulary a checkpoint directory's tokenizer reads: dir/vocab.txt when it exists, else
// dir/vocab.json when it exists, else dir/vocab.txt (which is then reported missing).
std::string PretrainedVocabPath(const std::string& dir);

// NotFound for a missing file (naming it); InvalidArgument for a config.json the trainer cannot
// build (naming the key and value) or a weights file that is not valid safetensors.
Result<PretrainedCheckpoint> ReadPretrainedCheckpoint(const std::string& dir,
                                                      const std::string& name);

}  // namespace tune

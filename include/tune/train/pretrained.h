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

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tune/model_catalog.h"
#include "tune/status.h"
#include "tune/train/tokenizer.h"

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

// NotFound for a missing file (naming it; a pytorch_model.bin-only directory says how to convert
// it); InvalidArgument for a config.json the trainer cannot build (naming the key and value, an
// unsupported model_type with the closest supported one), a weights file that is not valid
// safetensors, or a tokenizer with more tokens than config.json's vocab_size.
// model.checkpoint = dir.
Result<PretrainedCheckpoint> ReadPretrainedCheckpoint(const std::string& dir,
                                                      const std::string& name);

// The tokenizer of a checkpoint directory: the one place tune loads a checkpoint's tokenizer
// (PretrainedVocabPath; tokenizer_config.json's do_lower_case when given, else `lowercase`).
Result<Tokenizer> LoadCheckpointTokenizer(const std::string& dir, bool lowercase = true);

// The tokenizer files of a checkpoint directory that exist (vocab.txt, vocab.json, merges.txt,
// tokenizer.json, tokenizer_config.json, special_tokens_map.json, spm.model,
// sentencepiece.bpe.model), to copy with a saved model.
std::vector<std::string> CheckpointTokenizerFiles(const std::string& dir);

// --- Resolving a model name to a checkpoint directory (docs/config.md, "Checkpoints") ----------

// Where a name is looked for, in this order: an explicit path (absolute, or relative to
// base_dir); the catalog entry's "checkpoint" (relative to base_dir); models_dir/NAME; the
// Hugging Face cache (HuggingFaceHubCache(): models--ORG--NAME/snapshots/<refs/main>/).
struct CheckpointSearch {
  std::filesystem::path base_dir;
  std::optional<std::string> catalog_checkpoint;
  std::optional<std::string> models_dir;  // absolute
  std::string hub_cache;                  // HuggingFaceHubCache() unless a test sets it
};

// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::string HuggingFaceHubCache();

// The directory `name` resolves to (offline), or NotFound listing every place searched.
Result<std::string> ResolveCheckpoint(const std::string& name, const CheckpointSearch& search);

}  // namespace tune

// A local Hugging Face-style checkpoint directory to fine-tune from [tune_train, private] (plain
// C++, no LibTorch): reading one, resolving a model name to one, and listing a Hugging Face
// cache's.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoints/hub_cache.h"
#include "tokenizers/tokenizer.h"
#include "tune/model_catalog.h"
#include "tune/status.h"

namespace tune {

struct PretrainedCheckpoint {
  std::string dir;
  std::string config_path;   // dir/config.json
  std::string weights_path;  // dir/ the first of kWeightsFiles present
  std::string vocab_path;    // the tokenizer file (PretrainedVocabPath)
  // The architecture; model.pretrained = weights_path, model.name = `name`;
  // model.extra["layer_norm_eps"] from config.json when given.
  ModelSpec model;
};

// The tokenizer file a checkpoint directory's tokenizer reads (Tokenizer::CheckpointTokenizerFile:
// vocab.txt, vocab.json, spm.model, sentencepiece.bpe.model, tokenizer.json, the first present;
// dir/vocab.txt, then reported missing, when none is).
std::string PretrainedVocabPath(const std::string& dir);

// Reads the checkpoint directory `dir`:
//   config.json        the architecture (model_type, hidden_size, num_hidden_layers, ...)
//   the weights        model.safetensors, pytorch_model.bin (read without executing it), or
//                      either sharded behind its *.index.json (checkpoint_weights.h); F32, F16
//                      or BF16
//   the tokenizer      vocab.txt (BERT's WordPiece), vocab.json + merges.txt (byte-level BPE),
//                      spm.model (DeBERTa), sentencepiece.bpe.model (XLM-RoBERTa) or
//                      tokenizer.json: the first present (Tokenizer::FromCheckpointDir)
// turning config.json into a ModelSpec the trainer can build (BERT, RoBERTa, XLM-RoBERTa,
// CamemBERT, DeBERTa-v2/v3 with the settings of the published v3 checkpoints) and checking that
// the weights file can be read; which tensors fill which parameter is decided when the model is
// built (tune_torch, torch_pretrained.h).
// NotFound for a missing file (naming it; no weights file: the names tune reads); InvalidArgument
// for a config.json the trainer cannot build (naming the key and value, an unsupported model_type
// with the closest supported one), a weights file that cannot be read (a PyTorch pickle naming
// anything but a state dict's parts included), or a tokenizer with more tokens than
// config.json's vocab_size.
// model.checkpoint = dir.
Result<PretrainedCheckpoint> ReadPretrainedCheckpoint(const std::string& dir,
                                                      const std::string& name);

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

// The directory `name` resolves to (offline), or NotFound listing every place searched.
Result<std::string> ResolveCheckpoint(const std::string& name, const CheckpointSearch& search);

// --- The checkpoints of a Hugging Face cache (`tune init --from-cache`) ------------------------

// A models--ORG--NAME directory of the cache that is not a checkpoint tune can fine-tune.
struct SkippedHubEntry {
  std::string path;    // the models--ORG--NAME directory
  std::string reason;  // no snapshot, a missing file, an unsupported model_type, ...
};

struct HubCheckpoints {
  // By name; model.name is "ORG/NAME" ("NAME" without an organisation), the name
  // ResolveCheckpoint finds in the cache.
  std::vector<PretrainedCheckpoint> found;
  std::vector<SkippedHubEntry> skipped;
};

// Every models--ORG--NAME/ of `cache` whose snapshot (the one ResolveCheckpoint picks: refs/main,
// else the only one) ReadPretrainedCheckpoint accepts, if its name matches one of `patterns`
// (fnmatch globs on ORG/NAME; empty: every name). Entries that are not models--* (datasets,
// .locks) are ignored; names that match no pattern are not read. NotFound when `cache` is not a
// directory.
Result<HubCheckpoints> FindHubCheckpoints(const std::string& cache,
                                          const std::vector<std::string>& patterns = {});

}  // namespace tune

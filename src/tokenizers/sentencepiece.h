// A SentencePiece model file (spm.model, sentencepiece.bpe.model) read through Debian's
// libsentencepiece [tune_train, private]: its pieces, their scores and its normalizer's character
// map, which the tokenizer encodes with as Hugging Face's tokenizers do (unigram.h). tune_train
// does not link libsentencepiece: it opens libtune_spm.so (spm_shim/spm_shim.h) with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND), because libsentencepiece's embedded protobuf would otherwise
// clash with LibTorch's in the same process. The shim's errors become Status values here; nothing
// of it leaks out of sentencepiece.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

struct tune_spm;

namespace tune::internal {

class SentencePieceModel {
 public:
  // NotFound for a missing file; InvalidArgument (naming the file) for one SentencePiece cannot
  // parse.
  // FailedPrecondition when libtune_spm.so cannot be loaded (naming where it was looked for).
  static Result<std::shared_ptr<const SentencePieceModel>> Load(const std::string& path);
  // The shim's path: $TUNE_SPM_LIBRARY, else libtune_spm.so next to libtune_train.so, else
  // where the build put it.
  static std::vector<std::string> ShimCandidates();
  ~SentencePieceModel();

  int size() const;
  // The piece with this id ("" when out of range).
  std::string Piece(int id) const;
  // The id of `piece`, or -1 when the model has no such piece.
  int PieceId(std::string_view piece) const;
  int unk_id() const;
  // The score of piece `id` (a unigram model's log probability).
  float Score(int id) const;
  // The normalizer's precompiled character map (empty when the model has none).
  std::string Charsmap() const;

 private:
  struct Api;
  // The shim, opened once per process.
  static Result<const Api*> Shim();
  SentencePieceModel(const Api* api, tune_spm* model);
  const Api* api_;
  tune_spm* model_;
};

}  // namespace tune::internal

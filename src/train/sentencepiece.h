// A SentencePiece model file (spm.model, sentencepiece.bpe.model) through Debian's
// libsentencepiece [tune_train, private]. Its errors become Status values here; nothing of
// SentencePiece's API leaks out of sentencepiece.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace tune::internal {

class SentencePieceModel {
 public:
  // NotFound for a missing file; InvalidArgument (naming the file) for one SentencePiece cannot
  // parse.
  static Result<std::shared_ptr<const SentencePieceModel>> Load(const std::string& path);
  ~SentencePieceModel();

  // The model's piece ids of `text` (its own normalization included).
  std::vector<int> EncodeIds(std::string_view text) const;
  std::vector<std::string> EncodePieces(std::string_view text) const;

  int size() const;
  // The piece with this id ("" when out of range).
  std::string Piece(int id) const;
  // The id of `piece`, or -1 when the model has no such piece.
  int PieceId(std::string_view piece) const;
  int unk_id() const;

 private:
  SentencePieceModel();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace tune::internal

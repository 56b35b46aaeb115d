#include "train/sentencepiece.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <exception>
#include <filesystem>

namespace tune::internal {

SentencePieceModel::SentencePieceModel()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceModel::~SentencePieceModel() = default;

Result<std::shared_ptr<const SentencePieceModel>> SentencePieceModel::Load(
    const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFoundError(fmt::format("{}: cannot open the SentencePiece model file", path));
  }
  std::shared_ptr<SentencePieceModel> m(new SentencePieceModel());
  std::string why;
  try {
    const auto st = m->sp_->Load(path);
    if (!st.ok()) why = st.ToString();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty() && m->sp_->GetPieceSize() <= 0) why = "no pieces";
  if (!why.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: not a valid SentencePiece model ({})", path, why));
  }
  return std::shared_ptr<const SentencePieceModel>(std::move(m));
}

std::vector<int> SentencePieceModel::EncodeIds(std::string_view text) const {
  std::vector<int> ids;
  try {
    if (!sp_->Encode(text, &ids).ok()) ids.clear();
  } catch (const std::exception&) {
    ids.clear();
  }
  return ids;
}

std::vector<std::string> SentencePieceModel::EncodePieces(std::string_view text) const {
  std::vector<std::string> pieces;
  try {
    if (!sp_->Encode(text, &pieces).ok()) pieces.clear();
  } catch (const std::exception&) {
    pieces.clear();
  }
  return pieces;
}

int SentencePieceModel::size() const { return sp_->GetPieceSize(); }

std::string SentencePieceModel::Piece(int id) const {
  return id >= 0 && id < size() ? sp_->IdToPiece(id) : std::string();
}

int SentencePieceModel::PieceId(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  return sp_->IdToPiece(id) == piece ? id : -1;
}

int SentencePieceModel::unk_id() const { return sp_->unk_id(); }

}  // namespace tune::internal

// libtune_spm.so: SentencePiece behind the C interface of spm_shim.h. See there for why.
#include "tokenizers/spm_shim/spm_shim.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#define TUNE_SPM_EXPORT __attribute__((visibility("default")))

struct tune_spm {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

void CopyError(const std::string& why, char* err, size_t err_cap) {
  if (err == nullptr || err_cap == 0) return;
  const size_t n = std::min(why.size(), err_cap - 1);
  std::memcpy(err, why.data(), n);
  err[n] = '\0';
}

// The ids (and pieces) of `text` into `out`, allocated with malloc.
bool Fill(const std::vector<int>& ids, const std::vector<std::string>* pieces,
          tune_spm_encoding* out) {
  out->count = ids.size();
  out->ids = static_cast<int*>(std::malloc(sizeof(int) * (ids.size() + 1)));
  if (out->ids == nullptr) return false;
  if (!ids.empty()) std::memcpy(out->ids, ids.data(), sizeof(int) * ids.size());
  if (pieces == nullptr) return true;
  size_t total = 0;
  for (const std::string& p : *pieces) total += p.size();
  out->piece_ends = static_cast<size_t*>(std::malloc(sizeof(size_t) * (pieces->size() + 1)));
  out->pieces = static_cast<char*>(std::malloc(total + 1));
  if (out->piece_ends == nullptr || out->pieces == nullptr) return false;
  size_t end = 0;
  for (size_t i = 0; i < pieces->size(); ++i) {
    std::memcpy(out->pieces + end, (*pieces)[i].data(), (*pieces)[i].size());
    end += (*pieces)[i].size();
    out->piece_ends[i] = end;
  }
  return true;
}

}  // namespace

extern "C" {

TUNE_SPM_EXPORT int tune_spm_abi(void) { return TUNE_SPM_ABI; }

TUNE_SPM_EXPORT tune_spm* tune_spm_load(const char* path, char* err, size_t err_cap) {
  try {
    auto* m = new tune_spm;
    const auto st = m->sp.Load(path);
    if (st.ok() && m->sp.GetPieceSize() > 0) return m;
    CopyError(st.ok() ? std::string("no pieces") : st.ToString(), err, err_cap);
    delete m;
  } catch (const std::exception& e) {
    CopyError(e.what(), err, err_cap);
  } catch (...) {
    CopyError("unknown error", err, err_cap);
  }
  return nullptr;
}

TUNE_SPM_EXPORT void tune_spm_free(tune_spm* model) { delete model; }

TUNE_SPM_EXPORT int tune_spm_size(const tune_spm* model) { return model->sp.GetPieceSize(); }

TUNE_SPM_EXPORT int tune_spm_unk_id(const tune_spm* model) { return model->sp.unk_id(); }

TUNE_SPM_EXPORT int tune_spm_piece_to_id(const tune_spm* model, const char* piece, size_t len) {
  try {
    return model->sp.PieceToId(std::string_view(piece, len));
  } catch (...) {
    return -1;
  }
}

TUNE_SPM_EXPORT size_t tune_spm_id_to_piece(const tune_spm* model, int id, char* buf, size_t cap) {
  try {
    const std::string& piece = model->sp.IdToPiece(id);
    std::memcpy(buf, piece.data(), std::min(cap, piece.size()));
    return piece.size();
  } catch (...) {
    return 0;
  }
}

TUNE_SPM_EXPORT int tune_spm_encode(const tune_spm* model, const char* text, size_t len,
                                    int with_pieces, tune_spm_encoding* out) {
  *out = tune_spm_encoding{0, nullptr, nullptr, nullptr};
  try {
    std::vector<int> ids;
    std::vector<std::string> pieces;
    const std::string_view input(text, len);
    if (!model->sp.Encode(input, &ids).ok()) return -1;
    if (with_pieces != 0 && !model->sp.Encode(input, &pieces).ok()) return -1;
    if (Fill(ids, with_pieces != 0 ? &pieces : nullptr, out)) return 0;
  } catch (...) {
  }
  tune_spm_encoding_free(out);
  return -1;
}

TUNE_SPM_EXPORT void tune_spm_encoding_free(tune_spm_encoding* out) {
  std::free(out->ids);
  std::free(out->piece_ends);
  std::free(out->pieces);
  *out = tune_spm_encoding{0, nullptr, nullptr, nullptr};
}

}  // extern "C"

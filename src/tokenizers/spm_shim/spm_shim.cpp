// libtune_spm.so: SentencePiece behind the C interface of spm_shim.h. See there for why.
#include "tokenizers/spm_shim/spm_shim.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

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

// Reads a protobuf varint at `p` (advanced); false at the end or on a malformed one.
bool Varint(const unsigned char*& p, const unsigned char* end, uint64_t& out) {
  out = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    const unsigned char b = *p++;
    out |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The bytes of the first length-delimited field `field` of the message in [p, end), or an empty
// view (fields of other wire types are skipped).
std::string_view Field(const unsigned char* p, const unsigned char* end, uint64_t field) {
  uint64_t key = 0, len = 0;
  while (p < end && Varint(p, end, key)) {
    switch (key & 7) {
      case 0:
        if (!Varint(p, end, len)) return {};
        break;
      case 1:
      case 5: {
        const long size = (key & 7) == 1 ? 8 : 4;
        if (end - p < size) return {};
        p += size;
        break;
      }
      case 2:
        if (!Varint(p, end, len) || len > static_cast<uint64_t>(end - p)) return {};
        if ((key >> 3) == field) return {reinterpret_cast<const char*>(p), len};
        p += len;
        break;
      default:
        return {};
    }
  }
  return {};
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
    // {data, size}: SentencePiece's absl::string_view, which is std::string_view from 0.1.97 and
    // a class of its own before (Ubuntu 22.04's 0.1.96), is built from both.
    return model->sp.PieceToId({piece, len});
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

TUNE_SPM_EXPORT float tune_spm_score(const tune_spm* model, int id) {
  try {
    return id >= 0 && id < model->sp.GetPieceSize() ? model->sp.GetScore(id) : 0.0f;
  } catch (...) {
    return 0.0f;
  }
}

// ModelProto field 3 is the NormalizerSpec, whose field 2 is precompiled_charsmap.
TUNE_SPM_EXPORT size_t tune_spm_charsmap(const tune_spm* model, char* buf, size_t cap) {
  try {
    const std::string proto = model->sp.serialized_model_proto();
    const auto* begin = reinterpret_cast<const unsigned char*>(proto.data());
    const std::string_view spec = Field(begin, begin + proto.size(), 3);
    const auto* spec_begin = reinterpret_cast<const unsigned char*>(spec.data());
    const std::string_view charsmap = Field(spec_begin, spec_begin + spec.size(), 2);
    if (cap > 0) std::memcpy(buf, charsmap.data(), std::min(cap, charsmap.size()));
    return charsmap.size();
  } catch (...) {
    return 0;
  }
}

}  // extern "C"

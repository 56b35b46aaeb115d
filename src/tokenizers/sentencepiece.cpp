#include "tokenizers/sentencepiece.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "tokenizers/spm_shim/spm_shim.h"
#include "util/dynamic_library.h"

namespace tune::internal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShim = "libtune_spm.so";

}  // namespace

struct SentencePieceModel::Api {
  decltype(&tune_spm_abi) abi = nullptr;
  decltype(&tune_spm_load) load = nullptr;
  decltype(&tune_spm_free) free = nullptr;
  decltype(&tune_spm_size) size = nullptr;
  decltype(&tune_spm_unk_id) unk_id = nullptr;
  decltype(&tune_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&tune_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&tune_spm_score) score = nullptr;
  decltype(&tune_spm_charsmap) charsmap = nullptr;

  bool Bind(const DynamicLibrary& lib) {
    abi = lib.Symbol<decltype(abi)>("tune_spm_abi");
    load = lib.Symbol<decltype(load)>("tune_spm_load");
    free = lib.Symbol<decltype(free)>("tune_spm_free");
    size = lib.Symbol<decltype(size)>("tune_spm_size");
    unk_id = lib.Symbol<decltype(unk_id)>("tune_spm_unk_id");
    piece_to_id = lib.Symbol<decltype(piece_to_id)>("tune_spm_piece_to_id");
    id_to_piece = lib.Symbol<decltype(id_to_piece)>("tune_spm_id_to_piece");
    score = lib.Symbol<decltype(score)>("tune_spm_score");
    charsmap = lib.Symbol<decltype(charsmap)>("tune_spm_charsmap");
    return abi != nullptr && load != nullptr && free != nullptr && size != nullptr &&
           unk_id != nullptr && piece_to_id != nullptr && id_to_piece != nullptr &&
           score != nullptr && charsmap != nullptr && abi() == TUNE_SPM_ABI;
  }
};

std::vector<std::string> SentencePieceModel::ShimCandidates() {
  if (const char* env = std::getenv("TUNE_SPM_LIBRARY"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&SentencePieceModel::ShimCandidates), &info) != 0 &&
      info.dli_fname != nullptr) {
    out.push_back((fs::path(info.dli_fname).parent_path() / kShim).string());
  }
#ifdef TUNE_SPM_BUILD_PATH
  out.push_back(TUNE_SPM_BUILD_PATH);
#endif
  return out;
}

// AddressSanitizer refuses RTLD_DEEPBIND (its interceptors must come first). A sanitizer build
// (cmake/TuneSanitizers.cmake) has no LibTorch, whose protobuf DEEPBIND keeps apart, so it opens
// the shim without it.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kShimScope = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kShimScope = 0;
#else
constexpr int kShimScope = RTLD_DEEPBIND;
#endif
#else
constexpr int kShimScope = RTLD_DEEPBIND;
#endif

// Opened once per process and never closed: its own symbol scope first (DEEPBIND), and nothing
// of it in the global scope (LOCAL).
Result<const SentencePieceModel::Api*> SentencePieceModel::Shim() {
  static const Result<const Api*> shim = []() -> Result<const Api*> {
    static Api api;
    auto lib = DynamicLibrary::OpenFirst(ShimCandidates(), kShimScope);
    if (lib.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("the SentencePiece library {} is missing ({}); rebuild tune or "
                                "set TUNE_SPM_LIBRARY to its path",
                                kShim, lib.status().message()));
    }
    if (!lib.ok()) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("cannot load the SentencePiece library {} (Debian: "
                                "libsentencepiece0; scripts/install-deps.sh installs it)",
                                lib.status().message()));
    }
    if (!api.Bind(*lib)) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("{} is not the SentencePiece library of this tune build "
                                "(stale or foreign); rebuild tune, or point TUNE_SPM_LIBRARY "
                                "at the right {}",
                                lib->path(), kShim));
    }
    lib->Keep();
    return &api;
  }();
  return shim;
}

Result<std::shared_ptr<const SentencePieceModel>> SentencePieceModel::Load(
    const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return NotFoundError(fmt::format("{}: cannot open the SentencePiece model file", path));
  }
  TUNE_ASSIGN_OR_RETURN(const Api* api, Shim());
  char why[512] = {0};
  tune_spm* model = api->load(path.c_str(), why, sizeof(why));
  if (model == nullptr) {
    return InvalidArgumentError(fmt::format("{}: not a valid SentencePiece model ({})", path, why));
  }
  return std::shared_ptr<const SentencePieceModel>(new SentencePieceModel(api, model));
}

SentencePieceModel::SentencePieceModel(const Api* api, tune_spm* model)
    : api_(api), model_(model) {}

SentencePieceModel::~SentencePieceModel() { api_->free(model_); }

int SentencePieceModel::size() const { return api_->size(model_); }

std::string SentencePieceModel::Piece(int id) const {
  if (id < 0 || id >= size()) return std::string();
  std::string piece(64, '\0');
  size_t n = api_->id_to_piece(model_, id, piece.data(), piece.size());
  if (n > piece.size()) {
    piece.resize(n);
    n = api_->id_to_piece(model_, id, piece.data(), piece.size());
  }
  piece.resize(n);
  return piece;
}

int SentencePieceModel::PieceId(std::string_view piece) const {
  const int id = api_->piece_to_id(model_, piece.data(), piece.size());
  return id >= 0 && Piece(id) == piece ? id : -1;
}

int SentencePieceModel::unk_id() const { return api_->unk_id(model_); }

float SentencePieceModel::Score(int id) const { return api_->score(model_, id); }

std::string SentencePieceModel::Charsmap() const {
  std::string map(api_->charsmap(model_, nullptr, 0), '\0');
  map.resize(api_->charsmap(model_, map.data(), map.size()));
  return map;
}

}  // namespace tune::internal

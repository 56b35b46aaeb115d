// The C interface of libtune_spm.so, the one library that links Debian's libsentencepiece
// [tune_spm, loaded by tune_train with dlopen].
//
// libsentencepiece.so.0 carries its own copy of protobuf-lite and exports its symbols; LibTorch
// links libprotobuf.so. Loaded into one symbol scope the two interpose on each other and the
// process crashes in protobuf's static initialisation. tune_train therefore never links
// SentencePiece: it opens this shim with RTLD_LOCAL | RTLD_DEEPBIND (sentencepiece.cpp), so the
// shim and libsentencepiece bind to their own protobuf and nothing else sees it. Only plain C
// types cross this boundary; no exception leaves the shim.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped when a signature below changes; the loader refuses a shim with another number.
#define TUNE_SPM_ABI 2

typedef struct tune_spm tune_spm;

int tune_spm_abi(void);
// The model in `path`, or NULL with the reason in `err` (NUL-terminated, cut to `err_cap`).
tune_spm* tune_spm_load(const char* path, char* err, size_t err_cap);
void tune_spm_free(tune_spm* model);
int tune_spm_size(const tune_spm* model);
int tune_spm_unk_id(const tune_spm* model);
// The id of `piece` (the unknown id for a piece the model lacks, as SentencePiece does).
int tune_spm_piece_to_id(const tune_spm* model, const char* piece, size_t len);
// Piece `id` copied into `buf` (at most `cap` bytes, not NUL-terminated); returns its length.
size_t tune_spm_id_to_piece(const tune_spm* model, int id, char* buf, size_t cap);
// The score of piece `id` (its log probability in a unigram model); 0 when out of range.
float tune_spm_score(const tune_spm* model, int id);
// The normalizer's precompiled character map (NormalizerSpec.precompiled_charsmap: the map
// Hugging Face's Precompiled normalizer reads) copied into `buf` (at most `cap` bytes); returns
// its length, 0 when the model has none.
size_t tune_spm_charsmap(const tune_spm* model, char* buf, size_t cap);

#ifdef __cplusplus
}  // extern "C"
#endif

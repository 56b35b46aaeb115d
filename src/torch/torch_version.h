// TUNE_TORCH_AT_LEAST(major, minor): compile-time LibTorch version checks (private to tune_torch).
// Only <torch/version.h>, so that files including nothing else of LibTorch stay cheap to compile.
#pragma once

#include <torch/version.h>

#define TUNE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// SHA-256 (FIPS 180-4) of bytes and files: the content hash that keys a measured memory fit of a
// model file ("sha256:<hex>"), so a changed file is measured again and an unchanged one is not.
#pragma once

#include <string>
#include <string_view>

#include "tune/status.h"

namespace tune {

// The 64 lowercase hex digits of the SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// "sha256:<hex>" of the file's contents; NotFound "PATH: cannot read (REASON)" when it cannot be
// read.
Result<std::string> FileContentHash(const std::string& path);

}  // namespace tune

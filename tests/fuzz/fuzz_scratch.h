// The fuzz targets' scratch directory: readers that take a path get the input as a file in it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tune::fuzz {

// One directory per process under $TMPDIR, removed at exit.
const std::filesystem::path& ScratchDir();
// Writes `bytes` to ScratchDir()/name (replacing it; `name` may start with a folder, made when
// missing) and returns its path.
std::string WriteScratchFile(const std::string& name, std::string_view bytes);

}  // namespace tune::fuzz

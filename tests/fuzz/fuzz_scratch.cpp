#include "fuzz/fuzz_scratch.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace tune::fuzz {
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path path;
  Scratch() {
    std::string templ = (fs::temp_directory_path() / "tune-fuzz-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) {
      std::perror("tune fuzz: mkdtemp");
      std::abort();
    }
    path = templ;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

const fs::path& ScratchDir() {
  static const Scratch scratch;
  return scratch.path;
}

std::string WriteScratchFile(const std::string& name, std::string_view bytes) {
  const fs::path path = ScratchDir() / name;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "tune fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

}  // namespace tune::fuzz

#include "util/python_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace tune {

namespace fs = std::filesystem;

std::optional<std::string> PythonModuleDir(std::string* looked) {
  Dl_info info{};
  std::vector<fs::path> candidates;
  if (dladdr(reinterpret_cast<void*>(&PythonModuleDir), &info) != 0 && info.dli_fname != nullptr) {
    const fs::path lib = fs::path(info.dli_fname).parent_path();
    candidates.push_back(lib / "python");                                         // a build tree
    candidates.push_back(lib.parent_path().parent_path() / "share/tune/python");  // installed
  }
  std::string seen;
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    const fs::path normal = fs::weakly_canonical(dir, ec);
    const fs::path shown = ec ? dir : normal;
    if (fs::is_regular_file(shown / kPythonModuleFile, ec)) return shown.string();
    seen += (seen.empty() ? "" : ", ") + shown.string();
  }
  if (looked != nullptr) *looked = seen.empty() ? "(libtune_core.so's place unknown)" : seen;
  return std::nullopt;
}

}  // namespace tune

#include "checkpoints/hub_cache.h"

#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

namespace tune {
namespace fs = std::filesystem;

std::string HuggingFaceHubCache() {
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub != nullptr && *hub != '\0') return hub;
  if (const char* home = std::getenv("HF_HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / "hub").string();
  }
  const char* user = std::getenv("HOME");
  return (fs::path(user != nullptr ? user : "") / ".cache" / "huggingface" / "hub").string();
}

std::string HubRepoFolder(const std::string& name) {
  std::string folder = "models--" + name;
  for (size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at + 2)) {
    folder.replace(at, 1, "--");
  }
  return folder;
}

std::optional<fs::path> HubSnapshot(const std::string& name, const std::string& cache,
                                    std::string& where) {
  const fs::path repo = fs::path(cache) / HubRepoFolder(name);
  std::error_code ec;
  std::ifstream ref(repo / "refs" / "main");
  std::string rev;
  if (ref >> rev) {
    where = (repo / "snapshots" / rev).string() + " (refs/main)";
    if (fs::is_directory(repo / "snapshots" / rev, ec)) return repo / "snapshots" / rev;
    return std::nullopt;
  }
  where = (repo / "snapshots" / "<rev>").string() + " (no refs/main)";
  std::vector<fs::path> snapshots;
  for (fs::directory_iterator it(repo / "snapshots", ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) snapshots.push_back(it->path());
  }
  if (snapshots.size() == 1) return snapshots[0];
  return std::nullopt;
}

}  // namespace tune

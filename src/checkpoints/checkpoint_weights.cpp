#include "checkpoints/checkpoint_weights.h"

#include <fmt/format.h>

#include <set>

#include "checkpoints/pytorch_bin.h"
#include "checkpoints/safetensors.h"
#include "util/json_file.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<std::string> FindWeightsFile(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : kWeightsFiles) {
    if (fs::is_regular_file(dir / name, ec)) return (dir / name).string();
  }
  return std::nullopt;
}

const CheckpointTensor* CheckpointWeights::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::vector<float>> CheckpointWeights::ReadFloats(const CheckpointTensor& tensor) const {
  return ReadTensorFloats(files_.at(tensor.file), tensor);
}

// Reads one file's tensors into tensors_; `shown_in` is the index that named it ("" unsharded).
Status CheckpointWeights::AddFile(const std::string& file, const std::string& shown_in) {
  const size_t index = files_.size();
  files_.push_back(file);
  std::vector<CheckpointTensor> tensors;
  std::string format;
  if (EndsWith(file, ".safetensors")) {
    TUNE_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Open(file));
    for (const auto& [name, info] : st.tensors()) tensors.push_back(info.ToCheckpointTensor());
    format = "safetensors";
  } else {
    TUNE_ASSIGN_OR_RETURN(PytorchCheckpoint pt, ReadPytorchCheckpoint(file));
    tensors = std::move(pt.tensors);
    format = "pytorch " + pt.format;
  }
  if (format_.empty()) format_ = format;
  for (CheckpointTensor& t : tensors) {
    t.file = index;
    const std::string name = t.name;
    if (!tensors_.emplace(name, std::move(t)).second) {
      return InvalidArgumentError(fmt::format("{}: tensor '{}' is in two shards ({} and {})",
                                              shown_in, name, files_[tensors_.at(name).file],
                                              file));
    }
  }
  return Status::Ok();
}

Result<CheckpointWeights> CheckpointWeights::Open(const std::string& path) {
  CheckpointWeights w;
  w.path_ = path;
  if (!EndsWith(path, ".index.json")) {
    TUNE_RETURN_IF_ERROR(w.AddFile(path, path));
    return w;
  }
  // A sharded checkpoint: {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}}.
  TUNE_ASSIGN_OR_RETURN(Json index, ReadJsonObjectFile(path));
  if (!index.contains("weight_map") || !index["weight_map"].is_object() ||
      index["weight_map"].empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: no \"weight_map\" (an object of tensor name -> shard file) in the index", path));
  }
  std::map<std::string, std::string> weight_map;
  std::set<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find('/') != std::string::npos) {
      return InvalidArgumentError(fmt::format(
          "{}: weight_map['{}'] is {}; expected the name of a shard file next to the index", path,
          name, shard.dump()));
    }
    weight_map[name] = shard.get<std::string>();
    shards.insert(shard.get<std::string>());
  }
  const fs::path dir = fs::path(path).parent_path();
  for (const std::string& shard : shards) {
    const std::string file = (dir / shard).string();
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      return NotFoundError(fmt::format("{}: shard {} is missing (the index names {} shards)", path,
                                       file, shards.size()));
    }
    TUNE_RETURN_IF_ERROR(w.AddFile(file, path));
  }
  for (const auto& [name, shard] : weight_map) {
    const CheckpointTensor* t = w.Find(name);
    if (t == nullptr || fs::path(w.files_[t->file]).filename() != shard) {
      return InvalidArgumentError(fmt::format(
          "{}: the index puts tensor '{}' in {}, which does not hold it", path, name, shard));
    }
  }
  w.format_ += fmt::format(", {} shards", shards.size());
  return w;
}

}  // namespace tune

// A checkpoint's weights, whatever files hold them [tune_train, private] (plain C++, no LibTorch):
// model.safetensors, pytorch_model.bin (read without executing it, pytorch_bin.h), or either
// format sharded by Hugging Face's save_pretrained (model-00001-of-00002.safetensors,
// pytorch_model-00001-of-00002.bin) behind its index, {"weight_map": {tensor: shard file}}.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoints/tensor_data.h"
#include "tune/status.h"

namespace tune {

// The weights files a checkpoint directory may have, in the order Hugging Face's from_pretrained
// prefers them.
inline constexpr const char* kWeightsFiles[] = {"model.safetensors", "model.safetensors.index.json",
                                                "pytorch_model.bin",
                                                "pytorch_model.bin.index.json"};

// The first of kWeightsFiles present in `dir`; nullopt when none is.
std::optional<std::string> FindWeightsFile(const std::filesystem::path& dir);

class CheckpointWeights {
 public:
  // Opens a weights file (a .safetensors, a PyTorch .bin) or a sharded checkpoint's
  // *.index.json, reading every header and no tensor data. NotFound for a missing file (a shard
  // named by the index included); InvalidArgument naming the file and what is wrong otherwise,
  // and for a tensor the index names that its shard lacks, or a tensor in two shards.
  static Result<CheckpointWeights> Open(const std::string& path);

  const std::string& path() const { return path_; }  // what was opened
  // "safetensors", "pytorch zip", "pytorch legacy"; with ", N shards" when sharded.
  const std::string& format() const { return format_; }
  // The files that hold the tensors (one unless sharded); CheckpointTensor::file indexes it.
  const std::vector<std::string>& files() const { return files_; }
  // Sorted by name.
  const std::map<std::string, CheckpointTensor>& tensors() const { return tensors_; }
  const CheckpointTensor* Find(const std::string& name) const;
  // The tensor's values as float (ReadTensorFloats on its file).
  Result<std::vector<float>> ReadFloats(const CheckpointTensor& tensor) const;

 private:
  Status AddFile(const std::string& file, const std::string& shown_in);

  std::string path_;
  std::string format_;
  std::vector<std::string> files_;
  std::map<std::string, CheckpointTensor> tensors_;
};

}  // namespace tune

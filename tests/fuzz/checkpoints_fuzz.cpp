// Fuzz targets of the checkpoint readers (src/checkpoints/): the restricted unpickler,
// pytorch_model.bin (zip and legacy), safetensors, and a sharded checkpoint's index.
#include <string>

#include "checkpoints/checkpoint_weights.h"
#include "checkpoints/pickle.h"
#include "checkpoints/pytorch_bin.h"
#include "checkpoints/safetensors.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_targets.h"

namespace tune::fuzz {

namespace {

// Reads every tensor's values, as tune does when it loads pretrained weights.
template <typename Weights, typename Tensors>
void ReadAll(const Weights& weights, const Tensors& tensors) {
  for (const auto& [name, tensor] : tensors) (void)weights.ReadFloats(tensor);
}

}  // namespace

int FuzzPickle(std::string_view bytes) {
  // Hooks that accept everything, so that the machine itself is what runs: every global, every
  // call (its arguments as a tuple) and every persistent id (an object).
  PickleHooks hooks;
  hooks.global = [](const std::string&, const std::string&) { return Status::Ok(); };
  hooks.reduce = [](const std::string&, PickleRef args, PickleArena& arena) -> Result<PickleRef> {
    return arena.Tuple({args});
  };
  int64_t next_id = 0;
  hooks.persistent_load = [&](PickleRef, PickleArena& arena) -> Result<PickleRef> {
    return arena.Object("storage", next_id++);
  };
  // A run of pickles, as a legacy pytorch_model.bin holds.
  PickleArena arena;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t before = pos;
    Result<PickleRef> value = Unpickle(bytes, pos, hooks, "fuzz.pkl", arena);
    if (!value.ok() || pos <= before) break;
    (void)PickleKindName(**value);
  }
  return 0;
}

int FuzzPytorchBin(std::string_view bytes) {
  const std::string path = WriteScratchFile("pytorch_model.bin", bytes);
  Result<PytorchCheckpoint> checkpoint = ReadPytorchCheckpoint(path);
  if (!checkpoint.ok()) return 0;
  for (const CheckpointTensor& tensor : checkpoint->tensors) {
    (void)ReadTensorFloats(path, tensor);
  }
  return 0;
}

int FuzzSafetensors(std::string_view bytes) {
  Result<SafetensorsFile> file =
      SafetensorsFile::Open(WriteScratchFile("model.safetensors", bytes));
  if (file.ok()) ReadAll(*file, file->tensors());
  return 0;
}

int FuzzShardIndex(std::string_view bytes) {
  // The shards the seeds' indexes name, written once: two safetensors files and a PyTorch one.
  static const bool shards = [] {
    const std::string dir = ScratchDir().string() + "/";
    bool ok = WriteSafetensors(dir + "model-00001-of-00002.safetensors",
                               {{"w", {2, 3}, {1, 2, 3, 4, 5, 6}, TensorDtype::kF32}})
                  .ok();
    ok = ok && WriteSafetensors(dir + "model-00002-of-00002.safetensors",
                                {{"v", {2}, {1, 2}, TensorDtype::kF16}})
                   .ok();
    ok = ok && WriteSafetensors(dir + "pytorch_model-00001-of-00001.bin",
                                {{"w", {1}, {1}, TensorDtype::kBF16}})
                   .ok();  // a safetensors file under a .bin name: refused, naming it
    return ok;
  }();
  if (!shards) return 0;
  Result<CheckpointWeights> weights =
      CheckpointWeights::Open(WriteScratchFile("model.safetensors.index.json", bytes));
  if (weights.ok()) ReadAll(*weights, weights->tensors());
  return 0;
}

}  // namespace tune::fuzz

// Reading PyTorch checkpoints, `pytorch_model.bin`, without executing them [tune_train, private]
// (plain C++, no LibTorch).
#pragma once

#include <string>
#include <vector>

#include "checkpoints/tensor_data.h"
#include "tune/status.h"

namespace tune {

struct PytorchCheckpoint {
  std::string format;  // "zip" or "legacy"
  // By the state dict's order; file = 0, storage_begin absolute in `path`.
  std::vector<CheckpointTensor> tensors;
};

// Reads the state dict's tensors (no tensor data; CheckTensorBounds holds for every one). Reads
// `torch.save(state_dict)`'s zip archive (PyTorch >= 1.6: <prefix>/data.pkl, a pickle of the
// state dict whose tensors point by persistent id at uncompressed storages <prefix>/data/<key>;
// <prefix>/byteorder "little" or absent) and the legacy format before it (a run of pickles:
// magic number, protocol version, system info, the state dict, the storage keys; then each
// storage as an int64 element count and its raw bytes). Tensors keep their views: storage
// offsets, strides, storages shared by tied weights.
// The pickle is read by a restricted unpickler (pickle.h) that accepts what a state dict is made
// of and nothing more, the promise of `torch.load(weights_only=True)`: collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter /
// _rebuild_parameter_with_state, torch._tensor._rebuild_from_type_v2 (of torch.Tensor or
// torch.nn.Parameter), the typed storages (torch.FloatStorage, ...), the dtypes, torch.Size and
// _codecs.encode. Nothing named in the file is ever called.
// NotFound when the file cannot be opened; InvalidArgument naming the file and what is wrong for
// anything else: a refused global (named), a pickle that is not a flat state dict (name ->
// tensor), a truncated or corrupt archive, a storage shorter than a tensor needs, a compressed or
// big-endian archive, early PyTorch's tar format, a safetensors file.
Result<PytorchCheckpoint> ReadPytorchCheckpoint(const std::string& path);

}  // namespace tune

// TorchScript models in the trainer (private to tune_torch; docs/config.md "TorchScript models").
//
// A TorchScript file (torch.jit.script(model).save("m.pt") in PyTorch) is trained in process: its
// module's forward(input_ids: Tensor[B, T] int64, attention_mask: Tensor[B, T] int64) must return
// the logits, Tensor[B, num_labels]. LoadScriptModule reads the file; CheckScriptForward is the
// checked load's dry run at B=1, T=8. Both turn LibTorch's exceptions into InvalidArgument
// statuses that say what was expected and how to export a model.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tune/status.h"

namespace tune::internal {

// The module in `path`, on `device`. NotFound for a missing file; InvalidArgument (saying how to
// export one) for a file that is not TorchScript (a pickled state_dict, a torch.save(model)).
Result<torch::jit::Module> LoadScriptModule(const std::string& path, const torch::Device& device);

// The dry run of the checked load: forward at B=1, T=8 in evaluation mode without gradients,
// once with small token ids and once with `max_id` (the tokenizer's largest). InvalidArgument
// when forward does not take (input_ids, attention_mask), fails, returns something other than a
// floating Tensor[1, num_labels] (any Tensor[1, K] when num_labels <= 0), or the module has no
// trainable parameters. Returns the width of its logits.
Result<int64_t> CheckScriptForward(torch::jit::Module& module, const std::string& path,
                                   int64_t num_labels, int64_t max_id, const torch::Device& device);

// The module's trainable parameters split as Hugging Face's Trainer does: no weight decay for
// biases (a name containing "bias") and the parameters of LayerNorm modules.
void ScriptDecayGroups(const torch::jit::Module& module, std::vector<torch::Tensor>& decay,
                       std::vector<torch::Tensor>& no_decay);

// Every trainable parameter.
std::vector<torch::Tensor> ScriptParameters(const torch::jit::Module& module);

// Turns the module's gradient checkpointing on: it must declare a bool attribute
// `gradient_checkpointing`; InvalidArgument otherwise (it is not a lever tune can pull).
Status EnableScriptCheckpointing(torch::jit::Module& module, const std::string& path);

// An error of the TorchScript interpreter ("The following operation failed in the TorchScript
// interpreter. Traceback ... RuntimeError: MESSAGE") with MESSAGE as its first line; any other
// text unchanged.
std::string ScriptErrorText(const std::string& what);

// Writes the module to `path` atomically (a temporary file, then a rename).
Status SaveScriptModule(const torch::jit::Module& module, const std::string& path);

}  // namespace tune::internal

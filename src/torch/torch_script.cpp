// TorchScript models in the trainer (torch_script.h).
#include "torch/torch_script.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace tune::internal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHowToExport =
    "tune trains a TorchScript module whose forward(input_ids: Tensor[B, T] int64, "
    "attention_mask: Tensor[B, T] int64) returns the logits, Tensor[B, num_labels]; export one "
    "in PyTorch with torch.jit.script(model).save(\"m.pt\") (docs/config.md, \"TorchScript "
    "models\")";

constexpr const char* kInterpreterError =
    "The following operation failed in the TorchScript interpreter";

// The first line of a LibTorch message (the rest is a C++ or TorchScript backtrace); for an
// error in the TorchScript interpreter, the original message (ScriptErrorText).
std::string Brief(const std::string& what) {
  const std::string text = ScriptErrorText(what);
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 300) {
    line.resize(300);
    line.append("...");
  }
  return line;
}

// "Tensor[1, 3] float", "tuple", "None".
std::string Describe(const torch::IValue& v) {
  if (!v.isTensor()) return v.tagKind();
  const torch::Tensor& t = v.toTensor();
  std::string shape;
  for (int64_t d : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return fmt::format("Tensor[{}] {}", shape, c10::toString(t.scalar_type()));
}

// The forward's input count (without self), or -1 when the module has no forward.
int64_t ForwardArity(const torch::jit::Module& module) {
  auto forward = module.find_method("forward");
  if (!forward) return -1;
  return static_cast<int64_t>(forward->function().getSchema().arguments().size()) - 1;
}

// input_ids [1, 8] = [2, six tokens, 3] (the tokenizer's [CLS] and [SEP]): id 1, or with
// `use_max` ids up to max_id; attention_mask all ones.
std::vector<torch::IValue> DryRunInputs(int64_t max_id, bool use_max, const torch::Device& device) {
  std::vector<int64_t> ids = {2};
  for (int64_t i = 0; i < 6; ++i) ids.push_back(use_max ? std::max<int64_t>(max_id - i, 1) : 1);
  ids.push_back(3);
  torch::Tensor input = torch::tensor(ids, torch::kLong).view({1, 8}).to(device);
  torch::Tensor mask = torch::ones({1, 8}, torch::kLong).to(device);
  return {input, mask};
}

// One forward of the dry run; its output, or the error's first line in `error`.
std::optional<torch::IValue> TryForward(torch::jit::Module& module,
                                        std::vector<torch::IValue> inputs, std::string& error) {
  try {
    return module.forward(std::move(inputs));
  } catch (const c10::Error& e) {
    error = Brief(e.what_without_backtrace());
  } catch (const std::exception& e) {
    error = Brief(e.what());
  }
  return std::nullopt;
}

// The width of the logits `out`: Tensor[1, num_labels], or any Tensor[1, K] when num_labels <= 0.
Result<int64_t> CheckOutput(const torch::IValue& out, const std::string& path, int64_t num_labels) {
  const bool shaped = out.isTensor() && out.toTensor().dim() == 2 && out.toTensor().size(0) == 1 &&
                      out.toTensor().size(1) >= 1 && out.toTensor().is_floating_point();
  if (shaped && (num_labels <= 0 || out.toTensor().size(1) == num_labels)) {
    return out.toTensor().size(1);
  }
  return InvalidArgumentError(fmt::format(
      "TorchScript model {}: forward at B=1, T=8 returned {}, expected the logits as a floating "
      "Tensor[1, {}] (B x num_labels); {}",
      path, Describe(out), num_labels > 0 ? std::to_string(num_labels) : "num_labels",
      kHowToExport));
}

}  // namespace

std::string ScriptErrorText(const std::string& what) {
  if (what.rfind(kInterpreterError, 0) != 0) return what;
  const size_t end = what.find_last_not_of("\n ");
  const size_t begin = what.rfind('\n', end);
  if (end == std::string::npos || begin == std::string::npos) return what;
  return what.substr(begin + 1, end - begin) + " (in the TorchScript interpreter)\n" + what;
}

Result<torch::jit::Module> LoadScriptModule(const std::string& path, const torch::Device& device) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return NotFoundError(fmt::format("TorchScript model {}: no such file", path));
  }
  try {
    return torch::jit::load(path, device);
  } catch (const std::exception& e) {
    const std::string what = Brief(e.what());
    return InvalidArgumentError(fmt::format(
        "{} is not a TorchScript file ({}). A torch.save(model) or a pickled state_dict is not "
        "TorchScript: {}",
        path, what, kHowToExport));
  }
}

Result<int64_t> CheckScriptForward(torch::jit::Module& module, const std::string& path,
                                   int64_t num_labels, int64_t max_id,
                                   const torch::Device& device) {
  const int64_t arity = ForwardArity(module);
  if (arity != 2) {
    return InvalidArgumentError(
        fmt::format("TorchScript model {}: {}; {}", path,
                    arity < 0 ? std::string("the module has no forward method")
                              : fmt::format("forward takes {} input{}, expected 2 (input_ids, "
                                            "attention_mask)",
                                            arity, arity == 1 ? "" : "s"),
                    kHowToExport));
  }
  if (ScriptParameters(module).empty()) {
    return InvalidArgumentError(fmt::format(
        "TorchScript model {}: the module has no trainable parameters (a torch.jit.freeze'd "
        "module?); {}",
        path, kHowToExport));
  }
  module.eval();
  torch::NoGradGuard no_grad;
  std::string error;
  auto out = TryForward(module, DryRunInputs(max_id, false, device), error);
  if (!out) {
    return InvalidArgumentError(fmt::format(
        "TorchScript model {}: forward(input_ids, attention_mask) failed at B=1, T=8 (int64 "
        "inputs): {}; {}",
        path, error, kHowToExport));
  }
  TUNE_ASSIGN_OR_RETURN(const int64_t outputs, CheckOutput(*out, path, num_labels));
  if (!TryForward(module, DryRunInputs(max_id, true, device), error)) {
    return InvalidArgumentError(fmt::format(
        "TorchScript model {}: forward fails on token id {}, the tokenizer's largest ({} "
        "tokens): {}. Make the module's embedding at least that large, or set the catalog "
        "entry's \"vocab_size\" (the tokenizer tune builds) to the embedding's size",
        path, max_id, max_id + 1, error));
  }
  return outputs;
}

std::vector<torch::Tensor> ScriptParameters(const torch::jit::Module& module) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : module.parameters(/*recurse=*/true)) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

void ScriptDecayGroups(const torch::jit::Module& module, std::vector<torch::Tensor>& decay,
                       std::vector<torch::Tensor>& no_decay) {
  for (const auto& sub : module.named_modules()) {
    const auto type = sub.value.type()->name();
    const bool layer_norm =
        type && type->name() == "LayerNorm";  // torch.nn.LayerNorm, or a class so named
    for (const auto& p : sub.value.named_parameters(/*recurse=*/false)) {
      if (!p.value.requires_grad()) continue;
      const std::string name = sub.name.empty() ? p.name : sub.name + "." + p.name;
      const bool exempt = layer_norm || name.find("bias") != std::string::npos;
      (exempt ? no_decay : decay).push_back(p.value);
    }
  }
}

Status EnableScriptCheckpointing(torch::jit::Module& module, const std::string& path) {
  if (!module.hasattr("gradient_checkpointing") ||
      !module.attr("gradient_checkpointing").isBool()) {
    return InvalidArgumentError(fmt::format(
        "gradient_checkpointing: TorchScript model {} does not declare it (a bool attribute "
        "`gradient_checkpointing` its forward reads); tune cannot checkpoint a module's layers "
        "itself",
        path));
  }
  module.setattr("gradient_checkpointing", true);
  return Status::Ok();
}

Status SaveScriptModule(const torch::jit::Module& module, const std::string& path) {
  const std::string tmp = path + ".tmp";
  try {
    module.save(tmp);
  } catch (const std::exception& e) {
    return InternalError(
        fmt::format("cannot save the TorchScript model to {}: {}", tmp, Brief(e.what())));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return InternalError(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

}  // namespace tune::internal

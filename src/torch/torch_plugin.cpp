// The C entry points the tune binary finds with dlsym (torch/torch_plugin.h). No LibTorch
// here: the trainer's own files include it.
#include "torch/torch_plugin.h"

#include "torch/torch_trainer.h"

extern "C" {

__attribute__((visibility("default"))) int tune_torch_plugin_abi() { return tune::kTorchPluginAbi; }

__attribute__((visibility("default"))) tune::Trainer* tune_torch_new_trainer(
    const tune::TorchTrainerOptions* options, tune::Status* status) {
  auto trainer = tune::NewTorchTrainer(*options);
  if (!trainer.ok()) {
    *status = trainer.status();
    return nullptr;
  }
  *status = tune::Status::Ok();
  return std::move(trainer).value().release();
}

__attribute__((visibility("default"))) void tune_torch_version(std::string* out) {
  *out = tune::TorchVersion();
}

__attribute__((visibility("default"))) void tune_torch_cuda_status(std::string* out) {
  *out = tune::TorchCudaStatus();
}

}  // extern "C"

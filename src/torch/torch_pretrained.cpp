#include "torch/torch_pretrained.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "checkpoints/checkpoint_weights.h"
#include "checkpoints/encoder_family.h"
#include "checkpoints/safetensors.h"
#include "util/nonfinite.h"

namespace tune::internal {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// File names a model parameter may be stored under, in order of preference.
std::vector<std::string> Candidates(const std::string& name, const std::string& prefix) {
  std::vector<std::string> bases;
  // RobertaForSequenceClassification's head: classifier.dense is tune's pooler (dense + tanh).
  if (StartsWith(name, "pooler.dense.") && prefix == "roberta.") {
    bases.push_back("classifier.dense." + name.substr(std::string("pooler.dense.").size()));
  }
  bases.push_back(prefix + name);
  if (StartsWith(name, "pooler.") && !prefix.empty()) bases.push_back(name);
  std::vector<std::string> out;
  for (const auto& b : bases) {
    out.push_back(b);
    // TF-converted BERT checkpoints: LayerNorm.gamma / LayerNorm.beta.
    if (EndsWith(b, "LayerNorm.weight")) out.push_back(b.substr(0, b.size() - 6) + "gamma");
    if (EndsWith(b, "LayerNorm.bias")) out.push_back(b.substr(0, b.size() - 4) + "beta");
  }
  return out;
}

// The tensor of the output layer's parameter `name` ("classifier.out.weight", ...): tune's own
// names first (a model saved before the Hugging Face layout), then *ForSequenceClassification's:
// classifier.* (BERT, DeBERTa), classifier.out_proj.* (RoBERTa, XLM-R, CamemBERT). Other head
// parameters (classifier.hidden.N.*) by their own name only.
const CheckpointTensor* FindHeadTensor(const CheckpointWeights& file, const std::string& name) {
  const CheckpointTensor* head = file.Find(name);
  const std::string out = "classifier.out.";
  if (head == nullptr && StartsWith(name, out)) {
    head = file.Find("classifier." + name.substr(out.size()));
    if (head == nullptr) head = file.Find("classifier.out_proj." + name.substr(out.size()));
  }
  return head;
}

std::vector<int64_t> Shape(const torch::Tensor& t) { return t.sizes().vec(); }

}  // namespace

Result<PretrainedLoadReport> LoadPretrainedWeights(torch::nn::Module& model,
                                                   const std::string& weights_path) {
  TUNE_ASSIGN_OR_RETURN(CheckpointWeights file, CheckpointWeights::Open(weights_path));
  PretrainedLoadReport report;
  bool found_prefix = false;
  for (const char* p : {"bert.", "roberta.", "deberta.", ""}) {
    if (file.Find(std::string(p) + "embeddings.word_embeddings.weight")) {
      report.prefix = p;
      found_prefix = true;
      break;
    }
  }
  if (!found_prefix) {
    return InvalidArgumentError(fmt::format(
        "{}: no tensor 'embeddings.word_embeddings.weight' (with or without a 'bert.', "
        "'roberta.' or 'deberta.' prefix); is this a BERT/RoBERTa/DeBERTa encoder checkpoint?",
        weights_path));
  }

  // Match every parameter first; copy only when everything fits.
  std::vector<std::pair<torch::Tensor, const CheckpointTensor*>> plan;
  std::set<std::string> used;
  std::vector<std::string> problems;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& param = item.value();
    if (StartsWith(name, "classifier.")) {
      // The head (FindHeadTensor's names); newly initialised when absent or of another shape.
      const CheckpointTensor* head = FindHeadTensor(file, name);
      if (head != nullptr && head->shape == Shape(param) && IsFloatDtype(head->dtype)) {
        used.insert(head->name);
        plan.emplace_back(param, head);
      } else {
        if (head != nullptr) {
          report.resized.push_back(
              fmt::format("{}: found shape {} in the checkpoint, the model "
                          "needs {}",
                          head->name, ShapeString(head->shape), ShapeString(Shape(param))));
        }
        report.fresh.push_back(name);
      }
      continue;
    }
    const CheckpointTensor* found = nullptr;
    for (const auto& candidate : Candidates(name, report.prefix)) {
      if ((found = file.Find(candidate)) != nullptr) break;
    }
    if (found == nullptr) {
      if (StartsWith(name, "pooler.")) {
        report.fresh.push_back(name);
      } else {
        problems.push_back(fmt::format("missing tensor '{}{}' (expected shape {})", report.prefix,
                                       name, ShapeString(Shape(param))));
      }
      continue;
    }
    used.insert(found->name);
    if (found->shape != Shape(param)) {
      problems.push_back(fmt::format("tensor '{}': expected shape {} (parameter '{}'), found {}",
                                     found->name, ShapeString(Shape(param)), name,
                                     ShapeString(found->shape)));
      continue;
    }
    if (!IsFloatDtype(found->dtype)) {
      problems.push_back(fmt::format("tensor '{}': dtype {}, expected F32, F16 or BF16",
                                     found->name, TensorDtypeName(found->dtype)));
      continue;
    }
    plan.emplace_back(param, found);
  }
  if (!problems.empty()) {
    const size_t shown = std::min<size_t>(problems.size(), 8);
    std::string list;
    for (size_t i = 0; i < shown; ++i) list += "\n  " + problems[i];
    if (shown < problems.size())
      list += fmt::format("\n  ... and {} more", problems.size() - shown);
    return InvalidArgumentError(
        fmt::format("{}: the checkpoint does not fit the model from its "
                    "config.json ({} problem{}):{}",
                    weights_path, problems.size(), problems.size() == 1 ? "" : "s", list));
  }
  for (const auto& [name, info] : file.tensors()) {
    // Buffers, not weights (HF saves position_ids in older BERT checkpoints).
    if (EndsWith(name, "position_ids") || EndsWith(name, "token_type_ids")) continue;
    if (!used.count(name)) report.unexpected.push_back(name);
  }
  torch::NoGradGuard no_grad;
  for (auto& [param, info] : plan) {
    TUNE_ASSIGN_OR_RETURN(std::vector<float> values, file.ReadFloats(*info));
    PretrainedLoadReport::NonFinite bad{info->name, 0, static_cast<int64_t>(values.size()), 0};
    for (float v : values) {
      if (std::isfinite(v)) continue;
      if (bad.count++ == 0) bad.example = v;
    }
    if (bad.count > 0) report.nonfinite.push_back(std::move(bad));
    torch::Tensor src = torch::from_blob(values.data(), info->shape, torch::kFloat);
    param.copy_(src);  // to the parameter's device and dtype
    ++report.loaded;
  }
  return report;
}

std::string NonFiniteWeightsText(const std::vector<PretrainedLoadReport::NonFinite>& tensors,
                                 size_t shown) {
  std::string out;
  for (size_t i = 0; i < tensors.size() && i < shown; ++i) {
    const auto& t = tensors[i];
    out += fmt::format("{}tensor '{}' has {} non-finite value{} of {} (e.g. {})", i ? "; " : "",
                       t.name, t.count, t.count == 1 ? "" : "s", t.total, FormatNumber(t.example));
  }
  if (tensors.size() > shown) out += fmt::format("; and {} more tensors", tensors.size() - shown);
  return out;
}

std::string PretrainedPrefix(const std::string& model_type) {
  const EncoderFamily* family = FindEncoderFamily(model_type);
  return family != nullptr ? family->prefix : "roberta.";
}

std::string HuggingFaceName(const std::string& name, const std::string& prefix,
                            bool extra_head_layers) {
  const std::string pooler = "pooler.dense.", out = "classifier.out.";
  if (StartsWith(name, pooler)) {
    if (prefix == "roberta.") return "classifier.dense." + name.substr(pooler.size());
    return (prefix == "deberta." ? "" : prefix) + name;
  }
  if (StartsWith(name, out) && !extra_head_layers) {
    return (prefix == "roberta." ? "classifier.out_proj." : "classifier.") +
           name.substr(out.size());
  }
  if (StartsWith(name, "classifier.")) return name;  // tune's own head layers
  return prefix + name;
}

Status SavePretrainedWeights(torch::nn::Module& model, const std::string& prefix,
                             const std::string& path) {
  bool extra_head_layers = false;
  for (const auto& item : model.named_parameters()) {
    if (StartsWith(item.key(), "classifier.hidden.")) extra_head_layers = true;
  }
  std::vector<SafetensorsWriteTensor> tensors;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor t = item.value().detach().to(torch::kCPU, torch::kFloat).contiguous();
    SafetensorsWriteTensor w;
    w.name = HuggingFaceName(name, prefix, extra_head_layers);
    w.shape = t.sizes().vec();
    w.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    tensors.push_back(std::move(w));
  }
  const std::string tmp = path + ".tmp";
  TUNE_RETURN_IF_ERROR(WriteSafetensors(tmp, tensors, {{"format", "pt"}}));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return InternalError(fmt::format("cannot rename {} to {}", tmp, path));
  }
  return Status::Ok();
}

}  // namespace tune::internal

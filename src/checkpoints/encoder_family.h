// The Hugging Face encoder families the trainer builds [tune_train, private]: the one table of
// what tune knows per config.json `model_type` (checked when a checkpoint is read, the prefix of
// its base model's tensors, the class that loads a saved model, RoBERTa's position offset).
#pragma once

#include <string>
#include <vector>

namespace tune {

struct EncoderFamily {
  const char* model_type;      // config.json's
  const char* prefix;          // the base model's tensors in HF checkpoints: "bert.", ...
  const char* sequence_class;  // what AutoModelForSequenceClassification builds
  bool roberta_positions;      // position ids start after the padding id (2 reserved)
};

// bert, roberta, xlm-roberta, camembert, deberta-v2.
const std::vector<EncoderFamily>& EncoderFamilies();
// The family of `model_type`; null for another.
const EncoderFamily* FindEncoderFamily(const std::string& model_type);
// Their model_types, in the table's order (for "valid: ..." messages).
std::vector<std::string> EncoderModelTypes();

}  // namespace tune

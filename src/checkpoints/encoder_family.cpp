#include "checkpoints/encoder_family.h"

namespace tune {

const std::vector<EncoderFamily>& EncoderFamilies() {
  static const std::vector<EncoderFamily> families = {
      {"bert", "bert.", "BertForSequenceClassification", false},
      {"roberta", "roberta.", "RobertaForSequenceClassification", true},
      {"xlm-roberta", "roberta.", "XLMRobertaForSequenceClassification", true},
      {"camembert", "roberta.", "CamembertForSequenceClassification", true},
      {"deberta-v2", "deberta.", "DebertaV2ForSequenceClassification", false}};
  return families;
}

const EncoderFamily* FindEncoderFamily(const std::string& model_type) {
  for (const EncoderFamily& f : EncoderFamilies()) {
    if (model_type == f.model_type) return &f;
  }
  return nullptr;
}

std::vector<std::string> EncoderModelTypes() {
  std::vector<std::string> out;
  for (const EncoderFamily& f : EncoderFamilies()) out.emplace_back(f.model_type);
  return out;
}

}  // namespace tune

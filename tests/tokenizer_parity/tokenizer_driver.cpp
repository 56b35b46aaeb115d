// The tune side of the tokenizer parity test (tokenizer_parity.py).
//
//   tune_tokenizer_driver DIR < requests.jsonl > out.jsonl
//
// Loads DIR's tokenizer with Tokenizer::FromCheckpointDir and answers one JSON request per line
// on stdin, after a first output line with the special ids and the vocabulary size:
//   - a string: {"ids": [...], "words": [...]}, the ids of Encode (no special tokens added) and
//     the words of SplitWords (BERT's basic tokens, GPT-2's pre-tokens, SentencePiece's pieces);
//   - {"a", "b", "max_length", "truncation"}: a sentence pair, {"ids": [...], "types": [...]} of
//     EncodePairForClassification;
//   - {"batch": [texts], "pairs": [second texts] (optional), "max_length", "truncation",
//     "token_types"}: the texts as the trainer batches them (TokenizeTextDataset, then
//     BuildTokenBatch padded to the longest): {"input_ids", "attention_mask", "token_type_ids"},
//     one row per text (token_type_ids only for pairs with "token_types": true).
// Exit 2 (with the error on stderr) when the tokenizer does not load or a request is malformed.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizers/tokenizer.h"
#include "train/batching.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace {

// The rows of a [rows x cols] matrix.
nlohmann::json Rows(const std::vector<int64_t>& cells, int64_t rows, int64_t cols) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t r = 0; r < rows; ++r) {
    out.push_back(std::vector<int64_t>(cells.begin() + r * cols, cells.begin() + (r + 1) * cols));
  }
  return out;
}

tune::Result<nlohmann::json> Batch(const tune::Tokenizer& t, const nlohmann::json& in) {
  tune::TextDataset dataset;
  dataset.labels = {"x"};
  const bool pairs = in.contains("pairs");
  if (pairs) {
    TUNE_ASSIGN_OR_RETURN(dataset.pair_truncation,
                          tune::ParseTruncation(in.value("truncation", "longest_first")));
  }
  const auto& texts = in["batch"];
  for (size_t i = 0; i < texts.size(); ++i) {
    tune::TextExample e;
    e.text = texts[i].get<std::string>();
    if (pairs) e.text_pair = in["pairs"][i].get<std::string>();
    dataset.validation.push_back(std::move(e));
  }
  const int64_t max_length = in["max_length"].get<int64_t>();
  const tune::TextTrainData data = tune::TokenizeTextDataset(dataset, t, max_length);
  const std::optional<tune::PairSplit> split =
      tune::PairSplitOf(data, /*train=*/false, in.value("token_types", false));
  std::vector<int64_t> indices(texts.size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  const tune::TokenBatch b =
      tune::BuildTokenBatch(data.validation_ids, {}, indices, max_length, tune::Padding::kLongest,
                            data.pad_id, data.cls_id, data.sep_id, split ? &*split : nullptr);
  nlohmann::json out{{"input_ids", Rows(b.input_ids, b.rows, b.cols)},
                     {"attention_mask", Rows(b.attention_mask, b.rows, b.cols)}};
  if (!b.token_type_ids.empty()) out["token_type_ids"] = Rows(b.token_type_ids, b.rows, b.cols);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tune_tokenizer_driver DIR < requests.jsonl\n";
    return 2;
  }
  auto tokenizer = tune::Tokenizer::FromCheckpointDir(argv[1], tune::TokenizerOptions{});
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().ToString() << "\n";
    return 2;
  }
  const tune::Tokenizer& t = *tokenizer;
  std::cout << nlohmann::json{{"pad", t.pad_id()},   {"unk", t.unk_id()},
                              {"cls", t.cls_id()},   {"sep", t.sep_id()},
                              {"mask", t.mask_id()}, {"vocab_size", t.vocab_size()}}
                   .dump()
            << "\n";
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto in = nlohmann::json::parse(line);
    if (in.is_object() && in.contains("batch")) {
      auto out = Batch(t, in);
      if (!out.ok()) {
        std::cerr << out.status().ToString() << "\n";
        return 2;
      }
      std::cout << out->dump() << "\n";
      continue;
    }
    if (in.is_object()) {  // a pair: {"a", "b", "max_length", "truncation"}
      auto truncation = tune::ParseTruncation(in["truncation"].get<std::string>());
      if (!truncation.ok()) {
        std::cerr << truncation.status().ToString() << "\n";
        return 2;
      }
      std::vector<int32_t> types;
      const std::vector<int32_t> ids =
          t.EncodePairForClassification(in["a"].get<std::string>(), in["b"].get<std::string>(),
                                        in["max_length"].get<int64_t>(), *truncation, &types);
      std::cout << nlohmann::json{{"ids", ids}, {"types", types}}.dump() << "\n";
      continue;
    }
    const auto text = in.get<std::string>();
    nlohmann::json out{{"ids", t.Encode(text)}, {"words", t.SplitWords(text)}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

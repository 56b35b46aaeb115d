// The tune side of the tokenizer parity test (tokenizer_parity.py).
//
//   tune_tokenizer_driver DIR < strings.jsonl > out.jsonl
//
// Loads DIR's tokenizer with Tokenizer::FromCheckpointDir and reads one JSON string per line on
// stdin. Prints first a JSON object of the special ids and the vocabulary size, then per input
// line a JSON object {"ids": [...], "words": [...]}: the ids of Encode and the words of
// SplitWords (BERT's basic tokens, GPT-2's pre-tokens, or SentencePiece's pieces). A line that is
// a JSON object {"a", "b", "max_length", "truncation"} is a sentence pair: {"ids": [...],
// "types": [...]} of EncodePairForClassification.
// Exit 2 (with the error on stderr) when the tokenizer does not load.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizers/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tune_tokenizer_driver DIR < strings.jsonl\n";
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

// Fuzz targets of the tokenizer files tune parses itself (src/tokenizers/tokenizer_files.cpp):
// tokenizer.json, vocab.txt, and vocab.json with merges.txt. Each loads the file through
// Tokenizer::FromCheckpointDir, as a checkpoint directory is read, then encodes text with it:
// fixed text with accents, CJK, white space and special tokens, and the input's own first bytes.
#include <algorithm>
#include <string>

#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_targets.h"
#include "tokenizers/tokenizer.h"

namespace tune::fuzz {

namespace {

constexpr std::string_view kText =
    "Hello, WORLD! Grüße aus Köln\t東京タワー  [CLS] <s> x[MASK]y <mask> </s>\r\n\xff ##ing";

// Loads the tokenizer of `dir` (a folder of ScratchDir()) and encodes with it.
void LoadAndEncode(const std::string& dir, std::string_view bytes) {
  Result<Tokenizer> tokenizer = Tokenizer::FromCheckpointDir((ScratchDir() / dir).string(), {});
  if (!tokenizer.ok()) return;
  const std::string_view own = bytes.substr(0, std::min<size_t>(bytes.size(), 256));
  for (std::string_view text : {kText, own}) {
    (void)tokenizer->SplitWords(text);
    (void)tokenizer->Encode(text);
    (void)tokenizer->EncodeForClassification(text, 16);
    const int64_t max_length = 2 + tokenizer->PairSeparators() + 3;
    (void)tokenizer->EncodePairForClassification(text, kText, max_length,
                                                 Truncation::kLongestFirst);
  }
  for (int32_t id = -1; id <= static_cast<int32_t>(tokenizer->vocab_size()); ++id) {
    (void)tokenizer->TokenId(tokenizer->TokenText(id));
  }
}

}  // namespace

int FuzzTokenizerJson(std::string_view bytes) {
  WriteScratchFile("tokenizer_json/tokenizer.json", bytes);
  LoadAndEncode("tokenizer_json", bytes);
  return 0;
}

int FuzzVocabTxt(std::string_view bytes) {
  WriteScratchFile("vocab_txt/vocab.txt", bytes);
  LoadAndEncode("vocab_txt", bytes);
  return 0;
}

// The input is vocab.json, a NUL byte, then merges.txt (no NUL: merges.txt is empty).
int FuzzBpeFiles(std::string_view bytes) {
  const size_t nul = bytes.find('\0');
  WriteScratchFile("bpe/vocab.json", bytes.substr(0, nul));
  WriteScratchFile("bpe/merges.txt",
                   nul == std::string_view::npos ? std::string_view() : bytes.substr(nul + 1));
  LoadAndEncode("bpe", bytes);
  return 0;
}

}  // namespace tune::fuzz

// Byte-level BPE, as RoBERTa and GPT-2 tokenize (vocab.json + merges.txt) [tune_train, private].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tune/status.h"

namespace tune::internal {

// GPT-2's pre-tokenizer, the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over code points, as Python's `regex` module runs it: a word keeps the one space before it;
// \p{L} and \p{N} are the general categories L* and N* (unicode.h's IsLetter and IsNumber), \s
// is the White_Space property.
std::vector<std::u32string> GptPreTokenize(std::u32string_view text);

// The UTF-8 string's bytes in GPT-2's byte-to-unicode alphabet (printable Latin-1 bytes map to
// themselves, the others to U+0100 and up; a space becomes "Ġ"), UTF-8 encoded.
std::string ByteLevel(std::string_view utf8);

class ByteBpe {
 public:
  // Reads merges.txt: an optional "#version" line, then one "left right" pair per line, the
  // earliest merged first. InvalidArgument names the line of a malformed pair.
  static Result<ByteBpe> FromMergesFile(const std::string& path);
  // The same from "left right" strings in rank order (a tokenizer.json's merges); errors name
  // `source` and the index.
  static Result<ByteBpe> FromMerges(const std::vector<std::string>& pairs,
                                    const std::string& source);

  // Splits one byte-level word into its BPE pieces: repeatedly merges the adjacent pair of the
  // lowest rank, every occurrence of it left to right, until no pair is in the merges.
  void Split(const std::string& word, std::vector<std::string>& out) const;

  size_t size() const { return ranks_.size(); }

 private:
  Status AddMerge(std::string_view pair, const std::string& where);
  std::unordered_map<std::string, int32_t> ranks_;  // "left right" -> rank
};

}  // namespace tune::internal

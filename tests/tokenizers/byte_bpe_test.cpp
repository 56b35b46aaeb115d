// Byte-level BPE (RoBERTa's vocab.json + merges.txt): GPT-2's pre-tokenizer, the byte alphabet,
// merges by rank, and the files' errors. Expected ids are worked out by hand in the comments.
#include "tokenizers/byte_bpe.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"
#include "tokenizers/tokenizer.h"

namespace tune {
namespace {

using Words = std::vector<std::string>;

Words PreTokens(std::string_view text) {
  Words out;
  for (const auto& w : internal::GptPreTokenize(internal::DecodeUtf8(text))) {
    std::string s;
    for (char32_t c : w) internal::AppendUtf8(c, s);
    out.push_back(s);
  }
  return out;
}

TEST(ByteBpe, PreTokenizesAsGpt2sPattern) {
  // A word keeps the space before it; contractions split off; runs of one class stay together.
  EXPECT_EQ(PreTokens("Hello world!"), (Words{"Hello", " world", "!"}));
  EXPECT_EQ(PreTokens("it's  12\n"), (Words{"it", "'s", " ", " 12", "\n"}));
  EXPECT_EQ(PreTokens("we'll they've I'm"), (Words{"we", "'ll", " they", "'ve", " I", "'m"}));
  EXPECT_EQ(PreTokens("a1b2 ..."), (Words{"a", "1", "b", "2", " ..."}));
  // \s+(?!\S): the last space of a run goes to the next word; trailing spaces stay together.
  EXPECT_EQ(PreTokens("x   y  "), (Words{"x", "  ", " y", "  "}));
  // Only a space joins the word after it: the run's last newline is a token of its own.
  EXPECT_EQ(PreTokens("\n\nHi"), (Words{"\n", "\n", "Hi"}));
  // Letters beyond ASCII: Latin-1, Cyrillic, CJK; a sign between letters is its own token.
  EXPECT_EQ(PreTokens("Crème Ёлка 東京 a+b"), (Words{"Crème", " Ёлка", " 東京", " a", "+", "b"}));
  EXPECT_TRUE(PreTokens("").empty());
  // \p{L}, \p{N} and \s from Unicode (expected values from the `regex` module): Thai letters,
  // Devanagari's marks (neither letters nor numbers), Arabic-Indic digits, U+2028 and U+0085
  // as white space; Roman numerals, fractions and mathematical digits are numbers; runes letters.
  EXPECT_EQ(
      PreTokens("ภาษาไทย हिन्द"
                "ी ١٢٣ x y z"),
      (Words{"ภาษาไทย", " ह", "ि", "न", "्", "द", "ी", " ١٢٣", " x", " ", "y", " ", "", "z"}));
  EXPECT_EQ(PreTokens("Ⅻ½ 𝟘𝟙 ᚠᛇ"), (Words{"Ⅻ½", " 𝟘𝟙", " ᚠᛇ"}));
}

TEST(ByteBpe, MapsBytesToGpt2sAlphabet) {
  EXPECT_EQ(internal::ByteLevel("abc!~"), "abc!~");  // printable ASCII is itself
  // Space 0x20 and newline 0x0A are the 33rd and 11th non-printable bytes: U+0120, U+010A.
  EXPECT_EQ(internal::ByteLevel(" \n"), "\u0120\u010A");
  // é is C3 A9, both printable Latin-1: "Ã©"; the soft hyphen 0xAD is the 68th: U+0143.
  EXPECT_EQ(internal::ByteLevel("é"), "\u00C3\u00A9");
  EXPECT_EQ(internal::ByteLevel("\xAD"), "\u0143");
}

class ByteBpeFiles : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() / name, std::ios::binary) << text;
  }
  std::string VocabPath() const { return (dir_.path() / "vocab.json").string(); }
  void WriteRobertaLike() {
    Write("vocab.json",
          R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "e": 5, "l": 6, "o": 7,
              "\u0120": 8, "w": 9, "r": 10, "d": 11, "he": 12, "ll": 13, "hell": 14,
              "hello": 15, "\u0120w": 16, "or": 17, "\u0120wor": 18, "\u0120world": 19,
              "!": 20, "'s": 21, "'": 22, "s": 23, "1": 24, "2": 25, "12": 26, "\u010a": 27,
              "\u0120worl": 28, "i": 29, "t": 30})");
    Write("merges.txt",
          "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\u0120 w\no r\n\u0120w or\n\u0120wor l\n"
          "\u0120worl d\n' s\n1 2\n");
  }
  testing::TempDir dir_;
};

TEST_F(ByteBpeFiles, EncodesRobertaStyle) {
  WriteRobertaLike();
  auto t = Tokenizer::FromVocabFile(VocabPath(), /*lowercase=*/true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->cls_id(), 0);
  EXPECT_EQ(t->pad_id(), 1);
  EXPECT_EQ(t->sep_id(), 2);
  EXPECT_EQ(t->unk_id(), 3);
  EXPECT_EQ(t->vocab_size(), 31);
  EXPECT_NE(t->description().find("byte-level BPE"), std::string::npos);
  // "hello": h e l l o -> (h e) -> (l l) -> (he ll) -> (hell o) = 15;
  // " world": Ġ w o r l d -> (Ġ w) -> (o r) -> (Ġw or) -> (Ġwor l) -> (Ġworl d) = 19; "!" = 20.
  EXPECT_EQ(t->Encode("hello world!"), (std::vector<int32_t>{15, 19, 20}));
  // Cased: "Hello"'s H is not in the vocabulary (<unk>), nothing is lowercased.
  EXPECT_EQ(t->Encode("Hello"), (std::vector<int32_t>{3, 5, 13, 7}));  // H (e) (l l) (o)
  // it | 's | " " | " 12" | "\n": i t, (' s), Ġ, Ġ (1 2), Ċ.
  EXPECT_EQ(t->Encode("it's  12\n"), (std::vector<int32_t>{29, 30, 21, 8, 8, 26, 27}));
  // The lowest rank wins wherever it is: "ohe" -> o (h e).
  EXPECT_EQ(t->Encode("ohe"), (std::vector<int32_t>{7, 12}));
  EXPECT_EQ(t->EncodeForClassification("hello world!", 16),
            (std::vector<int32_t>{0, 15, 19, 20, 2}));
  EXPECT_EQ(t->EncodeForClassification("hello world!", 4), (std::vector<int32_t>{0, 15, 19, 2}));
  EXPECT_EQ(t->SplitWords("hello world!"), (Words{"hello", " world", "!"}));
}

TEST_F(ByteBpeFiles, FileErrorsNameTheFileAndWhat) {
  WriteRobertaLike();
  std::filesystem::remove(dir_.path() / "merges.txt");
  auto t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("merges.txt"), std::string::npos) << t.status().message();

  Write("merges.txt", "#version: 0.2\nh e\nhe ll o\n");
  t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("merges.txt:3: 'he ll o' is not a merge"), std::string::npos)
      << t.status().message();

  Write("merges.txt", "h e\n");
  Write("vocab.json", R"({"<pad>": 0, "<unk>": 1, "</s>": 2, "h": 3})");
  t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no <s> token"), std::string::npos) << t.status().message();

  Write("vocab.json", R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": "three"})");
  t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("token '<unk>' has id \"three\""), std::string::npos)
      << t.status().message();

  Write("vocab.json", R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 2})");
  t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("share id 2"), std::string::npos) << t.status().message();

  Write("vocab.json", "[1, 2]");
  t = Tokenizer::FromVocabFile(VocabPath(), true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace tune

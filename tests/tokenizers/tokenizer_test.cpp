#include "tokenizers/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/temp_dir.h"

namespace tune {
namespace {

using Words = std::vector<std::string>;

std::string WriteVocab(const testing::TempDir& dir, const std::vector<std::string>& tokens) {
  std::string path = (dir.path() / "vocab.txt").string();
  std::ofstream out(path);
  for (const auto& t : tokens) out << t << "\n";
  return path;
}

Tokenizer BertLike(const testing::TempDir& dir) {
  auto t = Tokenizer::FromVocabFile(
      WriteVocab(dir, {"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able",
                       "want", "##ed", "runn", "##ing", ",", "!", "the", "café"}),
      /*lowercase=*/true);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST(Tokenizer, SplitsLikeBertsBasicTokenizer) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  EXPECT_EQ(t.SplitWords("  Hello,WORLD!  "), (Words{"hello", ",", "world", "!"}));
  // Accents stripped, Latin-1 / Latin Extended-A / Greek / Cyrillic lowercased.
  EXPECT_EQ(t.SplitWords("Crème BRÛLÉE Łódź ΆΛΦΑ Ёлка"),
            (Words{"creme", "brulee", "łodz", "αλφα", "елка"}));
  // Combining marks (NFD input) are dropped; control characters removed; CJK split per character.
  EXPECT_EQ(t.SplitWords("cafe\xCC\x81 a\x01\x7F"
                         "b \xE4\xB8\xAD\xE6\x96\x87"),
            (Words{"cafe", "ab", "\xE4\xB8\xAD", "\xE6\x96\x87"}));
  EXPECT_EQ(t.SplitWords("a\xE2\x80\x94"
                         "b \xC2\xBFqu\xC3\xA9?"),
            (Words{"a", "\xE2\x80\x94", "b", "\xC2\xBF", "que", "?"}));
}

// Cases the Unicode data decides (expected values from transformers 5.24's BertTokenizer, that is
// tokenizers 0.23's BertNormalizer and BertPreTokenizer): each character lowercased on its own
// (no final sigma), NFD accent stripping that drops only nonspacing marks (Devanagari's spacing
// vowel signs stay), line separators split like spaces, soft hyphens (Cf) removed, no
// compatibility folding, and no NFC: cased text keeps its decomposed accents.
TEST(Tokenizer, BasicTokenizerUsesUnicodeCategories) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  EXPECT_EQ(t.SplitWords("ΟΔΟΣ.Σ İstanbul x\u2028y a\u00ADb ﬁ"),
            (Words{"οδοσ", ".", "σ", "istanbul", "x", "y", "ab", "ﬁ"}));
  EXPECT_EQ(t.SplitWords("हिन्दी ก่า 東京abc"), (Words{"हिनदी", "กา", "東", "京", "abc"}));
  auto cased =
      Tokenizer::FromVocabFile(WriteVocab(dir, {"[PAD]", "[UNK]", "[CLS]", "[SEP]"}), false);
  ASSERT_TRUE(cased.ok());
  EXPECT_EQ(cased->SplitWords("e\u0301te\u0301 A\u030A \u00C5"),
            (Words{"e\u0301te\u0301", "A\u030A", "\u00C5"}));
}

// Regressions from the parity test against Hugging Face's tokenizers (tokenizer_parity): the
// library's own Unicode tables, where they differ from Unicode 15.0's.
TEST(Tokenizer, UnicodeTablesAreTheTokenizersLibrarys) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  // An unassigned code point is kept as a letter, not removed as a control character.
  EXPECT_EQ(t.SplitWords("x\u0378y"), (Words{"x\u0378y"}));
  // Format characters (Cf) are removed as of Unicode 8.0: U+00AD is, U+0890 (Unicode 14) is not.
  EXPECT_EQ(t.SplitWords("a\u0890b a\u00ADb"), (Words{"a\u0890b", "ab"}));
  // Punctuation as of Unicode 8.0: U+2E3A (6.1) splits, U+2E5D (14.0) does not.
  EXPECT_EQ(t.SplitWords("a\u2E5Db a\u2E3Ab"), (Words{"a\u2E5Db", "a", "\u2E3A", "b"}));
  // The library's CJK ranges start extension C-E at U+2B920.
  EXPECT_EQ(t.SplitWords("x\U0002B820y x\U0002B920y"),
            (Words{"x\U0002B820y", "x", "\U0002B920", "y"}));
  // Unicode 16.0's case pairs (U+1C89 -> U+1C8A), İ -> i + U+0307 (then stripped), Σ -> σ.
  EXPECT_EQ(t.SplitWords("\u1C89\u0130\u03A3"), (Words{"\u1C8Ai\u03C3"}));
  // Nonspacing marks as of Unicode 8.0: U+0D00 (10.0) stays, U+0301 goes.
  EXPECT_EQ(t.SplitWords("a\u0D00 a\u0301"), (Words{"a\u0D00", "a"}));
  // NFD as of Unicode 9.0 (the library's tables): U+11938 (13.0) does not decompose.
  EXPECT_EQ(t.SplitWords("\U00011938"), (Words{"\U00011938"}));
}

// Special tokens written in the text are the special tokens (Hugging Face's added tokens); each
// piece between them is tokenized on its own.
TEST(Tokenizer, SpecialTokensInTheText) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  auto id = [&](const char* s) { return t.TokenId(s); };
  EXPECT_EQ(t.Encode("the[SEP]the [CLS] [UNK]"),
            (std::vector<int32_t>{id("the"), t.sep_id(), id("the"), t.cls_id(), t.unk_id()}));
  // Case matters (the raw text is matched): [sep] is punctuation and a word.
  EXPECT_EQ(t.SplitWords("[sep] [SEP]"), (Words{"[", "sep", "]", "[SEP]"}));
  EXPECT_EQ(t.Encode("the the [SEP]", 2), (std::vector<int32_t>{id("the"), id("the")}));
}

TEST(Tokenizer, CasedKeepsCaseAndAccents) {
  testing::TempDir dir;
  auto t = Tokenizer::FromVocabFile(WriteVocab(dir, {"[PAD]", "[UNK]", "[CLS]", "[SEP]"}), false);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->SplitWords("Crème, OK"), (Words{"Crème", ",", "OK"}));
}

TEST(Tokenizer, WordPieceGreedyLongestMatch) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 2);
  EXPECT_EQ(t.cls_id(), 3);
  EXPECT_EQ(t.sep_id(), 4);
  auto id = [&](const char* s) { return t.TokenId(s); };
  EXPECT_EQ(t.Encode("unaffable running, wanted!"),
            (std::vector<int32_t>{id("un"), id("##aff"), id("##able"), id("runn"), id("##ing"),
                                  id(","), id("want"), id("##ed"), id("!")}));
  // A word that cannot be split entirely is one [UNK]; so is a word over 100 characters.
  EXPECT_EQ(t.Encode("unaffablex the"), (std::vector<int32_t>{t.unk_id(), id("the")}));
  EXPECT_EQ(t.Encode(std::string(101, 'u') + " the"),
            (std::vector<int32_t>{t.unk_id(), id("the")}));
  // "CAFÉ" lowercases to "café", then accent stripping gives "cafe", which is not in the vocab.
  EXPECT_EQ(t.Encode("CAFÉ"), (std::vector<int32_t>{t.unk_id()}));
  EXPECT_EQ(t.Encode("the the the the", 2), (std::vector<int32_t>{id("the"), id("the")}));
}

TEST(Tokenizer, EncodeForClassificationTruncates) {
  testing::TempDir dir;
  Tokenizer t = BertLike(dir);
  auto ids = t.EncodeForClassification("unaffable running", 4);
  EXPECT_EQ(ids,
            (std::vector<int32_t>{t.cls_id(), t.TokenId("un"), t.TokenId("##aff"), t.sep_id()}));
  EXPECT_EQ(t.EncodeForClassification("", 8), (std::vector<int32_t>{t.cls_id(), t.sep_id()}));
  EXPECT_EQ(t.EncodeForClassification("the the", 2),
            (std::vector<int32_t>{t.cls_id(), t.sep_id()}));
}

TEST(Tokenizer, VocabFileErrors) {
  testing::TempDir dir;
  auto missing = Tokenizer::FromVocabFile((dir.path() / "nope.txt").string(), true);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.txt"), std::string::npos);

  auto no_cls = Tokenizer::FromVocabFile(WriteVocab(dir, {"[PAD]", "[UNK]", "[SEP]", "a"}), true);
  EXPECT_EQ(no_cls.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_cls.status().message().find("no [CLS] token"), std::string::npos)
      << no_cls.status().message();

  auto empty = Tokenizer::FromVocabFile(WriteVocab(dir, {}), true);
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);

  std::string bad = (dir.path() / "bad.txt").string();
  std::ofstream(bad) << "[PAD]\n[UNK]\nab\xff\n";
  auto invalid = Tokenizer::FromVocabFile(bad, true);
  EXPECT_NE(invalid.status().message().find("bad.txt:3:3: invalid UTF-8"), std::string::npos)
      << invalid.status().message();
}

TEST(Tokenizer, BuildsAVocabularyFromTheTrainingText) {
  std::vector<std::string> texts = {"the cat sat on the mat", "The dog sat.", "a rare zebra"};
  TokenizerOptions o;
  o.vocab_size = 200;
  Tokenizer t = Tokenizer::Build(texts, o);
  EXPECT_EQ(t.TokenText(0), "[PAD]");
  EXPECT_EQ(t.TokenText(1), "[UNK]");
  EXPECT_EQ(t.TokenText(2), "[CLS]");
  EXPECT_EQ(t.TokenText(3), "[SEP]");
  EXPECT_LE(t.vocab_size(), 200);
  // Characters come first (both forms), then words by frequency.
  EXPECT_GE(t.TokenId("t"), 4);
  EXPECT_GE(t.TokenId("##t"), 4);
  EXPECT_GE(t.TokenId("the"), 0);
  EXPECT_LT(t.TokenId("the"), t.TokenId("cat"));  // "the" x3 before "cat" x1
  // A word outside the vocabulary is spelled with characters; an unseen character is [UNK].
  auto ids = t.Encode("tac");
  EXPECT_EQ(ids, (std::vector<int32_t>{t.TokenId("t"), t.TokenId("##a"), t.TokenId("##c")}));
  EXPECT_EQ(t.Encode("q"), (std::vector<int32_t>{t.unk_id()}));
  // Deterministic.
  Tokenizer again = Tokenizer::Build(texts, o);
  ASSERT_EQ(again.vocab_size(), t.vocab_size());
  for (int32_t i = 0; i < t.vocab_size(); ++i) EXPECT_EQ(again.TokenText(i), t.TokenText(i));
}

TEST(Tokenizer, BuildRespectsMinCountAndSize) {
  std::vector<std::string> texts = {"alpha beta beta gamma gamma gamma"};
  TokenizerOptions o;
  o.min_count = 2;
  Tokenizer t = Tokenizer::Build(texts, o);
  EXPECT_GE(t.TokenId("beta"), 0);
  EXPECT_GE(t.TokenId("gamma"), 0);
  EXPECT_EQ(t.TokenId("alpha"), -1);
  o.min_count = 1;
  o.vocab_size = 4 + 2 + 1;  // specials, at most one character (both forms), one word
  Tokenizer small = Tokenizer::Build(texts, o);
  EXPECT_EQ(small.vocab_size(), 7);
  EXPECT_EQ(small.TokenText(4), "a");  // the most frequent character
  EXPECT_EQ(small.TokenText(6), "gamma");
}

TEST(Utf8, FindsInvalidSequences) {
  using internal::FindInvalidUtf8;
  constexpr auto npos = std::string_view::npos;
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), npos);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xFF"), 2u);
  EXPECT_EQ(FindInvalidUtf8("a\xC0\x80"), 1u);          // overlong NUL
  EXPECT_EQ(FindInvalidUtf8("a\xED\xA0\x80"), 1u);      // surrogate
  EXPECT_EQ(FindInvalidUtf8("a\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);        // truncated
  EXPECT_EQ(internal::DecodeUtf8("a\xFF"
                                 "b\xE2\x82"),
            U"ab");
}

TEST(Tokenizer, InvalidUtf8IsDroppedNotFatal) {
  Tokenizer t = Tokenizer::Build({"good text"}, {});
  EXPECT_EQ(t.SplitWords("go\xFFod te\xC3xt"), (Words{"good", "text"}));
}

}  // namespace
}  // namespace tune

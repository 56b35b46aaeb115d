// Tokenizer::FromCheckpointDir: which file is read, tokenizer_config.json, SentencePiece models
// (trained here by Debian's python3-sentencepiece) with Hugging Face's ids, tokenizer.json, and
// the errors of missing and corrupt files. Parity on random text: tests/tokenizer_parity/.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "testing/temp_dir.h"
#include "tokenizers/tokenizer.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;

void WriteLines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
}

// Trains a small SentencePiece model with python3-sentencepiece; false when it cannot.
bool TrainSentencePiece(const fs::path& dir, const std::string& prefix, bool deberta) {
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < 200; ++i) {
    corpus << "the quick brown fox jumps over the lazy dog " << i << "\n"
           << "Grüße aus Köln, привет мир, 東京タワー\n";
  }
  corpus.close();
  const std::string ids = deberta ? "pad_id=0, pad_piece='[PAD]', bos_id=1, bos_piece='[CLS]', "
                                    "eos_id=2, eos_piece='[SEP]', unk_id=3, unk_piece='[UNK]'"
                                  : "unk_id=0, bos_id=1, eos_id=2, pad_id=-1";
  const std::string script =
      "import sentencepiece as spm\n"
      "spm.SentencePieceTrainer.train(input='" +
      (dir / "corpus.txt").string() + "', model_prefix='" + (dir / prefix).string() +
      "', vocab_size=" + (deberta ? "80" : "120") + ", model_type='" +
      (deberta ? "unigram" : "bpe") + "', minloglevel=2, " + ids + ")\n";
  std::ofstream(dir / "train.py") << script;
  return std::system(
             ("/usr/bin/python3 " + (dir / "train.py").string() + " 2>/dev/null").c_str()) == 0;
}

TEST(TokenizerFiles, ChoosesTheFirstTokenizerFilePresent) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  EXPECT_EQ(Tokenizer::CheckpointTokenizerFile(d.string()), (d / "vocab.txt").string());
  for (const char* name :
       {"tokenizer.json", "sentencepiece.bpe.model", "spm.model", "vocab.json", "vocab.txt"}) {
    std::ofstream(d / name) << "x";
    EXPECT_EQ(Tokenizer::CheckpointTokenizerFile(d.string()), (d / name).string());
  }
}

TEST(TokenizerFiles, MissingAndCorruptFilesAreNamed) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  auto none = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(d.string() + ": no tokenizer file"), std::string::npos);
  EXPECT_NE(none.status().message().find("spm.model (DeBERTa's SentencePiece)"), std::string::npos);

  std::ofstream(d / "spm.model") << "not a protobuf at all";
  auto corrupt = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(corrupt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(corrupt.status().message().find((d / "spm.model").string() +
                                            ": not a valid SentencePiece model"),
            std::string::npos)
      << corrupt.status().message();
  fs::remove(d / "spm.model");

  std::ofstream(d / "tokenizer.json") << "{\"model\": ";
  auto truncated = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(truncated.status().message().rfind(
                (d / "tokenizer.json").string() + ":1:11: invalid JSON: ", 0),
            0u)
      << truncated.status().message();
  std::ofstream(d / "tokenizer.json", std::ios::trunc) << "[1, 2]";
  EXPECT_EQ(Tokenizer::FromCheckpointDir(d.string(), {}).status().message(),
            (d / "tokenizer.json").string() + ": not a JSON object");
  std::ofstream(d / "tokenizer.json", std::ios::trunc)
      << R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]]}})";
  auto unigram = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_NE(unigram.status().message().find("model.type is 'Unigram'; tune reads tokenizer.json "
                                            "files of type WordPiece and BPE"),
            std::string::npos)
      << unigram.status().message();

  WriteLines(d / "vocab.txt", {"[PAD]", "[UNK]", "[CLS]", "[SEP]"});
  std::ofstream(d / "tokenizer_config.json") << R"({"do_lower_case": "yes"})";
  auto config = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(config.status().message(),
            (d / "tokenizer_config.json").string() +
                ": \"do_lower_case\" is \"yes\"; expected true or false");
}

TEST(TokenizerFiles, TokenizerConfigSetsLowercasing) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  WriteLines(d / "vocab.txt", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Café", "cafe"});
  auto uncased = Tokenizer::FromCheckpointDir(d.string(), {});  // BertTokenizer's default
  ASSERT_TRUE(uncased.ok()) << uncased.status().ToString();
  EXPECT_EQ(uncased->Encode("Café"), (Ids{6}));
  EXPECT_EQ(uncased->mask_id(), 4);
  std::ofstream(d / "tokenizer_config.json")
      << R"({"do_lower_case": false, "strip_accents": null})";
  auto cased = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(cased.ok()) << cased.status().ToString();
  EXPECT_FALSE(cased->lowercase());
  EXPECT_EQ(cased->Encode("Café"), (Ids{5}));
  // Lowercased but accents kept (strip_accents: false).
  std::ofstream(d / "tokenizer_config.json", std::ios::trunc)
      << R"({"do_lower_case": true, "strip_accents": false})";
  auto kept = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->SplitWords("CAFÉ"), (Words{"café"}));
}

// tokenizer_config.json's added_tokens_decoder gives the special tokens' flags (expected values
// from transformers 5.24): a single_word token only between non-word characters (the Rust regex
// crate's \w: a combining mark and U+200D are word characters, "²" and "①" are not), rstrip
// taking the white space after it.
TEST(TokenizerFiles, AddedTokensDecoderFlags) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  WriteLines(d / "vocab.txt", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "\u00B2"});
  std::ofstream(d / "tokenizer_config.json") << R"({"added_tokens_decoder": {
      "4": {"content": "[MASK]", "single_word": true, "rstrip": true, "lstrip": false,
            "normalized": false, "special": true}}})";
  auto t = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Encode("a [MASK]  b"), (Ids{5, 4, 6}));
  EXPECT_EQ(t->SplitWords("a[MASK] b"), (Words{"a", "[", "mask", "]", "b"}));
  EXPECT_EQ(t->Encode("b \u0301[MASK]"), (Ids{6, 1, 1, 1}));
  EXPECT_EQ(t->Encode("b [MASK]\u200D"), (Ids{6, 1, 1, 1}));
  EXPECT_EQ(t->Encode("b \u00B2[MASK]"), (Ids{6, 7, 4}));
  EXPECT_EQ(t->Encode("[MASK]\u2460"), (Ids{4, 1}));
}

TEST(TokenizerFiles, DebertaSpmModelUsesItsOwnIds) {
  testing::TempDir dir;
  if (!TrainSentencePiece(dir.path(), "spm", /*deberta=*/true)) {
    GTEST_SKIP() << "python3-sentencepiece cannot train a model (Debian: python3-sentencepiece)";
  }
  auto t = Tokenizer::FromCheckpointDir(dir.path().string(), {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->pad_id(), 0);
  EXPECT_EQ(t->cls_id(), 1);
  EXPECT_EQ(t->sep_id(), 2);
  EXPECT_EQ(t->unk_id(), 3);
  EXPECT_EQ(t->mask_id(), 80);  // not a piece: added after the last one
  EXPECT_EQ(t->vocab_size(), 81);
  const Ids ids = t->Encode("the lazy fox");
  ASSERT_FALSE(ids.empty());
  Words pieces = t->SplitWords("the lazy fox");
  ASSERT_EQ(pieces.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(t->TokenText(ids[i]), pieces[i]);
  EXPECT_EQ(t->Encode("\xF0\x9F\x98\x80"), (Ids{t->TokenId("\xE2\x96\x81"), 3}));  // ▁ + [UNK]
  // As transformers 5's DebertaV2Tokenizer: no NFKC (the ligature stays one unknown character),
  // runs of white space and tabs are one space, [SEP] in the text is [SEP].
  Words fi = t->SplitWords("\xEF\xAC\x81");  // U+FB01
  EXPECT_EQ(fi, (Words{"\xE2\x96\x81", "\xEF\xAC\x81"}));
  EXPECT_EQ(t->Encode("the  lazy\tfox"), t->Encode("the lazy fox"));
  EXPECT_EQ(t->Encode("fox[SEP]").back(), t->sep_id());
  EXPECT_EQ(t->EncodeForClassification("the", 8).front(), 1);
}

TEST(TokenizerFiles, XlmRobertaModelUsesFairseqIds) {
  testing::TempDir dir;
  if (!TrainSentencePiece(dir.path(), "sentencepiece.bpe", /*deberta=*/false)) {
    GTEST_SKIP() << "python3-sentencepiece cannot train a model (Debian: python3-sentencepiece)";
  }
  fs::remove(dir.path() / "sentencepiece.bpe.vocab");
  auto t = Tokenizer::FromCheckpointDir(dir.path().string(), {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->cls_id(), 0);
  EXPECT_EQ(t->pad_id(), 1);
  EXPECT_EQ(t->sep_id(), 2);
  EXPECT_EQ(t->unk_id(), 3);
  EXPECT_EQ(t->vocab_size(), 122);  // 120 pieces + <pad> + <mask>
  EXPECT_EQ(t->mask_id(), 121);
  EXPECT_EQ(t->TokenText(121), "<mask>");
  // Every piece moves up by one; SentencePiece's unknown (0) is <unk> (3).
  const Ids ids = t->Encode("the fox \xF0\x9F\x98\x80");
  Words pieces = t->SplitWords("the fox \xF0\x9F\x98\x80");
  ASSERT_EQ(pieces.size(), ids.size());
  EXPECT_EQ(ids.back(), 3);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_GE(ids[i], 4);
    EXPECT_EQ(t->TokenText(ids[i]), pieces[i]);
  }
  // As transformers 5's XLMRobertaTokenizer: the model's character map (NFKC: the ligature is
  // "fi", U+00A0 a space), then a split on every white-space character (U+0085 too).
  EXPECT_EQ(t->Encode("\xEF\xAC\x81ne"), t->Encode("fine"));
  EXPECT_EQ(t->Encode("the\xC2\xA0"
                      "fox"),
            t->Encode("the fox"));
  EXPECT_EQ(t->Encode("the\xC2\x85"
                      "fox"),
            t->Encode("the fox"));
  EXPECT_EQ(t->Encode("the <mask>").back(), t->mask_id());
}

TEST(TokenizerFiles, TokenizerJsonWordPieceAndBpe) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  std::ofstream(d / "tokenizer.json") << R"({
    "normalizer": {"type": "BertNormalizer", "lowercase": true, "strip_accents": null,
                   "handle_chinese_chars": true, "clean_text": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]},
    "added_tokens": [{"id": 6, "content": "[MASK]"}],
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100,
              "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "run": 4, "##ning": 5}}})";
  auto wp = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(wp.ok()) << wp.status().ToString();
  EXPECT_EQ(wp->EncodeForClassification("RUNNING runs", 8), (Ids{2, 4, 5, 1, 3}));
  EXPECT_EQ(wp->mask_id(), 6);

  std::ofstream(d / "tokenizer.json", std::ios::trunc) << R"({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
    "model": {"type": "BPE", "unk_token": null, "merges": [["h", "i"], "\u0120 hi"],
              "vocab": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "i": 5,
                        "hi": 6, "\u0120": 7, "\u0120hi": 8}}})";
  auto bpe = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(bpe.ok()) << bpe.status().ToString();
  EXPECT_EQ(bpe->EncodeForClassification("hi hi ih", 16), (Ids{0, 6, 8, 7, 5, 4, 2}));
  EXPECT_EQ(bpe->mask_id(), -1);

  // A special token with lstrip takes the white space before it (RoBERTa's <mask>); the file's
  // added_tokens are the tokens matched in the text.
  std::ofstream(d / "tokenizer.json", std::ios::trunc) << R"({
    "added_tokens": [{"id": 9, "content": "<mask>", "lstrip": true, "rstrip": false,
                      "single_word": false, "normalized": false, "special": true},
                     {"id": 2, "content": "</s>", "lstrip": false, "rstrip": false,
                      "single_word": false, "normalized": false, "special": true}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
    "model": {"type": "BPE", "unk_token": null, "merges": [["h", "i"], "\u0120 hi"],
              "vocab": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "i": 5,
                        "hi": 6, "\u0120": 7, "\u0120hi": 8, "<mask>": 9}}})";
  auto masked = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(masked.ok()) << masked.status().ToString();
  EXPECT_EQ(masked->Encode("hi  <mask> hi</s>"), (Ids{6, 9, 8, 2}));

  std::ofstream(d / "tokenizer.json", std::ios::trunc) << R"({
    "pre_tokenizer": {"type": "Whitespace"},
    "model": {"type": "BPE", "merges": [], "vocab": {"<s>": 0}}})";
  auto ws = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_NE(ws.status().message().find("pre_tokenizer.type is 'Whitespace'; a BPE tokenizer.json "
                                       "needs ByteLevel"),
            std::string::npos)
      << ws.status().message();
}

// Fuzzing (tests/fuzz/corpus/tokenizer_json/finding-type-not-a-string.json): a value of another
// type than the format's ("type": {...}, "id": "x") made nlohmann's typed accessors throw, which
// ended tune. Now each is an error naming the file.
TEST(TokenizerFiles, ValuesOfTheWrongTypeAreErrorsNamingTheFile) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  const std::string file = (d / "tokenizer.json").string();
  std::ofstream(d / "tokenizer.json") << R"({"model": {"type": {"BPE": 1}, "vocab": {}}})";
  auto object_type = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_FALSE(object_type.ok());
  EXPECT_EQ(object_type.status().message().rfind(file + ": model.type is ''", 0), 0u)
      << object_type.status().message();
  std::ofstream(d / "tokenizer.json", std::ios::trunc)
      << R"({"added_tokens": [{"id": "x", "content": "<s>"}],
             "model": {"type": "BPE", "vocab": {"<s>": 0}, "merges": []}})";
  auto string_id = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_FALSE(string_id.ok());
  EXPECT_EQ(string_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(string_id.status().message(),
            file +
                ": a JSON value of the wrong type in the tokenizer files: type must be number, "
                "but is string");
}

// Found by fuzzing (tests/fuzz/corpus/bpe/finding-id-past-vocab): a vocab.json token with id
// 2^31 - 1 made tune allocate a table of 2^31 strings. Ids must be below the number of tokens
// the files define + 2^16, in vocab.json, tokenizer.json (model.vocab, added_tokens) and
// tokenizer_config.json (added_tokens_decoder); a gap within that is read as before.
TEST(TokenizerFiles, AnIdFarPastTheVocabularyIsAnErrorNamingTheFile) {
  testing::TempDir dir;
  const fs::path d = dir.path();
  const std::string specials = R"("<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3)";
  std::ofstream(d / "merges.txt") << "#version: 0.2\na b\n";
  std::ofstream(d / "vocab.json") << "{" << specials << R"(, "a": 2147483647})";
  auto huge = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(huge.status().message(),
            (d / "vocab.json").string() +
                ": token 'a' has id 2147483647, but there are 5 tokens; ids must be below 65541 "
                "(the number of tokens + 65536)");
  std::ofstream(d / "vocab.json", std::ios::trunc) << "{" << specials << R"(, "a": 65541})";
  EXPECT_FALSE(Tokenizer::FromCheckpointDir(d.string(), {}).ok());
  std::ofstream(d / "vocab.json", std::ios::trunc) << "{" << specials << R"(, "a": 65540})";
  auto gap = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_TRUE(gap.ok()) << gap.status().message();
  EXPECT_EQ(gap->TokenId("a"), 65540);

  std::ofstream(d / "tokenizer_config.json")
      << R"({"added_tokens_decoder": {"2000000000": {"content": "<x>", "special": true}}})";
  auto decoder = Tokenizer::FromCheckpointDir(d.string(), {});
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().message().rfind(
                (d / "tokenizer_config.json").string() +
                    ": added_tokens_decoder: token '<x>' has id 2000000000, but there are ",
                0),
            0u)
      << decoder.status().message();
  fs::remove(d / "tokenizer_config.json");
  fs::remove(d / "vocab.json");

  const std::string json = (d / "tokenizer.json").string();
  std::ofstream(json) << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 123456789},
                                       "merges": []}})";
  auto model_vocab = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(model_vocab.status().message(),
            json +
                ": model.vocab: token 'b' has id 123456789, but there are 2 tokens; ids must be "
                "below 65538 (the number of tokens + 65536)");
  std::ofstream(json, std::ios::trunc)
      << R"({"added_tokens": [{"id": 2147483647, "content": "<x>", "special": true}],
             "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
  auto added = Tokenizer::FromCheckpointDir(d.string(), {});
  EXPECT_EQ(added.status().message(),
            json +
                ": added_tokens: token '<x>' has id 2147483647, but there are 2 tokens; ids "
                "must be below 65538 (the number of tokens + 65536)");
}

}  // namespace
}  // namespace tune

// Text helpers (util/text.h): did-you-mean suggestions and URL %-decoding.
#include "util/text.h"

#include <gtest/gtest.h>

#include <string>

#include "util/sha256.h"

namespace tune {
namespace {

TEST(Text, ClosestMatchSuggestsTyposOnly) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(ClosestMatch("n_startup", {"n_startup_trials", "seed"}), "n_startup_trials");
  EXPECT_EQ(ClosestMatch("tpee", {"tpe", "random"}), "tpe");
  EXPECT_EQ(ClosestMatch("zzzzzz", {"tpe", "random"}), std::nullopt);
  EXPECT_EQ(DidYouMean("radnom", {"tpe", "random"}), " (did you mean 'random'?)");
  EXPECT_EQ(JoinNames({"a", "b", "c"}), "a, b, c");
}

TEST(Text, PercentDecode) {
  EXPECT_EQ(PercentDecode("p%40ss%2Fw%20rd"), "p@ss/w rd");
  EXPECT_EQ(PercentDecode("plain"), "plain");
  EXPECT_EQ(PercentDecode(""), "");
  EXPECT_EQ(PercentDecode("%41%4a"), "AJ");
  EXPECT_EQ(PercentDecode("bad%2"), std::nullopt);
  EXPECT_EQ(PercentDecode("bad%zz"), std::nullopt);
  EXPECT_EQ(PercentDecode("%"), std::nullopt);
}

TEST(Text, Sha256OfKnownTexts) {
  // FIPS 180-4's examples, and a text of more than one block whose padding takes a second one.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Text, DisplayWidthCountsCharactersNotBytes) {
  EXPECT_EQ(DisplayWidth("b·B·T"), 5u);
  EXPECT_EQ(DisplayWidth("c·B·T² (c = 1)"), 14u);
  EXPECT_EQ(DisplayWidth("plain"), 5u);
  EXPECT_EQ(DisplayWidth(""), 0u);
}

}  // namespace
// Bytes from outside become valid UTF-8: each byte that does not start a well-formed sequence is
// written as \xNN; valid text, multi-byte characters included, is unchanged.
TEST(ValidUtf8, EscapesEveryInvalidByteAndKeepsValidText) {
  EXPECT_EQ(ValidUtf8("plain ascii\n"), "plain ascii\n");
  EXPECT_EQ(ValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(ValidUtf8("bad \xff\xfe bytes"), "bad \\xff\\xfe bytes");
  EXPECT_EQ(ValidUtf8("\x80"), "\\x80");                             // a stray continuation byte
  EXPECT_EQ(ValidUtf8("\xc3"), "\\xc3");                             // truncated at the end
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(ValidUtf8("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(ValidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));  // NUL is valid UTF-8
}

}  // namespace tune

// The Unicode classes and transforms of unicode.h over every code point: against
// tests/data/unicode/expectations.txt (other implementations' answers: unicodedata2's letters,
// numbers, NFD and NFC, Python's str.lower, Unicode 15.0's GraphemeBreakTest.txt; made by
// scripts/generate-unicode-tables.py --expectations), the invariants of normalization, Hangul's
// algorithmic (de)composition, and cases worked out by hand: the versions the tokenizers library
// reads (8.0, 9.0, 16.0, 17.0) where they differ from 15.0, and the grapheme rules.
#include "tokenizers/unicode.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tune::internal {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

using Clusters = std::vector<std::pair<size_t, size_t>>;

std::u32string Hexes(std::istringstream& in) {
  std::u32string out;
  std::string hex;
  while (in >> hex) out.push_back(static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
  return out;
}

struct Expectations {
  std::vector<bool> letter = std::vector<bool>(kMaxCodePoint + 1);
  std::vector<bool> number = std::vector<bool>(kMaxCodePoint + 1);
  std::map<char32_t, std::u32string> nfd, nfc, lower;
  // GraphemeBreakTest.txt: the text and its clusters.
  std::vector<std::pair<std::u32string, Clusters>> graphemes;
};

const Expectations& Expected() {
  static const Expectations* e = [] {
    auto* out = new Expectations;
    std::ifstream file(TUNE_TEST_DATA_DIR "/unicode/expectations.txt");
    EXPECT_TRUE(file.good());
    std::string line;
    while (std::getline(file, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "letter" || kind == "number") {
        std::string first, last;
        in >> first >> last;
        auto& bits = kind == "letter" ? out->letter : out->number;
        for (unsigned long c = std::stoul(first, nullptr, 16); c <= std::stoul(last, nullptr, 16);
             ++c) {
          bits[c] = true;
        }
      } else if (kind == "nfd" || kind == "nfc" || kind == "lower") {
        std::string hex;
        in >> hex;
        const auto c = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
        (kind == "nfd" ? out->nfd : kind == "nfc" ? out->nfc : out->lower)[c] = Hexes(in);
      } else if (kind == "grapheme") {
        // "÷ 0020 × 0308 ÷": a break (÷) or none (×) between code points.
        std::u32string text;
        Clusters clusters;
        std::string token;
        while (in >> token) {
          if (token == "\u00F7") {
            if (!text.empty()) {
              const size_t begin = clusters.empty() ? 0 : clusters.back().second;
              clusters.emplace_back(begin, text.size());
            }
          } else if (token != "\u00D7") {
            text.push_back(static_cast<char32_t>(std::stoul(token, nullptr, 16)));
          }
        }
        out->graphemes.emplace_back(text, clusters);
      } else {
        ADD_FAILURE() << "unknown line: " << line;
      }
    }
    return out;
  }();
  return *e;
}

std::string Hex(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), out.empty() ? "%04X" : " %04X", static_cast<unsigned>(c));
    out += buf;
  }
  return out;
}

bool IsSurrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }
bool IsHangulSyllable(char32_t c) { return c >= 0xAC00 && c <= 0xD7A3; }

TEST(Unicode, ExpectationsFileIsThere) {
  EXPECT_EQ(Expected().nfd.size(), 2060u);  // the decompositions of 9.0's characters
  EXPECT_GT(Expected().graphemes.size(), 600u);
  EXPECT_GT(Expected().lower.size(), 1400u);
}

TEST(Unicode, LettersAndNumbersAreUnicode16s) {
  const Expectations& e = Expected();
  int wrong = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (IsLetter(c) != e.letter[c] || IsNumber(c) != e.number[c]) {
      if (++wrong <= 10) ADD_FAILURE() << "U+" << Hex({c});
    }
    ASSERT_FALSE(IsLetter(c) && IsNumber(c)) << Hex({c});
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Unicode, NormalizesEveryCodePointAsUnicodedata2) {
  const Expectations& e = Expected();
  int wrong = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (IsHangulSyllable(c)) continue;  // below
    const std::u32string s(1, c);
    const auto d = e.nfd.find(c);
    const auto k = e.nfc.find(c);
    // Characters after 9.0 are not in the file: they are left alone, as every other one.
    const std::u32string want_d = d == e.nfd.end() ? s : d->second;
    const std::u32string want_c = k == e.nfc.end() ? s : k->second;
    if (Nfd(s) != want_d || Nfc(s) != want_c) {
      if (++wrong <= 10) {
        ADD_FAILURE() << Hex(s) << ": NFD " << Hex(Nfd(s)) << " (want " << Hex(want_d) << "), NFC "
                      << Hex(Nfc(s)) << " (want " << Hex(want_c) << ")";
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// Every code point of planes 0-3 and 14 (the others hold no character of any version yet: planes
// 4-13 are unassigned, 15 and 16 private use), before a mark and between marks.
TEST(Unicode, NormalizationInvariantsHoldForEveryCharacter) {
  int wrong = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (c == 0x40000) c = 0xE0000;
    if (c == 0xF0000) break;
    if (IsSurrogate(c)) continue;
    for (const std::u32string& x :
         {std::u32string{c, 0x301}, std::u32string{'a', c, 0x316, 0x301}}) {
      const std::u32string d = Nfd(x), k = Nfc(x);
      const bool ok = Nfd(d) == d && Nfc(k) == k && Nfc(d) == k && Nfd(k) == d &&
                      StripAccents(x) == StripAccents(d);
      if (!ok && ++wrong <= 10) ADD_FAILURE() << Hex(x);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Unicode, HangulSyllablesDecomposeAndComposeAlgorithmically) {
  for (char32_t l = 0; l < 19; ++l) {
    for (char32_t v = 0; v < 21; ++v) {
      for (char32_t t = 0; t < 28; ++t) {
        const char32_t syllable = 0xAC00 + (l * 21 + v) * 28 + t;
        std::u32string jamo{0x1100 + l, 0x1161 + v};
        if (t != 0) jamo.push_back(0x11A7 + t);
        ASSERT_EQ(Nfd(std::u32string(1, syllable)), jamo) << Hex({syllable});
        ASSERT_EQ(Nfc(jamo), std::u32string(1, syllable)) << Hex(jamo);
        ASSERT_EQ(Graphemes(jamo), (Clusters{{0, jamo.size()}})) << Hex(jamo);
      }
    }
  }
  // An LV syllable takes a trailing consonant; an LVT one does not.
  EXPECT_EQ(Nfc(U"\uAC00\u11A8"), U"\uAC01");
  EXPECT_EQ(Nfc(U"\uAC01\u11A8"), U"\uAC01\u11A8");
}

TEST(Unicode, LowercasesEveryCodePointAsPython) {
  const Expectations& e = Expected();
  // The uppercase letters Unicode 16.0 and 17.0 added (Python's 14.0 does not know them).
  std::map<char32_t, char32_t> newer = {{0x1C89, 0x1C8A}, {0xA7CB, 0x264},  {0xA7CC, 0xA7CD},
                                        {0xA7CE, 0xA7CF}, {0xA7D2, 0xA7D3}, {0xA7D4, 0xA7D5},
                                        {0xA7DA, 0xA7DB}, {0xA7DC, 0x19B}};
  for (char32_t c = 0x10D50; c <= 0x10D65; ++c) newer[c] = c + 0x20;  // Garay
  for (char32_t c = 0x16EA0; c <= 0x16EB8; ++c) newer[c] = c + 0x1B;  // Kirat Rai
  int wrong = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    const std::u32string s(1, c);
    const auto l = e.lower.find(c);
    const auto n = newer.find(c);
    const std::u32string want = l != e.lower.end() ? l->second
                                : n != newer.end() ? std::u32string(1, n->second)
                                                   : s;
    const std::u32string got = Lowercase(s);
    if ((got != want || Lowercase(got) != got) && ++wrong <= 10) {
      ADD_FAILURE() << Hex(s) << ": " << Hex(got) << " (want " << Hex(want) << ")";
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(Lowercase(U"\u0130\u03A3"), U"i\u0307\u03C3");  // without context
}

TEST(Unicode, GraphemesPassUnicode15sBreakTest) {
  int wrong = 0;
  for (const auto& [text, clusters] : Expected().graphemes) {
    if (Graphemes(text) != clusters && ++wrong <= 10) ADD_FAILURE() << Hex(text);
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Unicode, GraphemesOfEveryCodePoint) {
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    const std::u32string s{c, 'a', c};
    const Clusters g = Graphemes(s);
    ASSERT_FALSE(g.empty());
    ASSERT_EQ(g.front().first, 0u);
    ASSERT_EQ(g.back().second, s.size());
    for (size_t i = 1; i < g.size(); ++i) ASSERT_EQ(g[i].first, g[i - 1].second) << Hex(s);
    ASSERT_EQ(Graphemes(std::u32string(1, c)), (Clusters{{0, 1}}));
  }
}

TEST(Unicode, GraphemeRulesByHand) {
  // GB3-GB5: CR LF stays together; controls stand alone.
  EXPECT_EQ(Graphemes(U"a\r\n\u0301"), (Clusters{{0, 1}, {1, 3}, {3, 4}}));
  // GB9, GB9a, GB9b: marks, spacing marks and ZWJ extend; a prepended character joins the next.
  EXPECT_EQ(Graphemes(U"e\u0301\u200D\u0903\u0600x"), (Clusters{{0, 4}, {4, 6}}));
  // GB11: emoji ZWJ sequences; GB12/13: flags pair up.
  EXPECT_EQ(Graphemes(U"\U0001F468\u200D\U0001F469\u200D\U0001F467!"), (Clusters{{0, 5}, {5, 6}}));
  EXPECT_EQ(Graphemes(U"\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA\U0001F1EF"),
            (Clusters{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(Graphemes(U"a\u200D\U0001F600"), (Clusters{{0, 2}, {2, 3}}));
  // Indic conjuncts (ICU 72's rule 9.3): consonant, virama (with marks of a class other than 0
  // or ZWJ around it), consonant. A vowel sign of class 0 ends it; so does a script without it.
  EXPECT_EQ(Graphemes(U"\u0915\u094D\u0937"), (Clusters{{0, 3}}));
  EXPECT_EQ(Graphemes(U"\u0915\u093C\u094D\u200D\u0937\u094D\u0915"), (Clusters{{0, 7}}));
  EXPECT_EQ(Graphemes(U"\u0915\u0941\u094D\u0937"), (Clusters{{0, 3}, {3, 4}}));
  EXPECT_EQ(Graphemes(U"\u0D15\u0D4D\u0D15"), (Clusters{{0, 3}}));
  EXPECT_EQ(Graphemes(U"\u0B95\u0BCD\u0BB7"), (Clusters{{0, 2}, {2, 3}}));  // Tamil
  // The marks Unicode 16.0 and 17.0 added extend the cluster before them, but not a control.
  EXPECT_EQ(Graphemes(U"a\u0897\U0001E5EE b\u1ACF"), (Clusters{{0, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(Graphemes(U"\n\u0897"), (Clusters{{0, 1}, {1, 2}}));
  EXPECT_TRUE(Graphemes(U"").empty());
}

TEST(Unicode, VersionsOfTheLibraryByHand) {
  // Categories of Unicode 8.0: U+0890 (Cf in 14.0) is no control, U+00AD is; U+2E5D (14.0) is no
  // punctuation; U+166D and U+111C9 were punctuation, U+1734 a nonspacing mark, U+1885 not.
  EXPECT_TRUE(IsBertControl(0xAD));
  EXPECT_FALSE(IsBertControl(0x890));
  EXPECT_FALSE(IsBertControl('\t'));
  EXPECT_TRUE(IsBertControl(0));
  EXPECT_TRUE(IsBertControl(0xFFFD));
  EXPECT_TRUE(IsBertControl(0xE000));
  EXPECT_FALSE(IsBertControl(0x378));
  EXPECT_TRUE(IsBertPunctuation('$'));
  EXPECT_TRUE(IsBertPunctuation(0x2E3A));
  EXPECT_FALSE(IsBertPunctuation(0x2E5D));
  EXPECT_TRUE(IsBertPunctuation(0x166D));
  EXPECT_TRUE(IsBertPunctuation(0x111C9));
  EXPECT_TRUE(IsNonspacingMark(0x1734));
  EXPECT_FALSE(IsNonspacingMark(0x1885));
  EXPECT_TRUE(IsNonspacingMark(0x301));
  EXPECT_FALSE(IsNonspacingMark(0xD00));  // 10.0
  EXPECT_TRUE(IsWhiteSpace(0x3000));
  EXPECT_TRUE(IsWhiteSpace(0x85));
  EXPECT_FALSE(IsWhiteSpace(0x200B));
  EXPECT_FALSE(IsWhiteSpace(0x1C));
  // \w: letters, marks, decimal digits, connector punctuation, Join_Control; 16.0's too.
  EXPECT_TRUE(IsWordChar(0x200D));
  EXPECT_TRUE(IsWordChar(0x2040));
  EXPECT_TRUE(IsWordChar(0x897));    // a mark of 16.0
  EXPECT_FALSE(IsWordChar(0x1ACF));  // a mark of 17.0
  EXPECT_TRUE(IsWordChar(0x10D40));  // a digit of 16.0
  EXPECT_TRUE(IsLetter(0x1C89));     // a letter of 16.0
  EXPECT_FALSE(IsLetter(0x16EA0));   // a letter of 17.0
  EXPECT_FALSE(IsWordChar('-'));
  // Normalization of 9.0: a later mark neither moves nor lets marks around it move.
  EXPECT_EQ(Nfd(U"a\u0301\u0316"), U"a\u0316\u0301");
  EXPECT_EQ(Nfd(U"a\U00010D24\u0316"), U"a\U00010D24\u0316");
  EXPECT_EQ(Nfc(U"a\u0316\u0301"), U"\u00E1\u0316");
  // Exclusions and singletons stay decomposed; a blocked mark does not compose.
  EXPECT_EQ(Nfc(U"\u0958"), U"\u0915\u093C");
  EXPECT_EQ(Nfc(U"\u212B"), U"\u00C5");
  EXPECT_EQ(Nfc(U"a\u0301\u0301"), U"\u00E1\u0301");
  EXPECT_EQ(Nfc(U"\u1E0B\u0323"), U"\u1E0D\u0307");
  EXPECT_EQ(StripAccents(U"\u00C5ngstr\u00F6m"), U"Angstrom");
  EXPECT_TRUE(CheckUnicodeData().ok());
}

}  // namespace
}  // namespace tune::internal

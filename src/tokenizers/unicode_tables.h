// The Unicode tables of unicode.cpp [tune_train, private], generated into unicode_tables.cpp by
// scripts/generate-unicode-tables.py from pinned Unicode data (15.0.0's data files; 16.0.0's and
// 17.0.0's general categories, for what those versions added). Every table is sorted by code point:
// unicode.cpp searches the mappings and turns kPropertyRanges into a two-stage index on first use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tune::internal::unicode_tables {

// The bits of a code point's property word: each says what the function of unicode.h of (about)
// the same name answers, with its Unicode versions and exceptions already applied.
enum PropertyBit : uint32_t {
  kBertControl = 1u << 0,
  kWhiteSpace = 1u << 1,
  kBertPunctuation = 1u << 2,
  kNonspacingMark = 1u << 3,
  kLetter = 1u << 4,
  kNumber = 1u << 5,
  kWordChar = 1u << 6,
  // Assigned in Unicode 9.0 (the library's normalization): only runs of these are normalized.
  kNormalizes = 1u << 7,
  // Has a canonical decomposition (kDecompositions, or a Hangul syllable); of 9.0's characters.
  kDecomposes = 1u << 8,
  // A combining class other than 0, or NFC_QC No or Maybe: a run of 9.0's characters without one
  // is in NFC already.
  kNfcCheck = 1u << 9,
  // Has a lowercase mapping (kLowercase or kLowercaseSpecial).
  kChangesLower = 1u << 10,
  kExtendedPictographic = 1u << 11,
  // A mark Unicode 16.0 or 17.0 added (unassigned in 15.0, so Grapheme_Cluster_Break Other here).
  kNewerMark = 1u << 12,
  // ICU 72's rule 9.3 (Indic conjuncts): the Indic_Syllabic_Category Consonant and Virama of
  // Bengali, Devanagari, Gujarati, Malayalam, Oriya and Telugu, and ExtCccZwj: a
  // Grapheme_Cluster_Break Extend of a combining class other than 0, or ZWJ.
  kLinkingConsonant = 1u << 13,
  kVirama = 1u << 14,
  kExtendCccZwj = 1u << 15,
  // Composes with a character before it (the second of a primary composite's pair, or Hangul's
  // V or T jamo): NFC_QC Maybe.
  kComposesBack = 1u << 20,
};
// Bits 16-19 hold the Grapheme_Cluster_Break of Unicode 15.0, bits 24-31 the canonical combining
// class.
constexpr int kGraphemeBreakShift = 16;
constexpr int kCombiningClassShift = 24;
enum GraphemeBreak : uint32_t {
  kGcbOther,
  kGcbCr,
  kGcbLf,
  kGcbControl,
  kGcbExtend,
  kGcbZwj,
  kGcbRegionalIndicator,
  kGcbPrepend,
  kGcbSpacingMark,
  kGcbL,
  kGcbV,
  kGcbT,
  kGcbLv,
  kGcbLvt,
};

// Each code point's property word is one of kPropertyWords (at most 256): the bits above, the
// Grapheme_Cluster_Break of Unicode 15.0 at kGraphemeBreakShift and the canonical combining class
// of a character of 9.0 at kCombiningClassShift (0 for every other code point).
extern const uint32_t kPropertyWords[];
extern const size_t kPropertyWordCount;
// A range's word holds from `first` up to the next range's first (the last's to U+10FFFF).
struct PropertyRange {
  char32_t first;
  uint8_t word;  // an index into kPropertyWords
};
extern const PropertyRange kPropertyRanges[];
extern const size_t kPropertyRangeCount;

// Full (recursive) canonical decompositions of 9.0's characters, Hangul syllables excepted:
// `length` code points of the pool from `offset`. kLowercaseSpecial uses the same layout.
struct Decomposition {
  char32_t code_point;
  uint16_t offset;
  uint16_t length;
};
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const char32_t kDecompositionPool[];

// The primary composites of 9.0's characters (canonical pairs not excluded from composition),
// keyed by first << 21 | second; Hangul syllables compose algorithmically.
struct Composition {
  uint64_t pair;
  char32_t composite;
};
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

// Full lowercase mappings without context: Unicode 15.0's (SpecialCasing's unconditional ones
// over UnicodeData's), and those of the uppercase letters 16.0 and 17.0 added.
struct CaseMapping {
  char32_t code_point;
  char32_t lower;
};
extern const CaseMapping kLowercase[];
extern const size_t kLowercaseCount;
extern const Decomposition kLowercaseSpecial[];
extern const size_t kLowercaseSpecialCount;
extern const char32_t kLowercaseSpecialPool[];

}  // namespace tune::internal::unicode_tables

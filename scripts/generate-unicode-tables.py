#!/usr/bin/python3
"""Writes src/tokenizers/unicode_tables.cpp, the Unicode tables of src/tokenizers/unicode.cpp,
from pinned Unicode data. A developer runs it when the data or the classes change; the build does
not (the output is committed). To regenerate, on Debian 12:

    apt-get install unicode-data                  # 15.0.0-1, in /usr/share/unicode
    .venv/bin/python -m pip install --target DIR16 unicodedata2==16.0.0
    .venv/bin/python -m pip install --target DIR17 unicodedata2==17.0.0
    /usr/bin/python3 scripts/generate-unicode-tables.py \\
        --unicodedata2-16 DIR16 --unicodedata2-17 DIR17 --expectations [--check]

(unicodedata2 is a compiled module: install it with a pip of the Python that runs this script,
3.11 on Debian 12; tune's virtual environment has one.) Options: --ucd DIR (default
/usr/share/unicode), --output FILE, --expectations [FILE], --check.

The data, pinned (the script stops when a version differs):
  * Unicode 15.0.0: the Unicode Character Database text files of Debian 12's `unicode-data`
    package: UnicodeData.txt, DerivedAge.txt, PropList.txt, DerivedCoreProperties.txt,
    DerivedNormalizationProps.txt, SpecialCasing.txt, Scripts.txt, IndicSyllabicCategory.txt,
    auxiliary/GraphemeBreakProperty.txt and emoji/emoji-data.txt. These are the data of ICU 72
    (Unicode 15.0), which tune used before, and everything below is defined relative to them
    ("known" = assigned in 15.0). Grapheme clusters take ICU 72's root rules (CONJUNCT_SCRIPTS
    below has its one rule beyond UAX #29 15.0).
  * Unicode 16.0.0 and 17.0.0: the general categories of PyPI's `unicodedata2` 16.0.0 and 17.0.0
    (each DIR is loaded on its own): the letters and numbers Unicode 16.0 added (GPT-2's \\p{L}
    and \\p{N}) and the marks 16.0 and 17.0 added (grapheme clusters, \\w).
  * Unicode 8.0 and 9.0: the tokenizers library's categories are those of 8.0 and its
    normalization that of 9.0. The characters assigned by then come from DerivedAge.txt 15.0
    (ages never change); the six characters whose category changed since 8.0 are listed below
    (WAS_PUNCTUATION_IN_8, WAS_NONSPACING_IN_8, WAS_OTHER_IN_8). Decompositions and combining
    classes never change for an assigned character, so the 15.0 data restricted to the
    characters of 9.0 is 9.0's.
  * The lowercase mappings of the uppercase letters Unicode 16.0 and 17.0 added (unicodedata2 has
    no case mappings): UnicodeData.txt 16.0/17.0's simple lowercase, listed below
    (NEWER_LOWERCASE); the script checks that they are exactly the new Lu of 17.0 and map to Ll.

--expectations also writes tests/data/unicode/expectations.txt, what tests/tokenizers/
unicode_test.cpp checks the tables against, from other implementations than this script's
reading of the data files: unicodedata2 16.0.0's letters and numbers (\\p{L}, \\p{N}) and
17.0.0's NFD and NFC of every character of 9.0 they change, Python's own str.lower of every
character (Debian 12's Python 3.11: Unicode 14.0.0, required) that it changes, and the lines of
Unicode 15.0.0's auxiliary/GraphemeBreakTest.txt.

--check regenerates and fails (exit 1) when a committed file differs.
"""
import argparse
import importlib.util
import os
import sys
import textwrap
import unicodedata

MAX_CP = 0x10FFFF

# Characters whose general category in Unicode 8.0 differs from 15.0's, as the library sees them:
# U+166D CANADIAN SYLLABICS CHI SIGN and U+111C9 SHARADA SANDHI MARK were Po; U+1734 HANUNOO SIGN
# PAMUDPOD was Mn; U+1885, U+1886 (Mongolian) and U+A9BD (Javanese) were not Mn (U+111C9 neither).
WAS_PUNCTUATION_IN_8 = {0x166D, 0x111C9}
WAS_NONSPACING_IN_8 = {0x1734}
WAS_OTHER_IN_8 = {0x1885, 0x1886, 0xA9BD, 0x111C9}

# The simple lowercase of the uppercase letters Unicode 16.0 and 17.0 added (UnicodeData.txt).
NEWER_LOWERCASE = {0x1C89: 0x1C8A, 0xA7CB: 0x264, 0xA7CC: 0xA7CD, 0xA7CE: 0xA7CF,
                   0xA7D2: 0xA7D3, 0xA7D4: 0xA7D5, 0xA7DA: 0xA7DB, 0xA7DC: 0x19B}
NEWER_LOWERCASE.update({c: c + 0x20 for c in range(0x10D50, 0x10D66)})  # Garay
NEWER_LOWERCASE.update({c: c + 0x1B for c in range(0x16EA0, 0x16EB9)})  # Kirat Rai

# ICU 72's rule 9.3 (its root rules, before Unicode 15.1's GB9c): no break within
# $LinkingConsonant $ExtCccZwj* $Virama $ExtCccZwj* $LinkingConsonant, where $LinkingConsonant and
# $Virama are the Indic_Syllabic_Category Consonant and Virama of these scripts, and $ExtCccZwj is
# Grapheme_Cluster_Break Extend with a combining class other than 0, or ZWJ.
CONJUNCT_SCRIPTS = ["Gujarati", "Telugu", "Malayalam", "Oriya", "Bengali", "Devanagari"]

GCB_VALUES = ["Other", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
              "SpacingMark", "L", "V", "T", "LV", "LVT"]

# Property bits (unicode_tables.h must agree).
BITS = {
    "BertControl": 1 << 0,
    "WhiteSpace": 1 << 1,
    "BertPunctuation": 1 << 2,
    "NonspacingMark": 1 << 3,
    "Letter": 1 << 4,
    "Number": 1 << 5,
    "WordChar": 1 << 6,
    "Normalizes": 1 << 7,
    "Decomposes": 1 << 8,
    "NfcCheck": 1 << 9,
    "ChangesLower": 1 << 10,
    "ExtendedPictographic": 1 << 11,
    "NewerMark": 1 << 12,
    "LinkingConsonant": 1 << 13,
    "Virama": 1 << 14,
    "ExtendCccZwj": 1 << 15,
    "ComposesBack": 1 << 20,
}
GCB_SHIFT = 16  # 4 bits
CCC_SHIFT = 24  # 8 bits: the canonical combining class of a character of 9.0


def fail(message):
    sys.exit(f"generate-unicode-tables: {message}")


def data_lines(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [field.strip() for field in line.split(";")]


def code_points(field):
    if ".." in field:
        first, last = field.split("..")
        return range(int(first, 16), int(last, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def check_version(path, version):
    with open(path, encoding="utf-8") as f:
        head = f.readline()
    if version not in head:
        fail(f"{path} is not of Unicode {version} (its first line: {head.strip()})")


def read_property(path, wanted):
    """{code point: value} of a property file's lines whose value is in `wanted` (a set)."""
    out = {}
    for fields in data_lines(path):
        if fields[1] in wanted:
            for c in code_points(fields[0]):
                out[c] = fields[1]
    return out


def load_unicodedata2(directory, version):
    for name in sorted(os.listdir(directory)):
        if name.startswith("unicodedata2") and name.endswith(".so"):
            spec = importlib.util.spec_from_file_location("unicodedata2",
                                                          os.path.join(directory, name))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if module.unidata_version != version:
                fail(f"{directory}: unicodedata2 is of Unicode {module.unidata_version}, "
                     f"not {version}")
            return module
    fail(f"no unicodedata2 module in {directory} (pip install --target {directory} "
         f"unicodedata2=={version})")


class Ucd:
    def __init__(self, root):
        for name in ["UnicodeData.txt"]:
            if not os.path.exists(os.path.join(root, name)):
                fail(f"no {name} in {root} (Debian: apt-get install unicode-data)")
        for name in ["DerivedAge.txt", "PropList.txt", "DerivedCoreProperties.txt",
                     "DerivedNormalizationProps.txt", "SpecialCasing.txt",
                     "Scripts.txt", "IndicSyllabicCategory.txt",
                     "auxiliary/GraphemeBreakProperty.txt"]:
            check_version(os.path.join(root, name), "15.0.0")
        check_version(os.path.join(root, "emoji/emoji-data.txt"), "emoji-data.txt")
        with open(os.path.join(root, "emoji/emoji-data.txt"), encoding="utf-8") as f:
            if "Emoji Version 15.0" not in f.read(2000):
                fail("emoji/emoji-data.txt is not of Unicode 15.0")

        self.category, self.ccc, self.decomposition, self.lower = {}, {}, {}, {}
        first = None
        for fields in data_lines(os.path.join(root, "UnicodeData.txt")):
            c = int(fields[0], 16)
            if fields[1].endswith(", First>"):
                first = c
                continue
            span = range(first, c + 1) if fields[1].endswith(", Last>") else [c]
            for cp in span:
                self.category[cp] = fields[2]
                if fields[3] != "0":
                    self.ccc[cp] = int(fields[3])
                if fields[5] and not fields[5].startswith("<"):
                    self.decomposition[cp] = [int(x, 16) for x in fields[5].split()]
                if fields[13]:
                    self.lower[cp] = [int(fields[13], 16)]
        # Full lowercase: SpecialCasing's unconditional mappings win over the simple ones.
        for fields in data_lines(os.path.join(root, "SpecialCasing.txt")):
            if len(fields) > 4 and fields[4]:
                continue  # a condition (Final_Sigma, a language): never for a lone character
            c = int(fields[0], 16)
            lower = [int(x, 16) for x in fields[1].split()]
            if lower == [c]:
                self.lower.pop(c, None)
            else:
                self.lower[c] = lower

        self.age = {}
        for fields in data_lines(os.path.join(root, "DerivedAge.txt")):
            major, minor = (int(x) for x in fields[1].split("."))
            for c in code_points(fields[0]):
                self.age[c] = (major, minor)
        props = read_property(os.path.join(root, "PropList.txt"), {"White_Space"})
        self.white_space = set(props)
        self.join_control = set(read_property(os.path.join(root, "PropList.txt"),
                                              {"Join_Control"}))
        self.alphabetic = set(read_property(os.path.join(root, "DerivedCoreProperties.txt"),
                                            {"Alphabetic"}))
        self.composition_exclusion = set(read_property(
            os.path.join(root, "DerivedNormalizationProps.txt"), {"Full_Composition_Exclusion"}))
        nfc_qc = {}
        for fields in data_lines(os.path.join(root, "DerivedNormalizationProps.txt")):
            if fields[1] == "NFC_QC":
                for c in code_points(fields[0]):
                    nfc_qc[c] = fields[2]
        self.nfc_qc = nfc_qc
        self.gcb = read_property(os.path.join(root, "auxiliary/GraphemeBreakProperty.txt"),
                                 set(GCB_VALUES))
        scripts = read_property(os.path.join(root, "Scripts.txt"), set(CONJUNCT_SCRIPTS))
        insc = read_property(os.path.join(root, "IndicSyllabicCategory.txt"),
                             {"Consonant", "Virama"})
        self.linking_consonant = {c for c, v in insc.items() if v == "Consonant" and c in scripts}
        self.virama = {c for c, v in insc.items() if v == "Virama" and c in scripts}
        self.ext_pict = set(read_property(os.path.join(root, "emoji/emoji-data.txt"),
                                          {"Extended_Pictographic"}))

    def known(self, c):
        return c in self.age

    def assigned_by(self, c, version):
        return c in self.age and self.age[c] <= version

    def gc(self, c):
        return self.category.get(c, "Cn")


def newer_classes(ucd, u16, u17):
    """The letters and numbers of 16.0 and the marks of 16.0 and 17.0 that 15.0 lacks."""
    letters16, numbers16, marks16, marks17 = set(), set(), set(), set()
    new_upper = set()
    for c in range(MAX_CP + 1):
        if ucd.known(c):
            continue
        g16, g17 = u16.category(chr(c)), u17.category(chr(c))
        if g16[0] == "L":
            letters16.add(c)
        elif g16[0] == "N":
            numbers16.add(c)
        if g16[0] == "M":
            marks16.add(c)
        elif g17[0] == "M":
            marks17.add(c)
        if g17 == "Lu":
            new_upper.add(c)
    if new_upper != set(NEWER_LOWERCASE):
        fail("NEWER_LOWERCASE is not the uppercase letters 16.0 and 17.0 added: "
             f"{sorted(hex(c) for c in new_upper ^ set(NEWER_LOWERCASE))}")
    for upper, lower in NEWER_LOWERCASE.items():
        if u17.category(chr(lower)) != "Ll":
            fail(f"NEWER_LOWERCASE maps U+{upper:04X} to U+{lower:04X}, not a lowercase letter")
    return letters16, numbers16, marks16, marks17


def properties(ucd, newer):
    """Each code point's property word: BITS, the Grapheme_Cluster_Break at GCB_SHIFT and the
    canonical combining class at CCC_SHIFT."""
    letters16, numbers16, marks16, marks17 = newer
    v8, v9 = (8, 0), (9, 0)
    second_of_pair = set()
    for c, d in ucd.decomposition.items():
        if len(d) == 2 and c not in ucd.composition_exclusion:
            second_of_pair.add(d[1])
    out = []
    for c in range(MAX_CP + 1):
        gc = ucd.gc(c)
        known = ucd.known(c)
        bits = 0
        # IsBertControl
        if c in (0x9, 0xA, 0xD):
            control = False
        elif c in (0, 0xFFFD) or gc in ("Cc", "Co", "Cs"):
            control = True
        else:
            control = gc == "Cf" and ucd.assigned_by(c, v8)
        bits |= BITS["BertControl"] if control else 0
        bits |= BITS["WhiteSpace"] if c in ucd.white_space else 0
        # IsBertPunctuation
        if c < 0x80:
            punct = 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126
        else:
            punct = (gc[0] == "P" and ucd.assigned_by(c, v8)) or c in WAS_PUNCTUATION_IN_8
        bits |= BITS["BertPunctuation"] if punct else 0
        # IsNonspacingMark
        if c < 0x300:
            nsm = False
        elif c in WAS_NONSPACING_IN_8:
            nsm = True
        else:
            nsm = gc == "Mn" and ucd.assigned_by(c, v8) and c not in WAS_OTHER_IN_8
        bits |= BITS["NonspacingMark"] if nsm else 0
        letter = gc[0] == "L" or (not known and c in letters16)
        number = gc[0] == "N" or (not known and c in numbers16)
        bits |= BITS["Letter"] if letter else 0
        bits |= BITS["Number"] if number else 0
        # IsWordChar (the Rust regex crate's \w)
        if c < 0x80:
            word = c == 0x5F or 0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A
        else:
            word = (c in ucd.alphabetic or c in ucd.join_control or gc[0] == "M" or
                    gc in ("Nd", "Pc") or
                    (not known and (letter or number or c in marks16)))
        bits |= BITS["WordChar"] if word else 0
        # Normalization: the characters of 9.0 (the rest neither decompose, compose nor move).
        if ucd.assigned_by(c, v9):
            bits |= BITS["Normalizes"]
            hangul = 0xAC00 <= c <= 0xD7A3
            if c in ucd.decomposition or hangul:
                bits |= BITS["Decomposes"]
            if c in ucd.ccc or ucd.nfc_qc.get(c, "Y") != "Y":
                bits |= BITS["NfcCheck"]
            if c in second_of_pair or 0x1161 <= c <= 0x1175 or 0x11A8 <= c <= 0x11C2:
                bits |= BITS["ComposesBack"]  # Hangul's V and T jamo too
                if ucd.nfc_qc.get(c, "Y") != "M":
                    fail(f"U+{c:04X} composes with a character before it, not NFC_QC=Maybe")
            bits |= ucd.ccc.get(c, 0) << CCC_SHIFT
        if c in ucd.lower or (not known and c in NEWER_LOWERCASE):
            bits |= BITS["ChangesLower"]
        bits |= BITS["ExtendedPictographic"] if c in ucd.ext_pict else 0
        if not known and (c in marks16 or c in marks17):
            bits |= BITS["NewerMark"]
        if c in ucd.linking_consonant:
            bits |= BITS["LinkingConsonant"]
        if c in ucd.virama:
            bits |= BITS["Virama"]
        gcb = ucd.gcb.get(c, "Other")
        if (gcb == "Extend" and c in ucd.ccc) or gcb == "ZWJ":
            bits |= BITS["ExtendCccZwj"]
        if (bits & BITS["NewerMark"]) and gcb != "Other":
            fail(f"U+{c:04X}, a mark after 15.0, has the Grapheme_Cluster_Break {gcb} in 15.0")
        bits |= GCB_VALUES.index(ucd.gcb.get(c, "Other")) << GCB_SHIFT
        out.append(bits)
    return out


def ranges(values):
    """[(first code point, value)] where the value changes."""
    out = []
    for c, v in enumerate(values):
        if not out or out[-1][1] != v:
            out.append((c, v))
    return out


def full_decomposition(ucd, c):
    out = []
    for d in ucd.decomposition.get(c, [c]):
        out.extend(full_decomposition(ucd, d) if d in ucd.decomposition and d != c else [d])
    return out


def normalization(ucd):
    v9 = (9, 0)
    decompositions = []
    for c in sorted(ucd.decomposition):
        if ucd.assigned_by(c, v9):
            decompositions.append((c, full_decomposition(ucd, c)))
    compositions = []
    for c in sorted(ucd.decomposition):
        d = ucd.decomposition[c]
        if len(d) != 2 or c in ucd.composition_exclusion:
            continue
        if not (ucd.assigned_by(d[0], v9) and ucd.assigned_by(d[1], v9)):
            continue  # never inside one run of 9.0 characters
        if not ucd.assigned_by(c, v9):
            fail(f"U+{c:04X} (after 9.0) composes from characters of 9.0")
        compositions.append(((d[0] << 21) | d[1], c))
    compositions.sort()
    return decompositions, compositions


def lowercase(ucd):
    single, multiple = [], []
    for c in range(MAX_CP + 1):
        if ucd.known(c):
            lower = ucd.lower.get(c)
        else:
            lower = [NEWER_LOWERCASE[c]] if c in NEWER_LOWERCASE else None
        if lower is None:
            continue
        (single if len(lower) == 1 else multiple).append((c, lower))
    return single, multiple


def rows(items, per_line, width=100):
    lines, line = [], "   "
    for i, item in enumerate(items):
        piece = " " + item + ","
        if len(line) + len(piece) > width or (per_line and i and i % per_line == 0):
            lines.append(line)
            line = "   "
        line += piece
    if line.strip():
        lines.append(line)
    return "\n".join(lines)


def render(props, decompositions, compositions, lower_single, lower_multiple):
    prop_ranges = ranges(props)
    words = sorted(set(props))
    if len(words) > 256:
        fail(f"{len(words)} distinct property words: more than a uint8_t numbers")
    word_index = {w: i for i, w in enumerate(words)}
    pool, entries = [], []
    for c, d in decompositions:
        entries.append(f"{{0x{c:X}, {len(pool)}, {len(d)}}}")
        pool.extend(d)
    special_pool, special_entries = [], []
    for c, lower in lower_multiple:
        special_entries.append(f"{{0x{c:X}, {len(special_pool)}, {len(lower)}}}")
        special_pool.extend(lower)
    bit_names = ", ".join(f"{name}={value:#x}" for name, value in BITS.items())
    comment = "\n".join("// " + line for line in textwrap.wrap(
        f"The {len(words)} distinct property words. Bits: {bit_names}; "
        f"Grapheme_Cluster_Break << {GCB_SHIFT}; canonical combining class << {CCC_SHIFT}.", 97))
    hx = lambda v: f"0x{v:X}"  # noqa: E731
    return f"""\
// Generated by scripts/generate-unicode-tables.py: do not edit. The Unicode tables of unicode.cpp
// (unicode_tables.h says what each holds), from the Unicode 15.0.0 data files (Debian 12's
// unicode-data 15.0.0-1) and PyPI's unicodedata2 16.0.0 and 17.0.0; the script's docstring says
// how to regenerate them.
//
// clang-format off
#include "tokenizers/unicode_tables.h"

namespace tune::internal::unicode_tables {{

{comment}
const uint32_t kPropertyWords[] = {{
{rows([hx(v) for v in words], 0)}
}};
const size_t kPropertyWordCount = sizeof(kPropertyWords) / sizeof(kPropertyWords[0]);

// {len(prop_ranges)} ranges: (first code point, index into kPropertyWords).
const PropertyRange kPropertyRanges[] = {{
{rows([f"{{{hx(c)}, {word_index[v]}}}" for c, v in prop_ranges], 0)}
}};
const size_t kPropertyRangeCount = sizeof(kPropertyRanges) / sizeof(kPropertyRanges[0]);

// {len(entries)} full canonical decompositions ({len(pool)} code points).
const Decomposition kDecompositions[] = {{
{rows(entries, 0)}
}};
const size_t kDecompositionCount = sizeof(kDecompositions) / sizeof(kDecompositions[0]);
const char32_t kDecompositionPool[] = {{
{rows([hx(v) for v in pool], 0)}
}};

// {len(compositions)} primary composites: (first << 21 | second) -> composite.
const Composition kCompositions[] = {{
{rows([f"{{{hx(k)}, {hx(v)}}}" for k, v in compositions], 0)}
}};
const size_t kCompositionCount = sizeof(kCompositions) / sizeof(kCompositions[0]);

// {len(lower_single)} single-character lowercase mappings.
const CaseMapping kLowercase[] = {{
{rows([f"{{{hx(c)}, {hx(lower[0])}}}" for c, lower in lower_single], 0)}
}};
const size_t kLowercaseCount = sizeof(kLowercase) / sizeof(kLowercase[0]);

// {len(special_entries)} longer lowercase mappings.
const Decomposition kLowercaseSpecial[] = {{
{rows(special_entries, 0)}
}};
const size_t kLowercaseSpecialCount = sizeof(kLowercaseSpecial) / sizeof(kLowercaseSpecial[0]);
const char32_t kLowercaseSpecialPool[] = {{
{rows([hx(v) for v in special_pool], 0)}
}};

}}  // namespace tune::internal::unicode_tables
"""


def expectations(ucd, u16, u17, root):
    if unicodedata.unidata_version != "14.0.0":
        fail(f"--expectations wants Python's Unicode 14.0.0 (Debian 12's Python 3.11), not "
             f"{unicodedata.unidata_version}")
    out = ["# Generated by scripts/generate-unicode-tables.py --expectations: do not edit. What",
           "# tests/tokenizers/unicode_test.cpp checks src/tokenizers/unicode.cpp against (the",
           "# script's docstring says where each line comes from). Code points in hex.",
           "# letter/number FIRST LAST: the ranges of unicodedata2 16.0.0's L* and N*.",
           "# nfd/nfc C MAPPING...: unicodedata2 17.0.0's NFD and NFC of a character of 9.0",
           "# (Hangul syllables left out).",
           "# lower C MAPPING...: Python's (Unicode 14.0.0) str.lower of a character.",
           "# grapheme LINE: a line of Unicode 15.0.0's GraphemeBreakTest.txt."]
    hexes = lambda s: " ".join(f"{ord(x):04X}" for x in s)  # noqa: E731
    for kind, letter in (("letter", "L"), ("number", "N")):
        run = None
        for c in range(MAX_CP + 2):
            inside = c <= MAX_CP and u16.category(chr(c))[0] == letter
            if inside and run is None:
                run = c
            elif not inside and run is not None:
                out.append(f"{kind} {run:04X} {c - 1:04X}")
                run = None
    for c in range(MAX_CP + 1):
        if not ucd.assigned_by(c, (9, 0)) or 0xD800 <= c <= 0xDFFF or 0xAC00 <= c <= 0xD7A3:
            continue  # the test decomposes and composes Hangul syllables on its own
        for form in ("NFD", "NFC"):
            mapped = u17.normalize(form, chr(c))
            if mapped != chr(c):
                out.append(f"{form.lower()} {c:04X} {hexes(mapped)}")
    for c in range(MAX_CP + 1):
        if 0xD800 <= c <= 0xDFFF or unicodedata.category(chr(c)) == "Cn":
            continue
        if chr(c).lower() != chr(c):
            out.append(f"lower {c:04X} {hexes(chr(c).lower())}")
    for line in open(os.path.join(root, "auxiliary/GraphemeBreakTest.txt"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(f"grapheme {line}")
    return "\n".join(out) + "\n"


def write_or_check(path, text, check):
    if check:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{path} is out of date: rerun {sys.argv[0]}")
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ucd", default="/usr/share/unicode",
                        help="the Unicode 15.0.0 data files (Debian: unicode-data)")
    parser.add_argument("--unicodedata2-16", required=True,
                        help="a directory with unicodedata2 16.0.0 (pip install --target)")
    parser.add_argument("--unicodedata2-17", required=True,
                        help="a directory with unicodedata2 17.0.0 (pip install --target)")
    parser.add_argument("--output", default=os.path.join(root, "src/tokenizers/unicode_tables.cpp"))
    parser.add_argument("--expectations", nargs="?", metavar="FILE",
                        const=os.path.join(root, "tests/data/unicode/expectations.txt"),
                        help="also write the unit test's expectations (default: %(const)s)")
    parser.add_argument("--check", action="store_true",
                        help="fail when an output file differs from what would be written")
    args = parser.parse_args()

    ucd = Ucd(args.ucd)
    u16 = load_unicodedata2(args.unicodedata2_16, "16.0.0")
    u17 = load_unicodedata2(args.unicodedata2_17, "17.0.0")
    newer = newer_classes(ucd, u16, u17)
    props = properties(ucd, newer)
    decompositions, compositions = normalization(ucd)
    lower_single, lower_multiple = lowercase(ucd)
    text = render(props, decompositions, compositions, lower_single, lower_multiple)
    write_or_check(args.output, text, args.check)
    if args.expectations:
        write_or_check(args.expectations, expectations(ucd, u16, u17, args.ucd), args.check)
    if not args.check:
        print(f"wrote {args.output}: {len(ranges(props))} property ranges "
              f"({len(set(props))} distinct words), {len(decompositions)} decompositions, "
              f"{len(compositions)} compositions, "
              f"{len(lower_single) + len(lower_multiple)} lowercase mappings")


if __name__ == "__main__":
    main()

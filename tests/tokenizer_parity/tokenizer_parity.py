#!/usr/bin/python3
"""Tokenizer parity: tune's tokenizers against Python references on random mixed-script text.

    tokenizer_parity.py --driver BUILD/tests/tune_tokenizer_driver [--strings 20000]

Builds checkpoint-style tokenizer directories in a temporary folder and runs the driver
(tokenizer_driver.cpp) on the same random strings as the references; every id and every word
must agree:
  - vocab.txt, uncased and cased (tokenizer_config.json), and tokenizer.json (WordPiece): a
    transcription of Hugging Face's BasicTokenizer + WordpieceTokenizer on Python's unicodedata;
  - vocab.json + merges.txt, and tokenizer.json (BPE): GPT-2's pattern run by the `regex`
    module, GPT-2's byte alphabet and its bpe() merge loop;
  - spm.model (unigram, DeBERTa's ids) and sentencepiece.bpe.model (BPE, XLM-RoBERTa's fairseq
    ids), trained here with the `sentencepiece` module on Debian's fortunes: the module's own
    encode, with Hugging Face's id conventions.
Exit 0: no difference; 1: differences (the first ones printed); 77: skipped (a Python module or
the fortunes are missing).
"""
import argparse
import collections
import functools
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

try:
    import regex
    import sentencepiece as spm
except ImportError as e:
    print(f"SKIPPED: {e.name} is missing (Debian: python3-regex, python3-sentencepiece)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from fortunes_text import FORTUNES, fortune_lines  # noqa: E402

# ---- random mixed-script strings ------------------------------------------------------------

POOLS = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A)],
    "accented": [(0xC0, 0x24F), (0x1E00, 0x1EFF)],
    "combining": [(0x300, 0x36F)],
    "cyrillic": [(0x400, 0x4FF)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF)],
    "cjk": [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xF900, 0xFAFF),
            (0x3040, 0x30FF), (0xAC00, 0xD7A3)],
    "thai": [(0xE00, 0xE7F)],
    "devanagari": [(0x900, 0x97F)],
    "arabic": [(0x600, 0x6FF)],
    "emoji": [(0x1F300, 0x1FAFF), (0x2600, 0x27BF), (0x200D, 0x200D), (0xFE0F, 0xFE0F)],
    "control": [(0x0, 0x1F), (0x7F, 0x9F), (0x200B, 0x200F), (0x2028, 0x202E), (0xFEFF, 0xFEFF),
                (0xAD, 0xAD), (0xFFFD, 0xFFFD), (0xE000, 0xE0FF)],
    "space": [(0x9, 0xD), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
              (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
              (0x3000, 0x3000)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E), (0xA1, 0xBF),
              (0x2010, 0x205E), (0x3000, 0x303F), (0xFF01, 0xFF65)],
    "digits": [(0x30, 0x39), (0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19), (0xB2, 0xB3),
               (0x2150, 0x218B), (0x2460, 0x24FF)],
}
WORDS = ["the", "The", "'s", "'ll", "'re", "'ve", "'m", "'d", "'t", "don't", "I'm", "café",
         "naïve", "Straße", "ΣΟΦΟΣ", "İstanbul", "ﬁne", "x²", "１２３", "   ", "\n\n", " \t "]


def assigned(c):
    """Assigned in the oldest Unicode of the references (Python's unicodedata) and not a
    surrogate: characters newer than that are classified differently by design."""
    return unicodedata.category(c) not in ("Cn", "Cs")


def random_string(rng, fortune_words):
    parts = []
    for _ in range(rng.randint(1, 14)):
        kind = rng.random()
        if kind < 0.15:
            parts.append(rng.choice(WORDS))
        elif kind < 0.3 and fortune_words:
            parts.append(rng.choice(fortune_words))
        else:
            lo, hi = rng.choice(POOLS[rng.choice(list(POOLS))])
            run, length = [], rng.randint(1, 8)
            while len(run) < length:
                c = chr(rng.randint(lo, hi))
                if assigned(c):
                    run.append(c)
            parts.append("".join(run))
        if rng.random() < 0.5:
            parts.append(rng.choice([" ", " ", " ", "  ", "\n", "\t", "\u3000", "\xa0"]))
    return "".join(parts)


# ---- BERT: Hugging Face's BasicTokenizer and WordpieceTokenizer, transcribed ------------------

def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    return c not in "\t\n\r" and unicodedata.category(c).startswith("C")


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def split_on_punc(text):
    out, cur = [], []
    for c in text:
        if is_punctuation(c):
            if cur:
                out.append("".join(cur))
            cur = []
            out.append(c)
        else:
            cur.append(c)
    if cur:
        out.append("".join(cur))
    return out


@functools.lru_cache(maxsize=None)
def basic_tokenize(text, lower, strip, chinese):
    cleaned = []
    for c in text:
        if ord(c) == 0 or ord(c) == 0xFFFD or is_control(c):
            continue
        cleaned.append(" " if is_whitespace(c) else c)
    text = "".join(cleaned)
    if chinese:
        text = "".join(f" {c} " if is_chinese_char(ord(c)) else c for c in text)
    out = []
    for token in unicodedata.normalize("NFC", text).strip().split():
        if lower:
            token = token.lower()
        if strip:
            token = strip_accents(token)
        out.extend(split_on_punc(token))
    return tuple(" ".join(out).strip().split())


def wordpiece(tokens, vocab, unk, prefix="##", max_chars=100):
    out = []
    for token in tokens:
        chars = list(token)
        if len(chars) > max_chars:
            out.append(vocab[unk])
            continue
        start, pieces, bad = 0, [], False
        while start < len(chars):
            end, cur = len(chars), None
            while start < end:
                sub = "".join(chars[start:end])
                if start > 0:
                    sub = prefix + sub
                if sub in vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                bad = True
                break
            pieces.append(vocab[cur])
            start = end
        out.extend([vocab[unk]] if bad else pieces)
    return out


def make_wordpiece_vocab(rng, texts):
    """Specials, some single characters (as start and "##" continuation), frequent words and
    word pieces: enough for longest-match splits and [UNK]s."""
    words, chars = collections.Counter(), collections.Counter()
    for t in texts:
        for w in basic_tokenize(t, True, True, True) + basic_tokenize(t, False, False, True):
            words[w] += 1
            chars.update(w)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for c, _ in chars.most_common():
        if rng.random() < 0.85:
            vocab += [c, "##" + c]
    for w, _ in words.most_common(3000):
        vocab.append(w)
        if len(w) > 3:
            cut = rng.randint(1, len(w) - 1)
            vocab += [w[:cut], "##" + w[cut:]]
    seen, unique = set(), []
    for v in vocab:
        if v not in seen and "\n" not in v and "\r" not in v:
            seen.add(v)
            unique.append(v)
    return unique


# ---- GPT-2: the pattern, the byte alphabet and bpe() ---------------------------------------

GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ALPHABET = bytes_to_unicode()


def byte_level(piece):
    return "".join(BYTE_ALPHABET[b] for b in piece.encode("utf-8"))


def bpe(token, ranks):
    word = tuple(token)
    while len(word) > 1:
        pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        first, second = best
        new, i = [], 0
        while i < len(word):
            try:
                j = word.index(first, i)
            except ValueError:
                new.extend(word[i:])
                break
            new.extend(word[i:j])
            i = j
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new.append(first + second)
                i += 2
            else:
                new.append(word[i])
                i += 1
        word = tuple(new)
    return list(word)


def train_byte_bpe(texts, merges_wanted):
    counts = collections.Counter()
    for t in texts:
        for piece in GPT2_PATTERN.findall(t):
            counts[tuple(byte_level(piece))] += 1
    merges = []
    words = dict(counts)
    for _ in range(merges_wanted):
        pairs = collections.Counter()
        for w, n in words.items():
            for i in range(len(w) - 1):
                pairs[(w[i], w[i + 1])] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        words = {merge_pair(w, best): n for w, n in words.items()}
    return merges


def merge_pair(word, pair):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def byte_bpe_ids(text, ranks, vocab, cache, prefix_space=False):
    # tokenizers' ByteLevel add_prefix_space: a space before text not starting with one.
    if prefix_space and not text.startswith(" "):
        text = " " + text
    words = GPT2_PATTERN.findall(text)
    ids = []
    for w in words:
        if w not in cache:
            cache[w] = [vocab.get(p, vocab["<unk>"]) for p in bpe(byte_level(w), ranks)]
        ids.extend(cache[w])
    return ids, words


# ---- SentencePiece ---------------------------------------------------------------------------

def train_spm(corpus, prefix, model_type, deberta):
    ids = (dict(pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2,
                eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]") if deberta else
           dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1))
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type=model_type,
        vocab_size=1000 if model_type == "unigram" else 800, character_coverage=0.9995,
        input_sentence_size=8000, shuffle_input_sentence=True, seed_sentencepiece_size=50000,
        num_threads=2, minloglevel=2, **ids)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


# ---- running and comparing -------------------------------------------------------------------

def run_driver(driver, directory, strings):
    payload = "".join(json.dumps(s) + "\n" for s in strings)
    proc = subprocess.run([driver, directory], input=payload.encode(), capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {driver} {directory}: exit {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')}")
    lines = proc.stdout.decode().split("\n")[:-1]  # not splitlines(): U+2028 is in the text
    return json.loads(lines[0]), [json.loads(l) for l in lines[1:]]


def compare(name, driver, directory, strings, reference, specials):
    got_specials, got = run_driver(driver, directory, strings)
    problems = [f"specials {got_specials} != {specials}"] if got_specials != specials else []
    diffs = 0
    for s, g in zip(strings, got):
        ids, words = reference(s)
        if g["ids"] != ids or (words is not None and g["words"] != words):
            diffs += 1
            if len(problems) < 5:
                problems.append(f"{json.dumps(s)}:\n  tune  {g}\n  python {{'ids': {ids}, "
                                f"'words': {words}}}")
    if len(got) != len(strings):
        problems.append(f"{len(got)} outputs for {len(strings)} strings")
    print(f"{name}: {len(strings)} strings, {diffs} differences")
    for p in problems:
        print("  " + p)
    return not problems


# ---- sentence pairs: Hugging Face tokenizers' post-processors and truncate_pair, transcribed ----

def hf_pair_keep(n_a, n_b, room, strategy):
    """What each text keeps (tokenizers' truncate_pair); None where tokenizers raises."""
    if n_a + n_b <= room:
        return n_a, n_b
    if strategy == "longest_first":
        n1, n2 = n_a, n_b
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = n1 if n1 > room else max(n1, room - n1)
        if n1 + n2 > room:
            n1 = room // 2
            n2 = n1 + room % 2
        if swap:
            n1, n2 = n2, n1
        return min(n_a, n1), min(n_b, n2)
    removed = n_a + n_b - room
    if strategy == "only_first":
        return None if n_a <= removed else (n_a - removed, n_b)
    return None if n_b <= removed else (n_a, n_b - removed)


def pair_reference(single, specials, roberta):
    """tokenizer(a, b, truncation=..., max_length=...)'s input_ids and token_type_ids: BERT's
    (and DeBERTa-v3's) template [CLS] A [SEP] B [SEP] with types 0 then 1, RoBERTa's (and
    XLM-R's) <s> A </s></s> B </s> (types not compared: those models have none)."""
    cls, sep = specials["cls"], specials["sep"]
    added = 4 if roberta else 3

    def encode(case):
        a, b = single(case["a"])[0], single(case["b"])[0]
        keep = hf_pair_keep(len(a), len(b), case["max_length"] - added, case["truncation"])
        a, b = a[:keep[0]], b[:keep[1]]
        if roberta:
            return [cls] + a + [sep, sep] + b + [sep], None
        return [cls] + a + [sep] + b + [sep], [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return encode


def pair_cases(rng, strings, single, n):
    """n pairs of the strings with random lengths and strategies that tokenizers accepts."""
    cases = []
    while len(cases) < n:
        a, b = rng.choice(strings), rng.choice(strings)
        case = {"a": a, "b": b, "max_length": rng.randint(5, 48),
                "truncation": rng.choice(["longest_first", "only_first", "only_second"])}
        la, lb = len(single(a)[0]), len(single(b)[0])
        if hf_pair_keep(la, lb, case["max_length"] - 4, case["truncation"]) is None or \
                hf_pair_keep(la, lb, case["max_length"] - 3, case["truncation"]) is None:
            case["truncation"] = "longest_first"
        cases.append(case)
    return cases


def compare_pairs(name, driver, directory, cases, reference):
    _, got = run_driver(driver, directory, cases)
    diffs, problems = 0, []
    for case, g in zip(cases, got):
        ids, types = reference(case)
        if g["ids"] != ids or (types is not None and g["types"] != types):
            diffs += 1
            if len(problems) < 5:
                problems.append(f"{json.dumps(case)}:\n  tune  {g}\n  python {ids} {types}")
    if len(got) != len(cases):
        problems.append(f"{len(got)} outputs for {len(cases)} pairs")
    cut = sum(1 for c in cases
              if len(reference(c)[0]) == c["max_length"])
    print(f"{name} pairs: {len(cases)} pairs ({cut} cut to max_length), {diffs} differences")
    for p in problems:
        print("  " + p)
    return not problems


def wordpiece_dirs(root, rng, train_texts):
    vocab_list = make_wordpiece_vocab(rng, train_texts)
    vocab = {t: i for i, t in enumerate(vocab_list)}
    cases = []
    for name, lower, chinese in (("uncased", True, True), ("cased", False, True),
                                 ("uncased-nocjk", True, False)):
        d = os.path.join(root, "wordpiece-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in vocab_list))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": lower, "tokenize_chinese_chars": chinese}, f)
        ref = (lambda s, lo=lower, ch=chinese: (
            wordpiece(basic_tokenize(s, lo, lo, ch), vocab, "[UNK]"),
            list(basic_tokenize(s, lo, lo, ch))))
        cases.append(("WordPiece vocab.txt " + name, d, ref))
    d = os.path.join(root, "wordpiece-json")
    os.makedirs(d)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"version": "1.0", "added_tokens": [],
                   "normalizer": {"type": "BertNormalizer", "clean_text": True,
                                  "handle_chinese_chars": True, "strip_accents": None,
                                  "lowercase": True},
                   "pre_tokenizer": {"type": "BertPreTokenizer"},
                   "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]],
                                      "cls": ["[CLS]", vocab["[CLS]"]]},
                   "model": {"type": "WordPiece", "unk_token": "[UNK]",
                             "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                             "vocab": vocab}}, f, ensure_ascii=False)
    cases.append(("WordPiece tokenizer.json", d,
                  lambda s: (wordpiece(basic_tokenize(s, True, True, True), vocab, "[UNK]"),
                             list(basic_tokenize(s, True, True, True)))))
    specials = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4, "vocab_size": len(vocab)}
    return [(n, d, r, specials) for n, d, r in cases]


def bpe_dirs(root, train_texts):
    merges = train_byte_bpe(train_texts, 300)
    ranks = {m: i for i, m in enumerate(merges)}
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + sorted(set(BYTE_ALPHABET.values()))
    tokens += [a + b for a, b in merges if a + b not in tokens] + ["<mask>"]
    vocab = {t: i for i, t in enumerate(tokens)}
    specials = {"pad": 1, "unk": 3, "cls": 0, "sep": 2, "mask": len(tokens) - 1,
                "vocab_size": len(tokens)}
    d = os.path.join(root, "bpe")
    os.makedirs(d)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    dj = os.path.join(root, "bpe-json")
    os.makedirs(dj)
    with open(os.path.join(dj, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"version": "1.0", "normalizer": None,
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True,
                                     "trim_offsets": True, "use_regex": True},
                   "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2],
                                      "cls": ["<s>", 0]},
                   "model": {"type": "BPE", "unk_token": None, "vocab": vocab,
                             "merges": [[a, b] for a, b in merges]}}, f, ensure_ascii=False)
    cache = {}
    return [("byte-level BPE vocab.json", d, lambda s: byte_bpe_ids(s, ranks, vocab, cache),
             specials),
            ("byte-level BPE tokenizer.json (add_prefix_space)", dj,
             lambda s: (byte_bpe_ids(s, ranks, vocab, cache, True)[0], None), specials)]


def spm_dirs(root, fortunes):
    corpus = os.path.join(root, "fortunes.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(fortunes) + "\n")
    cases = []
    d = os.path.join(root, "deberta")
    os.makedirs(d)
    sp = train_spm(corpus, os.path.join(d, "spm"), "unigram", deberta=True)
    n = sp.get_piece_size()
    cases.append(("SentencePiece unigram spm.model (DeBERTa ids)", d,
                  lambda s, sp=sp: (sp.encode(s), sp.encode(s, out_type=str)),
                  {"pad": 0, "cls": 1, "sep": 2, "unk": 3, "mask": n, "vocab_size": n + 1}))
    d = os.path.join(root, "xlmr")
    os.makedirs(d)
    sp2 = train_spm(corpus, os.path.join(d, "sentencepiece.bpe"), "bpe", deberta=False)
    n2 = sp2.get_piece_size()
    for f in glob.glob(os.path.join(d, "*.vocab")):
        os.remove(f)
    cases.append(("SentencePiece BPE sentencepiece.bpe.model (XLM-R fairseq ids)", d,
                  lambda s, sp=sp2: ([3 if i == 0 else i + 1 for i in sp.encode(s)],
                                     sp.encode(s, out_type=str)),
                  {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": n2 + 1, "vocab_size": n2 + 2}))
    return cases


def pool_counts(strings):
    def has(s, ranges):
        return any(lo <= ord(c) <= hi for c in s for lo, hi in ranges)
    return [(kind, sum(1 for s in strings if has(s, ranges))) for kind, ranges in POOLS.items()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--strings", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=3000)
    args = parser.parse_args()
    fortunes = fortune_lines()
    if not fortunes:
        print(f"SKIPPED: no fortunes in {FORTUNES} (Debian: fortunes)")
        return 77
    rng = random.Random(args.seed)
    fortune_words = [w for l in fortunes[:5000] for w in l.split()]
    train_texts = fortunes[:3000] + [random_string(rng, fortune_words) for _ in range(3000)]
    strings = [random_string(rng, fortune_words) for _ in range(args.strings)]
    print(f"{len(strings)} random strings; how many contain each kind of character:")
    print("  " + ", ".join(f"{kind} {count}" for kind, count in pool_counts(strings)))
    ok = True
    with tempfile.TemporaryDirectory() as root:
        cases = (wordpiece_dirs(root, rng, train_texts) + bpe_dirs(root, fortunes[:800])
                 + spm_dirs(root, fortunes))
        for name, directory, reference, specials in cases:
            ok = compare(name, args.driver, directory, strings, reference, specials) and ok
            roberta = "BPE" in name  # byte-level BPE and XLM-R's SentencePiece BPE
            pairs = pair_cases(random.Random(args.seed + 1), strings[:2000], reference,
                               args.pairs)
            ok = compare_pairs(name, args.driver, directory, pairs,
                               pair_reference(reference, specials, roberta)) and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

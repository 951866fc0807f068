"""A Qwen3.5-style tokenizer built from scratch for the oracle tests, and the strings to test.

The real Qwen3.5 vocabulary (248k tokens) cannot be downloaded here, so the tests build one
with the same structure: HF `tokenizers` BPE, the qwen35 Split regex, ByteLevel without
prefix space, a vocabulary trained on generated multilingual text, the family's control
tokens (<|im_start|> ...) and user-defined added tokens (<think> ...), exported to GGUF
metadata the way convert_hf_to_gguf.py does (tokenizer.ggml.*). HF tokenizers is then the
oracle for `strata tokenize` on that GGUF.

Run as a script to build a large vocabulary for the throughput benchmark:
    python tests/oracle/tokenizer_fixture.py --bench-vocab OUT.gguf --vocab-size 160000
"""
from __future__ import annotations

import argparse
import functools
import json
import pathlib
import random
import tempfile
import unicodedata

import gguf
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# The Qwen3.5 tokenizer.json pre-tokenizer (llama.cpp LLAMA_VOCAB_PRE_TYPE_QWEN35).
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Special (control) tokens and non-special added (user-defined) tokens of the family.
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                  "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|fim_prefix|>", "<|fim_pad|>"]
USER_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]

ENGLISH = ("the of and to in is it you that he was for on are with as I his they be at one have this from or "
           "had by hot word but what some we can out other were all there when up use your how said an each "
           "she which do their time if will way about many then them write would like so these her long make "
           "thing see him two has look more day could go come did number sound no most people my over know "
           "water than call first who may down side been now find any new work part take get place made live "
           "where after back little only round man year came show every good me give our under name very "
           "through just form sentence great think say help low line differ turn cause much mean before move "
           "right boy old too same tell does set three want air well also play small end put home read hand "
           "port large spell add even land here must big high such follow act why ask men change went light "
           "kind off need house picture try us again animal point mother world near build self earth father "
           "model tokenizer engine inference kernel memory throughput latency expert router attention").split()
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if err != nil {\n\treturn nil, err\n}", "const auto& [key, value] : map", "SELECT * FROM users WHERE id = 42;",
        "x = {'a': 1, \"b\": [1, 2, 3]}", "#include <vector>\n", "    # comment: it's fine\n", "fn main() -> i32 { 0 }",
        "console.log(`value=${v}`);", "std::vector<float> w(4096, 0.0f);", "a->b && c || !d", "/* block */ // line",
        "lambda x: x**2 + 1e-6", "@decorator\nclass Foo(Bar):\n    pass\n", "$ ls -la | grep '.py' > out.txt"]
CJK_BASES = [(0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)]
CJK_PUNCT = "，。！？、：；「」『』（）【】"
ARABIC_LETTERS = [chr(c) for c in range(0x0621, 0x064B)]
ARABIC_MARKS = [chr(c) for c in range(0x064B, 0x0653)]
DEVANAGARI = [chr(c) for c in range(0x0915, 0x0939)]
DEVANAGARI_MARKS = [chr(c) for c in (0x093E, 0x093F, 0x0940, 0x0941, 0x0947, 0x094B, 0x094D, 0x0902)]
THAI = [chr(c) for c in range(0x0E01, 0x0E2F)] + [chr(c) for c in (0x0E31, 0x0E34, 0x0E35, 0x0E48, 0x0E49)]
EMOJI = ["😀", "👍", "👍🏽", "🎉", "❤️", "🇫🇷", "🇯🇵", "👨‍👩‍👧", "🧑🏿‍💻", "🏳️‍🌈", "✅", "🔥", "🤖", "☕", "🙂"]
COMBINING = [chr(c) for c in range(0x0300, 0x0370)] + ["\u20dd", "\u0489", "\u1ab0", "\ufe20"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "\u3000", "\xa0", "\u2028", "\x0b", "\x0c", "\x85", "    ", "\r"]


def _cjk(rng: random.Random, n: int) -> str:
    lo, hi = rng.choice(CJK_BASES)
    # Frequent characters are the low end of each block; bias toward them so merges form.
    return "".join(chr(lo + int((hi - lo) * rng.random() ** 4)) for _ in range(n))


def _word(rng: random.Random, kind: str) -> str:
    if kind == "en":
        w = rng.choice(ENGLISH)
        return w.capitalize() if rng.random() < 0.15 else (w.upper() if rng.random() < 0.03 else w)
    if kind == "cjk":
        return _cjk(rng, rng.randint(1, 6)) + (rng.choice(CJK_PUNCT) if rng.random() < 0.3 else "")
    if kind == "ar":
        w = "".join(rng.choice(ARABIC_LETTERS) + (rng.choice(ARABIC_MARKS) if rng.random() < 0.3 else "")
                    for _ in range(rng.randint(2, 7)))
        return w
    if kind == "hi":
        return "".join(rng.choice(DEVANAGARI) + (rng.choice(DEVANAGARI_MARKS) if rng.random() < 0.6 else "")
                       for _ in range(rng.randint(1, 5)))
    if kind == "th":
        return "".join(rng.choice(THAI) for _ in range(rng.randint(2, 8)))
    if kind == "num":
        return rng.choice([str(rng.randint(0, 10**rng.randint(1, 9))), f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 4)}f}",
                           f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/20{rng.randint(10, 30)}", f"{rng.randint(0, 100)}%",
                           f"{rng.random():.3e}", f"{rng.randint(1000, 99999):,}", "١٢٣", "٤٥٦٧"])
    if kind == "emoji":
        return rng.choice(EMOJI)
    if kind == "mark":
        base = rng.choice("aeiouncszAEIOU")
        return base + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 3)))
    raise ValueError(kind)


def generate_line(rng: random.Random) -> str:
    """One line of mixed text, mostly English with runs of the other scripts."""
    if rng.random() < 0.15:
        return rng.choice(CODE)
    main = rng.choices(["en", "cjk", "ar", "hi", "th"], weights=[60, 15, 8, 5, 3])[0]
    parts = []
    for _ in range(rng.randint(3, 25)):
        kind = main if rng.random() < 0.8 else rng.choice(["en", "num", "emoji", "mark", "cjk"])
        parts.append(_word(rng, kind))
        if rng.random() < 0.1:
            parts.append(rng.choice([",", ".", "!", "?", ";", ":", " -", "...", "'s", "'t", "n't", "\"", "(", ")"]))
    sep = "" if main in ("cjk", "th") else " "
    line = sep.join(parts)
    if rng.random() < 0.2:
        line += rng.choice(SPACES)
    return line


def generate_corpus(seed: int, n_lines: int) -> list[str]:
    rng = random.Random(seed)
    return [generate_line(rng) for _ in range(n_lines)]


def build_hf_tokenizer(vocab_size: int, corpus) -> Tokenizer:
    """BPE trained on the corpus with the Qwen3.5 pre-tokenizer; added tokens appended after the
    trained vocabulary, as in the real vocabulary (ids 248044 and up)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens(CONTROL_TOKENS)
    tok.add_tokens(USER_TOKENS)
    return tok


def export_gguf(tok: Tokenizer, path: str, chat_template: str | None = None, add_bos: bool = False,
                add_eos: bool = False) -> None:
    """Writes the tokenizer.ggml.* keys as convert_hf_to_gguf.py does for a gpt2/qwen35 vocabulary."""
    vocab = tok.get_vocab(with_added_tokens=True)
    n = max(vocab.values()) + 1
    tokens = [""] * n
    for text, i in vocab.items():
        tokens[i] = text
    added = tok.get_added_tokens_decoder()
    types = []
    for i in range(n):
        if i in added:
            types.append(gguf.TokenType.CONTROL if added[i].special else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    w = gguf.GGUFWriter(path, arch="qwen4exp")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(add_eos)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# The vocabulary the oracle tests share: small enough to train in seconds on two cores, large
# enough (6,000 tokens, ~5,700 merges) that merges cover every script in the corpus.
TRAIN_LINES = 15000
VOCAB_SIZE = 6000


@functools.lru_cache(maxsize=None)
def trained_fixture():
    """(HF tokenizer, GGUF path), trained and written once per test process."""
    tok = build_hf_tokenizer(VOCAB_SIZE, generate_corpus(1, TRAIN_LINES))
    path = pathlib.Path(tempfile.mkdtemp(prefix="strata-tok-")) / "tokenizer.gguf"
    export_gguf(tok, str(path))
    return tok, path


# ----------------------------------------------------------------------------------------
# Strings to test
# ----------------------------------------------------------------------------------------

def _assigned_codepoints() -> list[int]:
    """Code points assigned in Python's Unicode (14.0 for 3.11): every Unicode version since
    agrees on their categories, unlike characters added later, which ICU and Oniguruma may
    know differently."""
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.category(chr(cp)) != "Cn":
            out.append(cp)
    return out


# Large blocks of one category: every 16th code point is enough to cover them.
_UNIFORM_BLOCKS = ("CJK UNIFIED IDEOGRAPH", "HANGUL SYLLABLE", "TANGUT", "CJK COMPATIBILITY IDEOGRAPH",
                   "YI SYLLABLE", "KHITAN", "NUSHU", "EGYPTIAN HIEROGLYPH", "CUNEIFORM", "ANATOLIAN HIEROGLYPH",
                   "BAMUM LETTER", "LINEAR B", "VAI SYLLABLE", "CANADIAN SYLLABICS")


def coverage_codepoints() -> list[int]:
    """Every assigned code point whose category could differ from its neighbours', with the big
    one-category blocks (ideographs, syllables, private use) sampled."""
    out = []
    for cp in _assigned_codepoints():
        c = chr(cp)
        if unicodedata.category(c) == "Co":
            if cp % 4096 == 0:
                out.append(cp)
            continue
        name = unicodedata.name(c, "")
        if name.startswith(_UNIFORM_BLOCKS) and cp % 16:
            continue
        out.append(cp)
    return out


def _random_unicode(rng: random.Random, pool: list[int]) -> str:
    n = rng.randint(1, 40)
    return "".join(chr(rng.choice(pool)) if rng.random() < 0.8 else rng.choice(" \n\t'aS1.") for _ in range(n))


def _with_specials(rng: random.Random) -> str:
    bits = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.3:
            bits.append(rng.choice(CONTROL_TOKENS + USER_TOKENS))
        elif r < 0.4:
            t = rng.choice(CONTROL_TOKENS + USER_TOKENS)
            bits.append(t[: rng.randint(1, len(t) - 1)])  # a prefix that must not match
        else:
            bits.append(_word(rng, rng.choice(["en", "cjk", "num", "emoji"])))
        if rng.random() < 0.5:
            bits.append(rng.choice(SPACES))
    return "".join(bits)


def _whitespace(rng: random.Random) -> str:
    return "".join(rng.choice(SPACES) * rng.randint(1, 4) + (_word(rng, "en") if rng.random() < 0.6 else "")
                   for _ in range(rng.randint(1, 10)))


def _invalid_utf8(rng: random.Random) -> bytes:
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\x81", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
           b"\xf5", b"\xff", b"\xfe", b"\xe2\x82", b"\xf0\x9f\x91", b"\xc3", b"\xe4\xbd"]
    out = b""
    for _ in range(rng.randint(1, 8)):
        out += rng.choice(bad) if rng.random() < 0.5 else _word(rng, rng.choice(["en", "cjk", "emoji"])).encode()
        if rng.random() < 0.4:
            out += rng.choice([b" ", b"\n", b"!", b"'s", b"1"])
    return out


def oracle_strings(seed: int = 1234) -> list[tuple[str, bytes]]:
    """(category, bytes) pairs: at least 2,000 strings over every category the issue names."""
    rng = random.Random(seed)
    pool = _assigned_codepoints()
    cases: list[tuple[str, bytes]] = []

    def add(category: str, count: int, make):
        for _ in range(count):
            s = make()
            cases.append((category, s if isinstance(s, bytes) else s.encode("utf-8")))

    add("english", 200, lambda: " ".join(_word(rng, "en") for _ in range(rng.randint(1, 30))) + rng.choice(["", ".", "!\n"]))
    add("code", 150, lambda: "".join(rng.choice(CODE) for _ in range(rng.randint(1, 4))))
    add("numbers", 150, lambda: " ".join(_word(rng, "num") for _ in range(rng.randint(1, 8))))
    add("cjk", 150, lambda: "".join(_word(rng, "cjk") for _ in range(rng.randint(1, 8))))
    add("arabic", 100, lambda: " ".join(_word(rng, "ar") for _ in range(rng.randint(1, 8))))
    add("indic_thai", 100, lambda: " ".join(_word(rng, rng.choice(["hi", "th"])) for _ in range(rng.randint(1, 8))))
    add("emoji", 120, lambda: " ".join(_word(rng, rng.choice(["emoji", "emoji", "en"])) for _ in range(rng.randint(1, 8))))
    add("combining", 150, lambda: "".join(rng.choice([_word(rng, "mark"), rng.choice(COMBINING), " ",
                                                      unicodedata.normalize("NFD", "Ångström café")])
                                          for _ in range(rng.randint(1, 8))))
    add("whitespace", 150, lambda: _whitespace(rng))
    add("special_tokens", 150, lambda: _with_specials(rng))
    add("mixed_lines", 150, lambda: "\n".join(generate_line(rng) for _ in range(rng.randint(1, 5))))
    add("random_unicode", 400, lambda: _random_unicode(rng, pool))
    add("invalid_utf8", 120, lambda: _invalid_utf8(rng))
    fixed = ["", " ", "\n", "a", "'s", "'S", "'ſ", "a'ſt", "it's", "I'M", "you'LL", " '", "'''s", "\r\n\r\n", "  \n  x",
             "x" * 1000, " " * 500, "\n" * 300, "\t" * 64 + "x", "ab" * 400, "😀" * 100, "你好" * 300,
             "\u0301" * 20, " \u0301a", "\u00a0\u00a0x", "a\u0085b\u2028c\u2029d", "\x1c\x1d\x1e\x1f x",
             "<|im_start|>user\nhi<|im_end|>\n", "<think>\n\n</think>\n\n", "<|im_start|<|im_end|>>", "<<think>>"]
    for s in fixed:
        cases.append(("fixed", s.encode("utf-8")))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-vocab", required=True, help="GGUF to write")
    ap.add_argument("--vocab-size", type=int, default=160000)
    ap.add_argument("--corpus", nargs="*", default=[], help="extra text files to train on")
    ap.add_argument("--lines", type=int, default=400000, help="generated lines")
    args = ap.parse_args()

    def corpus():
        yield from generate_corpus(7, args.lines)
        for path in args.corpus:
            with open(path, encoding="utf-8", errors="replace") as f:
                yield from f

    tok = build_hf_tokenizer(args.vocab_size, corpus())
    export_gguf(tok, args.bench_vocab)
    n_merges = len(json.loads(tok.to_str())["model"]["merges"])
    print(f"wrote {args.bench_vocab}: {tok.get_vocab_size()} tokens, {n_merges} merges")


if __name__ == "__main__":
    main()

"""`strata tokenize` against HF tokenizers on a Qwen3.5-style vocabulary trained here.

The vocabulary is trained in the test session (tokenizer_fixture.py), exported to GGUF
metadata, and both tokenizers then encode 2,000+ strings: English, code, numbers, CJK,
Arabic, Indic and Thai, emoji, combining marks, whitespace and newline runs, special tokens
inside text, random Unicode and invalid UTF-8. Ids must be identical and decoding must give
back the exact bytes.

HF tokenizers takes Python str, which cannot hold invalid UTF-8. For those strings the
expected ids are built from HF's own parts: its pre-tokenizer splits the text with each
invalid byte standing as U+FFFD (the class Strata gives an invalid byte), and its BPE model
merges each piece's original bytes. The same construction is checked against tokenizer.encode
on valid strings, so it is the same oracle.
"""
import functools
import json

import pytest

import tokenizer_fixture as fx
from conftest import run_strata

def trained():
    return fx.trained_fixture()


def byte_level(b: bytes) -> str:
    table = byte_level_table()
    return "".join(table[x] for x in b)


@functools.lru_cache(maxsize=None)
def byte_level_table():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + n)
            n += 1
    return table


def expected_ids_from_parts(tok, data: bytes) -> list[int]:
    """Split with HF's pre-tokenizer (invalid bytes as U+FFFD), merge with HF's BPE model."""
    text = data.decode("utf-8", errors="surrogateescape")  # one surrogate per invalid byte
    units = [bytes([ord(c) - 0xDC00]) if 0xDC80 <= ord(c) <= 0xDCFF else c.encode() for c in text]
    probe = "".join("\ufffd" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
    split = tok.pre_tokenizer.pre_tokenize_str(probe)  # (piece, (start, end)) in characters
    ids = []
    for _, (start, end) in split:
        piece = b"".join(units[start:end])
        ids.extend(t.id for t in tok.model.tokenize(byte_level(piece)))
    return ids


@pytest.fixture(scope="module")
def oracle():
    tok, path = trained()
    cases = fx.oracle_strings()
    return tok, path, cases


def run_batch(strata_bin, gguf_path, cases, tmp_path, *flags):
    batch = tmp_path / "batch.hex"
    batch.write_text("".join(data.hex() + "\n" for _, data in cases))
    proc = run_strata(strata_bin, "tokenize", "-m", gguf_path, "--batch", batch, *flags)
    lines = proc.stdout.splitlines()
    assert len(lines) == len(cases)
    return [json.loads(line) for line in lines]


def test_at_least_2000_strings_cover_every_category(oracle):
    _, _, cases = oracle
    assert len(cases) >= 2000
    categories = {c for c, _ in cases}
    for needed in ["english", "code", "numbers", "cjk", "arabic", "emoji", "combining", "whitespace",
                   "special_tokens", "random_unicode", "invalid_utf8"]:
        assert needed in categories


def test_oracle_construction_matches_hf_encode(oracle):
    """The parts-based oracle used for invalid UTF-8 agrees with tokenizer.encode where both apply
    (valid strings without added tokens)."""
    tok, _, cases = oracle
    checked = 0
    for category, data in cases:
        if category in ("invalid_utf8", "special_tokens", "fixed"):
            continue
        assert expected_ids_from_parts(tok, data) == tok.encode(data.decode()).ids, data
        checked += 1
    assert checked > 1500


def test_ids_equal_hf_and_decode_round_trips(strata_bin, oracle, tmp_path):
    tok, path, cases = oracle
    results = run_batch(strata_bin, path, cases, tmp_path)
    mismatches = []
    for (category, data), got in zip(cases, results):
        try:
            expected = tok.encode(data.decode("utf-8")).ids
        except UnicodeDecodeError:
            expected = expected_ids_from_parts(tok, data)
        if got["ids"] != expected:
            mismatches.append((category, data, got["ids"], expected))
        assert bytes.fromhex(got["decoded_hex"]) == data, (category, data)
    assert not mismatches, f"{len(mismatches)} mismatches; first: {mismatches[:3]}"


def test_hf_decodes_strata_ids(strata_bin, oracle, tmp_path):
    """The other direction: HF's ByteLevel decoder turns Strata's ids back into the text."""
    tok, path, cases = oracle
    valid = [(c, d) for c, d in cases if c not in ("invalid_utf8",)][:500]
    results = run_batch(strata_bin, path, valid, tmp_path)
    for (_, data), got in zip(valid, results):
        assert tok.decode(got["ids"], skip_special_tokens=False) == data.decode()


def test_every_assigned_codepoint_in_context(strata_bin, oracle, tmp_path):
    """Each assigned code point (big one-category blocks sampled) in contexts that exercise every
    class boundary of the regex (letter, mark, digit, space, punctuation, newline), against HF."""
    tok, path, _ = oracle
    pool = fx.coverage_codepoints()
    contexts = ["{c}{c}a1 ", "x{c}\n'{c}", " {c}!{c}\t{c}"]
    cases = []
    for ctx in contexts:
        chunk = []
        for i, cp in enumerate(pool):
            chunk.append(ctx.format(c=chr(cp)))
            if len(chunk) == 512 or i == len(pool) - 1:
                cases.append(("codepoints", "".join(chunk).encode()))
                chunk = []
    results = run_batch(strata_bin, path, cases, tmp_path)
    bad = [data for (_, data), got in zip(cases, results) if got["ids"] != tok.encode(data.decode()).ids]
    assert not bad, f"{len(bad)} of {len(cases)} chunks differ; first: {bad[0][:200]!r}"


def test_cli_prompt_json_and_decode(strata_bin, oracle):
    tok, path, _ = oracle
    text = "Hello <|im_start|>wörld 👍🏽 <think>x</think>\n\n"
    out = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-p", text, "--json").stdout)
    assert out["ids"] == tok.encode(text).ids
    assert out["count"] == len(out["ids"])
    plain = run_strata(strata_bin, "tokenize", "-m", path, "-p", text).stdout.split()
    assert [int(x) for x in plain] == out["ids"]
    decoded = run_strata(strata_bin, "tokenize", "-m", path, "--decode", ",".join(map(str, out["ids"]))).stdout
    assert decoded == text
    # Without special parsing, a control token is plain text (but <think> is still matched).
    raw = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-p", text, "--json", "--no-parse-special").stdout)
    assert tok.get_vocab()["<|im_start|>"] not in raw["ids"]
    assert tok.get_vocab()["<think>"] in raw["ids"]


def test_cli_file_and_empty_prompt(strata_bin, oracle, tmp_path):
    tok, path, _ = oracle
    f = tmp_path / "text.txt"
    text = "\n".join(fx.generate_corpus(5, 200))
    f.write_text(text, encoding="utf-8")
    out = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-f", f, "--json").stdout)
    assert out["ids"] == tok.encode(text).ids
    empty = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-p", "", "--json").stdout)
    assert empty["ids"] == []


def test_add_bos_eos_from_metadata(strata_bin, tmp_path):
    tok, _ = trained()
    path = tmp_path / "bos.gguf"
    fx.export_gguf(tok, str(path), add_bos=True, add_eos=True)
    out = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-p", "hi", "--json").stdout)
    vocab = tok.get_vocab()
    assert out["ids"] == [vocab["<|endoftext|>"], *tok.encode("hi").ids, vocab["<|im_end|>"]]
    bare = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-p", "hi", "--json", "--no-add-special").stdout)
    assert bare["ids"] == tok.encode("hi").ids


def test_bad_inputs_are_errors(strata_bin, oracle, tmp_path):
    _, path, _ = oracle
    proc = run_strata(strata_bin, "tokenize", "-m", path, "--decode", "1,999999999", check=False)
    assert proc.returncode != 0 and "token id" in proc.stderr
    proc = run_strata(strata_bin, "tokenize", "-m", tmp_path / "missing.gguf", "-p", "x", check=False)
    assert proc.returncode != 0


def test_throughput_benchmark(strata_bin, oracle, tmp_path):
    """`--bench` reports MB/s and tokens/s as JSON. The number is printed for the log; the bound
    is loose (CI machines are shared), the real figure is in the report (see the file header
    of tokenizer_fixture.py for the large-vocabulary benchmark)."""
    _, path, _ = oracle
    f = tmp_path / "bench.txt"
    f.write_text("\n".join(fx.generate_corpus(11, 20000)), encoding="utf-8")
    out = json.loads(run_strata(strata_bin, "tokenize", "-m", path, "-f", f, "--bench", "--bench-seconds", "1").stdout)
    print(f"\ntokenizer throughput: {out['mb_per_s']:.1f} MB/s, {out['tokens_per_s']:.0f} tokens/s "
          f"on {out['bytes']} bytes")
    assert out["tokens"] > 0 and out["mb_per_s"] > 2.0

"""`strata run -p`: text in, text out, against the HF tokenizer of the converted checkpoint.

The ids path (`--tokens`, checked against transformers in test_model_oracle.py) is the oracle
here: text mode must tokenize the prompt exactly as HF does, generate the same tokens, and
print exactly the bytes of those tokens (up to the first end-of-generation token). A random
model emits byte tokens that do not form UTF-8, so the comparison is on bytes: the byte-level
symbols of HF's tokens mapped back to the bytes they stand for.
"""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import convert_hf_to_gguf as cv  # noqa: E402
import tiny_models as tm  # noqa: E402
from conftest import run_strata  # noqa: E402
from test_chat_template import render_jinja  # noqa: E402

PROMPTS = ["the cat sat on the mat", "Hello, world! 12345", "naïve café — ünïcödé 東京"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoTokenizer

    root = tmp_path_factory.getbasetemp() / "tiny"
    ck = tm.cached_checkpoint(tm.SPECS["qsa_ple"], root)
    gguf = cv.convert(ck, tmp_path_factory.mktemp("run_text") / "qsa_ple-f32.gguf", "f32")
    return gguf, AutoTokenizer.from_pretrained(ck)


def generate_ids(strata_bin, gguf, ids, n):
    out = run_strata(strata_bin, "run", "-m", gguf, "--tokens", ",".join(map(str, ids)), "-n", n).stdout
    return [int(t) for t in out.strip().split(",")]


BYTE_OF = {sym: b for b, sym in enumerate(tm.byte_symbols())}


def hf_bytes_until_eog(tok, ids):
    out = bytearray()
    for piece, i in zip(tok.convert_ids_to_tokens(ids), ids):
        if i in (tm.EOS, tm.IM_END):
            break
        if piece is None:  # an id past the tokenizer's vocabulary: the converter's "[PADi]" filler, printed as is
            out += f"[PAD{i}]".encode()
        elif i in (tm.IM_START,):
            out += piece.encode()
        else:
            out += bytes(BYTE_OF[c] for c in piece)
    return bytes(out)


def run_text(strata_bin, *args):
    proc = subprocess.run([str(strata_bin), *map(str, args)], capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc


@pytest.mark.parametrize("prompt", PROMPTS)
def test_prompt_text_matches_ids_path(strata_bin, tiny, prompt):
    gguf, tok = tiny
    ids = tok.encode(prompt)
    generated = generate_ids(strata_bin, gguf, ids, 12)
    proc = run_text(strata_bin, "run", "-m", gguf, "-p", prompt, "-n", 12)
    assert proc.stdout == hf_bytes_until_eog(tok, generated) + b"\n"
    assert b"tok/s" in proc.stderr


def test_chat_prompt_is_the_family_template(strata_bin, tiny):
    gguf, tok = tiny
    messages = [{"role": "user", "content": "the cat sat"}]
    rendered = render_jinja(messages, enable_thinking=False)
    generated = generate_ids(strata_bin, gguf, tok.encode(rendered), 6)
    proc = run_text(strata_bin, "run", "-m", gguf, "-p", "the cat sat", "--chat", "--think", "off", "-n", 6)
    assert proc.stdout == hf_bytes_until_eog(tok, generated) + b"\n"


def test_sampling_is_seeded(strata_bin, tiny):
    gguf, _ = tiny
    args = ["run", "-m", gguf, "-p", "the cat", "-n", 10, "--temp", "1.5", "--top-k", "50", "--top-p", "0.95"]
    a = run_text(strata_bin, *args, "--seed", 7).stdout
    b = run_text(strata_bin, *args, "--seed", 7).stdout
    greedy = run_text(strata_bin, "run", "-m", gguf, "-p", "the cat", "-n", 10).stdout
    assert a == b
    seeds = {run_text(strata_bin, *args, "--seed", s).stdout for s in range(6)}
    assert len(seeds | {greedy}) > 1, "sampling at temperature 1.5 never left the greedy path"


@pytest.mark.parametrize("args,needle", [
    (["--tokens", "1,2", "-p", "x"], "exactly one of --tokens and -p"),
    (["-p", "x", "--think", "off"], "--think needs --chat"),
    (["--tokens", "1,2", "--chat"], "need -p"),
    (["-p", "x", "--top-p", "0"], "top_p"),
])
def test_bad_arguments(strata_bin, tiny, args, needle):
    gguf, _ = tiny
    proc = run_strata(strata_bin, "run", "-m", gguf, *args, check=False)
    assert proc.returncode != 0
    assert needle in proc.stderr

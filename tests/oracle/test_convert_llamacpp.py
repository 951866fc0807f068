"""Layout proof: llama.cpp (through llama-cpp-python, whose vendored llama.cpp knows `qwen4exp`) loads the GGUFs
written by tools/convert_hf_to_gguf.py and computes transformers' logits.

llama.cpp (as vendored in llama-cpp-python 0.3.36, llama.cpp commit 0c1e5709 of 2026-10-01) selects QSA cells with
one top-k of width budget + ratio - 1 over cells (gguf-layout.md §4.5a), which differs from transformers' block
selection once a query sees more than budget + ratio - 1 tokens; so prompts stay within that dense range here.
The MTP head is not compared: that llama.cpp has no qwen4exp MTP graph and refuses a file that carries the
MTP block ("wrong number of tensors"), so `mtp_vl` is converted with --no-mtp.
KV cache in F32, flash attention off, one batch per prompt: agreement to LLAMA_REL_TOL = 1e-4 of the largest
logit (measured: about 2e-6).

Skipped when llama-cpp-python is not installed (it builds llama.cpp from source: see the test report).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import convert_hf_to_gguf as cv  # noqa: E402
import tiny_models as tm  # noqa: E402

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed; the llama.cpp layout proof "
                                                     "needs it (pip install llama-cpp-python==0.3.36)")

LLAMA_REL_TOL = 1e-4
GGML_TYPE_F32 = 0
CASES = {  # spec -> prompt lengths, all <= the spec's dense limit
    "qsa_ple": [1, 2, 7, 12, 19],
    "hc2_ratio3": [1, 5, 20, 35],
    "mtp_vl": [1, 4, 9],
}


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "tiny"


@pytest.fixture(scope="module")
def ggufs(tiny_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("llamacpp")
    return {name: cv.convert(tm.cached_checkpoint(tm.SPECS[name], tiny_root), out / f"{name}.gguf", "f32",
                             mtp=False)
            for name in CASES}


@pytest.fixture(scope="module")
def hf_models(tiny_root):
    return {name: tm.load_hf(tm.cached_checkpoint(tm.SPECS[name], tiny_root), tm.SPECS[name]) for name in CASES}


RUNNER = """
import sys, numpy as np, llama_cpp
path, out, tokens = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(",")]
llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1, n_threads_batch=1,
                      logits_all=True, flash_attn=False, type_k=%d, type_v=%d, verbose=False)
llm.eval(tokens)
np.save(out, np.array(llm.scores[:len(tokens)], dtype=np.float32))
""" % (GGML_TYPE_F32, GGML_TYPE_F32)


def llama_logits(path: Path, tokens: list[int]) -> np.ndarray:
    """llama.cpp's logits for every position, from a child process (a crash inside llama.cpp fails one test)."""
    out = path.with_suffix(f".{len(tokens)}.npy")
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(path), str(out), ",".join(map(str, tokens))],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise LlamaCppCrash(f"llama.cpp on {path.name} exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    return np.load(out)


class LlamaCppCrash(AssertionError):
    pass


def cpu_has_amx() -> bool:
    try:
        return " amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def report(label: str, got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    diff, scale = float(np.max(np.abs(got - ref))), float(np.max(np.abs(ref)))
    agree = int(np.sum(got.argmax(-1) == ref.argmax(-1)))
    print(f"llama.cpp {label}: max|diff| {diff:.3e} rel {diff / scale:.2e} argmax {agree}/{len(ref)}")
    return diff, scale


@pytest.mark.parametrize("name,length", [(n, k) for n, ks in CASES.items() for k in ks])
def test_llama_cpp_matches_transformers(name, length, ggufs, hf_models):
    spec = tm.SPECS[name]
    assert length <= spec.dense_limit
    tokens = tm.prompt(length, seed=6000, eos_at=(3, 4))
    got = llama_logits(ggufs[name], tokens)
    ref = tm.hf_logits(hf_models[name], tokens)
    diff, scale = report(f"{name} n={length}", got, ref)
    assert diff <= LLAMA_REL_TOL * scale, f"max |diff| {diff:.3e} > {LLAMA_REL_TOL:g} x {scale:.3e}"


def test_llama_cpp_sparse_rows_with_full_tail(ggufs, hf_models):
    """Past the dense range, this llama.cpp takes budget + ratio - 1 cells: the best whole blocks, the tail, and
    (when the tail is shorter than ratio - 1) cells of one more block. transformers takes whole blocks plus the
    tail only. So rows whose tail holds ratio - 1 tokens agree and the others do not. `qsa_ple` has its only
    attention layer last, so a row's selection affects that row alone."""
    spec = tm.SPECS["qsa_ple"]
    tokens = tm.prompt(64, seed=6100, eos_at=(3, 4, 40))
    got, ref = llama_logits(ggufs["qsa_ple"], tokens), tm.hf_logits(hf_models["qsa_ple"], tokens)
    rows = np.arange(len(tokens))
    same = (rows < spec.dense_limit) | ((rows + 1) % spec.idx_ratio == spec.idx_ratio - 1)
    diff, scale = report("qsa_ple sparse rows with a full tail", got[same], ref[same])
    assert diff <= LLAMA_REL_TOL * scale
    other, _ = report("qsa_ple sparse rows with a short tail (expected to differ)", got[~same], ref[~same])
    assert other > LLAMA_REL_TOL * scale, "llama.cpp now selects like transformers: update gguf-layout.md §4.5a"


@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_llama_cpp_loads_every_outtype(outtype, tiny_root, hf_models, tmp_path):
    """The storage types the converter picks (forced F32, q8_0 -> F16 fallbacks) load and run in llama.cpp; the
    logits stay within the rounding of the type (measured: f16 3e-3, bf16 3e-2, q8_0 8e-2 relative)."""
    spec = tm.SPECS["qsa_ple"]
    path = cv.convert(tm.cached_checkpoint(spec, tiny_root), tmp_path / f"{outtype}.gguf", outtype)
    tokens = tm.prompt(spec.dense_limit, seed=6000, eos_at=(3, 4))
    try:
        got = llama_logits(path, tokens)
    except LlamaCppCrash:
        if outtype == "q8_0" and cpu_has_amx():
            pytest.xfail("llama.cpp built for an AMX CPU crashes while repacking these small Q8_0 tensors into its "
                         "AMX buffer (a ggml bug; a build without AMX, e.g. CMAKE_ARGS=-DGGML_NATIVE=OFF, runs them)")
        raise
    ref = tm.hf_logits(hf_models["qsa_ple"], tokens)
    diff, scale = report(f"qsa_ple {outtype}", got, ref)
    assert diff <= 0.2 * scale

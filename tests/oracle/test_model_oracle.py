"""Model oracle: Strata's logits against transformers' on tiny random Qwen4Exp checkpoints.

Each tiny checkpoint (tiny_models.py) is converted to an f32 GGUF by tools/convert_hf_to_gguf.py and run with
`strata run -m FILE --tokens ID,ID,... [-n N] --logits-out F.npy` (float32 [rows, vocab]: one row per prompt
position, then one per generated step). transformers runs the same token ids in fp32 with eager attention and
eager experts. Checks:

* prefill: every position of prompts of 1 to 161 tokens (dense and sparse QSA, chunk boundaries of the chunked
  GDN at 64 and 128, EOS inside the prompt so the PLE n-gram window resets) agrees to 1e-4 of the largest logit;
* prefill + greedy decode with -n N equals one pass over prompt + generated tokens (Strata and transformers);
* the chunked GDN equals the recurrent form (Strata's forced-recurrent option, $STRATA_GDN_RECURRENT_FLAG,
  default `--no-chunked`);
* the MTP head (`--mtp-logits-out`): row t is the draft for position t + 2 from the trunk's wide residual at t and
  token t + 1, at RoPE position t, attending to MTP rows 0..t. The oracle is assembled from transformers'
  own decoder-layer, norm and hyper-connection modules (model.md §9, hidden pre-norm over all hc*hidden values);
* quantized experts: a GGUF whose routed-expert tensors hold random valid blocks of IQ2_XXS, IQ2_XS, IQ3_XXS,
  IQ3_S, IQ1_M, Q2_K, Q4_K, Q5_K, Q2_0, Q5_0, Q5_1 and IQ4_NL gives transformers' logits on the dequantized
  weights (dequantized independently in numpy, dequant_np.py).

Every test here needs `strata run`; without it they fail with a message saying so (never skip). Extra arguments
for every run can be given in $STRATA_RUN_ARGS. Each comparison is reported (max |diff|, relative, argmax
agreement) in an "oracle report" section of the pytest output.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import convert_hf_to_gguf as cv  # noqa: E402
import dequant_np as dq  # noqa: E402
import tiny_models as tm  # noqa: E402
from conftest import run_strata  # noqa: E402

REL_TOL = 1e-4          # fp32 agreement, relative to the largest |logit| of the compared rows
RECURRENT_FLAG = os.environ.get("STRATA_GDN_RECURRENT_FLAG", "--no-chunked")
EXTRA_ARGS = shlex.split(os.environ.get("STRATA_RUN_ARGS", ""))
ORACLE_SPECS = ["qsa_ple", "hc2_ratio3", "mtp_vl", "gpu_geom"]
PROMPT_LENGTHS = [1, 2, 7, 19, 20, 33, 64, 65, 100, 129, 161]
EOS_POSITIONS = (5, 6, 40, 97)          # consecutive EOS, EOS mid-window, EOS before a chunk boundary

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------------------

_REPORT: list[str] = []


class _ReportPlugin:
    """Prints every comparison in a final "oracle report" section (captured test output would hide it)."""

    def pytest_terminal_summary(self, terminalreporter):
        if _REPORT:
            terminalreporter.write_sep("-", "oracle report")
            for line in _REPORT:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def oracle_report(request):
    if not request.config.pluginmanager.has_plugin("strata-oracle-report"):
        request.config.pluginmanager.register(_ReportPlugin(), "strata-oracle-report")
    yield


@pytest.fixture(scope="session")
def strata(strata_bin):
    """The strata binary, checked to have the `run` command (fails, not skips, when it does not)."""
    proc = run_strata(strata_bin, "run", "--help", check=False)
    text = (proc.stdout + proc.stderr).lower()
    if proc.returncode != 0 or "--logits-out" not in text:
        pytest.fail(f"{strata_bin} has no usable `run` command (exit {proc.returncode}); the model oracle needs "
                    f"`strata run -m FILE --tokens ... --logits-out F.npy`. Output:\n{proc.stdout}{proc.stderr}")
    return strata_bin


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "tiny"


_GGUF: dict[str, Path] = {}
_HF: dict[str, object] = {}


@pytest.fixture(scope="session")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("oracle_gguf")


def converted(name: str, tiny_root: Path, out_dir: Path) -> Path:
    if name not in _GGUF:
        ck = tm.cached_checkpoint(tm.SPECS[name], tiny_root)
        _GGUF[name] = cv.convert(ck, out_dir / f"{name}-f32.gguf", "f32")
    return _GGUF[name]


def hf_model(name: str, tiny_root: Path):
    if name not in _HF:
        _HF[name] = tm.load_hf(tm.cached_checkpoint(tm.SPECS[name], tiny_root), tm.SPECS[name])
    return _HF[name]


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------

def strata_logits(strata_bin, gguf: Path, tokens: list[int], out: Path, *extra, n_gen: int = 0,
                  flag: str = "--logits-out") -> np.ndarray:
    args = ["run", "-m", gguf, "--tokens", ",".join(map(str, tokens)), "-n", n_gen, flag, out, *EXTRA_ARGS, *extra]
    run_strata(strata_bin, *args)
    arr = np.load(out)
    assert arr.dtype == np.float32 and arr.ndim == 2 and arr.shape[1] == tm.VOCAB, \
        f"{out}: expected float32 [rows, {tm.VOCAB}], got {arr.dtype} {arr.shape}"
    return arr


def compare(label: str, got: np.ndarray, ref: np.ndarray, rel: float = REL_TOL) -> None:
    assert got.shape == ref.shape, f"{label}: shape {got.shape} vs reference {ref.shape}"
    assert np.all(np.isfinite(got)), f"{label}: non-finite values from strata"
    diff = float(np.max(np.abs(got.astype(np.float64) - ref)))
    scale = float(np.max(np.abs(ref)))
    agree = int(np.sum(got.argmax(-1) == ref.argmax(-1)))
    line = (f"{label:44s} rows {ref.shape[0]:4d}  max|diff| {diff:.3e}  rel {diff / scale:.2e}  "
            f"argmax {agree}/{ref.shape[0]}")
    _REPORT.append(line)
    print(line)
    assert diff <= rel * scale, f"{label}: max |diff| {diff:.3e} > {rel:g} x max|logit| {scale:.3e}"


def oracle_prompt(n: int, seed: int = 1000) -> list[int]:
    return tm.prompt(n, seed, EOS_POSITIONS)


# ---------------------------------------------------------------------------------------------------------
# The oracle's own soundness (no strata needed)
# ---------------------------------------------------------------------------------------------------------

MIN_MARGIN = 1e-5       # a top-k cut closer than this could flip under fp32 rounding: pick other seeds


def trunk_prompts() -> list[list[int]]:
    """Every prompt the strata tests below feed to a trunk (decode uses transformers' own greedy continuation)."""
    return ([oracle_prompt(n) for n in PROMPT_LENGTHS] + [oracle_prompt(161, seed=3000)]
            + [oracle_prompt(42, seed=2000)])


@pytest.mark.parametrize("name", ORACLE_SPECS)
def test_oracle_inputs_have_no_selection_ties(name, tiny_root):
    """No QSA block selection or router top-k of the oracle inputs sits on a near-tie, so any engine that computes
    the same scores to fp32 accuracy must select the same blocks and experts."""
    model = hf_model(name, tiny_root)
    with tm.SelectionMargins() as m:
        for tokens in trunk_prompts():
            tm.hf_logits(model, tokens)
        if tm.SPECS[name].mtp:
            oracle = MtpOracle(tm.cached_checkpoint(tm.SPECS[name], tiny_root), model)
            for n in (9, 40):
                tokens = oracle_prompt(n, seed=4000)
                oracle.logits(tokens, tm.hf_logits_and_wide(model, tokens)[1])
    _REPORT.append(f"selection margins {name}: indexer min {min(m.indexer, default=float('inf')):.2e} over "
                   f"{len(m.indexer)} cuts, router min {min(m.router):.2e} over {len(m.router)} calls")
    assert min(m.indexer, default=1.0) > MIN_MARGIN and min(m.router) > MIN_MARGIN


def test_quant_oracle_has_no_selection_ties(quant_case):
    _, model = quant_case
    with tm.SelectionMargins() as m:
        for n in (1, 37, 100):
            tm.hf_logits(model, oracle_prompt(n, seed=5000))
    _REPORT.append(f"selection margins quant: indexer min {min(m.indexer, default=float('inf')):.2e}, "
                   f"router min {min(m.router):.2e}")
    assert min(m.indexer, default=1.0) > MIN_MARGIN and min(m.router) > MIN_MARGIN


# ---------------------------------------------------------------------------------------------------------
# Trunk
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("length", PROMPT_LENGTHS)
@pytest.mark.parametrize("name", ORACLE_SPECS)
def test_prefill_matches_transformers(name, length, strata, tiny_root, gguf_dir, tmp_path):
    tokens = oracle_prompt(length)
    got = strata_logits(strata, converted(name, tiny_root, gguf_dir), tokens, tmp_path / "l.npy")
    ref = tm.hf_logits(hf_model(name, tiny_root), tokens)
    assert got.shape[0] == length, f"expected one row per prompt token ({length}), got {got.shape[0]}"
    compare(f"prefill {name} n={length}", got, ref)


@pytest.mark.parametrize("name", ORACLE_SPECS)
def test_decode_equals_one_pass(name, strata, tiny_root, gguf_dir, tmp_path):
    """Greedy decode after a prefill gives the logits of a single pass over prompt + generated tokens."""
    prompt, n_gen = oracle_prompt(30, seed=2000), 12
    gguf = converted(name, tiny_root, gguf_dir)
    dec = strata_logits(strata, gguf, prompt, tmp_path / "dec.npy", n_gen=n_gen)
    assert dec.shape[0] in (len(prompt) + n_gen - 1, len(prompt) + n_gen), \
        f"-n {n_gen}: expected {len(prompt) + n_gen - 1} or {len(prompt) + n_gen} rows, got {dec.shape[0]}"
    rows = len(prompt) + n_gen - 1                      # the last generated token needs no logits
    generated = dec[len(prompt) - 1:rows].argmax(-1).tolist()
    full = prompt + generated[:n_gen - 1]
    one = strata_logits(strata, gguf, full, tmp_path / "one.npy")
    compare(f"decode vs one pass (strata) {name}", dec[:rows], one[:rows].astype(np.float64))
    compare(f"decode vs one pass (hf) {name}", dec[:rows], tm.hf_logits(hf_model(name, tiny_root), full))


@pytest.mark.parametrize("name", ORACLE_SPECS)
def test_transformers_decode_equals_one_pass(name, tiny_root):
    """The oracle's own consistency (no strata): transformers' cached decode equals its single pass."""
    tokens = oracle_prompt(60, seed=2500)
    model = hf_model(name, tiny_root)
    compare(f"hf decode vs one pass {name}", tm.hf_incremental_logits(model, tokens, 30), tm.hf_logits(model, tokens),
            rel=1e-5)


@pytest.mark.parametrize("name", ["qsa_ple", "hc2_ratio3"])
def test_chunked_gdn_equals_recurrent(name, strata, tiny_root, gguf_dir, tmp_path):
    tokens = oracle_prompt(161, seed=3000)
    gguf = converted(name, tiny_root, gguf_dir)
    chunked = strata_logits(strata, gguf, tokens, tmp_path / "c.npy")
    recurrent = strata_logits(strata, gguf, tokens, tmp_path / "r.npy", RECURRENT_FLAG)
    compare(f"recurrent vs chunked GDN {name}", recurrent, chunked.astype(np.float64))


# ---------------------------------------------------------------------------------------------------------
# MTP head
# ---------------------------------------------------------------------------------------------------------

class MtpOracle:
    """The MTP draft head assembled from transformers' modules and the trunk's own embedding and lm_head."""

    def __init__(self, model_dir: Path, model):
        self.model = model
        self.lm = tm.language_model(model)
        self.cfg = tm.text_config_of(model)
        self.mods = tm.load_mtp_modules(model_dir, self.cfg)

    def hidden_norm(self, x: torch.Tensor, mode: str) -> torch.Tensor:
        w = self.mods["pre_fc_norm_hidden"]
        if mode == "pooled":                                       # SGLang/vLLM: one statistic over hc*hidden
            return w(x)
        H, eps = self.cfg.hidden_size, self.cfg.rms_norm_eps     # llama.cpp's port: one per stream
        g = x.float().reshape(*x.shape[:-1], -1, H)
        g = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + eps)).flatten(-2)
        return g * (1.0 + w.weight.float())

    @torch.no_grad()
    def logits(self, tokens: list[int], wide: np.ndarray, *, hnorm: str = "pooled", dense: bool = False):
        T, H, S = len(tokens) - 1, self.cfg.hidden_size, self.cfg.hc_count
        m = self.mods
        x = torch.from_numpy(wide[:T]).float()[None]                                     # [1, T, S*H]
        e = m["fc_embedding"](m["pre_fc_norm_embedding"](self.lm.embed_tokens(torch.tensor([tokens[1:]]))))
        xs = self.hidden_norm(x, hnorm).reshape(1, T, S, H)
        z = (m["fc_hidden"](xs) + e[:, :, None, :]).reshape(1, T, S * H)
        pos = torch.arange(T)[None, None, :]
        cos, sin = self.lm.rotary_emb(z, pos)
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
        idx = m["layer"].self_attn.indexer
        saved = idx.token_budget, idx.block_topk
        if dense:
            idx.token_budget, idx.block_topk = 1 << 20, 1 << 20
        try:
            out = m["layer"](z, position_embeddings=(cos, sin), attention_mask=mask, conv_mask=None, cache=None)
        finally:
            idx.token_budget, idx.block_topk = saved
        return self.model.lm_head(m["hyper_connection_mixer"](out))[0].float().numpy()


@pytest.mark.parametrize("length", [9, 40])
def test_mtp_head(length, strata, tiny_root, gguf_dir, tmp_path):
    """The reference is model.md §9: hidden pre-norm with one statistic over all hc*hidden values, and the MTP
    layer's attention with its own QSA indexer at the trunk's budget and ratio (transformers' attention module).
    The GGUF gives the MTP block compress ratio 0 (llama.cpp's layout, whose draft attends densely); within the
    dense range (<= budget + ratio - 1 rows) the two coincide, beyond it they do not. The distances to the
    per-stream-norm and dense variants are reported, to name the difference when the test fails."""
    name = "mtp_vl"
    spec = tm.SPECS[name]
    model = hf_model(name, tiny_root)
    tokens = oracle_prompt(length, seed=4000)
    _, wide = tm.hf_logits_and_wide(model, tokens)
    oracle = MtpOracle(tm.cached_checkpoint(spec, tiny_root), model)
    got = strata_logits(strata, converted(name, tiny_root, gguf_dir), tokens, tmp_path / "mtp.npy",
                        flag="--mtp-logits-out")
    assert got.shape[0] >= length - 1, f"expected at least {length - 1} MTP rows, got {got.shape[0]}"
    got = got[:length - 1]
    variants = {(h, d): oracle.logits(tokens, wide, hnorm=h, dense=d) for h in ("pooled", "stream")
                for d in (False, True)}
    if length - 1 <= spec.dense_limit:
        assert np.array_equal(variants[("pooled", False)], variants[("pooled", True)])
    errors = {k: float(np.max(np.abs(got - v))) / float(np.max(np.abs(v))) for k, v in variants.items()}
    _REPORT.append(f"mtp n={length}: relative max|diff| per oracle variant (hnorm, dense): "
                   + ", ".join(f"{k}={v:.2e}" for k, v in errors.items()))
    compare(f"mtp {name} n={length}", got, variants[("pooled", False)])


def test_mtp_head_during_decode(strata, tiny_root, gguf_dir, tmp_path):
    """With -n N the MTP rows continue over the generated tokens: row i drafts from position i and token i + 1."""
    name = "mtp_vl"
    model = hf_model(name, tiny_root)
    prompt, n_gen = oracle_prompt(20, seed=4100), 8
    logits, mtp = tmp_path / "l.npy", tmp_path / "m.npy"
    run_strata(strata, "run", "-m", converted(name, tiny_root, gguf_dir), "--tokens", ",".join(map(str, prompt)),
               "-n", n_gen, "--logits-out", logits, "--mtp-logits-out", mtp, *EXTRA_ARGS)
    rows = len(prompt) + n_gen - 1
    full = prompt + np.load(logits)[len(prompt) - 1:rows].argmax(-1).tolist()          # P + N tokens
    got = np.load(mtp)
    assert got.shape == (rows, tm.VOCAB), f"expected [{rows}, {tm.VOCAB}] MTP rows, got {got.shape}"
    oracle = MtpOracle(tm.cached_checkpoint(tm.SPECS[name], tiny_root), model)
    compare(f"mtp during decode {name}", got, oracle.logits(full, tm.hf_logits_and_wide(model, full)[1]))


# ---------------------------------------------------------------------------------------------------------
# Quantized experts
# ---------------------------------------------------------------------------------------------------------

# layer -> (gate type, up type, down type); gate/up rows are 256 wide, down rows 64
QUANT_PLAN = {0: ("IQ2_XXS", "IQ3_XXS", "Q2_0"), 1: ("IQ3_S", "Q4_K", "Q5_1"), 2: ("IQ2_XS", "Q5_K", "IQ4_NL"),
              3: ("IQ1_M", "Q2_K", "Q5_0")}


@pytest.fixture(scope="module")
def quant_case(tiny_root, gguf_dir):
    """(GGUF with random quantized expert blocks, transformers model holding the dequantized experts)."""
    spec = tm.SPECS["quant"]
    ck = tm.cached_checkpoint(spec, tiny_root)
    model = tm.load_hf(ck, spec)
    rng = np.random.default_rng(77)
    E, F, H = spec.experts, spec.ffn, spec.hidden
    overrides = {}
    for il, types in QUANT_PLAN.items():
        parts = {}
        for part, tname, shape in zip(("gate", "up", "down"), types, ((E, F, H), (E, F, H), (E, H, F))):
            fmt = dq.FORMATS[tname]
            raw, values = dq.random_tensor(fmt, shape, rng, std=1.0 / np.sqrt(shape[-1]))
            overrides[f"blk.{il}.ffn_{part}_exps.weight"] = cv.Override(fmt.type_id, raw, fmt.block, fmt.size)
            parts[part] = values
        tm.replace_experts(model, il, parts["gate"], parts["up"], parts["down"])
    gguf = cv.convert(ck, gguf_dir / "quant-experts.gguf", "f32", overrides=overrides)
    return gguf, model


@pytest.mark.parametrize("length", [1, 37, 100])
def test_quantized_experts_match_dequantized_transformers(length, quant_case, strata, tmp_path):
    gguf, model = quant_case
    tokens = oracle_prompt(length, seed=5000)
    got = strata_logits(strata, gguf, tokens, tmp_path / "q.npy")
    compare(f"quantized experts n={length}", got, tm.hf_logits(model, tokens))

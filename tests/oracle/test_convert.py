"""Converter tests: tools/convert_hf_to_gguf.py against transformers' tiny checkpoints, read back with gguf.

Every GGUF tensor is compared with the transformers parameter it comes from, through an expected-value table
written here independently of the converter (value-head tiling by index arithmetic, +1 gammas, A = -exp(A_log),
the indexer split, gate = first half of gate_up_proj, eh_proj = [fc_embedding | fc_hidden]). Keys are checked
against the HF config. Then: storage types per --outtype, every layer-type spelling, fused vs per-expert experts,
the PLE hash constants against the released values of model.md Appendix A, and the errors for unsupported
checkpoints. No strata binary is needed.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tools"))

import convert_hf_to_gguf as cv  # noqa: E402
import tiny_models as tm  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFReader  # noqa: E402

ARCH = "qwen4exp"


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "tiny"


@pytest.fixture(scope="session")
def checkpoints(tiny_root):
    return {name: tm.cached_checkpoint(spec, tiny_root) for name, spec in tm.SPECS.items()}


@pytest.fixture(scope="session")
def f32_files(checkpoints, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf_f32")
    return {name: cv.convert(d, out / f"{name}.gguf", "f32") for name, d in checkpoints.items()}


def fields(reader: GGUFReader) -> dict:
    return {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}


def tensors(reader: GGUFReader) -> dict:
    return {t.name: t for t in reader.tensors}


# ---------------------------------------------------------------------------------------------------------
# The expected table (independent of the converter)
# ---------------------------------------------------------------------------------------------------------

def hf_state(model_dir: Path, spec: tm.TinySpec) -> dict[str, np.ndarray]:
    """HF parameters and buffers by text-model name (model.* / lm_head / mtp.*), float32 or int64."""
    model = tm.load_hf(model_dir, spec)
    out = {}
    for k, v in model.state_dict().items():
        k = k.replace("model.language_model.", "model.")
        if k.startswith("model.visual."):
            continue
        out[k] = v.detach().numpy()
    if spec.mtp:
        from safetensors.numpy import load_file
        out.update({k: v for k, v in load_file(model_dir / "model.safetensors").items() if k.startswith("mtp.")})
    return out


def tiled_rows(n_k: int, per_k: int, head_dim: int) -> np.ndarray:
    """Row index into the grouped (HF) layout for each row of the tiled (GGUF) layout."""
    heads = np.arange(n_k * per_k)
    grouped_head = (heads % n_k) * per_k + heads // n_k
    return (grouped_head[:, None] * head_dim + np.arange(head_dim)[None, :]).reshape(-1)


def expected(spec: tm.TinySpec, sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """GGUF name -> expected float32 values in numpy order (shape = reversed ne)."""
    F = spec.ffn
    n_k, n_v, d = spec.lin_k_heads, spec.lin_v_heads, spec.lin_head_dim
    per_k, key_dim = n_v // n_k, n_k * d
    v_rows = tiled_rows(n_k, per_k, d)
    head_rows = tiled_rows(n_k, per_k, 1)
    ple_layers = [i - 1 for i in spec.ple_layer_ids]
    exp: dict[str, np.ndarray] = {"token_embd.weight": sd["model.embed_tokens.weight"],
                                  "output.weight": sd["lm_head.weight"]}

    def hc(dst, src, inject=True):
        exp[f"{dst}_norm.weight"] = sd[f"{src}.hc_norm.weight"] + 1
        exp[f"{dst}_down.weight"] = sd[f"{src}.input_mix_weight_down.weight"]
        exp[f"{dst}_up.weight"] = sd[f"{src}.input_mix_weight_up.weight"]
        if inject:
            exp[f"{dst}_inject.weight"] = sd[f"{src}.block_inject_weight.weight"]

    def layer(il, src, attention):
        b = f"blk.{il}"
        hc(f"{b}.hc_attn", f"{src}.attn_hyper_connection")
        hc(f"{b}.hc_ffn", f"{src}.mlp_hyper_connection")
        if attention:
            a = f"{src}.self_attn"
            n_q = spec.idx_heads * spec.idx_dim
            exp.update({f"{b}.attn_q.weight": sd[f"{a}.q_proj.weight"], f"{b}.attn_k.weight": sd[f"{a}.k_proj.weight"],
                        f"{b}.attn_v.weight": sd[f"{a}.v_proj.weight"],
                        f"{b}.attn_output.weight": sd[f"{a}.o_proj.weight"],
                        f"{b}.attn_q_norm.weight": sd[f"{a}.q_norm.weight"] + 1,
                        f"{b}.attn_k_norm.weight": sd[f"{a}.k_norm.weight"] + 1,
                        f"{b}.indexer.q_proj.weight": sd[f"{a}.indexer.index_qk_proj.weight"][:n_q],
                        f"{b}.indexer.k_proj.weight": sd[f"{a}.indexer.index_qk_proj.weight"][n_q:],
                        f"{b}.indexer.q_norm.weight": sd[f"{a}.indexer.q_layernorm.weight"] + 1,
                        f"{b}.indexer.k_norm.weight": sd[f"{a}.indexer.k_layernorm.weight"] + 1})
        else:
            g = f"{src}.linear_attn"
            qkv = sd[f"{g}.in_proj_qkv.weight"]
            conv = sd[f"{g}.conv1d.weight"][:, 0, :]
            exp.update({
                f"{b}.attn_qkv.weight": np.concatenate([qkv[:2 * key_dim], qkv[2 * key_dim:][v_rows]]),
                f"{b}.attn_gate.weight": sd[f"{g}.in_proj_z.weight"][v_rows],
                f"{b}.ssm_conv1d.weight": np.concatenate([conv[:2 * key_dim], conv[2 * key_dim:][v_rows]]),
                f"{b}.ssm_dt.bias": sd[f"{g}.dt_bias"][head_rows],
                f"{b}.ssm_a": (-torch.from_numpy(sd[f"{g}.A_log"]).float().exp()).numpy()[head_rows],
                f"{b}.ssm_alpha.weight": sd[f"{g}.in_proj_a.weight"][head_rows],
                f"{b}.ssm_beta.weight": sd[f"{g}.in_proj_b.weight"][head_rows],
                f"{b}.ssm_norm.weight": sd[f"{g}.norm.weight"],
                f"{b}.ssm_out.weight": sd[f"{g}.out_proj.weight"][:, v_rows]})
        if il in ple_layers:
            p = f"{src}.ple"
            exp.update({f"{b}.ple_key.weight": sd[f"{p}.key_proj.weight"],
                        f"{b}.ple_value.weight": sd[f"{p}.value_proj.weight"],
                        f"{b}.ple_norm_key.weight": sd[f"{p}.norm_key.weight"] + 1,
                        f"{b}.ple_norm_query.weight": sd[f"{p}.norm_query.weight"] + 1,
                        f"{b}.ple_norm_conv.weight": sd[f"{p}.norm_conv.weight"] + 1,
                        f"{b}.ple_conv1d.weight": sd[f"{p}.conv1d.weight"][:, 0, :]})
            exp["per_layer_token_embd.weight"] = sd[f"{p}.ple_embedding.ngram_embedding.weight"]
        m = f"{src}.mlp"
        gu = sd[f"{m}.experts.gate_up_proj"]
        exp.update({f"{b}.ffn_gate_inp.weight": sd[f"{m}.gate.weight"],
                    f"{b}.ffn_gate_exps.weight": gu[:, :F], f"{b}.ffn_up_exps.weight": gu[:, F:],
                    f"{b}.ffn_down_exps.weight": sd[f"{m}.experts.down_proj"],
                    f"{b}.ffn_gate_inp_shexp.weight": sd[f"{m}.shared_expert_gate.weight"][0],
                    f"{b}.ffn_gate_shexp.weight": sd[f"{m}.shared_expert.gate_proj.weight"],
                    f"{b}.ffn_up_shexp.weight": sd[f"{m}.shared_expert.up_proj.weight"],
                    f"{b}.ffn_down_shexp.weight": sd[f"{m}.shared_expert.down_proj.weight"]})

    hc("output_hc", "model.hyper_connection_mixer", inject=False)
    for il in range(spec.layers):
        layer(il, f"model.layers.{il}", (il + 1) % spec.interval == 0)
    if spec.mtp:
        n = spec.layers
        layer(n, "mtp.layers.0", True)
        exp[f"blk.{n}.nextn.eh_proj.weight"] = np.concatenate([sd["mtp.fc_embedding.weight"],
                                                              sd["mtp.fc_hidden.weight"]], axis=1)
        exp[f"blk.{n}.nextn.enorm.weight"] = sd["mtp.pre_fc_norm_embedding.weight"] + 1
        exp[f"blk.{n}.nextn.hnorm.weight"] = sd["mtp.pre_fc_norm_hidden.weight"] + 1
        hc(f"blk.{n}.nextn.hc_head", "mtp.hyper_connection_mixer", inject=False)
    assert all(v.dtype == np.float32 for v in exp.values())
    return exp


def expected_keys(spec: tm.TinySpec, sd: dict[str, np.ndarray]) -> dict:
    k = f"{ARCH}."
    n_blocks = spec.layers + int(spec.mtp)
    is_attn = [(i + 1) % spec.interval == 0 for i in range(spec.layers)]
    r = spec.rotary_dim // 2
    keys = {
        "general.architecture": ARCH, k + "block_count": n_blocks, k + "context_length": 4096,
        k + "embedding_length": spec.hidden, k + "attention.head_count": spec.heads,
        k + "attention.head_count_kv": spec.kv_heads, k + "attention.key_length": spec.head_dim,
        k + "attention.value_length": spec.head_dim, k + "rope.freq_base": spec.rope_theta,
        k + "rope.dimension_count": spec.rotary_dim,
        k + "rope.dimension_sections": [-(-r // 3), -(-(r - 1) // 3), -(-(r - 2) // 3), 0],
        k + "expert_count": spec.experts, k + "expert_used_count": spec.top_k,
        k + "expert_feed_forward_length": spec.ffn, k + "expert_shared_feed_forward_length": spec.shared_ffn,
        k + "ssm.conv_kernel": 4, k + "ssm.state_size": spec.lin_head_dim, k + "ssm.group_count": spec.lin_k_heads,
        k + "ssm.time_step_rank": spec.lin_v_heads, k + "ssm.inner_size": spec.lin_v_heads * spec.lin_head_dim,
        k + "full_attention_interval": spec.interval, k + "hyper_connection.count": spec.hc,
        k + "hyper_connection.low_rank": spec.hc_rank, k + "attention.indexer.head_count": spec.idx_heads,
        k + "attention.indexer.key_length": spec.idx_dim, k + "attention.indexer.top_k": spec.idx_budget,
        k + "attention.compress_ratios": [spec.idx_ratio if a else 0 for a in is_attn] + [0] * int(spec.mtp),
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen35", "tokenizer.ggml.eos_token_id": tm.EOS,
        "tokenizer.ggml.add_bos_token": False,
    }
    if spec.mtp:
        keys[k + "nextn_predict_layers"] = 1
    if spec.ple_layer_ids:
        p = f"model.layers.{spec.ple_layer_ids[0] - 1}.ple.ple_embedding."
        keys.update({k + "ple.layers": [spec.ple_layer_ids[0] - 1], k + "ple.ngram_size": 3,
                     k + "ple.heads_per_ngram": 8, k + "ple.conv_kernel": 4, k + "ple.eos_token_id": spec.ple_eos,
                     k + "embedding_length_per_layer_input": spec.hidden // 16,
                     k + "ple.layer_multipliers": sd[p + "layer_multipliers"].tolist(),
                     k + "ple.head_offsets": sd[p + "ngram_heads_offsets"].tolist(),
                     k + "ple.head_vocab_sizes": sd[p + "ngram_heads_vocab_sizes"].tolist()})
    return keys


# ---------------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(tm.SPECS))
def test_f32_tensors_equal_transformers(name, checkpoints, f32_files):
    spec = tm.SPECS[name]
    sd = hf_state(checkpoints[name], spec)
    exp = expected(spec, sd)
    got = tensors(GGUFReader(f32_files[name]))
    assert sorted(got) == sorted(exp), f"missing {sorted(set(exp) - set(got))}, extra {sorted(set(got) - set(exp))}"
    for n, want in exp.items():
        t = got[n]
        assert t.tensor_type == Q.F32, n
        assert [int(x) for x in t.shape] == list(reversed(want.shape)), n
        np.testing.assert_array_equal(np.asarray(t.data).reshape(want.shape), want, err_msg=n)


@pytest.mark.parametrize("name", list(tm.SPECS))
def test_keys_match_config(name, checkpoints, f32_files):
    spec = tm.SPECS[name]
    sd = hf_state(checkpoints[name], spec)
    got = fields(GGUFReader(f32_files[name]))
    for key, want in expected_keys(spec, sd).items():
        assert key in got, key
        if isinstance(want, float):
            assert got[key] == pytest.approx(want, rel=1e-6), key
        else:
            assert got[key] == want, key
    if not spec.ple_layer_ids:
        assert not [k for k in got if k.startswith(f"{ARCH}.ple.")]
    assert len(got["tokenizer.ggml.tokens"]) == tm.VOCAB
    assert got["tokenizer.ggml.tokens"][tm.EOS] == "<|endoftext|>"
    assert got["tokenizer.ggml.token_type"][tm.EOS] == 3          # CONTROL
    assert got["tokenizer.ggml.token_type"][300] == 5             # UNUSED padding row
    assert len(got["tokenizer.ggml.merges"]) == len(tm.MERGES)
    assert "<|im_start|>" in got["tokenizer.chat_template"]
    # The tiny vocabulary cannot hold the released image token id; an in-range one is kept.
    assert got.get(f"{ARCH}.ple.image_token_id") in (None, 300)


def test_ple_multiplier_keys_are_u64(f32_files):
    r = GGUFReader(f32_files["qsa_ple"])
    for key in ("ple.layer_multipliers", "ple.head_offsets", "ple.head_vocab_sizes"):
        f = r.fields[f"{ARCH}.{key}"]
        assert [t.name for t in f.types] == ["ARRAY", "UINT64"], key


def test_released_ple_constants():
    """The derivation used when a checkpoint lacks the buffers reproduces model.md Appendix A."""
    cfg = cv.ModelConfig(text={"vocab_size": 248320, "ngram_size": 3, "heads_per_ngram": 8,
                               "ngram_vocab_size_base": 20_000_000, "seed": 1234},
                         outer={}, n_layer=48, hidden=2560, layer_is_attention=[], ple_layers=[1], rope={})
    c = cv.derived_ple_constants(cfg)
    assert c["multipliers"] == [23703573157769, 20109073645365, 8052911324071]
    assert c["sizes"][:3] == [20000003, 20000023, 20000033] and c["sizes"][-1] == 20000171
    assert c["offsets"][15] == 300001275 and sum(c["sizes"]) == 320001446


def test_derived_constants_equal_checkpoint_buffers(checkpoints):
    spec = tm.SPECS["qsa_ple"]
    sd = hf_state(checkpoints["qsa_ple"], spec)
    cfg = cv.read_config(checkpoints["qsa_ple"])
    c = cv.derived_ple_constants(cfg)
    p = "model.layers.1.ple.ple_embedding."
    assert c["multipliers"] == sd[p + "layer_multipliers"].tolist()
    assert c["offsets"] == sd[p + "ngram_heads_offsets"].tolist()
    assert c["sizes"] == sd[p + "ngram_heads_vocab_sizes"].tolist()


@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_outtypes(outtype, checkpoints, f32_files, tmp_path):
    """Storage types follow §3.1 and the values round-trip within the type's precision."""
    from gguf.quants import dequantize

    name = "mtp_vl"
    path = cv.convert(checkpoints[name], tmp_path / f"{outtype}.gguf", outtype)
    ref = tensors(GGUFReader(f32_files[name]))
    want = {"f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}[outtype]
    got = GGUFReader(path)
    assert fields(got)["general.file_type"] == {"f16": 1, "bf16": 32, "q8_0": 7}[outtype]
    for t in got.tensors:
        ne0 = int(t.shape[0])
        forced = (len(t.shape) == 1 or t.name.endswith("_norm.weight") or not t.name.endswith(".weight")
                  or t.name.endswith(("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight")))
        typ = Q.F32 if forced else (Q.F16 if want == Q.Q8_0 and ne0 % 32 else want)
        assert t.tensor_type == typ, (t.name, t.tensor_type.name, typ.name)
        values = dequantize(np.asarray(t.data), t.tensor_type).reshape(-1)
        base = np.asarray(ref[t.name].data).reshape(-1)
        tol = {Q.F32: 0, Q.F16: 1e-3, Q.BF16: 8e-3, Q.Q8_0: 1e-2}[t.tensor_type]
        assert np.max(np.abs(values - base)) <= tol * max(1.0, np.max(np.abs(base))), t.name
    # the PLE conv kernel (ne0 = 4) and the PLE table (ne0 = 4 here) take the q8_0 -> F16 fallback
    if outtype == "q8_0":
        types = {t.name: t.tensor_type for t in got.tensors}
        assert types["blk.0.ple_conv1d.weight"] == Q.F16
        assert types["per_layer_token_embd.weight"] == Q.F16
        assert types["blk.3.attn_q.weight"] == Q.Q8_0


SPELLINGS = ["full_attention", "qwen_sparse_attention", "indexed_attention", "deepseek_sparse_attention",
             "hybrid_indexed"]


@pytest.mark.parametrize("spelling", SPELLINGS + [None])
def test_layer_type_spellings(spelling, checkpoints, tmp_path):
    """Every spelling of the QSA layer (and a config with only full_attention_interval) gives the same ratios."""
    src = checkpoints["qsa_ple"]
    dst = tmp_path / "ck"
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    if spelling is None:
        del cfg["layer_types"]
        cfg["full_attention_interval"] = 4
    else:
        cfg["layer_types"] = [spelling if t != "linear_attention" else t for t in cfg["layer_types"]]
    (dst / "config.json").write_text(json.dumps(cfg))
    got = fields(GGUFReader(cv.convert(dst, tmp_path / "o.gguf", "f32")))
    assert got[f"{ARCH}.attention.compress_ratios"] == [0, 0, 0, 4]
    assert got[f"{ARCH}.full_attention_interval"] == 4


def test_irregular_layer_pattern_writes_recurrent_flags(checkpoints, tmp_path):
    spec = tm.TinySpec("irregular", seed=5, layers=3, interval=4)
    from transformers import Qwen4ExpForCausalLM, Qwen4ExpTextConfig

    kw = tm.text_config_kwargs(spec)
    kw.pop("full_attention_interval")
    kw["layer_types"] = ["indexed_attention", "linear_attention", "indexed_attention"]
    model = Qwen4ExpForCausalLM(Qwen4ExpTextConfig(**kw))
    model.save_pretrained(tmp_path / "ck")
    got = fields(GGUFReader(cv.convert(tmp_path / "ck", tmp_path / "o.gguf", "f32")))
    assert got[f"{ARCH}.attention.recurrent_layers"] == [0, 1, 0]
    assert f"{ARCH}.full_attention_interval" not in got
    assert got[f"{ARCH}.attention.compress_ratios"] == [4, 0, 4]


def test_fused_and_per_expert_layouts_agree(checkpoints, f32_files, tmp_path):
    """A checkpoint storing experts as gate_up_proj/down_proj converts to the same bytes as one per expert."""
    from safetensors.torch import load_file, save_file

    src = checkpoints["qsa_ple"]
    dst = tmp_path / "fused"
    shutil.copytree(src, dst)
    t = load_file(dst / "model.safetensors")
    E = tm.SPECS["qsa_ple"].experts
    for il in range(tm.SPECS["qsa_ple"].layers):
        p = f"model.layers.{il}.mlp.experts"
        gate = torch.stack([t.pop(f"{p}.{e}.gate_proj.weight") for e in range(E)])
        up = torch.stack([t.pop(f"{p}.{e}.up_proj.weight") for e in range(E)])
        t[f"{p}.gate_up_proj"] = torch.cat([gate, up], dim=1).contiguous()
        t[f"{p}.down_proj"] = torch.stack([t.pop(f"{p}.{e}.down_proj.weight") for e in range(E)]).contiguous()
    save_file(t, dst / "model.safetensors", metadata={"format": "pt"})
    a = tensors(GGUFReader(f32_files["qsa_ple"]))
    b = tensors(GGUFReader(cv.convert(dst, tmp_path / "o.gguf", "f32")))
    assert sorted(a) == sorted(b)
    for n in a:
        np.testing.assert_array_equal(np.asarray(a[n].data), np.asarray(b[n].data), err_msg=n)


def test_no_mtp(checkpoints, tmp_path):
    path = cv.convert(checkpoints["mtp_vl"], tmp_path / "o.gguf", "f32", mtp=False)
    r = GGUFReader(path)
    got = fields(r)
    assert got[f"{ARCH}.block_count"] == 4 and f"{ARCH}.nextn_predict_layers" not in got
    assert got[f"{ARCH}.attention.compress_ratios"] == [0, 0, 0, 2]
    assert not [t.name for t in r.tensors if t.name.startswith("blk.4.")]


def test_cli(checkpoints, tmp_path, capsys):
    out = tmp_path / "cli.gguf"
    assert cv.main([str(checkpoints["qsa_ple"]), "--outfile", str(out), "--outtype", "f16"]) == 0
    assert fields(GGUFReader(out))["general.file_type"] == 1
    assert cv.main([str(tmp_path / "nowhere")]) == 1
    assert "config.json: not found" in capsys.readouterr().err


# --- unsupported checkpoints ---------------------------------------------------------------------------------

def edited(src: Path, dst: Path, config=None, tensors_fn=None) -> Path:
    shutil.copytree(src, dst)
    if config is not None:
        cfg = json.loads((dst / "config.json").read_text())
        config(cfg.get("text_config", cfg))
        (dst / "config.json").write_text(json.dumps(cfg))
    if tensors_fn is not None:
        from safetensors.torch import load_file, save_file

        t = load_file(dst / "model.safetensors")
        tensors_fn(t)
        save_file(t, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def _set(key, value):
    return lambda c: c.__setitem__(key, value)


ERROR_CASES = {
    "model_type": (_set("model_type", "qwen3_next"), None, "expected model_type qwen4_exp"),
    "two_ple_layers": (_set("ple_layer_ids", [1, 2]), None, "only one PLE layer"),
    "ple_on_attention": (_set("ple_layer_ids", [4]), None, "PLE layer 3 is an attention layer"),
    "unknown_layer_type": (lambda c: c["layer_types"].__setitem__(0, "mamba"), None, "unsupported layer_types"),
    "rope_yarn": (lambda c: c["rope_parameters"].update(rope_type="yarn", factor=4.0), None, "rope_type 'yarn'"),
    "missing_indexer": (_set("indexer_n_heads", None), None, "missing text config fields"),
    "missing_tensor": (None, lambda t: t.pop("model.layers.2.linear_attn.A_log"),
                       "missing tensor model.layers.2.linear_attn.A_log"),
    "missing_expert": (None, lambda t: t.pop("model.layers.0.mlp.experts.3.up_proj.weight"),
                       "missing tensor model.layers.0.mlp.experts.3.up_proj.weight"),
    "unknown_tensor": (None, lambda t: t.__setitem__("model.layers.0.extra.weight", torch.zeros(2)),
                       "unexpected tensors ['model.layers.0.extra.weight']"),
    "wrong_shape": (None, lambda t: t.__setitem__("model.layers.0.linear_attn.dt_bias", torch.zeros(5)),
                    "model.layers.0.linear_attn.dt_bias has shape [5], expected [4]"),
    "fp8": (None, lambda t: t.__setitem__("model.layers.0.linear_attn.out_proj.weight",
                                          t["model.layers.0.linear_attn.out_proj.weight"].to(torch.float8_e4m3fn)),
            "stored as F8_E4M3"),
    "missing_ple_shard": (None, lambda t: t.pop("model.layers.1.ple.ple_embedding.ngram_embedding.shard_2.weight"),
                          "3 PLE table shards, expected 4"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_unsupported_checkpoint_errors(case, checkpoints, tmp_path):
    config, tensors_fn, message = ERROR_CASES[case]
    dst = edited(checkpoints["qsa_ple"], tmp_path / "ck", config, tensors_fn)
    with pytest.raises(cv.ConvertError, match=None) as err:
        cv.convert(dst, tmp_path / "o.gguf", "f32")
    assert message in str(err.value), str(err.value)
    assert not (tmp_path / "o.gguf").exists(), "a failed conversion left a file behind"



# --- raw-block overrides (the quantized oracle's files) -------------------------------------------------------

def read_tensor_table(path: Path) -> tuple[dict[str, tuple[list[int], int, int]], int]:
    """A minimal GGUF reader for files with types the gguf package does not know (Q2_0):
    {name: (ne, type id, absolute data offset)}."""
    import struct

    buf = path.read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode()
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(vtype):
        if vtype == 8:
            return string()
        if vtype == 9:
            sub, n = take("I"), take("Q")
            return [value(sub) for _ in range(n)]
        return take(scalar[vtype])

    assert take("I") == 0x46554747 and take("I") == 3
    n_tensors, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        key = string()
        v = value(take("I"))
        if key == "general.alignment":
            align = v
    table = {}
    for _ in range(n_tensors):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        table[name] = (ne, take("I"), take("Q"))
    data = pos + (-pos) % align
    return {k: (ne, t, data + off) for k, (ne, t, off) in table.items()}, len(buf)


def test_overrides_store_raw_blocks(checkpoints, f32_files, tmp_path):
    """Raw blocks given as overrides (including Q2_0, unknown to gguf 0.19) are stored verbatim, with their type
    id and the tensor's ne; everything else is unchanged."""
    import dequant_np as dq

    spec = tm.SPECS["quant"]
    rng = np.random.default_rng(3)
    E, F, H = spec.experts, spec.ffn, spec.hidden
    plan = {"blk.0.ffn_down_exps.weight": ("Q2_0", (E, H, F)), "blk.1.ffn_gate_exps.weight": ("IQ2_XXS", (E, F, H)),
            "blk.2.ffn_up_exps.weight": ("Q4_K", (E, F, H))}
    overrides, raws = {}, {}
    for name, (tname, shape) in plan.items():
        fmt = dq.FORMATS[tname]
        raw, _ = dq.random_tensor(fmt, shape, rng)
        overrides[name] = cv.Override(fmt.type_id, raw, fmt.block, fmt.size)
        raws[name] = raw
    path = cv.convert(checkpoints["quant"], tmp_path / "o.gguf", "f32", overrides=overrides)
    table, size = read_tensor_table(path)
    ref_table, _ = read_tensor_table(f32_files["quant"])
    assert sorted(table) == sorted(ref_table)
    blob = path.read_bytes()
    ref_blob = f32_files["quant"].read_bytes()
    for name, (ne, type_id, offset) in table.items():
        assert ne == ref_table[name][0], name
        if name in plan:
            fmt = dq.FORMATS[plan[name][0]]
            assert type_id == fmt.type_id, name
            assert blob[offset:offset + raws[name].nbytes] == raws[name].tobytes(), name
        else:
            assert type_id == 0, name
            n = 4 * int(np.prod(ne))
            ref_off = ref_table[name][2]
            assert blob[offset:offset + n] == ref_blob[ref_off:ref_off + n], name
    with pytest.raises(cv.ConvertError, match="does not have"):
        cv.convert(checkpoints["quant"], tmp_path / "x.gguf", "f32",
                   overrides={"blk.9.ffn_up_exps.weight": overrides["blk.2.ffn_up_exps.weight"]})

#!/usr/bin/env python3
"""Convert a Hugging Face Qwen4Exp (Qwen3.8-Flash-Next) checkpoint to a GGUF in llama.cpp's `qwen4exp` layout.

What this module owns
---------------------
* Reading an HF checkpoint directory: `config.json` (`model_type` `qwen4_exp` with a nested `text_config`, or a
  text-only `qwen4_exp_text`), the `*.safetensors` files (with or without an index), and, when present, the
  tokenizer files (`tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`).
* Mapping every text-model tensor to its llama.cpp name, shape (GGUF `ne` order) and transform, as written in
  `shared/spec/gguf-layout.md` §3: +1 on every zero-centred norm gamma (not on the GDN gated norm),
  A = -exp(A_log), value heads of the GDN layers reordered from grouped to tiled order, the indexer projection
  split into `indexer.q_proj` / `indexer.k_proj`, fused or per-expert experts written as separate gate / up / down
  stacks (gate = first half of `gate_up_proj`), the PLE n-gram table concatenated from its shards, its int64 hash
  constants written as u64 KV arrays (never through a float), and the MTP head as block `n_layer` plus `nextn.*`.
* The per-tensor storage type for `--outtype` f32 / f16 / bf16 / q8_0 with llama.cpp's forced-F32 rules and the
  q8_0 -> F16 fallback for rows that are not a multiple of 32 (§3.1).
* The metadata keys of §2 and the tokenizer keys of §6.

It does not own the vision tower (skipped; llama.cpp puts it in a separate mmproj file) nor quantization beyond
q8_0 (that is llama-quantize's or Strata's job). Unsupported checkpoints (another model type, missing tensors,
unknown tensors, FP8/NVFP4 storage, more than one PLE layer, rope scaling, ...) stop with a `ConvertError` that
names what was expected.

Usage: `python tools/convert_hf_to_gguf.py MODEL_DIR --outfile OUT.gguf --outtype f16 [--no-mtp]`.
Python callers use `convert(model_dir, outfile, outtype)`; tests may pass `overrides` to store given raw blocks for
chosen tensors (used by the quantized-format oracle).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

import gguf

ARCH = "qwen4exp"

# Every spelling of a QSA (sparse full-attention) layer seen in checkpoints and transformers revisions
# (model.md errata 1): the checkpoint, release-era transformers, 5.18+ transformers, and the pre-release draft.
ATTENTION_LAYER_TYPES = frozenset(
    {"full_attention", "qwen_sparse_attention", "indexed_attention", "deepseek_sparse_attention", "hybrid_indexed"})
LINEAR_LAYER_TYPES = frozenset({"linear_attention"})

OUTTYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

# Checkpoint tensors that carry nothing for the GGUF (PLE statistics some exports keep, rotary caches).
IGNORED_SUFFIXES = (".rotary_emb.inv_freq", ".token_lookup")
IGNORED_PATTERNS = (re.compile(r"\.hashstats_"),)

SAFETENSORS_FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}


class ConvertError(Exception):
    """An unsupported or inconsistent checkpoint; the message names the file/field and what was expected."""


# ---------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------

@dataclass
class ModelConfig:
    """The text-model fields the conversion needs, validated."""

    text: dict
    outer: dict
    n_layer: int
    hidden: int
    layer_is_attention: list[bool]
    ple_layers: list[int]          # 0-based
    rope: dict
    mtp_layers: int = 0            # set once the checkpoint is known

    def __getitem__(self, key: str):
        return self.text[key]

    def get(self, key: str, default=None):
        return self.text.get(key, default)

    @property
    def hc(self) -> int:
        return int(self.text["hc_count"])

    @property
    def wide(self) -> int:
        return self.hc * self.hidden

    @property
    def block_count(self) -> int:
        return self.n_layer + self.mtp_layers

    @property
    def rotary_dim(self) -> int:
        # transformers: int(head_dim * partial_rotary_factor), the factor defaulting to 1.0
        return int(int(self.text["head_dim"]) * float(self.rope.get("partial_rotary_factor", 1.0)))

    @property
    def eos_token_id(self) -> int:
        eos = self.text.get("eos_token_id", self.outer.get("eos_token_id"))
        if isinstance(eos, list):
            if not eos:
                raise ConvertError("config.json: eos_token_id is an empty list; PLE needs the n-gram reset token")
            return int(eos[0])  # transformers' PLE takes the first entry
        if eos is None:
            raise ConvertError("config.json: eos_token_id is required when PLE layers are present")
        return int(eos)


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConvertError(f"{path}: not found") from None
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: not valid JSON ({e})") from None


def text_config_of(config: dict, path: Path) -> tuple[dict, dict]:
    """(text config, outer config) for either model type."""
    model_type = config.get("model_type")
    if model_type == "qwen4_exp":
        text = config.get("text_config")
        if not isinstance(text, dict):
            raise ConvertError(f"{path}: model_type qwen4_exp needs a text_config object")
        return text, config
    if model_type == "qwen4_exp_text":
        return config, config
    raise ConvertError(f"{path}: expected model_type qwen4_exp or qwen4_exp_text, got {model_type!r}")


def layer_types_of(text: dict, n_layer: int, path: Path) -> list[bool]:
    """Per-layer 'is a QSA attention layer', from layer_types (any spelling) or full_attention_interval."""
    types = text.get("layer_types")
    if types is None:
        interval = int(text.get("full_attention_interval", 4))
        return [(i + 1) % interval == 0 for i in range(n_layer)]
    if len(types) < n_layer:
        raise ConvertError(f"{path}: layer_types has {len(types)} entries, expected {n_layer} (num_hidden_layers)")
    unknown = sorted(set(types[:n_layer]) - ATTENTION_LAYER_TYPES - LINEAR_LAYER_TYPES)
    if unknown:
        raise ConvertError(f"{path}: unsupported layer_types {unknown}; expected linear_attention or one of "
                           f"{sorted(ATTENTION_LAYER_TYPES)}")
    return [t in ATTENTION_LAYER_TYPES for t in types[:n_layer]]


REQUIRED_TEXT_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "hc_count", "hc_lowrank", "indexer_n_heads", "indexer_kv_heads",
    "indexer_head_dim", "indexer_budget", "indexer_compress_ratio",
)


def validate_text_config(text: dict, path: Path) -> None:
    missing = [k for k in REQUIRED_TEXT_FIELDS if text.get(k) is None]
    if missing:
        raise ConvertError(f"{path}: missing text config fields {missing}")
    if int(text["hc_count"]) <= 1:
        raise ConvertError(f"{path}: hc_count must be > 1, got {text['hc_count']}")
    if int(text["indexer_kv_heads"]) != 1:
        raise ConvertError(f"{path}: indexer_kv_heads must be 1, got {text['indexer_kv_heads']}")
    if int(text["linear_num_value_heads"]) % int(text["linear_num_key_heads"]) != 0:
        raise ConvertError(f"{path}: linear_num_value_heads must be a multiple of linear_num_key_heads")
    if int(text["linear_key_head_dim"]) != int(text["linear_value_head_dim"]):
        raise ConvertError(f"{path}: llama.cpp's layout needs linear_key_head_dim == linear_value_head_dim "
                           "(one ssm.state_size)")
    gate = text.get("output_gate_type") or text.get("hidden_act", "silu")
    if gate != "sigmoid":
        raise ConvertError(f"{path}: the qwen4exp graph uses a sigmoid GDN output gate; output_gate_type={gate!r}")
    if text.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"{path}: hidden_act must be silu, got {text.get('hidden_act')!r}")
    if text.get("attention_bias"):
        raise ConvertError(f"{path}: attention_bias=true is not part of the qwen4exp layout")
    if not text.get("norm_topk_prob", True):
        raise ConvertError(f"{path}: norm_topk_prob=false is not supported (llama.cpp renormalises always)")


def rope_of(text: dict, path: Path) -> dict:
    rope = dict(text.get("rope_parameters") or text.get("rope_scaling") or {})
    for key in ("rope_theta", "partial_rotary_factor"):
        if key not in rope and key in text:
            rope[key] = text[key]
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "mrope"):
        raise ConvertError(f"{path}: rope_type {rope_type!r} is not supported (only plain rope)")
    if "rope_theta" not in rope:
        raise ConvertError(f"{path}: rope_parameters.rope_theta is missing")
    return rope


def read_config(model_dir: Path) -> ModelConfig:
    path = model_dir / "config.json"
    text, outer = text_config_of(read_json(path), path)
    validate_text_config(text, path)
    n_layer = int(text["num_hidden_layers"])
    is_attention = layer_types_of(text, n_layer, path)
    ple_ids = sorted(set(int(i) for i in (text.get("ple_layer_ids") or [])))
    if len(ple_ids) > 1:
        raise ConvertError(f"{path}: ple_layer_ids={ple_ids}: only one PLE layer is supported (llama.cpp holds one "
                           "set of hash constants)")
    ple_layers = [i - 1 for i in ple_ids]  # HF ids are one-indexed
    for il in ple_layers:
        if not 0 <= il < n_layer:
            raise ConvertError(f"{path}: ple_layer_ids entry {il + 1} is outside [1, {n_layer}]")
        if is_attention[il]:
            raise ConvertError(f"{path}: PLE layer {il} is an attention layer; PLE is supported on linear layers only")
    return ModelConfig(text=text, outer=outer, n_layer=n_layer, hidden=int(text["hidden_size"]),
                       layer_is_attention=is_attention, ple_layers=ple_layers, rope=rope_of(text, path))


# ---------------------------------------------------------------------------------------------------------
# Checkpoint access
# ---------------------------------------------------------------------------------------------------------

def canonical_name(name: str) -> str | None:
    """The checkpoint name with the multimodal prefix removed; None for tensors that belong elsewhere (vision)."""
    if name.startswith(("model.visual.", "visual.")):
        return None
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    if name.startswith("language_model.model."):
        return "model." + name[len("language_model.model."):]
    if name.startswith("language_model.lm_head."):
        return name[len("language_model."):]
    if name.startswith("model.mtp."):
        return name[len("model."):]
    return name


class Checkpoint:
    """Lazy access to the safetensors tensors of a checkpoint directory, by canonical name."""

    def __init__(self, model_dir: Path):
        from safetensors import safe_open  # imported here so `--help` works without it

        self._open = safe_open
        files = self._files(model_dir)
        self._where: dict[str, tuple[Path, str]] = {}
        self._meta: dict[str, tuple[str, tuple[int, ...]]] = {}
        for f in files:
            with safe_open(f, framework="pt") as st:
                for raw in st.keys():
                    name = canonical_name(raw)
                    if name is None:
                        continue
                    if name in self._where:
                        raise ConvertError(f"{f}: tensor {name} appears twice in the checkpoint")
                    sl = st.get_slice(raw)
                    self._where[name] = (f, raw)
                    self._meta[name] = (sl.get_dtype(), tuple(int(d) for d in sl.get_shape()))
        self.used: set[str] = set()

    @staticmethod
    def _files(model_dir: Path) -> list[Path]:
        index = model_dir / "model.safetensors.index.json"
        if index.is_file():
            weight_map = read_json(index).get("weight_map", {})
            return sorted({model_dir / f for f in weight_map.values()})
        files = sorted(model_dir.glob("*.safetensors"))
        if not files:
            raise ConvertError(f"{model_dir}: no *.safetensors files")
        return files

    def names(self) -> list[str]:
        return sorted(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def shape(self, name: str) -> tuple[int, ...]:
        return self._meta[self.require(name)][1]

    def require(self, name: str) -> str:
        if name not in self._where:
            raise ConvertError(f"checkpoint: missing tensor {name}")
        return name

    def _tensor(self, name: str):
        path, raw = self._where[self.require(name)]
        self.used.add(name)
        with self._open(path, framework="pt") as st:
            return st.get_tensor(raw)

    def check_float(self, name: str) -> None:
        dtype = self._meta[self.require(name)][0]
        if dtype not in SAFETENSORS_FLOAT_DTYPES:
            raise ConvertError(f"checkpoint: tensor {name} is stored as {dtype}; only F32/F16/BF16 checkpoints "
                               "are supported (convert FP8/NVFP4 releases from the BF16 weights)")

    def load(self, name: str) -> np.ndarray:
        """A float tensor as float32 numpy."""
        self.check_float(name)
        import torch

        return self._tensor(name).to(torch.float32).numpy()

    def load_ints(self, name: str) -> list[int]:
        """An integer buffer, exactly (the PLE hash constants are ~45-bit values: never through a float)."""
        dtype = self._meta[self.require(name)][0]
        if dtype not in ("I64", "I32", "U64"):
            raise ConvertError(f"checkpoint: {name} must be an integer buffer, got {dtype}")
        return [int(x) for x in self._tensor(name).reshape(-1).tolist()]

    def mark_used(self, name: str) -> None:
        self.used.add(name)


# ---------------------------------------------------------------------------------------------------------
# Tensor plan: what goes into the GGUF, in order
# ---------------------------------------------------------------------------------------------------------

@dataclass
class OutTensor:
    """One GGUF tensor: name, numpy-order shape (ne reversed), how to produce its float32 data, dtype policy."""

    name: str
    shape: tuple[int, ...]
    produce: Callable[[], np.ndarray] | None = None
    chunks: Callable[[], Iterator[np.ndarray]] | None = None  # for the PLE table: rows in pieces
    force_f32: bool = False
    sources: tuple[str, ...] = ()


def plus_one(arr: np.ndarray) -> np.ndarray:
    """Fold the zero-centred gamma into a plain RMSNorm weight: (1 + w)."""
    return (arr.astype(np.float32) + np.float32(1.0)).astype(np.float32)


def reorder_v_heads(arr: np.ndarray, axis: int, n_k: int, per_k: int, head_dim: int) -> np.ndarray:
    """Grouped value-head order [G0v0, G0v1, .., G1v0, ..] -> tiled [G0v0, G1v0, .., G0v1, ..] along `axis`."""
    if per_k == 1:
        return arr
    axis = axis % arr.ndim
    shape = arr.shape
    split = shape[:axis] + (n_k, per_k, head_dim) + shape[axis + 1:]
    moved = np.swapaxes(arr.reshape(split), axis, axis + 1)
    return np.ascontiguousarray(moved).reshape(shape)


class Planner:
    """Builds the ordered list of OutTensors for a checkpoint; checks presence and shapes up front."""

    def __init__(self, cfg: ModelConfig, ckpt: Checkpoint):
        self.cfg = cfg
        self.ckpt = ckpt
        self.out: list[OutTensor] = []

    # --- helpers ------------------------------------------------------------------------------------------

    def expect(self, name: str, shape: Sequence[int]) -> str:
        self.ckpt.check_float(name)
        got = self.ckpt.shape(name)
        if tuple(got) != tuple(shape):
            raise ConvertError(f"checkpoint: tensor {name} has shape {list(got)}, expected {list(shape)}")
        return name

    def add(self, name: str, shape: Sequence[int], produce: Callable[[], np.ndarray], *, force_f32=False,
            sources: Sequence[str] = ()) -> None:
        self.out.append(OutTensor(name, tuple(int(s) for s in shape), produce=produce, force_f32=force_f32,
                                  sources=tuple(sources)))

    def copy(self, gguf_name: str, src: str, shape: Sequence[int], *, transform=None, force_f32=False,
             out_shape: Sequence[int] | None = None) -> None:
        self.expect(src, shape)
        load = self.ckpt.load
        fn = (lambda: load(src)) if transform is None else (lambda: transform(load(src)))
        self.add(gguf_name, out_shape or shape, fn, force_f32=force_f32, sources=(src,))

    def norm(self, gguf_name: str, src: str, width: int) -> None:
        self.copy(gguf_name, src, (width,), transform=plus_one, force_f32=True)

    # --- sections -----------------------------------------------------------------------------------------

    def plan(self) -> list[OutTensor]:
        cfg = self.cfg
        H, V = cfg.hidden, int(cfg["vocab_size"])
        self.copy("token_embd.weight", "model.embed_tokens.weight", (V, H))
        if self.ckpt.has("lm_head.weight"):
            self.copy("output.weight", "lm_head.weight", (V, H))
        elif not cfg.get("tie_word_embeddings", False):
            raise ConvertError("checkpoint: missing tensor lm_head.weight (tie_word_embeddings is false)")
        self.hc_module("output_hc", "model.hyper_connection_mixer", inject=False)
        if cfg.ple_layers:
            self.ple_table(cfg.ple_layers[0])
        for il in range(cfg.n_layer):
            self.layer(il, f"model.layers.{il}")
        if cfg.mtp_layers:
            self.mtp()
        return self.out

    def layer(self, il: int, src: str) -> None:
        blk = f"blk.{il}"
        self.hc_module(f"{blk}.hc_attn", f"{src}.attn_hyper_connection", inject=True)
        self.hc_module(f"{blk}.hc_ffn", f"{src}.mlp_hyper_connection", inject=True)
        if il < self.cfg.n_layer and not self.cfg.layer_is_attention[il]:
            self.gdn(blk, f"{src}.linear_attn")
        else:
            self.attention(blk, f"{src}.self_attn")
        if il in self.cfg.ple_layers:
            self.ple_layer(blk, f"{src}.ple")
        self.moe(blk, f"{src}.mlp")

    def hc_module(self, dst: str, src: str, *, inject: bool) -> None:
        """One hyper-connection module. `dst` is e.g. blk.3.hc_attn, output_hc or blk.N.nextn.hc_head."""
        W, R, S = self.cfg.wide, int(self.cfg["hc_lowrank"]), self.cfg.hc
        self.norm(f"{dst}_norm.weight", f"{src}.hc_norm.weight", W)
        self.copy(f"{dst}_down.weight", f"{src}.input_mix_weight_down.weight", (R, W))
        self.copy(f"{dst}_up.weight", f"{src}.input_mix_weight_up.weight", (W, R))
        if inject:
            self.copy(f"{dst}_inject.weight", f"{src}.block_inject_weight.weight", (S, W))

    def gdn(self, blk: str, src: str) -> None:
        c = self.cfg
        H = c.hidden
        n_k, n_v = int(c["linear_num_key_heads"]), int(c["linear_num_value_heads"])
        dk, dv, K = int(c["linear_key_head_dim"]), int(c["linear_value_head_dim"]), int(c["linear_conv_kernel_dim"])
        per_k, key_dim, value_dim = n_v // n_k, n_k * dk, n_v * dv
        conv_dim = 2 * key_dim + value_dim

        def v_rows(arr, head_dim):
            return reorder_v_heads(arr, 0, n_k, per_k, head_dim)

        def qkv(arr):
            return np.concatenate([arr[:2 * key_dim], v_rows(arr[2 * key_dim:], dv)], axis=0)

        def conv(arr):
            arr = arr.reshape(conv_dim, K)
            return np.concatenate([arr[:2 * key_dim], v_rows(arr[2 * key_dim:], dv)], axis=0)

        def a_from_log(arr):
            # float32 exp through torch: the very value transformers computes (-A_log.float().exp())
            import torch

            a = (-torch.exp(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))).numpy()
            return v_rows(a.reshape(n_v, 1), 1).reshape(n_v)

        self.copy(f"{blk}.attn_qkv.weight", f"{src}.in_proj_qkv.weight", (conv_dim, H), transform=qkv)
        self.copy(f"{blk}.attn_gate.weight", f"{src}.in_proj_z.weight", (value_dim, H),
                  transform=lambda a: v_rows(a, dv))
        self.copy(f"{blk}.ssm_conv1d.weight", f"{src}.conv1d.weight", (conv_dim, 1, K), transform=conv,
                  force_f32=True, out_shape=(conv_dim, K))
        self.copy(f"{blk}.ssm_dt.bias", f"{src}.dt_bias", (n_v,), force_f32=True,
                  transform=lambda a: v_rows(a.reshape(n_v, 1), 1).reshape(n_v))
        self.copy(f"{blk}.ssm_a", f"{src}.A_log", (n_v,), transform=a_from_log, force_f32=True)
        self.copy(f"{blk}.ssm_alpha.weight", f"{src}.in_proj_a.weight", (n_v, H), transform=lambda a: v_rows(a, 1))
        self.copy(f"{blk}.ssm_beta.weight", f"{src}.in_proj_b.weight", (n_v, H), transform=lambda a: v_rows(a, 1))
        self.copy(f"{blk}.ssm_norm.weight", f"{src}.norm.weight", (dv,), force_f32=True)  # gated norm: no +1
        self.copy(f"{blk}.ssm_out.weight", f"{src}.out_proj.weight", (H, value_dim),
                  transform=lambda a: reorder_v_heads(a, 1, n_k, per_k, dv))

    def attention(self, blk: str, src: str) -> None:
        c = self.cfg
        H, hd = c.hidden, int(c["head_dim"])
        n_head, n_kv = int(c["num_attention_heads"]), int(c["num_key_value_heads"])
        n_idx, d_idx = int(c["indexer_n_heads"]), int(c["indexer_head_dim"])
        n_q = n_idx * d_idx
        self.copy(f"{blk}.attn_q.weight", f"{src}.q_proj.weight", (2 * n_head * hd, H))
        self.copy(f"{blk}.attn_k.weight", f"{src}.k_proj.weight", (n_kv * hd, H))
        self.copy(f"{blk}.attn_v.weight", f"{src}.v_proj.weight", (n_kv * hd, H))
        self.copy(f"{blk}.attn_output.weight", f"{src}.o_proj.weight", (H, n_head * hd))
        self.norm(f"{blk}.attn_q_norm.weight", f"{src}.q_norm.weight", hd)
        self.norm(f"{blk}.attn_k_norm.weight", f"{src}.k_norm.weight", hd)
        proj = f"{src}.indexer.index_qk_proj.weight"
        self.expect(proj, (n_q + d_idx, H))
        self.copy(f"{blk}.indexer.q_proj.weight", proj, (n_q + d_idx, H), transform=lambda a: a[:n_q],
                  out_shape=(n_q, H))
        self.copy(f"{blk}.indexer.k_proj.weight", proj, (n_q + d_idx, H), transform=lambda a: a[n_q:],
                  out_shape=(d_idx, H))
        self.norm(f"{blk}.indexer.q_norm.weight", f"{src}.indexer.q_layernorm.weight", d_idx)
        self.norm(f"{blk}.indexer.k_norm.weight", f"{src}.indexer.k_layernorm.weight", d_idx)

    def moe(self, blk: str, src: str) -> None:
        c = self.cfg
        H, E, F, Fs = c.hidden, int(c["num_experts"]), int(c["moe_intermediate_size"]), \
            int(c["shared_expert_intermediate_size"])
        self.copy(f"{blk}.ffn_gate_inp.weight", f"{src}.gate.weight", (E, H), force_f32=True)
        self.experts(blk, f"{src}.experts", E, F, H)
        self.copy(f"{blk}.ffn_gate_inp_shexp.weight", f"{src}.shared_expert_gate.weight", (1, H),
                  transform=lambda a: a.reshape(H), force_f32=True, out_shape=(H,))
        self.copy(f"{blk}.ffn_gate_shexp.weight", f"{src}.shared_expert.gate_proj.weight", (Fs, H))
        self.copy(f"{blk}.ffn_up_shexp.weight", f"{src}.shared_expert.up_proj.weight", (Fs, H))
        self.copy(f"{blk}.ffn_down_shexp.weight", f"{src}.shared_expert.down_proj.weight", (H, Fs))

    def experts(self, blk: str, src: str, E: int, F: int, H: int) -> None:
        """Routed experts, fused (gate_up_proj [E, 2F, H], down_proj [E, H, F]) or one tensor per expert."""
        fused_gu, fused_down = f"{src}.gate_up_proj", f"{src}.down_proj"
        if self.ckpt.has(fused_gu):
            self.expect(fused_gu, (E, 2 * F, H))
            self.expect(fused_down, (E, H, F))
            load = self.ckpt.load
            self.add(f"{blk}.ffn_gate_exps.weight", (E, F, H), lambda: load(fused_gu)[:, :F], sources=(fused_gu,))
            self.add(f"{blk}.ffn_up_exps.weight", (E, F, H), lambda: load(fused_gu)[:, F:], sources=(fused_gu,))
            self.add(f"{blk}.ffn_down_exps.weight", (E, H, F), lambda: load(fused_down), sources=(fused_down,))
            return
        for part, gg, shape in (("gate_proj", "ffn_gate_exps", (F, H)), ("up_proj", "ffn_up_exps", (F, H)),
                                ("down_proj", "ffn_down_exps", (H, F))):
            names = [self.expect(f"{src}.{e}.{part}.weight", shape) for e in range(E)]
            self.add(f"{blk}.{gg}.weight", (E, *shape),
                     lambda names=names: np.stack([self.ckpt.load(n) for n in names]), sources=names)

    def ple_layer(self, blk: str, src: str) -> None:
        c = self.cfg
        H, W = c.hidden, c.wide
        dim = int(c.get("ple_embed_dim") or H)
        if dim != H:
            raise ConvertError(f"config.json: ple_embed_dim={dim} must equal hidden_size={H} in llama.cpp's layout")
        K = int(c.get("ple_conv_kernel_size", 4))
        self.copy(f"{blk}.ple_key.weight", f"{src}.key_proj.weight", (W, dim))
        self.copy(f"{blk}.ple_value.weight", f"{src}.value_proj.weight", (H, dim))
        for part in ("key", "query", "conv"):
            self.norm(f"{blk}.ple_norm_{part}.weight", f"{src}.norm_{part}.weight", W)
        # not forced to F32: a q8_0 conversion falls back to F16 because ne0 = kernel size (§3.1)
        self.copy(f"{blk}.ple_conv1d.weight", f"{src}.conv1d.weight", (W, 1, K),
                  transform=lambda a: a.reshape(W, K), out_shape=(W, K))

    def ple_shards(self, il: int) -> list[str]:
        prefix = f"model.layers.{il}.ple.ple_embedding.ngram_embedding"
        if self.ckpt.has(f"{prefix}.weight"):
            return [f"{prefix}.weight"]
        pat = re.compile(re.escape(prefix) + r"\.shard_(\d+)\.weight$")
        found = {int(m.group(1)): n for n in self.ckpt.names() if (m := pat.match(n))}
        if not found:
            raise ConvertError(f"checkpoint: missing tensor {prefix}.shard_0.weight (the PLE n-gram table)")
        n_parts = self.cfg.get("split_ngram_parts")
        if n_parts is not None and len(found) != int(n_parts):
            raise ConvertError(f"checkpoint: {len(found)} PLE table shards, expected {n_parts} (split_ngram_parts)")
        if sorted(found) != list(range(len(found))):
            raise ConvertError(f"checkpoint: PLE table shard indices {sorted(found)} are not 0..{len(found) - 1}")
        return [found[i] for i in range(len(found))]

    def ple_table(self, il: int) -> None:
        shards = self.ple_shards(il)
        shapes = [self.ckpt.shape(s) for s in shards]
        row = shapes[0][1]
        if any(len(s) != 2 or s[1] != row for s in shapes):
            raise ConvertError(f"checkpoint: PLE table shards disagree on the row width: {shapes}")
        rows = sum(s[0] for s in shapes)
        heads = (int(self.cfg.get("ngram_size", 3)) - 1) * int(self.cfg.get("heads_per_ngram", 8))
        dim = int(self.cfg.get("ple_embed_dim") or self.cfg.hidden)
        if heads * row != dim:
            raise ConvertError(f"checkpoint: PLE row width {row} x {heads} heads != ple_embed_dim {dim}")
        load = self.ckpt.load
        self.out.append(OutTensor("per_layer_token_embd.weight", (rows, row),
                                  chunks=lambda: (load(s) for s in shards), sources=tuple(shards)))

    def mtp(self) -> None:
        """The MTP head as trailing block n_layer: a trunk-shaped attention layer plus nextn.* tensors."""
        c = self.cfg
        H, W, n = c.hidden, c.wide, c.n_layer
        blk = f"blk.{n}"
        self.layer(n, "mtp.layers.0")
        emb, hid = "mtp.fc_embedding.weight", "mtp.fc_hidden.weight"
        self.expect(emb, (H, H))
        self.expect(hid, (H, H))
        load = self.ckpt.load
        self.add(f"{blk}.nextn.eh_proj.weight", (H, 2 * H),
                 lambda: np.concatenate([load(emb), load(hid)], axis=1), sources=(emb, hid))
        self.norm(f"{blk}.nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", H)
        self.norm(f"{blk}.nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", W)
        self.hc_module(f"{blk}.nextn.hc_head", "mtp.hyper_connection_mixer", inject=False)
        if self.ckpt.has("mtp.hyper_connection_mixer.block_inject_weight.weight"):
            self.ckpt.mark_used("mtp.hyper_connection_mixer.block_inject_weight.weight")  # unused by the head


# ---------------------------------------------------------------------------------------------------------
# MTP detection and leftovers
# ---------------------------------------------------------------------------------------------------------

def mtp_layer_count(cfg: ModelConfig, ckpt: Checkpoint, want_mtp: bool) -> int:
    names = [n for n in ckpt.names() if n.startswith("mtp.")]
    if not names or not want_mtp:
        for n in names:
            ckpt.mark_used(n)
        return 0
    layers = {int(m.group(1)) for n in names if (m := re.match(r"mtp\.layers\.(\d+)\.", n))}
    declared = cfg.get("mtp_num_hidden_layers", cfg.outer.get("mtp_num_hidden_layers"))
    if layers != {0} or (declared is not None and int(declared) != 1):
        raise ConvertError(f"checkpoint: MTP layers {sorted(layers)} (mtp_num_hidden_layers={declared}); "
                           "exactly one MTP block is supported; use --no-mtp to leave it out")
    return 1


def ple_hash_constants(cfg: ModelConfig, ckpt: Checkpoint) -> dict[str, list[int]]:
    """The three PLE int64 buffers, exactly; recomputed from the config when a checkpoint lacks them."""
    il = cfg.ple_layers[0]
    prefix = f"model.layers.{il}.ple.ple_embedding"
    names = {"multipliers": f"{prefix}.layer_multipliers", "offsets": f"{prefix}.ngram_heads_offsets",
             "sizes": f"{prefix}.ngram_heads_vocab_sizes"}
    if all(ckpt.has(n) for n in names.values()):
        return {k: ckpt.load_ints(n) for k, n in names.items()}
    return derived_ple_constants(cfg)


def derived_ple_constants(cfg: ModelConfig) -> dict[str, list[int]]:
    """transformers' derivation (model.md §5.1): primes above the base, SplitMix64 multipliers."""
    mask = (1 << 64) - 1
    gamma = 0x9E3779B97F4A7C15

    def splitmix(v: int) -> int:
        v = (v + gamma) & mask
        v = ((v ^ (v >> 30)) * 0xBF58476D1CE4E5B9) & mask
        v = ((v ^ (v >> 27)) * 0x94D049BB133111EB) & mask
        return (v ^ (v >> 31)) & mask

    def is_prime(x: int) -> bool:
        if x < 2 or x % 2 == 0:
            return x == 2
        return all(x % d for d in range(3, math.isqrt(x) + 1, 2))

    ngram, per = int(cfg.get("ngram_size", 3)), int(cfg.get("heads_per_ngram", 8))
    n_heads, base = (ngram - 1) * per, int(cfg.get("ngram_vocab_size_base", 20_000_000))
    sizes, p = [], base - 1
    for _ in range(n_heads):  # ple_layer_index 0: heads 0..n-1 take the first n primes
        p += 1
        while not is_prime(p):
            p += 1
        sizes.append(p)
    offsets = [sum(sizes[:h]) for h in range(n_heads)]
    half = max(1, ((1 << 63) - 1) // max(int(cfg["vocab_size"]), 1) // 2)
    seed = int(cfg.get("seed", 1234))
    mult = [2 * (splitmix((seed + gamma * (i + 1)) & mask) % half) + 1 for i in range(ngram)]
    return {"multipliers": mult, "offsets": offsets, "sizes": sizes}


def check_leftovers(ckpt: Checkpoint, planned: list[OutTensor]) -> None:
    for t in planned:
        for s in t.sources:
            ckpt.mark_used(s)
    left = [n for n in ckpt.names() if n not in ckpt.used and not n.endswith(IGNORED_SUFFIXES)
            and not any(p.search(n) for p in IGNORED_PATTERNS) and not n.endswith("ple_embedding.layer_multipliers")
            and not n.endswith(("ngram_heads_offsets", "ngram_heads_vocab_sizes"))]
    if left:
        more = f" (and {len(left) - 8} more)" if len(left) > 8 else ""
        raise ConvertError(f"checkpoint: unexpected tensors {left[:8]}{more}; this converter does not know where "
                           "they belong")


# ---------------------------------------------------------------------------------------------------------
# Storage types and encoding
# ---------------------------------------------------------------------------------------------------------

def storage_type(t: OutTensor, outtype: gguf.GGMLQuantizationType) -> gguf.GGMLQuantizationType:
    """llama.cpp's rule (§3.1): 1-D, *_norm.weight, routers, ssm_conv1d and non-.weight tensors stay F32."""
    if t.force_f32 or len(t.shape) <= 1 or t.name.endswith("_norm.weight") or not t.name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    if outtype == gguf.GGMLQuantizationType.Q8_0 and t.shape[-1] % 32 != 0:
        return gguf.GGMLQuantizationType.F16  # the q8_0 -> F16 fallback
    return outtype


def encode(arr: np.ndarray, qtype: gguf.GGMLQuantizationType) -> np.ndarray:
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == gguf.GGMLQuantizationType.F32:
        return arr
    if qtype == gguf.GGMLQuantizationType.F16:
        return arr.astype(np.float16)
    return gguf.quants.quantize(arr, qtype)


def nbytes_of(shape: Sequence[int], type_id: int) -> int:
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)]
    if shape[-1] % block:
        raise ConvertError(f"row width {shape[-1]} is not a multiple of the block size {block}")
    return int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // block) * size


@dataclass
class Override:
    """Raw blocks to store for one tensor instead of the converted data (tests: random quantized blocks)."""

    type_id: int
    data: np.ndarray       # uint8, exactly nbytes long
    block: int = 0         # elements per block, for types the gguf package does not know
    type_size: int = 0     # bytes per block, likewise

    def nbytes(self, shape: Sequence[int]) -> int:
        if self.block:
            if shape[-1] % self.block:
                raise ConvertError(f"override: row width {shape[-1]} is not a multiple of {self.block}")
            return int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // self.block) * self.type_size
        return nbytes_of(shape, self.type_id)


# ---------------------------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------------------------

def add_u64_array(w: gguf.GGUFWriter, key: str, values: Sequence[int]) -> None:
    w.add_key_value(key, [int(v) for v in values], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT64)


def add_i32_array(w: gguf.GGUFWriter, key: str, values: Sequence[int]) -> None:
    w.add_key_value(key, [int(v) for v in values], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)


def full_attention_interval(cfg: ModelConfig) -> int | None:
    """The interval that reproduces the layer pattern, or None when the pattern is irregular."""
    for interval in range(1, cfg.n_layer + 2):
        if all(((i + 1) % interval == 0) == a for i, a in enumerate(cfg.layer_is_attention)):
            return interval
    return None


def add_model_metadata(w: gguf.GGUFWriter, cfg: ModelConfig, ftype: gguf.LlamaFileType, name: str,
                       ple: dict[str, list[int]] | None, ple_row: int | None) -> None:
    k = f"{ARCH}."
    c = cfg
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_file_type(int(ftype))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_uint32(k + "block_count", c.block_count)
    if c.mtp_layers:
        w.add_uint32(k + "nextn_predict_layers", c.mtp_layers)
    w.add_uint32(k + "context_length", int(c.get("max_position_embeddings", 262144)))
    w.add_uint32(k + "embedding_length", c.hidden)
    w.add_uint32(k + "attention.head_count", int(c["num_attention_heads"]))
    w.add_uint32(k + "attention.head_count_kv", int(c["num_key_value_heads"]))
    w.add_uint32(k + "attention.key_length", int(c["head_dim"]))
    w.add_uint32(k + "attention.value_length", int(c["head_dim"]))
    w.add_float32(k + "attention.layer_norm_rms_epsilon", float(c.get("rms_norm_eps", 1e-6)))
    w.add_float32(k + "rope.freq_base", float(c.rope["rope_theta"]))
    w.add_uint32(k + "rope.dimension_count", c.rotary_dim)
    sections = list(c.rope.get("mrope_section") or [11, 11, 10])
    add_i32_array(w, k + "rope.dimension_sections", (sections + [0, 0, 0, 0])[:4])
    w.add_uint32(k + "expert_count", int(c["num_experts"]))
    w.add_uint32(k + "expert_used_count", int(c["num_experts_per_tok"]))
    w.add_uint32(k + "expert_feed_forward_length", int(c["moe_intermediate_size"]))
    w.add_uint32(k + "expert_shared_feed_forward_length", int(c["shared_expert_intermediate_size"]))
    w.add_uint32(k + "ssm.conv_kernel", int(c["linear_conv_kernel_dim"]))
    w.add_uint32(k + "ssm.state_size", int(c["linear_key_head_dim"]))
    w.add_uint32(k + "ssm.group_count", int(c["linear_num_key_heads"]))
    w.add_uint32(k + "ssm.time_step_rank", int(c["linear_num_value_heads"]))
    w.add_uint32(k + "ssm.inner_size", int(c["linear_num_value_heads"]) * int(c["linear_value_head_dim"]))
    interval = full_attention_interval(c)
    if interval is not None:
        w.add_uint32(k + "full_attention_interval", interval)
    else:  # an irregular pattern: the explicit per-block flag (trunk only; the MTP block is not recurrent)
        add_i32_array(w, k + "attention.recurrent_layers",
                      [0 if a else 1 for a in c.layer_is_attention] + [0] * c.mtp_layers)
    w.add_uint32(k + "hyper_connection.count", c.hc)
    w.add_uint32(k + "hyper_connection.low_rank", int(c["hc_lowrank"]))
    w.add_uint32(k + "attention.indexer.head_count", int(c["indexer_n_heads"]))
    w.add_uint32(k + "attention.indexer.key_length", int(c["indexer_head_dim"]))
    w.add_uint32(k + "attention.indexer.top_k", int(c["indexer_budget"]))
    ratio = int(c["indexer_compress_ratio"])
    # the MTP block gets 0 (§2: llama.cpp's draft attends densely; 0 means "not a QSA layer")
    add_i32_array(w, k + "attention.compress_ratios",
                  [ratio if a else 0 for a in c.layer_is_attention] + [0] * c.mtp_layers)
    if ple is not None:
        add_ple_metadata(w, cfg, ple, ple_row)


def add_ple_metadata(w: gguf.GGUFWriter, cfg: ModelConfig, ple: dict[str, list[int]], ple_row: int | None) -> None:
    k = f"{ARCH}."
    ngram, per = int(cfg.get("ngram_size", 3)), int(cfg.get("heads_per_ngram", 8))
    n_heads = (ngram - 1) * per
    if len(ple["multipliers"]) < ngram or len(ple["offsets"]) != n_heads or len(ple["sizes"]) != n_heads:
        raise ConvertError(f"checkpoint: PLE hash constants have {len(ple['multipliers'])} multipliers, "
                           f"{len(ple['offsets'])} offsets, {len(ple['sizes'])} sizes; expected >= {ngram}, "
                           f"{n_heads}, {n_heads}")
    add_i32_array(w, k + "ple.layers", cfg.ple_layers)
    w.add_uint32(k + "ple.ngram_size", ngram)
    w.add_uint32(k + "ple.heads_per_ngram", per)
    w.add_uint32(k + "ple.conv_kernel", int(cfg.get("ple_conv_kernel_size", 4)))
    w.add_uint32(k + "ple.eos_token_id", cfg.eos_token_id)
    image = cfg.outer.get("image_token_id")
    if image is not None and 0 <= int(image) < int(cfg["vocab_size"]):
        w.add_uint32(k + "ple.image_token_id", int(image))
    if ple_row is not None:
        w.add_uint32(k + "embedding_length_per_layer_input", ple_row)
    add_u64_array(w, k + "ple.layer_multipliers", ple["multipliers"])
    add_u64_array(w, k + "ple.head_offsets", ple["offsets"])
    add_u64_array(w, k + "ple.head_vocab_sizes", ple["sizes"])


# ---------------------------------------------------------------------------------------------------------
# Tokenizer (§6)
# ---------------------------------------------------------------------------------------------------------

def add_tokenizer(w: gguf.GGUFWriter, model_dir: Path, vocab_size: int) -> bool:
    """Byte-level BPE keys from tokenizer.json; False when the checkpoint has no tokenizer files."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return False
    tok = read_json(path)
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise ConvertError(f"{path}: expected a BPE tokenizer model, got {model.get('type')!r}")
    vocab: dict[str, int] = dict(model.get("vocab", {}))
    special: dict[int, bool] = {}
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = int(added["id"])
        special[int(added["id"])] = bool(added.get("special", False))
    if vocab and max(vocab.values()) >= vocab_size:
        raise ConvertError(f"{path}: token id {max(vocab.values())} does not fit vocab_size {vocab_size}")
    by_id = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in special:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if special[i] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tokens)
    w.add_token_types(types)
    special = gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=vocab_size)
    special.add_special_token.setdefault("bos", False)  # the Qwen3.5 family never prepends BOS (§6)
    special.add_to_gguf(w, quiet=True)
    return True


# ---------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------

def tensor_info(w: gguf.GGUFWriter, t: OutTensor, outtype, overrides: dict[str, Override]) -> int:
    """Declare one tensor; returns its storage type id."""
    if t.name in overrides:
        ov = overrides[t.name]
        w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), ov.nbytes(t.shape), raw_dtype=ov.type_id)
        return ov.type_id
    qtype = storage_type(t, outtype)
    w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), nbytes_of(t.shape, qtype), raw_dtype=qtype)
    return int(qtype)


def write_chunked(w: gguf.GGUFWriter, t: OutTensor, qtype: gguf.GGMLQuantizationType) -> None:
    """Write a tensor from row chunks with the writer's alignment, keeping one chunk in memory at a time."""
    fout = w.fout[0]
    info = w.tensors[0].pop(t.name)
    w.write_padding(fout, fout.tell())
    written = 0
    for chunk in t.chunks():
        data = encode(chunk, qtype)
        data.tofile(fout)
        written += data.nbytes
    if written != info.nbytes:
        raise ConvertError(f"{t.name}: wrote {written} bytes, expected {info.nbytes}")
    w.write_padding(fout, written)
    w.state = gguf.gguf_writer.WriterState.WEIGHTS


def write_tensor(w: gguf.GGUFWriter, t: OutTensor, type_id: int, overrides: dict[str, Override]) -> None:
    if t.name in overrides:
        data = np.ascontiguousarray(overrides[t.name].data, dtype=np.uint8)
        w.write_tensor_data(data)
        return
    qtype = gguf.GGMLQuantizationType(type_id)
    if t.chunks is not None:
        write_chunked(w, t, qtype)
        return
    arr = t.produce()
    if tuple(arr.shape) != t.shape:
        raise ConvertError(f"{t.name}: produced shape {list(arr.shape)}, planned {list(t.shape)}")
    w.write_tensor_data(encode(arr, qtype))


def convert(model_dir: str | Path, outfile: str | Path, outtype: str = "f16", *, mtp: bool = True,
            name: str | None = None, overrides: dict[str, Override] | None = None, verbose: bool = False) -> Path:
    """Convert `model_dir` to `outfile`; returns the output path."""
    model_dir, outfile = Path(model_dir), Path(outfile)
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype {outtype!r}: expected one of {sorted(OUTTYPES)}")
    qtype, ftype = OUTTYPES[outtype]
    overrides = dict(overrides or {})
    cfg = read_config(model_dir)
    ckpt = Checkpoint(model_dir)
    cfg.mtp_layers = mtp_layer_count(cfg, ckpt, mtp)
    planned = Planner(cfg, ckpt).plan()
    unknown = sorted(set(overrides) - {t.name for t in planned})
    if unknown:
        raise ConvertError(f"overrides name tensors that the file does not have: {unknown}")
    check_leftovers(ckpt, planned)
    ple = ple_hash_constants(cfg, ckpt) if cfg.ple_layers else None
    ple_row = next((t.shape[1] for t in planned if t.name == "per_layer_token_embd.weight"), None)

    outfile.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(outfile, ARCH)
    try:
        add_model_metadata(w, cfg, ftype, name or model_dir.name, ple, ple_row)
        if not add_tokenizer(w, model_dir, int(cfg["vocab_size"])) and verbose:
            print(f"note: {model_dir} has no tokenizer.json; no tokenizer keys written", file=sys.stderr)
        types = [tensor_info(w, t, qtype, overrides) for t in planned]
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for t, type_id in zip(planned, types):
            if verbose:
                print(f"{t.name:48s} {list(reversed(t.shape))} type {type_id}", file=sys.stderr)
            write_tensor(w, t, type_id, overrides)
    except BaseException:
        w.close()
        outfile.unlink(missing_ok=True)  # never leave a truncated GGUF behind
        raise
    w.close()
    return outfile


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path, help="HF checkpoint directory (config.json + *.safetensors)")
    ap.add_argument("--outfile", type=Path, help="output GGUF (default: MODEL_DIR/<name>-<outtype>.gguf)")
    ap.add_argument("--outtype", default="f16", choices=sorted(OUTTYPES))
    ap.add_argument("--no-mtp", action="store_true", help="leave the MTP draft head out")
    ap.add_argument("--name", help="general.name (default: the directory name)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    out = args.outfile or args.model_dir / f"{args.model_dir.name}-{args.outtype}.gguf"
    try:
        convert(args.model_dir, out, args.outtype, mtp=not args.no_mtp, name=args.name, verbose=args.verbose)
    except ConvertError as e:
        print(f"convert_hf_to_gguf: error: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

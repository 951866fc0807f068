"""Tiny random Qwen4Exp checkpoints for the oracle tests, built with transformers.

Each `TinySpec` is one configuration; `build_checkpoint(spec, dir)` writes an HF checkpoint directory exactly as
`save_pretrained` does (config.json, model.safetensors, a minimal byte-level BPE tokenizer), optionally with an MTP
head added to the safetensors (transformers drops `mtp.*`, so the weights are written here, with the shapes
SGLang/vLLM/llama.cpp use, model.md §9). Everything is float32 and seeded: the same spec gives the same bytes.

Between them the specs cover: GDN and QSA attention layers, PLE on a GDN layer (small n-gram vocabulary base so
the table stays small), QSA with a small budget and compress ratio (the sparse path starts within 20 tokens),
several experts with top-k > 1, hc_count 4 and 2, value/key head ratios 2 and 3, the multimodal
(`model.language_model.*`) and text-only (`model.*`) layouts, fused and per-expert expert storage, the legacy
layer-type spellings, and a list-valued eos_token_id.

`load_hf` loads a checkpoint back with the eager attention and eager experts backends (model.md errata 3) and
`hf_logits` runs it; `MtpOracle` (in test_model_oracle.py) assembles the MTP head from transformers' modules.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

VOCAB = 320
EOS = 256          # <|endoftext|>: the PLE n-gram reset token
IM_START, IM_END = 257, 258


@dataclass(frozen=True)
class TinySpec:
    name: str
    seed: int
    hidden: int = 64
    layers: int = 4
    interval: int = 4
    layer_type_spelling: str | None = None   # rewrite config.json's attention layer name (errata 1)
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    rope_theta: float = 1e7
    lin_k_heads: int = 2
    lin_v_heads: int = 4
    lin_head_dim: int = 16
    experts: int = 8
    top_k: int = 3
    ffn: int = 32
    shared_ffn: int = 32
    hc: int = 4
    hc_rank: int = 16
    ple_layer_ids: tuple[int, ...] = ()      # one-indexed, as in the HF config
    ngram_base: int = 64
    ple_shards: int = 4
    idx_heads: int = 8
    idx_dim: int = 16
    idx_budget: int = 16
    idx_ratio: int = 4
    eos: int | tuple[int, ...] = EOS
    multimodal: bool = False                 # Qwen4ExpForConditionalGeneration with a tiny vision tower
    mtp: bool = False

    @property
    def wide(self) -> int:
        return self.hc * self.hidden

    @property
    def rotary_dim(self) -> int:
        return self.head_dim // 4

    @property
    def ple_eos(self) -> int:
        return self.eos[0] if isinstance(self.eos, tuple) else self.eos

    @property
    def dense_limit(self) -> int:
        """Longest sequence whose every query attends densely (QSA selects everything up to here)."""
        return self.idx_budget + self.idx_ratio - 1


SPECS: dict[str, TinySpec] = {
    # The released shape in miniature: GDN x3 + QSA, PLE on layer index 1, budget 16 / ratio 4.
    "qsa_ple": TinySpec("qsa_ple", seed=11, ple_layer_ids=(2,)),
    # hc_count 2, value/key head ratio 3, interval 2, QSA budget 32, checkpoint spelling "qwen_sparse_attention".
    "hc2_ratio3": TinySpec("hc2_ratio3", seed=23, hidden=96, layers=4, interval=2, heads=4, kv_heads=1,
                           head_dim=64, rope_theta=1e4, lin_v_heads=6, experts=16, top_k=4, hc=2, idx_heads=8,
                           idx_dim=32, idx_budget=32, idx_ratio=4, layer_type_spelling="qwen_sparse_attention"),
    # Multimodal layout + vision tower (skipped by the converter), PLE on layer 0, ratio 2, eos list, MTP head.
    "mtp_vl": TinySpec("mtp_vl", seed=37, ple_layer_ids=(1,), experts=6, top_k=2, idx_budget=8, idx_ratio=2,
                       eos=(EOS, IM_END), multimodal=True, mtp=True, layer_type_spelling="full_attention"),
    # The smallest geometry the CUDA kernels take (attention head_dim 128, mat-vec widths in 32s): the GPU
    # decoder's whole-step parity (`strata parity --model`) runs on this one's GGUF.
    "gpu_geom": TinySpec("gpu_geom", seed=71, hidden=512, layers=4, interval=2, heads=2, kv_heads=1, head_dim=128,
                         lin_k_heads=2, lin_v_heads=4, lin_head_dim=32, experts=8, top_k=2, ffn=32, shared_ffn=32,
                         hc=4, hc_rank=32, ple_layer_ids=(1,), idx_heads=8, idx_dim=32, idx_budget=16, idx_ratio=4),
    # Widths that every K/IQ block format fits (ne0 = 256 for gate/up, 64 for down): the quantized oracle.
    "quant": TinySpec("quant", seed=53, hidden=256, heads=2, kv_heads=1, head_dim=64, lin_head_dim=32, experts=4,
                      top_k=2, ffn=64, shared_ffn=64, idx_heads=8, idx_dim=32, idx_budget=32, idx_ratio=4),
}


# ---------------------------------------------------------------------------------------------------------
# Configs and models
# ---------------------------------------------------------------------------------------------------------

def mrope_sections(n_pairs: int) -> list[int]:
    """Interleaved M-RoPE sections that cover every rotary pair, as [11, 11, 10] does for 32 pairs.

    transformers gives any pair outside the H/W slices the T position; llama.cpp's IMROPE gives a pair outside all
    three sections the fourth section's position, which is not the text position. With sections that cover every
    pair (t = pairs 0,3,6.., h = 1,4,7.., w = 2,5,8..) the two agree."""
    return [-(-n_pairs // 3), -(-(n_pairs - 1) // 3), -(-(n_pairs - 2) // 3)]


def text_config_kwargs(spec: TinySpec) -> dict:
    sections = mrope_sections(spec.rotary_dim // 2)
    return dict(
        vocab_size=VOCAB, hidden_size=spec.hidden, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads, head_dim=spec.head_dim,
        linear_num_key_heads=spec.lin_k_heads, linear_num_value_heads=spec.lin_v_heads,
        linear_key_head_dim=spec.lin_head_dim, linear_value_head_dim=spec.lin_head_dim,
        num_experts=spec.experts, num_experts_per_tok=spec.top_k, moe_intermediate_size=spec.ffn,
        shared_expert_intermediate_size=spec.shared_ffn, hc_count=spec.hc, hc_lowrank=spec.hc_rank,
        ple_layer_ids=list(spec.ple_layer_ids), ngram_vocab_size_base=spec.ngram_base,
        split_ngram_parts=spec.ple_shards, indexer_n_heads=spec.idx_heads, indexer_kv_heads=1,
        indexer_head_dim=spec.idx_dim, indexer_budget=spec.idx_budget, indexer_compress_ratio=spec.idx_ratio,
        output_gate_type="sigmoid", eos_token_id=list(spec.eos) if isinstance(spec.eos, tuple) else spec.eos,
        bos_token_id=EOS, max_position_embeddings=4096, full_attention_interval=spec.interval,
        rope_parameters={"rope_type": "default", "rope_theta": spec.rope_theta, "partial_rotary_factor": 0.25,
                         "mrope_section": sections, "mrope_interleaved": True},
    )


def make_config(spec: TinySpec):
    from transformers import Qwen4ExpConfig, Qwen4ExpTextConfig

    text = Qwen4ExpTextConfig(**text_config_kwargs(spec))
    if not spec.multimodal:
        return text
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=spec.hidden,
                  patch_size=4, temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16)
    return Qwen4ExpConfig(text_config=text.to_dict(), vision_config=vision, image_token_id=300, video_token_id=301,
                          vision_start_token_id=302, vision_end_token_id=303)


def model_class(spec: TinySpec):
    from transformers import Qwen4ExpForCausalLM, Qwen4ExpForConditionalGeneration

    return Qwen4ExpForConditionalGeneration if spec.multimodal else Qwen4ExpForCausalLM


def _init_value(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random values by parameter role, sized so every block contributes visibly and routing is decisive."""
    def normal(std):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std

    def uniform(lo, hi):
        return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo

    if name.endswith("linear_attn.norm.weight"):
        return 1.0 + normal(0.2)                       # gated norm: plain weight around 1
    if name.endswith("A_log"):
        return torch.log(uniform(0.5, 8.0))
    if name.endswith("dt_bias"):
        return normal(0.5)
    if "norm" in name.rsplit(".", 2)[-2] or name.endswith(("hc_norm.weight", "layernorm.weight")):
        return normal(0.2)                             # zero-centred gammas: (1 + w)
    if name.endswith("conv1d.weight"):
        return normal(0.5)
    if "ngram_embedding" in name or name.endswith("embed_tokens.weight"):
        return normal(1.0)
    if name.endswith("mlp.gate.weight"):
        return normal(3.0 / math.sqrt(shape[-1]))      # router: well-separated probabilities
    if name.endswith("gate_up_proj") or name.endswith("down_proj") and len(shape) == 3:
        return normal(1.0 / math.sqrt(shape[-1]))
    if len(shape) >= 2:
        return normal(1.0 / math.sqrt(shape[-1]))
    return normal(0.1)


def randomize_(module: torch.nn.Module, seed: int) -> None:
    """Overwrite every parameter (not the PLE hash buffers) with seeded values, in sorted name order."""
    gen = torch.Generator().manual_seed(seed)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            params[name].copy_(_init_value(name, tuple(params[name].shape), gen))


def build_model(spec: TinySpec):
    torch.manual_seed(spec.seed)
    model = model_class(spec)(make_config(spec))
    randomize_(model, spec.seed)
    return model.eval()


# ---------------------------------------------------------------------------------------------------------
# MTP head weights (model.md §9)
# ---------------------------------------------------------------------------------------------------------

def mtp_layer_config(text_config):
    """A text config with one extra attention layer at index n_layer, for building the MTP block's modules."""
    cfg = text_config.__class__(**{**text_config.to_dict(), "num_hidden_layers": text_config.num_hidden_layers + 1,
                                   "layer_types": list(text_config.layer_types) + ["indexed_attention"]})
    return cfg


def build_mtp_modules(text_config, seed: int) -> torch.nn.ModuleDict:
    """The MTP head's modules, built from transformers' own layer classes and randomized."""
    from transformers.models.qwen4_exp import modeling_qwen4_exp as M

    cfg = mtp_layer_config(text_config)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"   # ascending-expert summation, as the trunk (model.md errata 3)
    H, W = cfg.hidden_size, cfg.hc_count * cfg.hidden_size
    mods = torch.nn.ModuleDict({
        "layer": M.Qwen4ExpTextDecoderLayer(cfg, cfg.num_hidden_layers - 1),
        "pre_fc_norm_embedding": M.Qwen4ExpTextRMSNorm(H, eps=cfg.rms_norm_eps),
        "pre_fc_norm_hidden": M.Qwen4ExpTextRMSNorm(W, eps=cfg.rms_norm_eps),
        "fc_embedding": torch.nn.Linear(H, H, bias=False),
        "fc_hidden": torch.nn.Linear(H, H, bias=False),
        "hyper_connection_mixer": M.Qwen4ExpTextGatedResidual(cfg, use_combine=False),
    })
    randomize_(mods, seed)
    return mods.eval()


def mtp_state_dict(mods: torch.nn.ModuleDict) -> dict[str, torch.Tensor]:
    """Checkpoint names: mtp.layers.0.* (fused experts), mtp.fc_*, mtp.pre_fc_norm_*, mtp.hyper_connection_mixer.*"""
    out = {}
    for key, value in mods.state_dict().items():
        part, rest = key.split(".", 1)
        prefix = "mtp.layers.0." if part == "layer" else f"mtp.{part}."
        out[prefix + rest] = value.detach().clone().contiguous()
    return out


def load_mtp_modules(model_dir: Path, text_config) -> torch.nn.ModuleDict:
    """Rebuild the MTP modules from the mtp.* tensors of a checkpoint."""
    from safetensors.torch import load_file

    mods = build_mtp_modules(text_config, seed=0)
    tensors = {k: v for f in sorted(Path(model_dir).glob("*.safetensors")) for k, v in load_file(f).items()
               if k.startswith("mtp.")}
    state = {}
    for key in mods.state_dict():
        part, rest = key.split(".", 1)
        state[key] = tensors[("mtp.layers.0." if part == "layer" else f"mtp.{part}.") + rest]
    mods.load_state_dict(state, strict=True)
    return mods.eval()


def add_mtp_weights(model_dir: Path, text_config, seed: int) -> None:
    """Append mtp.* tensors to the checkpoint's single safetensors file and declare mtp_num_hidden_layers."""
    from safetensors.torch import load_file, save_file

    path = model_dir / "model.safetensors"
    tensors = load_file(path)
    tensors.update(mtp_state_dict(build_mtp_modules(text_config, seed)))
    save_file(tensors, path, metadata={"format": "pt"})
    cfg_path = model_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    target = cfg["text_config"] if "text_config" in cfg else cfg
    target["mtp_num_hidden_layers"] = 1
    target["mtp_use_dedicated_embeddings"] = False
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------------------
# A minimal byte-level BPE tokenizer (ids 0..255 bytes, then specials, then a few merges)
# ---------------------------------------------------------------------------------------------------------

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("Ġ", "s"),
          ("r", "e"), ("a", "t"), ("Ġ", "w"), ("e", "n"), ("Ġ", "o"), ("i", "s"), ("o", "r"), ("a", "n")]
SPECIALS = {EOS: "<|endoftext|>", IM_START: "<|im_start|>", IM_END: "<|im_end|>"}
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_symbols() -> list[str]:
    """GPT-2's byte -> printable unicode map, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def write_tokenizer(model_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {s: i for i, s in enumerate(byte_symbols())}
    vocab.update({s: i for i, s in SPECIALS.items()})
    next_id = max(SPECIALS) + 1
    for a, b in MERGES:
        vocab[a + b] = next_id
        next_id += 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=list(MERGES)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=SPECIALS[EOS], pad_token=SPECIALS[EOS],
                                   additional_special_tokens=[SPECIALS[IM_START], SPECIALS[IM_END]])
    assert all(fast.convert_tokens_to_ids(s) == i for i, s in SPECIALS.items()), "special token ids moved"
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(model_dir)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------

def respell_layer_types(model_dir: Path, spelling: str) -> None:
    """Write the attention layers under another accepted name (transformers remaps it on load)."""
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    target = cfg["text_config"] if "text_config" in cfg else cfg
    target["layer_types"] = [spelling if t != "linear_attention" else t for t in target["layer_types"]]
    path.write_text(json.dumps(cfg, indent=2) + "\n")


def build_checkpoint(spec: TinySpec, model_dir: Path) -> Path:
    """Write the spec's checkpoint to `model_dir` (created); returns it."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(spec)
    model.save_pretrained(model_dir)
    write_tokenizer(model_dir)
    if spec.layer_type_spelling:
        respell_layer_types(model_dir, spec.layer_type_spelling)
    if spec.mtp:
        add_mtp_weights(model_dir, text_config_of(model), spec.seed + 1)
    return model_dir


def text_config_of(model):
    cfg = model.config
    return cfg.text_config if hasattr(cfg, "text_config") else cfg


def load_hf(model_dir: Path, spec: TinySpec):
    """The checkpoint in transformers, fp32, eager attention and eager experts (model.md errata 3)."""
    model = model_class(spec).from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                              experts_implementation="eager")
    assert text_config_of(model)._experts_implementation == "eager"
    return model.eval()


def replace_experts(model, layer: int, gate: np.ndarray, up: np.ndarray, down: np.ndarray) -> None:
    """Set one layer's routed experts: gate/up [E, F, H], down [E, H, F] (numpy, torch layout)."""
    experts = language_model(model).layers[layer].mlp.experts
    with torch.no_grad():
        experts.gate_up_proj.copy_(torch.from_numpy(np.concatenate([gate, up], axis=1)))
        experts.down_proj.copy_(torch.from_numpy(down))


def language_model(model):
    inner = model.model
    return inner.language_model if hasattr(inner, "language_model") else inner


@torch.no_grad()
def hf_logits(model, tokens: list[int]) -> np.ndarray:
    """float32 logits [len(tokens), vocab] of one forward pass over `tokens`."""
    out = model(input_ids=torch.tensor([tokens], dtype=torch.long), use_cache=False)
    return out.logits[0].float().numpy()


@torch.no_grad()
def hf_incremental_logits(model, tokens: list[int], n_prefill: int) -> np.ndarray:
    """Logits of a prefill of `n_prefill` tokens then one token per call with the cache (transformers' decode path:
    recurrent GDN, cached raw index keys, cached PLE n-gram ids and conv rows)."""
    out = model(input_ids=torch.tensor([tokens[:n_prefill]]), use_cache=True)
    rows, cache = [out.logits[0]], out.past_key_values
    for t in tokens[n_prefill:]:
        out = model(input_ids=torch.tensor([[t]]), cache=cache, use_cache=True)
        rows.append(out.logits[0])
        cache = out.past_key_values
    return torch.cat(rows).float().numpy()


@torch.no_grad()
def hf_logits_and_wide(model, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Logits and the wide pre-mixer residual [len, hc*hidden] (the MTP head's input)."""
    captured = {}
    mixer = language_model(model).hyper_connection_mixer
    handle = mixer.register_forward_pre_hook(lambda mod, args: captured.setdefault("wide", args[0].detach()))
    try:
        logits = hf_logits(model, tokens)
    finally:
        handle.remove()
    return logits, captured["wide"][0].float().numpy()


class SelectionMargins:
    """Records, while active, the margin at the cut of every top-k transformers takes: the QSA block selection
    (1-D scores, absolute gap) and the MoE router (2-D probabilities, gap relative to the k-th probability). A margin near 0 means a tie whose order is
    implementation-defined (torch.topk), so an engine may legitimately pick differently."""

    def __init__(self):
        self.indexer: list[float] = []
        self.router: list[float] = []

    def _record(self, tensor: torch.Tensor, k: int) -> None:
        if tensor.shape[-1] > k:
            top = torch.sort(tensor.detach().float(), dim=-1, descending=True).values
            gap = top[..., k - 1] - top[..., k]
            if tensor.dim() == 1:           # QSA block scores, O(1): absolute gap
                self.indexer.append(float(gap.min()))
            else:                           # router probabilities: relative gap (= router-logit gap)
                self.router.append(float((gap / top[..., k - 1]).min()))

    def __enter__(self):
        self._method, self._function = torch.Tensor.topk, torch.topk
        method, function = self._method, self._function

        def spy_method(tensor, k, *args, **kwargs):
            self._record(tensor, k)
            return method(tensor, k, *args, **kwargs)

        def spy_function(tensor, k, *args, **kwargs):
            self._record(tensor, k)
            return function(tensor, k, *args, **kwargs)

        torch.Tensor.topk, torch.topk = spy_method, spy_function
        return self

    def __exit__(self, *exc):
        torch.Tensor.topk, torch.topk = self._method, self._function


def prompt(n: int, seed: int, eos_at: tuple[int, ...] = ()) -> list[int]:
    """A deterministic prompt of n token ids in [0, 256) (bytes and merges), with EOS at the given positions."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 256, size=n).tolist()
    for p in eos_at:
        if p < n:
            ids[p] = EOS
    return [int(i) for i in ids]


def cached_checkpoint(spec: TinySpec, root: Path) -> Path:
    """Build the spec's checkpoint under `root` once (per pytest session root); later calls reuse it."""
    model_dir = Path(root) / spec.name
    done = model_dir / ".complete"
    if not done.exists():
        build_checkpoint(spec, model_dir)
        done.write_text("ok\n")
    return model_dir

"""Numpy dequantizers and random valid blocks for the quantized-format oracle.

Dequantization uses the `gguf` package's numpy implementations where it has one and this module's own for the
types it lacks (Q1_0 and Q2_0, ggml types 41 and 42, per shared/spec/quant-formats.md §4.3). `test_convert_dequant.py` checks every
type used here against the bit-exact vectors in shared/formats/vectors.

`random_blocks` makes blocks the way the format vectors were made: random bytes, with every f16 scale field forced
to a finite, positive value, scaled so the dequantized weights have a chosen standard deviation and roughly zero
mean (the min/offset fields of Q4_1/Q5_1 and the K-quants are set relative to the scale).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import gguf

Q1_0 = 41   # in gguf 0.19's enum, without a dequantizer
Q2_0 = 42   # not in gguf 0.19's GGMLQuantizationType


@dataclass(frozen=True)
class BlockFormat:
    type_id: int
    name: str
    block: int          # weights per block
    size: int           # bytes per block
    scale: tuple[int, ...] = (0,)            # byte offsets of the f16 main scale(s)
    offset: tuple[tuple[int, float], ...] = ()  # (byte offset of an f16 min/dmin field, value as a multiple of d)


FORMATS: dict[str, BlockFormat] = {f.name: f for f in (
    BlockFormat(2, "Q4_0", 32, 18),
    BlockFormat(3, "Q4_1", 32, 20, offset=((2, -7.5),)),
    BlockFormat(6, "Q5_0", 32, 22),
    BlockFormat(7, "Q5_1", 32, 24, offset=((2, -15.5),)),
    BlockFormat(8, "Q8_0", 32, 34),
    BlockFormat(10, "Q2_K", 256, 84, scale=(80,), offset=((82, 1.5),)),
    BlockFormat(11, "Q3_K", 256, 110, scale=(108,)),
    BlockFormat(12, "Q4_K", 256, 144, offset=((2, 7.5),)),
    BlockFormat(13, "Q5_K", 256, 176, offset=((2, 15.5),)),
    BlockFormat(14, "Q6_K", 256, 210, scale=(208,)),
    BlockFormat(16, "IQ2_XXS", 256, 66),
    BlockFormat(17, "IQ2_XS", 256, 74),
    BlockFormat(18, "IQ3_XXS", 256, 98),
    BlockFormat(19, "IQ1_S", 256, 50),
    BlockFormat(20, "IQ4_NL", 32, 18),
    BlockFormat(21, "IQ3_S", 256, 110),
    BlockFormat(22, "IQ2_S", 256, 82),
    BlockFormat(23, "IQ4_XS", 256, 136),
    BlockFormat(29, "IQ1_M", 256, 56, scale=()),   # the f16 scale is split over the top nibbles of 4 words
    BlockFormat(34, "TQ1_0", 256, 54, scale=(52,)),
    BlockFormat(35, "TQ2_0", 256, 66, scale=(64,)),
    BlockFormat(41, "Q1_0", 128, 18),
    BlockFormat(Q2_0, "Q2_0", 64, 18),
)}
BY_ID = {f.type_id: f for f in FORMATS.values()}


# ---------------------------------------------------------------------------------------------------------
# Dequantization
# ---------------------------------------------------------------------------------------------------------

def dequantize_q2_0(blocks: np.ndarray) -> np.ndarray:
    """Q2_0: f16 d, then 16 bytes of 2-bit codes, low bits first; y = (c - 1) * d."""
    blocks = blocks.reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)            # [n, 1]
    qs = blocks[:, 2:].astype(np.uint8)                                       # [n, 16]
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8)
    codes = (qs[:, :, None] >> shifts[None, None, :]) & 3                     # [n, 16, 4]: weight 4*byte + k
    return (codes.reshape(-1, 64).astype(np.float32) - np.float32(1.0)) * d


def dequantize_q1_0(blocks: np.ndarray) -> np.ndarray:
    """Q1_0: f16 d, then one bit per weight (bit j&7 of byte j>>3); y = +d for 1, -d for 0."""
    blocks = blocks.reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    bits = np.unpackbits(blocks[:, 2:], axis=1, bitorder="little").astype(np.float32)   # [n, 128]
    return np.where(bits > 0, d, -d).astype(np.float32)


OWN_DEQUANTIZERS = {Q1_0: dequantize_q1_0, Q2_0: dequantize_q2_0}


def dequantize(data: np.ndarray, type_id: int, shape: tuple[int, ...]) -> np.ndarray:
    """Raw bytes of a tensor of numpy-order `shape` (last axis = ne0) -> float32 values of that shape."""
    fmt = BY_ID[type_id]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    raw = np.ascontiguousarray(data, dtype=np.uint8).reshape(rows, (shape[-1] // fmt.block) * fmt.size)
    if type_id in OWN_DEQUANTIZERS:
        out = OWN_DEQUANTIZERS[type_id](raw).reshape(rows, -1)
    else:
        out = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(type_id))
    return np.asarray(out, dtype=np.float32).reshape(shape)


# ---------------------------------------------------------------------------------------------------------
# Random valid blocks
# ---------------------------------------------------------------------------------------------------------

def _set_f16(blocks: np.ndarray, offset: int, values: np.ndarray) -> None:
    blocks[:, offset:offset + 2] = values.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _set_iq1m_scale(blocks: np.ndarray, values: np.ndarray) -> None:
    bits = values.astype(np.float16).view(np.uint16).astype(np.uint16)
    words = blocks[:, 48:56].copy().view(np.uint16)                            # W0..W3
    for i in range(4):
        nib = (bits >> (4 * i)) & 0xF
        words[:, i] = (words[:, i] & 0x0FFF) | (nib << 12)
    blocks[:, 48:56] = words.view(np.uint8)


def _set_scales(fmt: BlockFormat, blocks: np.ndarray, d: np.ndarray) -> None:
    if fmt.name == "IQ1_M":
        _set_iq1m_scale(blocks, d)
        return
    for off in fmt.scale:
        _set_f16(blocks, off, d)
    for off, mult in fmt.offset:
        _set_f16(blocks, off, d * mult)


def random_blocks(fmt: BlockFormat, n_blocks: int, rng: np.random.Generator, std: float = 0.1) -> np.ndarray:
    """uint8 [n_blocks, size]: random codes, finite positive scales, weights of about `std` deviation."""
    blocks = rng.integers(0, 256, size=(n_blocks, fmt.size), dtype=np.uint8)
    _set_scales(fmt, blocks, np.ones(n_blocks, dtype=np.float32))
    unit = dequantize(blocks, fmt.type_id, (n_blocks, fmt.block))
    scale = std / max(float(unit.std()), 1e-6)
    d = (scale * rng.uniform(0.5, 1.5, size=n_blocks)).astype(np.float32)
    _set_scales(fmt, blocks, d)
    return blocks


def random_tensor(fmt: BlockFormat, shape: tuple[int, ...], rng: np.random.Generator, std: float = 0.1):
    """(raw bytes as uint8 [rows, row_bytes], dequantized float32 of `shape`) for a numpy-order `shape`."""
    if shape[-1] % fmt.block:
        raise ValueError(f"{fmt.name}: row width {shape[-1]} is not a multiple of {fmt.block}")
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    per_row = shape[-1] // fmt.block
    blocks = random_blocks(fmt, rows * per_row, rng, std)
    raw = blocks.reshape(rows, per_row * fmt.size)
    values = dequantize(raw, fmt.type_id, shape)
    if not np.all(np.isfinite(values)):
        raise AssertionError(f"{fmt.name}: non-finite dequantized value")
    return raw, values


# ---------------------------------------------------------------------------------------------------------
# Format vectors (shared/formats/vectors/<TYPE>.txt)
# ---------------------------------------------------------------------------------------------------------

def read_vectors(path) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(block bytes uint8, expected float32 values)] from a vectors file."""
    pairs, block = [], None
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line.startswith("block_hex "):
            block = np.frombuffer(bytes.fromhex(line.split(None, 1)[1]), dtype=np.uint8)
        elif line.startswith("values ") and block is not None:
            vals = np.array([float.fromhex(v) for v in line.split()[1:]], dtype=np.float32)
            pairs.append((block, vals))
            block = None
    return pairs

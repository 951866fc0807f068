"""The numpy dequantizers of dequant_np.py (the quantized oracle's reference) against shared/formats/vectors,
bit for bit, and the random-block generator's validity (finite values of the requested size)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dequant_np as dq  # noqa: E402


def vectors_dir() -> Path:
    """shared/formats/vectors: beside the checkout (CI) or at /work/shared."""
    for root in (HERE.parents[2] / "shared", HERE.parents[1] / "shared", Path("/work/shared")):
        if (root / "formats" / "vectors").is_dir():
            return root / "formats" / "vectors"
    pytest.fail("shared/formats/vectors not found next to the checkout")


@pytest.mark.parametrize("name", sorted(dq.FORMATS))
def test_dequantizer_matches_vectors(name):
    fmt = dq.FORMATS[name]
    pairs = dq.read_vectors(vectors_dir() / f"{name}.txt")
    assert len(pairs) == 4
    for i, (block, want) in enumerate(pairs):
        assert block.size == fmt.size, f"{name} block {i}: {block.size} bytes, expected {fmt.size}"
        got = dq.dequantize(block, fmt.type_id, (1, fmt.block))[0]
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{name} block {i}")


@pytest.mark.parametrize("name", sorted(dq.FORMATS))
def test_random_blocks_are_valid(name):
    fmt = dq.FORMATS[name]
    raw, values = dq.random_tensor(fmt, (3, 2 * fmt.block), np.random.default_rng(1), std=0.05)
    assert raw.shape == (3, 2 * fmt.size)
    assert np.all(np.isfinite(values))
    assert 0.02 < values.std() < 0.1, values.std()
    again, _ = dq.random_tensor(fmt, (3, 2 * fmt.block), np.random.default_rng(1), std=0.05)
    assert np.array_equal(raw, again), "not deterministic"

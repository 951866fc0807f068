#!/usr/bin/env python3
"""Per-kernel times from ncu's CSV (bench/kernel-profile.sh): one line per kernel, its ncu id,
name, grid and time, then the total.

Usage: kernel_profile.py OUT SUFFIX

Reads OUT/ncu-ctx64SUFFIX.csv (every kernel of a short-context run; the last complete decode
window is kept, as kernel_limits.last_window finds it) and OUT/ncu-attention-ctx4096SUFFIX.csv (the
attention kernels at 4096 tokens; the last 14 are kept), and writes kernels-ctx64SUFFIX.txt and
kernels-attention-ctx4096SUFFIX.txt beside them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_limits  # noqa: E402

ATTENTION_KERNELS = 14  # the last decode window's attention launches of the 4-layer slice


def lines(seq):
    """[(name, metrics)] -> the file's text: `id name grid=G usUS` per kernel, then the total."""
    out = []
    total = 0.0
    for name, m in seq:
        us = m.get(kernel_limits.TIME, 0.0) / 1000
        total += us
        out.append(f"{m['id']} {name} grid={int(m.get('launch__grid_size', 0))} {us:.2f}us")
    out.append(f"total {total:.1f}us over {len(seq)} kernels")
    return "\n".join(out) + "\n"


def read(path):
    """The CSV's kernels; none when ncu recorded none (the file then holds only its log)."""
    try:
        with open(path) as f:
            return kernel_limits.read(f.read())
    except (OSError, ValueError):
        return []


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, sfx = sys.argv[1], sys.argv[2]
    window = kernel_limits.last_window(read(os.path.join(out, f"ncu-ctx64{sfx}.csv")))
    attention = read(os.path.join(out, f"ncu-attention-ctx4096{sfx}.csv"))[-ATTENTION_KERNELS:]
    for name, seq in ((f"kernels-ctx64{sfx}.txt", window), (f"kernels-attention-ctx4096{sfx}.txt", attention)):
        with open(os.path.join(out, name), "w") as f:
            f.write(lines(seq))
    print(lines(window).splitlines()[-1])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Shared-memory wavefronts of hc_post's T = 4 dot loop, per warp and 16-byte weight vector (8
BF16 weights), for three layouts of the staged r. A model, not a measurement: a load of W bytes
per lane is served 32, 16 or 8 lanes at a time for W = 4, 8, 16 (32 lanes for 4 bytes, 8 for 16), and within such
a phase the wavefronts are the most distinct addresses that share a bank (same addresses
broadcast). Lanes: 8 per row (sub = lane % 8, row c = lane / 8); lane sub reads vector v = sub
(+ 8 i, which does not change the banks)."""
RANK = 320
LANES = [(lane // 8, lane % 8) for lane in range(32)]


def wavefronts(byte_addrs, width):
    per_phase = {4: 32, 8: 16, 16: 8}[width]
    total = 0
    for start in range(0, 32, per_phase):
        banks = {}
        for a in set(byte_addrs[start:start + per_phase]):
            for w in range(width // 4):
                banks.setdefault((a // 4 + w) % 32, set()).add(a)
        total += max(len(s) for s in banks.values())
    return total


def main():
    # [t][k] floats, one 4-byte load per row t and weight e (the form the tree runs)
    tk = sum(wavefronts([4 * (t * RANK + sub * 8 + e) for _, sub in LANES], 4) for t in range(4) for e in range(8))
    # [k][4] float4s, one 16-byte load per weight e
    k4 = sum(wavefronts([16 * (sub * 8 + e) for _, sub in LANES], 16) for e in range(8))
    # the same with k's slot XORed by its vector index mod 8
    swz = sum(wavefronts([16 * ((sub * 8 + e) ^ (sub & 7)) for _, sub in LANES], 16) for e in range(8))
    print(f"[t][k] scalar: {tk}  [k][4]: {k4}  [k][4] XOR-swizzled: {swz}")


if __name__ == "__main__":
    main()

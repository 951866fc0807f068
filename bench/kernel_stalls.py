#!/usr/bin/env python3
"""Where one kernel's warps wait, per SASS instruction, from ncu's source page.

Input: the CSV of `ncu --import REP --page source --print-source sass --csv` (a line naming the
kernel, the header line starting with "Address", one line per instruction). Output: the stall
reasons summed over the kernel, then the instructions with the most samples, each with its two
largest reasons. Used by bench/kernel-stalls.sh.

Usage: kernel_stalls.py SOURCE.csv [--top N]
"""
import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read(path):
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if header_at is None:
        raise SystemExit(f"{path}: no header line starting with 'Address' (not an ncu source page CSV?)")
    kernel = rows[0][1] if header_at > 0 and len(rows[0]) > 1 else "?"
    header = rows[header_at]
    body = [r for r in rows[header_at + 1:] if len(r) == len(header)]
    return kernel, header, body


def summarize(path, top):
    kernel, header, body = read(path)
    col = {name: i for i, name in enumerate(header)}
    if SAMPLES not in col or "Source" not in col:
        raise SystemExit(f"{path}: no '{SAMPLES}' or 'Source' column (was the report taken with --set full?)")
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    total = sum(number(r[col[SAMPLES]]) for r in body)
    lines = [f"kernel {kernel}", f"{len(body)} instructions, {total:.0f} warp samples"]
    sums = sorted(((sum(number(r[col[h]]) for r in body), h) for h in reasons), reverse=True)
    lines.append("by reason: " + ", ".join(f"{h[6:]} {100 * s / max(total, 1):.1f}%" for s, h in sums if s > 0))
    lines.append(f"top {top} instructions (index in the listing, samples, share, largest reasons, SASS):")
    ranked = sorted(range(len(body)), key=lambda i: -number(body[i][col[SAMPLES]]))[:top]
    for i in ranked:
        r = body[i]
        n = number(r[col[SAMPLES]])
        if n <= 0:
            break
        why = sorted(((number(r[col[h]]), h[6:]) for h in reasons), reverse=True)[:2]
        why_text = " ".join(f"{h}:{v:.0f}" for v, h in why if v > 0)
        lines.append(f"  #{i:<5} {n:6.0f} {100 * n / max(total, 1):5.1f}%  {why_text:<32} {r[col['Source']].strip()}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    print(summarize(a.csv, a.top))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What bounds each kernel of one decode window, from ncu's CSV (bench/kernel-limits.sh).

Usage: kernel_limits.py NCU_CSV OUT_TXT

Each kernel of the last complete decode window (a window starts with the embedding's get_rows
followed by hc_broadcast; the one before the last start is taken) gets one line: its time, the
megabytes it read from DRAM and their rate, the fraction of the DRAM's, the issue slots' and the
shared-memory pipe's peak it used, its achieved occupancy, registers and grid; then the window's
kernels summed by name, the largest first.
"""
import collections
import csv
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_trace  # noqa: E402

TIME = "gpu__time_duration.sum"
DRAM_BYTES = "dram__bytes_read.sum"
COLUMNS = [  # (header, metric, format)
    ("dram%", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "6.1f"),
    ("issue%", "smsp__issue_active.avg.pct_of_peak_sustained_active", "6.1f"),
    ("smem%", "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed", "6.1f"),
    ("occ%", "sm__warps_active.avg.pct_of_peak_sustained_active", "5.1f"),
    ("regs", "launch__registers_per_thread", "4.0f"),
    ("grid", "launch__grid_size", "5.0f"),
]
METRICS = [TIME, DRAM_BYTES] + [m for _, m, _ in COLUMNS]


def short_name(name):
    """`void ns::<unnamed>::f<A, B>(args)` (ncu's form; `unnamed>::` where it cuts the name) or
    `void ns::(anonymous namespace)::f<(T)A, B>(args)` -> `f<A, B>` (kernel_trace's rule)."""
    return kernel_trace.short_name(name.replace("<unnamed>", "anon").replace("unnamed>", "anon"))


def read(text):
    """ncu --csv output -> [(short name, {metric: value, "id": ncu's launch id})] in launch order."""
    if '"ID"' not in text:
        raise ValueError("no ncu records")
    rows = {}
    for r in csv.DictReader(io.StringIO(text[text.index('"ID"'):])):
        k = rows.setdefault(int(r["ID"]), {"name": r["Kernel Name"], "id": int(r["ID"])})
        try:
            k[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            pass
    return [(short_name(rows[i]["name"]), rows[i]) for i in sorted(rows)]


def last_window(seq):
    starts = [j for j in range(len(seq) - 1) if "get_rows" in seq[j][0] and "broadcast" in seq[j + 1][0]]
    return seq[starts[-2]:starts[-1]] if len(starts) >= 2 else seq


def rate(mb, us):
    return mb / us * 1e3 if us else 0.0  # MB / us = TB/s; * 1e3: GB/s


def report(window):
    get = lambda m, key: m.get(key, float("nan"))
    lines = [f"{'us':>7} {'MB read':>8} {'GB/s':>6} " + " ".join(f"{h:>{len(format(0.0, f))}}" for h, _, f in COLUMNS)
             + "  kernel"]
    total = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for name, m in window:
        us, mb = get(m, TIME) / 1000, get(m, DRAM_BYTES) / 1e6
        cols = " ".join(format(get(m, key), f) for _, key, f in COLUMNS)
        lines.append(f"{us:7.2f} {mb:8.2f} {rate(mb, us):6.0f} {cols}  {name}")
        t = total[name]
        t[0] += 1
        t[1] += us
        t[2] += mb
    lines.append("")
    lines.append("by kernel (this window): launches, us, MB read, GB/s")
    for name, (n, us, mb) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{n:4d} {us:8.2f} {mb:8.2f} {rate(mb, us):6.0f}  {name}")
    us = sum(t[1] for t in total.values())
    mb = sum(t[2] for t in total.values())
    lines.append(f"total {us:.1f} us, {mb:.1f} MB over {len(window)} kernels")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        seq = read(open(sys.argv[1]).read())
    except ValueError as e:
        sys.exit(f"kernel_limits: {sys.argv[1]}: {e}")
    text = report(last_window(seq))
    with open(sys.argv[2], "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()

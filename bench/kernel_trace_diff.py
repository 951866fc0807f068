#!/usr/bin/env python3
"""Two kernel traces of the same decode graphs side by side (bench/kernel_trace.py's --json files):
per graph id present in both, the span of each and, per kernel, the time it adds to a launch of
the graph in each and the difference, the largest differences first.

Usage: kernel_trace_diff.py A.json B.json [--graph ID ...] [--top N]

Graph ids are the capture's own, so the two traces must come from runs that captured their
graphs in the same order (the same bench command): an id in only one trace is listed, not
compared. A kernel in only one of a graph's two traces counts 0 added in the other.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return {g["graph_id"]: g for g in json.load(f)}


def compare(a, b):
    """Two graphs' summaries -> rows (kernel, added in a, added in b, b - a), largest |b - a| first."""
    added_a = {r["kernel"]: r["added_us"] for r in a["kernels"]}
    added_b = {r["kernel"]: r["added_us"] for r in b["kernels"]}
    rows = [(k, added_a.get(k, 0.0), added_b.get(k, 0.0), added_b.get(k, 0.0) - added_a.get(k, 0.0))
            for k in set(added_a) | set(added_b)]
    return sorted(rows, key=lambda r: (-abs(r[3]), r[0]))


def report(graphs_a, graphs_b, ids=None, top=12):
    lines = []
    for gid in sorted(set(graphs_a) | set(graphs_b)):
        if ids and gid not in ids:
            continue
        if gid not in graphs_a or gid not in graphs_b:
            lines.append(f"graph {gid}: only in {'A' if gid in graphs_a else 'B'}")
            continue
        a, b = graphs_a[gid], graphs_b[gid]
        sa, sb = a["span_us_median"], b["span_us_median"]
        lines.append(f"graph {gid}: nodes {a['nodes']} / {b['nodes']}, span {sa:.1f} / {sb:.1f} us ({sb - sa:+.1f})")
        lines.append(f"  {'A us':>9} {'B us':>9} {'B - A':>8}  kernel")
        for k, ua, ub, d in compare(a, b)[:top]:
            lines.append(f"  {ua:9.1f} {ub:9.1f} {d:+8.1f}  {k}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--graph", type=int, nargs="*", help="only these graph ids")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per graph")
    args = ap.parse_args()
    try:
        text = report(load(args.a), load(args.b), set(args.graph or []), args.top)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"kernel_trace_diff: {e}")
    print(text, end="")


if __name__ == "__main__":
    main()

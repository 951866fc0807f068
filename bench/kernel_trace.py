#!/usr/bin/env python3
"""Where a decode graph's time goes, from tools/kernel_trace.cpp's records.

Usage: kernel_trace.py TRACE [--last N] [--json OUT]

Records of one graph launch share a correlation id; launches of the same captured graph share a
graph id. For every graph launched at least --min-replays times (the decode graphs: one per
window size), the last --last launches are read, and each kernel is charged the time it adds to
its launch: its end minus the latest end before it (records ordered by end). With programmatic
dependent launch a kernel starts while its predecessor runs, so its own duration (end - start)
includes the time it waits in pdl_wait; the added time does not, and the added times of a launch
sum to its span (first start to last end). Kernels are grouped by name (template arguments kept,
parameters dropped).

Each kernel's lead is that latest end before it minus its start: positive when it was resident
early (its CTAs started, and could request their weights, while the kernels before it still ran),
negative for a gap after them. A kernel whose CTAs find no room on the SMs until its predecessor's
leave has a lead near zero however early it was launched.
"""
import argparse
import collections
import json
import statistics
import sys


def short_name(name):
    """`void ns::f<A, B>(args)` -> `f<A, B>`: namespaces and the parameter list dropped."""
    name = name.replace("(anonymous namespace)", "anon")
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    head = name[:cut]
    depth, start = 0, 0
    for i, ch in enumerate(head):  # the last `::` outside template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == ":" and depth == 0 and i + 1 < len(head) and head[i + 1] == ":":
            start = i + 2
    short = head[start:]
    return short.replace("(strata::quant::Type)", "").replace("(int)", "").replace("(bool)", "")


def read(path):
    launches = collections.defaultdict(list)  # (graph, correlation) -> records
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] not in ("K", "C", "S"):
                continue
            start, end, corr, graph = int(p[1]), int(p[2]), int(p[3]), int(p[4])
            if graph == 0:
                continue  # launched outside a graph (prefill steps, set-up)
            name = short_name(p[11]) if p[0] == "K" else ("memcpy" if p[0] == "C" else "memset")
            launches[(graph, corr)].append((start, end, name, int(p[5])))
    return launches


def summarise(launches, last, min_replays):
    by_graph = collections.defaultdict(list)
    for (graph, corr), recs in launches.items():
        by_graph[graph].append((min(r[0] for r in recs), corr, recs))
    graphs = []
    for graph, reps in sorted(by_graph.items()):
        if len(reps) < min_replays:
            continue
        reps.sort()
        reps = reps[-last:]
        spans, periods = [], []
        added = collections.defaultdict(float)
        durs = collections.defaultdict(list)
        leads = collections.defaultdict(list)
        count = collections.Counter()
        for i, (t0, _, recs) in enumerate(reps):
            recs = sorted(recs, key=lambda r: r[1])
            spans.append((recs[-1][1] - t0) / 1e3)
            if i > 0:
                periods.append((t0 - reps[i - 1][0]) / 1e3)
            prev_end = t0
            for start, end, name, _ in recs:
                added[name] += max(0, end - max(prev_end, t0)) / 1e3
                leads[name].append((max(prev_end, t0) - start) / 1e3)
                prev_end = max(prev_end, end)
                durs[name].append((end - start) / 1e3)
                count[name] += 1
        n = len(reps)
        rows = []
        for name in sorted(added, key=lambda k: -added[k]):
            rows.append({
                "kernel": name,
                "per_launch": count[name] / n,
                "added_us": added[name] / n,
                "share": added[name] / n / statistics.median(spans),
                "mean_duration_us": statistics.fmean(durs[name]),
                "mean_lead_us": statistics.fmean(leads[name]),
            })
        graphs.append({
            "graph_id": graph,
            "launches": n,
            "nodes": len(reps[-1][2]),
            "span_us_median": statistics.median(spans),
            "period_us_median": statistics.median(periods) if periods else None,
            "kernels": rows,
        })
    return graphs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=32, help="launches per graph to read (the latest)")
    ap.add_argument("--min-replays", type=int, default=8, help="graphs launched fewer times are skipped")
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()
    graphs = summarise(read(args.trace), args.last, args.min_replays)
    if not graphs:
        sys.exit(f"kernel_trace: no graph launched {args.min_replays}+ times in {args.trace}")
    for g in graphs:
        period = f", launches every {g['period_us_median']:.1f} us" if g["period_us_median"] else ""
        print(f"graph {g['graph_id']}: {g['nodes']} nodes, span {g['span_us_median']:.1f} us (median of "
              f"{g['launches']} launches){period}")
        print(f"  {'added us':>9} {'share':>6} {'per launch':>10} {'mean dur us':>11} {'lead us':>8}  kernel")
        for r in g["kernels"]:
            print(f"  {r['added_us']:9.1f} {100 * r['share']:5.1f}% {r['per_launch']:10.0f} {r['mean_duration_us']:11.2f} "
                  f"{r['mean_lead_us']:8.2f}  {r['kernel']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(graphs, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Per-kernel times of one decode window at the released geometry, with ncu (the device has no
# nsys): a 4-layer synthetic slice, every kernel of one T = 1 window at a short context, then the
# attention kernels at 4096 tokens (where QSA selects). Writes kernels-ctx64.txt and
# kernels-attention-ctx4096.txt (one line per kernel: id, name, grid, us) and the raw CSV to $OUT.
#
# With a window W > 1 (third argument) the slice decodes windows of W rows and the files are
# named kernels-ctx64-wW.txt and kernels-attention-ctx4096-wW.txt.
#
# Usage (device, after a build): bash bench/kernel-profile.sh build-device/bin/strata [recipe] [window]
set -euo pipefail
strata=$1
recipe=${2:-iq3_xxs}
window=${3:-1}
sfx=""
[ "$window" -gt 1 ] && sfx="-w$window"
OUT=${OUT:-$PWD/device-out}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
common=(bench --device cuda --synth "$recipe" --layers 4 --forced --window "$window" --synth-dir /tmp/strata-shape-4l)
# Clocks and caches as in a real run: no clock locking, no cache flush between kernels.
opts=(--clock-control none --cache-control none --csv --metrics gpu__time_duration.sum,launch__grid_size)

"$ncu" "${opts[@]}" --launch-count 1200 "$strata" "${common[@]}" --ctx 64 --gen $((3 * window)) >"$OUT/ncu-ctx64$sfx.csv" 2>/dev/null
# The attention kernels only; the prefill's ~3600 of them are skipped.
"$ncu" "${opts[@]}" --kernel-name regex:"attn|qsa|chosen|block_key" --launch-skip 3500 --launch-count 120 \
  "$strata" "${common[@]}" --ctx 4096 --gen $((3 * window)) >"$OUT/ncu-attention-ctx4096$sfx.csv" 2>/dev/null

python3 - "$OUT" "$sfx" <<'PY'
import csv, io, os, re, sys
out, sfx = sys.argv[1], sys.argv[2]

def kernels(path):
    text = open(path).read()
    if '"ID"' not in text:
        return []
    rows = {}
    for r in csv.DictReader(io.StringIO(text[text.index('"ID"'):])):
        k = rows.setdefault(int(r["ID"]), {"name": r["Kernel Name"]})
        k[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    seq = []
    for i in sorted(rows):
        name = re.sub(r"\(.*$", "", re.sub(r"^void ", "", rows[i]["name"]))
        name = re.sub(r"(strata::cuda::|\(anonymous namespace\)::|<?unnamed>::|[a-z_]+_detail::)", "", name)
        seq.append((i, name, int(rows[i].get("launch__grid_size", 0)), rows[i].get("gpu__time_duration.sum", 0) / 1000))
    return seq

def write(name, seq):
    with open(os.path.join(out, name), "w") as f:
        for i, n, g, us in seq:
            f.write(f"{i} {n} grid={g} {us:.2f}us\n")
        f.write(f"total {sum(s[3] for s in seq):.1f}us over {len(seq)} kernels\n")

seq = kernels(os.path.join(out, f"ncu-ctx64{sfx}.csv"))
# A decode window starts with the embedding's get_rows followed by hc_broadcast: keep the last
# complete one (the one before the last start).
starts = [j for j in range(len(seq) - 1) if "get_rows" in seq[j][1] and "broadcast" in seq[j + 1][1]]
window = seq[starts[-2]:starts[-1]] if len(starts) >= 2 else seq
write(f"kernels-ctx64{sfx}.txt", window)
write(f"kernels-attention-ctx4096{sfx}.txt", kernels(os.path.join(out, f"ncu-attention-ctx4096{sfx}.csv"))[-14:])
print(open(os.path.join(out, f"kernels-ctx64{sfx}.txt")).read().splitlines()[-1])
PY

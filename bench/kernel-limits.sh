#!/usr/bin/env bash
# What bounds each kernel of one decode window (the device has no nsys): ncu metrics of every
# kernel of the last complete window of a 4-layer synthetic slice at a short context, each kernel
# run alone (serialised), with its time, the bytes it read from DRAM and the fraction of the
# DRAM's, the issue slots' and the shared-memory pipe's peak it used, and its achieved occupancy.
# A kernel near the DRAM peak is bound by bytes; one near the issue peak by instructions; one near
# neither by latency (too few loads in flight, or waits). Writes limits-ctx64-wW.txt (one line per
# kernel, then the same summed by kernel name) and the raw CSV to $OUT.
#
# Usage (device, after a build): bash bench/kernel-limits.sh build-device/bin/strata [recipe] [window]
set -euo pipefail
strata=$1
recipe=${2:-iq3_xxs}
window=${3:-1}
OUT=${OUT:-$PWD/device-out}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import kernel_limits; print(",".join(kernel_limits.METRICS))' \
  "$(dirname "$0")")
csv=$OUT/ncu-limits-w$window.csv
"$strata" bench --device cuda --synth "$recipe" --layers 4 --forced --window "$window" --synth-dir /tmp/strata-shape-4l \
  --ctx 64 --gen 1 >/dev/null 2>&1  # the shape pack, so that ncu's run does not build it
"$ncu" --clock-control none --cache-control none --csv --metrics "$metrics" --launch-count 1400 \
  "$strata" bench --device cuda --synth "$recipe" --layers 4 --forced --window "$window" \
  --synth-dir /tmp/strata-shape-4l --ctx 64 --gen $((3 * window)) >"$csv" 2>/dev/null || true

python3 "$(dirname "$0")/kernel_limits.py" "$csv" "$OUT/limits-ctx64-w$window.txt"

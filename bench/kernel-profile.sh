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

python3 "$(dirname "$0")/kernel_profile.py" "$OUT" "$sfx"

#!/usr/bin/env bash
# Where the biggest T = 1 decode kernels' warps wait, per SASS instruction (the device has no
# nsys; ncu's warp-state sampling with --set full): a 4-layer synthetic slice, one launch of each
# kernel after the first window, its source page summarised by bench/kernel_stalls.py into
# $OUT/stalls-<name>.txt (reasons over the kernel, then the hottest instructions).
#
# Usage (device, after a build): bash bench/kernel-stalls.sh build-device/bin/strata [recipe]
set -uo pipefail
strata=$1
recipe=${2:-iq3_xxs}
OUT=${OUT:-$PWD/device-out}
here=$(dirname "$0")
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
common=(bench --device cuda --synth "$recipe" --layers 4 --forced --synth-dir /tmp/strata-shape-4l --ctx 64 --gen 3)
"$strata" "${common[@]}" >/dev/null 2>&1  # the shape pack, so that ncu's run does not build it

# name, mangled-name regex, launches of it to skip (past the prefill's and the first window's).
kernels=(
  "hc_pre hc_pre_kernelILNS_5quant4TypeE30ELi1E 2"
  "hc_post hc_post_kernelILNS_5quant4TypeE30ELi1E 2"
  "gate_up grouped_direct_kernelILNS_5quant4TypeE18ELi1ELi5E 4"
  "qkvz mmvq_direct_kernelILNS_5quant4TypeE13ELi1E 3"
)
for k in "${kernels[@]}"; do
  read -r name regex skip <<<"$k"
  rep=/tmp/stalls-$name
  timeout 90 "$ncu" --set full --import-source yes --clock-control none --cache-control none \
    --kernel-name-base mangled --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 \
    -o "$rep" -f "$strata" "${common[@]}" >"$rep.log" 2>&1 || { echo "$name: ncu failed"; tail -3 "$rep.log"; continue; }
  "$ncu" --import "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.csv" 2>"$rep.err" &&
    python3 "$here/kernel_stalls.py" "$rep.csv" --top 40 >"$OUT/stalls-$name.txt" ||
    { echo "$name: no source page"; head -3 "$rep.err"; continue; }
  head -3 "$OUT/stalls-$name.txt"
done

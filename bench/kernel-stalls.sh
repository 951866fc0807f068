#!/usr/bin/env bash
# Where the biggest decode kernels' warps wait, per SASS instruction (the device has no nsys):
# ncu's warp-state sampling with --set full on a 4-layer synthetic slice, one launch of each
# kernel from a decode window, its source page summarised by bench/kernel_stalls.py into
# $OUT/stalls-<name>.txt (reasons over the kernel, then the hottest instructions). The attention
# kernels run at 4096 tokens, where QSA selects. With a window W > 1 (third argument) the slice
# decodes windows of W rows, the kernels are the forms those windows run (the HC pair's and the
# routed experts' templates take the window; the Q5_K projections run on mmvq_mma_kernel), each
# the launch before its last (the last decode window's: the prefill runs first), and the files
# are stalls-<name>-wW.txt. Each launch's ncu sections (duration, occupancy, waves) go to
# details-<name>[-wW].txt.
#
# STRATA_STALLS_ONLY="hc_pre down" profiles only the kernels of those names (the first column below).
#
# Usage (device, after a build): bash bench/kernel-stalls.sh build-device/bin/strata [recipe] [window]
set -uo pipefail
strata=$1
recipe=${2:-iq3_xxs}
window=${3:-1}
sfx=""
[ "$window" -gt 1 ] && sfx="-w$window"
OUT=${OUT:-$PWD/device-out}
here=$(dirname "$0")
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
common=(bench --device cuda --synth "$recipe" --layers 4 --forced --window "$window" --synth-dir /tmp/strata-shape-4l
  --gen $((3 * window)))
"$strata" "${common[@]}" --ctx 64 >/dev/null 2>&1  # the shape pack, so that ncu's run does not build it

# Launches of the kernels matching a mangled-name regex in one run at context $2 (a cheap
# metrics-only pass): the prefill's count is not worth deriving by hand.
count_launches() {
  timeout 120 "$ncu" --metrics gpu__time_duration.sum --csv --kernel-name-base mangled --kernel-name "regex:$1" \
    "$strata" "${common[@]}" --ctx "$2" 2>/dev/null | grep -c '"gpu__time_duration.sum"'
}

# name, mangled-name regex, context, launches of it to skip: a number (past the prefill's and the
# first window's), or "last" (the one before the last: a decode window's, after the prefill's).
if [ "$window" -eq 1 ]; then
  kernels=(
    "hc_pre hc_pre_kernelILNS_5quant4TypeE30ELi1E 64 2"
    "hc_post hc_post_kernelILNS_5quant4TypeE30ELi1E 64 2"
    "gate_up grouped_direct_kernelILNS_5quant4TypeE18ELi1ELi5E 64 4"
    "down grouped_direct_kernelILNS_5quant4TypeE42ELi1ELi5E 64 last"
    "qkvz mmvq_direct_kernelILNS_5quant4TypeE13ELi1E 64 3"
    "attn_split attn_split_kernelILi2E 4096 last"
    "qsa_topk qsa_topk_kernel 4096 last"
  )
else
  # The row count the templates are instantiated for: a window of W rows runs the form for the
  # next of 2, 4, 8 (hc.cu's launch_pre / launch_post, moe_direct.cu's entries_per_batch).
  rows=8
  [ "$window" -le 4 ] && rows=4
  [ "$window" -le 2 ] && rows=2
  # The routed experts' register-direct form up to 4 rows (CTAs of 8 warps), tensor cores past it.
  experts="grouped_direct_kernelILNS_5quant4TypeE18ELi${rows}ELi8E"
  down="grouped_direct_kernelILNS_5quant4TypeE42ELi${rows}ELi8E"
  [ "$window" -gt 4 ] && experts="grouped_mmvq_kernelILNS_5quant4TypeE18E" && down="grouped_mmvq_kernelILNS_5quant4TypeE42E"
  kernels=(
    "hc_pre hc_pre_kernelILNS_5quant4TypeE30ELi${rows}E 64 last"
    "hc_post hc_post_kernelILNS_5quant4TypeE30ELi${rows}E 64 last"
    "gate_up $experts 64 last"
    "down $down 64 last"
    "q5k mmvq_mma_kernelILNS_5quant4TypeE13E 64 last"
    "attn_split attn_split_kernelILi2E 4096 last"
    "qsa_topk qsa_topk_kernel 4096 last"
  )
fi
for k in "${kernels[@]}"; do
  read -r name regex ctx skip <<<"$k"
  [ -n "${STRATA_STALLS_ONLY:-}" ] && [[ " $STRATA_STALLS_ONLY " != *" $name "* ]] && continue
  if [ "$skip" = last ]; then
    n=$(count_launches "$regex" "$ctx")
    [ "${n:-0}" -ge 2 ] || { echo "$name: $n launches at ctx $ctx, none to profile"; continue; }
    skip=$((n - 2))
  fi
  rep=/tmp/stalls-$name$sfx
  timeout 90 "$ncu" --set full --import-source yes --clock-control none --cache-control none \
    --kernel-name-base mangled --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 \
    -o "$rep" -f "$strata" "${common[@]}" --ctx "$ctx" >"$rep.log" 2>&1 || { echo "$name: ncu failed"; tail -3 "$rep.log"; continue; }
  "$ncu" --import "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.csv" 2>"$rep.err" &&
    python3 "$here/kernel_stalls.py" "$rep.csv" --top 40 >"$OUT/stalls-$name$sfx.txt" ||
    { echo "$name: no source page"; head -3 "$rep.err"; continue; }
  head -3 "$OUT/stalls-$name$sfx.txt"
  # The report's sections as text (duration, occupancy and its limiters, waves, clusters a GPU can
  # hold), beside the stalls: the same launch.
  "$ncu" --import "$rep.ncu-rep" --page details >"$OUT/details-$name$sfx.txt" 2>/dev/null ||
    echo "$name: no details page"
done

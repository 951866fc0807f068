#!/usr/bin/env bash
# What each kernel adds to a decode graph's time as it runs in the graph (programmatic dependent
# launch and all), from CUPTI's kernel records: builds tools/kernel_trace.cpp, runs the
# full-geometry bench with it injected, and summarises the decode graphs' last launches with
# bench/kernel_trace.py into $OUT/kernel-trace[-SUFFIX].txt and .json. The bench's own JSON (the
# traced run's ms per token, to compare with an untraced run) goes beside them.
#
# CUPTI is looked for in $STRATA_CUPTI_DIR (a folder with include/cupti.h and lib/ or lib64/
# holding libcupti.so*), then in the CUDA toolkit, then in the python package nvidia-cuda-cupti.
#
# Usage (device, after a build): [STRATA_TRACE_GEN=48] bash bench/kernel-trace.sh build-device/bin/strata
#   [recipe] [windows, e.g. 1,4] [suffix]
# STRATA_TRACE_GEN: the tokens the traced bench generates. kernel_trace.py skips a graph launched
# fewer than 8 times: the default covers T = 1; 160 gave the T = 4 graphs 21 launches.
set -euo pipefail
strata=$1
recipe=${2:-iq3_xxs}
windows=${3:-1,4}
sfx=${4:+-$4}
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"

find_cupti() {
  local py
  py=$(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d) for p in nvidia.__path__ for d in ("cu13", "cuda_cupti")))' 2>/dev/null || true)
  for d in ${STRATA_CUPTI_DIR:-} /usr/local/cuda/extras/CUPTI /usr/local/cuda /usr/local/cuda/targets/x86_64-linux $py; do
    [ -f "$d/include/cupti.h" ] || continue
    for l in lib64 lib; do
      if compgen -G "$d/$l/libcupti.so*" >/dev/null; then
        echo "$d/include $d/$l"
        return
      fi
    done
  done
}
read -r inc lib <<<"$(find_cupti)" || true
if [ -z "${inc:-}" ]; then
  echo "kernel-trace: no CUPTI found (set STRATA_CUPTI_DIR)" >&2
  exit 1
fi
libfile=$(ls "$lib"/libcupti.so* | head -n 1)
tracer=/tmp/libkernel_trace.so
g++ -std=c++17 -O2 -shared -fPIC -I"$inc" -I/usr/local/cuda/include "$here/../tools/kernel_trace.cpp" "$libfile" \
  -Wl,-rpath,"$lib" -o "$tracer"

trace=/tmp/kernel-trace$sfx.tsv
STRATA_KERNEL_TRACE=$trace CUDA_INJECTION64_PATH=$tracer "$strata" bench --device cuda --synth "$recipe" --layers 48 \
  --ctx 4096 --gen "${STRATA_TRACE_GEN:-48}" --forced --window-sweep "$windows" --synth-dir /tmp/strata-shape \
  --json "$OUT/kernel-trace$sfx-bench.json" >"$OUT/kernel-trace$sfx-bench.log" 2>&1
python3 "$here/kernel_trace.py" "$trace" --json "$OUT/kernel-trace$sfx.json" >"$OUT/kernel-trace$sfx.txt"
head -n 40 "$OUT/kernel-trace$sfx.txt"

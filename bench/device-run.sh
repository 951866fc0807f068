#!/usr/bin/env bash
# One device run: build for sm_90 on the device's cores, run the GPU checks and benches, and
# leave full JSON plus a short table under $OUT (the table is printed last). Every step after
# the build runs under a wall-clock guard so the whole script ends within the budget (9 min).
#
# The device image has fmt, nlohmann-json, CLI11 and gtest but no ICU headers; its ICU
# runtime is 74. bench/device-deps.sh (run on the developer machine first) copies ICU's C
# headers into .deps/icu; the headers' stable C API (u_charType, u_hasBinaryProperty) is
# linked against the device's libicuuc.so.74 by renaming entry points to the _74 suffix.
#
# Usage (device): bash bench/device-run.sh [extra strata bench args]
# Steps and their logs: $OUT/steps.txt, $OUT/<step>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log=$OUT/build.log
start=$(date +%s)
deadline=$(( start + ${STRATA_DEVICE_BUDGET_S:-540} ))
: >"$OUT/steps.txt"

# guard NAME CAP RESERVE CMD...: CMD with at most CAP seconds, ending at least RESERVE seconds
# (kept for later steps) plus 15 (the summary) before the deadline; its output goes to
# $OUT/NAME.log. A failure or timeout is recorded in steps.txt and the script goes on, so one
# broken step does not hide the others' results.
guard() {
  local name=$1 cap=$2 reserve=$3
  shift 3
  local left=$(( deadline - $(date +%s) - 15 - reserve ))
  if (( left < cap )); then cap=$left; fi
  if (( cap < 5 )); then
    echo "$name skipped (no time left)" >>"$OUT/steps.txt"
    return 0
  fi
  local t0 rc=0
  t0=$(date +%s)
  timeout --kill-after=10 "$cap" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  echo "$name rc=$rc seconds=$(( $(date +%s) - t0 )) cap=$cap$([ "$rc" = 124 ] && echo ' TIMED OUT')" >>"$OUT/steps.txt"
  return 0
}

icu_lib=$(ls /usr/lib/x86_64-linux-gnu/libicuuc.so.* 2>/dev/null | head -n1 || true)
icu_args=()
if [ ! -d /usr/include/unicode ] && [ -n "$icu_lib" ] && [ -d .deps/icu/include ]; then
  icu_major=$(basename "$icu_lib" | sed -E 's/libicuuc\.so\.([0-9]+).*/\1/')
  # A forced include: a macro with parentheses does not survive the build tool's shell.
  echo "#define U_ICU_ENTRY_POINT_RENAME(x) x##_${icu_major}" >.deps/icu/rename.h
  icu_args=(-DICU_INCLUDE_DIR="$PWD/.deps/icu/include" -DICU_UC_LIBRARY_RELEASE="$icu_lib"
            "-DCMAKE_CXX_FLAGS=-include $PWD/.deps/icu/rename.h")
fi

cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DSTRATA_TESTS=OFF "${icu_args[@]}" >"$log" 2>&1
build_left=$(( deadline - $(date +%s) - 60 ))
timeout --kill-after=10 "$build_left" cmake --build build-device -j"$(nproc)" >>"$log" 2>&1 \
  || { tail -n 60 "$log"; exit 1; }
build_s=$(( $(date +%s) - start ))
echo "build rc=0 seconds=$build_s" >>"$OUT/steps.txt"
strata=build-device/bin/strata

# What the benches need is kept back from the checks before them (each full-geometry bench
# took ~20 s on the H200 on 2026-11-30: upload 3 s, prefill 4096 tokens 9 s, decode and sweep).
bench_reserve=90
guard devices 60 "$bench_reserve" bash -c '"$0" devices --measure --json >"$1"' "$strata" "$OUT/devices.json"

guard parity 240 "$bench_reserve" "$strata" parity --json "$OUT/parity.json" --bench

# The decoder against the reference, on every tiny model (--model is repeatable) and on
# synthetic slices.
models=()
for model in .deps/tiny/*.gguf; do
  [ -e "$model" ] && models+=(--model "$model")
done
guard parity-decoder 120 "$bench_reserve" "$strata" parity "${models[@]}" --synth-slices \
  --json "$OUT/parity-decoder.json"

# Full released geometry (48 layers, 512 experts); the shape-only packs are a few MB under /tmp
# and the decoder generates the weights as it uploads them.
reserve=$(( bench_reserve / 2 ))
for recipe in iq3_xxs q2_0; do
  guard "bench-$recipe" 60 "$reserve" "$strata" bench --device cuda --synth "$recipe" --layers 48 --ctx 4096 --gen 128 \
    --forced --window-sweep 1,2,3,4,8 --synth-dir /tmp/strata-shape --json "$OUT/bench-$recipe.json" "$@"
  reserve=0
done

echo "== summary"
echo "build_seconds $build_s (nproc $(nproc))"
cat "$OUT/steps.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]

def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None

devices = load("devices.json")
for d in devices or []:
    print(f"cuda:{d['index']} {d['name']} sm_{d['compute_capability']} read_gb_s {d.get('read_gb_s', 0):.0f}")

def summary(label, j):
    s = j.get("summary") if isinstance(j, dict) else None
    if not s:
        print(f"{label}: no summary ({str(j)[:120]})")
        return
    print(f"{label}: {s.get('passed')} passed, {s.get('failed')} failed, {s.get('skipped')} skipped")

for name in ("parity", "parity-decoder"):
    j = load(f"{name}.json")
    summary(name, j) if j is not None else print(f"{name}: missing (see {name}.log)")

print(f"\n{'recipe':<9} {'T':>2} {'ms/window':>10} {'ms/token':>9} {'tok/s':>8} {'GB/token':>9} {'roof':>6} "
      f"{'proj a=.75':>10}  top profile stages")
for recipe in ("iq3_xxs", "q2_0"):
    j = load(f"bench-{recipe}.json")
    if j is None or "cuda" not in j:
        print(f"{recipe:<9} no result (see bench-{recipe}.log)")
        continue
    c = j["cuda"]
    print(f"{recipe:<9} weights {c['weight_bytes'] / 1e9:.1f} GB, graph nodes {c['graph_nodes']}, "
          f"prefill {j['prefill_tok_s']:.0f} tok/s, roof {j['bandwidth']['gb_s']:.0f} GB/s, "
          f"slope {c['slope_ms_per_row']:.3f} ms/row")
    for r in [c["decode"]] + c["sweep"]:
        top = sorted(r["profile"], key=lambda s: -s["ms"])[:3]
        stages = ", ".join(f"{s['stage']} {100 * s['share']:.0f}%" for s in top)
        print(f"{'':<9} {r['window']:>2} {r['window_ms_median']:>10.3f} {r['ms_per_token']:>9.3f} {r['tok_s']:>8.1f} "
              f"{r['bytes_per_token'] / 1e9:>9.3f} {100 * r['roof_fraction']:>5.1f}% {r['projected_tok_s_75']:>10.1f}  "
              f"{stages}")
PY

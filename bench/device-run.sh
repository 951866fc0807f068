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
# STRATA_DEVICE_STEPS=a,b runs only the named steps (pdl-audit, devices, parity, parity-decoder, run-spec,
# bench, kernels, stalls) after the build; unset runs them all but `kernels` (per-kernel ncu
# times, bench/kernel-profile.sh, about a minute) and `stalls` (where the biggest kernels' warps
# wait, per instruction: bench/kernel-stalls.sh, about three minutes).
# Steps and their logs: $OUT/steps.txt, $OUT/<step>.log. At the end everything but the printed
# summary ($OUT/summary.txt) is packed into $OUT/device-run.tgz, since the device tool brings back
# only a few files per call; STRATA_DEVICE_PACK=0 leaves the files as they are.
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
  if [ -n "${STRATA_DEVICE_STEPS:-}" ] && [[ ",$STRATA_DEVICE_STEPS," != *",${name%%-[iq][q0-9]*},"* ]] \
     && [[ ",$STRATA_DEVICE_STEPS," != *",$name,"* ]]; then
    echo "$name not selected" >>"$OUT/steps.txt"
    return 0
  fi
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
build_rc=0
timeout --kill-after=10 "$build_left" cmake --build build-device -j"$(nproc)" >>"$log" 2>&1 || build_rc=$?
if [ "$build_rc" != 0 ]; then
  tail -n 60 "$log"
  [ "$build_rc" = 124 ] && echo "device-run: the build ran past the ${build_left} s left to it by" \
    "STRATA_DEVICE_BUDGET_S=${STRATA_DEVICE_BUDGET_S:-540} (a fresh machine builds every object)"
  exit 1
fi
build_s=$(( $(date +%s) - start ))
echo "build rc=0 seconds=$build_s" >>"$OUT/steps.txt"
strata=build-device/bin/strata

# What the three benches need is kept back from the checks before them (each full-geometry
# bench took 13-16 s on the H200 on 2026-11-30: upload 3 s, prefill 4096 tokens 8 s, decode and
# sweep).
bench_reserve=60
# The PDL contract on this build's SASS (this device's ptxas may place loads where CI's did not).
guard pdl-audit 90 "$bench_reserve" python3 tools/pdl_audit.py build-device/src/cuda/libstrata_cuda.a
guard devices 60 "$bench_reserve" bash -c '"$0" devices --measure --json >"$1"' "$strata" "$OUT/devices.json"

# Every kernel case, in 8 processes that share the GPU (--shard K/8; one alone took over 4
# minutes, mostly host reference work), then their results as one parity.json.
parity_shards() {
  local k pids=()
  for k in 0 1 2 3 4 5 6 7; do
    "$strata" parity --shard "$k/8" --json "$OUT/parity-$k.json" >"$OUT/parity-$k.log" 2>&1 & pids+=($!)
  done
  local rc=0
  for k in "${pids[@]}"; do wait "$k" || rc=1; done
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
merged = {"cases": [], "summary": {"passed": 0, "failed": 0, "skipped": 0}}
for k in range(8):
    try:
        j = json.load(open(f"{out}/parity-{k}.json"))
    except (OSError, ValueError):
        merged["summary"]["failed"] += 1  # a shard that wrote nothing counts as a failure
        merged.setdefault("missing_shards", []).append(k)
        continue
    merged["cases"] += j.get("cases", [])
    for key in ("passed", "failed", "skipped"):
        merged["summary"][key] += j.get("summary", {}).get(key, 0)
json.dump(merged, open(f"{out}/parity.json", "w"), indent=1)
PY
  cat "$OUT"/parity-?.log >"$OUT/parity-all.log"
  rm -f "$OUT"/parity-?.log "$OUT"/parity-?.json
  return $rc
}
export -f parity_shards
export strata OUT
guard parity 200 "$bench_reserve" bash -c parity_shards

# The decoder against the reference, on every tiny model (--model is repeatable) and on
# synthetic slices.
models=()
for model in .deps/tiny/*.gguf; do
  [ -e "$model" ] && models+=(--model "$model")
done
guard parity-decoder 120 "$bench_reserve" "$strata" parity "${models[@]}" --synth-slices --filter decoder \
  --json "$OUT/parity-decoder.json"

# `strata run --device cuda` with speculation: greedy ids identical to the CPU reference's, with
# and without verify windows. Two prompts: one that repeats itself, and one that holds the
# model's own greedy continuation of a prefix and then that prefix again, so prompt lookup
# drafts tokens the trunk accepts (random weights accept nothing otherwise).
run_spec() {
  local model=$1 base=1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4 n=96
  "$strata" run -m "$model" --tokens "$base" -n 32 --device cpu --ids-out "$OUT/run-seed.json" >/dev/null
  local echo_prompt
  echo_prompt=$(python3 -c 'import json,sys; b=sys.argv[1]; c=json.load(open(sys.argv[2]))["ids"]; print(",".join([b]+[str(i) for i in c]+[b]))' \
    "$base" "$OUT/run-seed.json")
  local name prompt
  for name in plain echo; do
    if [ "$name" = plain ]; then prompt=$base; else prompt=$echo_prompt; fi
    "$strata" run -m "$model" --tokens "$prompt" -n $n --device cpu --ids-out "$OUT/run-$name-cpu.json" >/dev/null
    "$strata" run -m "$model" --tokens "$prompt" -n $n --device cuda --ids-out "$OUT/run-$name-cuda.json" >/dev/null
    "$strata" run -m "$model" --tokens "$prompt" -n $n --device cuda --spec 4 --spec-source lookup \
      --ids-out "$OUT/run-$name-cuda-spec4.json" >/dev/null
    if "$strata" run -m "$model" --tokens "$prompt" -n 1 --device cuda --spec 4 --spec-source mtp >/dev/null 2>&1; then
      "$strata" run -m "$model" --tokens "$prompt" -n $n --device cuda --spec 4 --spec-source mtp \
        --ids-out "$OUT/run-$name-cuda-mtp4.json" >/dev/null
    fi
  done
  python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
bad = 0
for name in ("plain", "echo"):
    ref = json.load(open(f"{out}/run-{name}-cpu.json"))["ids"]
    for path in sorted(glob.glob(f"{out}/run-{name}-cuda*.json")):
        r = json.load(open(path))
        same = r["ids"] == ref
        first = next((i for i, (a, b) in enumerate(zip(r["ids"], ref)) if a != b), None)
        s = r.get("stats", {})
        print(f"run-spec {os.path.basename(path)[4:-5]}: {len(r['ids'])} ids, identical to cpu: {same}"
              f"{'' if same else f' (first difference at {first})'}; windows {s.get('windows')}, "
              f"drafted {s.get('drafted')}, accepted {s.get('accepted')}, tokens/window {s.get('tokens_per_window')}")
        bad += not same
sys.exit(1 if bad else 0)
PY
}
if [ -e .deps/tiny/gpu_geom_mtp-f32.gguf ]; then
  export -f run_spec
  export strata OUT
  guard run-spec 60 "$bench_reserve" bash -c 'run_spec "$0"' .deps/tiny/gpu_geom_mtp-f32.gguf
fi

# Full released geometry (48 layers, 512 experts); the shape-only packs are a few MB under /tmp
# and the decoder generates the weights as it uploads them.
reserve=$(( bench_reserve / 2 ))
for recipe in iq3_xxs q2_0; do
  guard "bench-$recipe" 60 "$reserve" "$strata" bench --device cuda --synth "$recipe" --layers 48 --ctx 4096 --gen 128 \
    --forced --window-sweep 1,2,3,4,8 --synth-dir /tmp/strata-shape --json "$OUT/bench-$recipe.json" "$@"
  reserve=0
done
# The other arm of the same run: iq3_xxs with the routed experts on grouped_mmvq_kernel for every
# type (STRATA_GROUPED_DIRECT=0) and every launch on one stream (STRATA_SIDE_STREAM=0).
guard bench-iq3_xxs-base 45 0 env STRATA_GROUPED_DIRECT=0 STRATA_SIDE_STREAM=0 "$strata" bench --device cuda \
  --synth iq3_xxs --layers 48 --ctx 4096 --gen 128 --forced --synth-dir /tmp/strata-shape \
  --json "$OUT/bench-iq3_xxs-base.json" "$@"

if [[ ",${STRATA_DEVICE_STEPS:-}," == *",kernels,"* ]]; then
  guard kernels 120 0 bash bench/kernel-profile.sh "$strata" iq3_xxs
fi
if [[ ",${STRATA_DEVICE_STEPS:-}," == *",stalls,"* ]]; then
  guard stalls 300 0 bash bench/kernel-stalls.sh "$strata" iq3_xxs
fi

summary() {
echo "== summary"
echo "build_seconds $build_s (nproc $(nproc))"
cat "$OUT/steps.txt"
[ -s "$OUT/pdl-audit.log" ] && tail -n 1 "$OUT/pdl-audit.log"
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
for recipe in ("iq3_xxs", "q2_0", "iq3_xxs-base"):
    j = load(f"bench-{recipe}.json")
    if j is None or "cuda" not in j:
        print(f"{recipe:<9} no result (see bench-{recipe}.log)")
        continue
    c = j["cuda"]
    print(f"{recipe} weights {c['weight_bytes'] / 1e9:.1f} GB, graph nodes {c['graph_nodes']}, "
          f"prefill {j['prefill_tok_s']:.0f} tok/s, roof {j['bandwidth']['gb_s']:.0f} GB/s, "
          f"slope {c['slope_ms_per_row']:.3f} ms/row")
    for r in [c["decode"]] + c.get("sweep", []):
        top = sorted(r["profile"], key=lambda s: -s["ms"])[:3]
        stages = ", ".join(f"{s['stage']} {100 * s['share']:.0f}%" for s in top)
        print(f"{'':<9} {r['window']:>2} {r['window_ms_median']:>10.3f} {r['ms_per_token']:>9.3f} {r['tok_s']:>8.1f} "
              f"{r['bytes_per_token'] / 1e9:>9.3f} {100 * r['roof_fraction']:>5.1f}% {r['projected_tok_s_75']:>10.1f}  "
              f"{stages}")
PY
}
summary | tee "$OUT/summary.txt.part"

# Pack the rest (written to /tmp first: the archive must not hold itself).
if [ "${STRATA_DEVICE_PACK:-1}" != 0 ]; then
  pack=$(mktemp /tmp/device-run.XXXXXX.tgz)
  tar czf "$pack" -C "$OUT" --exclude=summary.txt.part .
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.txt.part -exec rm -rf {} +
  chmod 644 "$pack"
  mv "$pack" "$OUT/device-run.tgz"
fi
mv "$OUT/summary.txt.part" "$OUT/summary.txt"

#!/usr/bin/env bash
# A/B of two source trees on the device, in one call: arm A is the working tree, arm B the same
# tree with the files under $STRATA_AB_B (a folder that mirrors repository paths) laid over it.
# A is built by bench/device-run.sh, B incrementally over A's build; B then runs the checks
# (kernel parity, decoder parity, `run --spec` identity: device-run.sh's steps, on B's binary)
# and both arms the full-geometry bench in alternating rounds (A B A B ...), since the device's
# speed drifts by about 0.5% between minutes. Prints each round's ms per token and the medians;
# the JSON of every round is left in $OUT/ab/.
#
# Making B's folder from a branch (on the developer machine; folders that git does not ignore
# travel with the working tree):
#   git diff --name-only main BRANCH | while read -r f; do
#     mkdir -p "scratch/b/$(dirname "$f")"; git show "BRANCH:$f" >"scratch/b/$f"; done
# Usage (device): STRATA_AB_B=scratch/b [STRATA_AB_ROUNDS=3] [STRATA_AB_CHECKS=parity,parity-decoder,run-spec]
#   [STRATA_AB_RECIPES="iq3_xxs q2_0"] bash bench/ab-run.sh [extra strata bench args, e.g. --window 4]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
b_dir=${STRATA_AB_B:?STRATA_AB_B must name the folder of the B arm files}
[ -d "$b_dir" ] || { echo "ab-run: $b_dir is not a folder" >&2; exit 2; }
rounds=${STRATA_AB_ROUNDS:-3}
recipes=${STRATA_AB_RECIPES:-iq3_xxs}
mkdir -p "$OUT/ab"

# Arm A: device-run.sh's build alone.
STRATA_DEVICE_STEPS=none STRATA_DEVICE_PACK=0 OUT=/tmp/ab-build-a bash bench/device-run.sh >/dev/null ||
  { echo "ab-run: arm A did not build"; tail -n 40 /tmp/ab-build-a/build.log; exit 1; }
cp build-device/bin/strata /tmp/strata-a

# Arm B: its files over the tree (the originals kept aside and put back at the end).
saved=/tmp/ab-originals
rm -rf "$saved"
mkdir -p "$saved"
root=$PWD
restore() { (cd "$saved" && find . -type f | while read -r f; do cp "$f" "$root/$f"; done); }
trap restore EXIT
(cd "$b_dir" && find . -type f) | while read -r f; do
  if [ -e "$f" ]; then mkdir -p "$saved/$(dirname "$f")" && cp "$f" "$saved/$f"; fi
  cp "$b_dir/$f" "$f"
  echo "ab-run: B replaces ${f#./}"
done
checks=${STRATA_AB_CHECKS:-parity,parity-decoder,run-spec}
STRATA_DEVICE_STEPS=$checks STRATA_DEVICE_PACK=0 STRATA_DEVICE_BUDGET_S=${STRATA_AB_CHECK_S:-330} \
  OUT=/tmp/ab-checks-b bash bench/device-run.sh >/tmp/ab-checks-b.out 2>&1 ||
  { echo "ab-run: arm B did not build"; tail -n 40 /tmp/ab-checks-b/build.log; exit 1; }
cp build-device/bin/strata /tmp/strata-b
echo "== arm B checks"
sed -n '/^== summary/,$p' /tmp/ab-checks-b.out | grep -v '^recipe\|no result' || true
cp /tmp/ab-checks-b/steps.txt "$OUT/ab/checks-b-steps.txt"
for f in parity.json parity-decoder.json run-spec.log; do
  [ -e "/tmp/ab-checks-b/$f" ] && cp "/tmp/ab-checks-b/$f" "$OUT/ab/b-$f"
done

# Alternating rounds of the same bench.
for recipe in $recipes; do
  for r in $(seq 1 "$rounds"); do
    for arm in a b; do
      "/tmp/strata-$arm" bench --device cuda --synth "$recipe" --layers 48 --ctx 4096 --gen 128 --forced \
        --synth-dir /tmp/strata-shape --json "$OUT/ab/$recipe-$arm-$r.json" "$@" >"$OUT/ab/$recipe-$arm-$r.log" 2>&1 ||
        echo "ab-run: $recipe arm $arm round $r failed (ab/$recipe-$arm-$r.log)"
    done
  done
done

echo "== A/B (ms per token, decode run; window sweep rows when asked for)"
python3 - "$OUT/ab" "$rounds" $recipes <<'PY'
import json, os, statistics, sys
out, rounds, recipes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def rows(path):
    try:
        c = json.load(open(path))["cuda"]
    except (OSError, ValueError, KeyError):
        return {}
    found = {f"T={c['decode']['window']}": c["decode"]["ms_per_token"]}
    for s in c.get("sweep", []):
        found[f"sweep T={s['window']}"] = s["window_ms_median"]
    return found

for recipe in recipes:
    got = {arm: [rows(f"{out}/{recipe}-{arm}-{r}.json") for r in range(1, rounds + 1)] for arm in "ab"}
    keys = sorted({k for arm in got for run in got[arm] for k in run})
    for k in keys:
        a = [run[k] for run in got["a"] if k in run]
        b = [run[k] for run in got["b"] if k in run]
        if not a or not b:
            print(f"{recipe} {k}: missing rounds (a {len(a)}, b {len(b)})")
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{recipe} {k}: A {' '.join(f'{v:.3f}' for v in a)} | B {' '.join(f'{v:.3f}' for v in b)} | "
              f"median A {ma:.3f} B {mb:.3f} ({100 * (mb - ma) / ma:+.2f}%)")
PY

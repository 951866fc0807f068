#!/usr/bin/env bash
# A/B of source trees on the device, in one call: arm A is the working tree, each further arm the
# same tree with the files of one folder (mirroring repository paths) laid over it. A is built by
# bench/device-run.sh, every other arm incrementally over that build; the last arm then runs the
# checks (kernel parity, decoder parity, `run --spec` identity: device-run.sh's steps, on its
# binary; make it the union of the others' changes), and all arms the full-geometry bench in
# alternating rounds (A B C ... A B C ...), since the device's speed drifts by about 0.5% between
# minutes. Prints each round's ms per token, the medians, and the profile stages that moved;
# every round's JSON is left in $OUT/ab/, packed into $OUT/ab-run.tgz, the summary in
# $OUT/ab-summary.txt.
#
# Making arm folders from patch files: bench/ab-arms.sh NAME=PATCH[+PATCH ...] (scratch/arms/NAME,
# sent with the run's carry: scratch/ is git-ignored). From a branch, on the developer machine (a
# folder under scratch/ goes in the carry too):
#   git diff --name-only main BRANCH | while read -r f; do
#     mkdir -p "scratch/b/$(dirname "$f")"; git show "BRANCH:$f" >"scratch/b/$f"; done
# Usage (device): STRATA_AB_B="scratch/b1 scratch/b2 ..." [STRATA_AB_ROUNDS=3]
#   [STRATA_AB_ENV="LABEL:ARM:VAR=V[,VAR=V] ..."] [STRATA_AB_CHECKS=parity,parity-decoder,run-spec]
#   [STRATA_AB_RECIPES="iq3_xxs q2_0"] bash bench/ab-run.sh [extra strata bench args, e.g. --window 4]
# STRATA_AB_ENV adds arms that run an arm's binary (ARM: A or a folder's name) with environment
# switches, e.g. "splits256:attn:STRATA_ATTN_SPLITS=256"; with STRATA_AB_ENV alone (no folders) the
# arms are A and its switches, and A gets the checks. STRATA_AB_CHECK_S (default 330) is each
# arm's device-run.sh budget, its build included: on a fresh machine A's build compiles every
# object, so keep it well above that build's time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
OUT=${OUT:-$PWD/device-out}
read -r -a arms <<<"${STRATA_AB_B:-}"
if [ ${#arms[@]} -eq 0 ] && [ -z "${STRATA_AB_ENV:-}" ]; then
  echo "ab-run: STRATA_AB_B (folders) or STRATA_AB_ENV (switches) must name the other arms" >&2
  exit 2
fi
for d in "${arms[@]}"; do
  [ -d "$d" ] || { echo "ab-run: $d is not a folder" >&2; exit 2; }
done
# The device keeps build-device/ between calls, but the tree arrives with its own file times: a file
# an arm laid over it in an earlier call is then older than the object built from the arm's
# version, and A's build would link that stale object. Every file overlaid is listed, and the list's
# files are touched before A builds.
overlaid=$root/build-device/ab-overlaid.txt
if [ -f "$overlaid" ]; then
  sort -u "$overlaid" | while read -r f; do [ -e "$f" ] && touch "$f"; done
  rm -f "$overlaid"
fi
rounds=${STRATA_AB_ROUNDS:-3}
recipes=${STRATA_AB_RECIPES:-iq3_xxs}
mkdir -p "$OUT/ab"

# Without folder arms A itself is the checked arm (checks under the caller's environment).
steps0=none
[ ${#arms[@]} -eq 0 ] && steps0=${STRATA_AB_CHECKS:-parity,parity-decoder,run-spec}
STRATA_DEVICE_STEPS=$steps0 STRATA_DEVICE_PACK=0 STRATA_DEVICE_BUDGET_S=${STRATA_AB_CHECK_S:-330} OUT=/tmp/ab-build-0 \
  bash bench/device-run.sh >/tmp/ab-build-0.out 2>&1 ||
  { echo "ab-run: arm A did not build"; tail -n 40 /tmp/ab-build-0/build.log; exit 1; }
cp build-device/bin/strata /tmp/strata-0
names=(A)

# The tree's own files, kept aside while an arm's files lie over them.
saved=/tmp/ab-originals
rm -rf "$saved"
mkdir -p "$saved"
restore() { (cd "$saved" && find . -type f | while read -r f; do cp "$f" "$root/$f"; done); }
trap restore EXIT
overlay() {
  mkdir -p "$(dirname "$overlaid")"
  (cd "$1" && find . -type f) | while read -r f; do
    echo "$f" >>"$overlaid"
    if [ -e "$f" ] && [ ! -e "$saved/$f" ]; then mkdir -p "$saved/$(dirname "$f")" && cp "$f" "$saved/$f"; fi
    cp "$1/$f" "$f"
  done
}

i=0
for d in "${arms[@]}"; do
  i=$((i + 1))
  restore
  overlay "$d"
  names+=("$(basename "$d")")
  echo "ab-run: arm ${names[$i]} replaces $(cd "$d" && find . -type f | sed 's|^\./||' | tr '\n' ' ')"
  last=$(( i == ${#arms[@]} ))
  steps=none
  [ "$last" = 1 ] && steps=${STRATA_AB_CHECKS:-parity,parity-decoder,run-spec}
  STRATA_DEVICE_STEPS=$steps STRATA_DEVICE_PACK=0 STRATA_DEVICE_BUDGET_S=${STRATA_AB_CHECK_S:-330} \
    OUT=/tmp/ab-build-$i bash bench/device-run.sh >/tmp/ab-build-$i.out 2>&1 ||
    { echo "ab-run: arm ${names[$i]} did not build"; tail -n 40 /tmp/ab-build-$i/build.log; exit 1; }
  cp build-device/bin/strata /tmp/strata-$i
done
echo "== checks of arm ${names[$i]}"
sed -n '/^== summary/,$p' /tmp/ab-build-$i.out | grep -v '^recipe\|no result' || true
for f in steps.txt parity.json parity-decoder.json run-spec.log; do
  [ -e "/tmp/ab-build-$i/$f" ] && cp "/tmp/ab-build-$i/$f" "$OUT/ab/checks-$f"
done

# Arms run as (binary, environment); the environment arms after the built ones.
bins=()
envs=()
for k in "${!names[@]}"; do
  bins+=("/tmp/strata-$k")
  envs+=("")
done
for spec in ${STRATA_AB_ENV:-}; do
  IFS=: read -r label base assigns <<<"$spec"
  found=""
  for k in "${!names[@]}"; do
    [ "${names[$k]}" = "$base" ] && found=$k
  done
  [ -n "$found" ] || { echo "ab-run: STRATA_AB_ENV arm $label names no arm '$base'"; continue; }
  names+=("$label")
  bins+=("/tmp/strata-$found")
  envs+=("${assigns//,/ }")
done

for recipe in $recipes; do
  for r in $(seq 1 "$rounds"); do
    for k in "${!names[@]}"; do
      # shellcheck disable=SC2086  # the arm's assignments split into words on purpose
      env ${envs[$k]} "${bins[$k]}" bench --device cuda --synth "$recipe" --layers 48 --ctx 4096 --gen 128 --forced \
        --synth-dir /tmp/strata-shape --json "$OUT/ab/$recipe-$k-$r.json" "$@" >"$OUT/ab/$recipe-$k-$r.log" 2>&1 ||
        echo "ab-run: $recipe arm ${names[$k]} round $r failed (ab/$recipe-$k-$r.log)"
    done
  done
done

echo "== ms per token (decode run; sweep rows: ms per window), per round, then the median against A's; the profile stages that moved"
python3 - "$OUT/ab" "$rounds" "${names[*]}" $recipes <<'PY' | tee "$OUT/ab-summary.txt"
import json, statistics, sys
out, rounds, names, recipes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]

def rows(path):
    """The run's numbers: ms per token of the decode run, ms per window of each sweep row, and the
    decode run's profile stages (ms, events around each stage, launches one at a time)."""
    try:
        c = json.load(open(path))["cuda"]
    except (OSError, ValueError, KeyError):
        return {}
    found = {f"T={c['decode']['window']}": c["decode"]["ms_per_token"]}
    for s in c.get("sweep", []):
        found[f"sweep T={s['window']}"] = s["window_ms_median"]
    for st in c["decode"].get("profile", []):
        found[f"stage {st['stage']}"] = st["ms"]
    return found

for recipe in recipes:
    got = [[rows(f"{out}/{recipe}-{k}-{r}.json") for r in range(1, rounds + 1)] for k in range(len(names))]
    keys = sorted({key for arm in got for run in arm for key in run})
    for key in [k for k in keys if not k.startswith("stage ")]:
        vals = [[run[key] for run in arm if key in run] for arm in got]
        base = statistics.median(vals[0]) if vals[0] else None
        for name, v in zip(names, vals):
            if not v:
                print(f"{recipe} {key} {name:>10}: no rounds")
                continue
            m = statistics.median(v)
            rel = f" ({100 * (m - base) / base:+.2f}%)" if base else ""
            print(f"{recipe} {key} {name:>10}: {' '.join(f'{x:.3f}' for x in v)} | median {m:.3f}{rel}")
    # Where each arm's time moved: profile stages whose median differs from A's by 0.01 ms or more.
    stages = [k for k in keys if k.startswith("stage ")]
    for k, name in enumerate(names[1:], start=1):
        moved = []
        for key in stages:
            a = [run[key] for run in got[0] if key in run]
            b = [run[key] for run in got[k] if key in run]
            if a and b and abs(statistics.median(b) - statistics.median(a)) >= 0.01:
                moved.append(f"{key[6:]} {statistics.median(b) - statistics.median(a):+.3f}")
        print(f"{recipe} profile {name:>10} against A (ms): {', '.join(moved) if moved else 'no stage moved 0.01 ms'}")
PY

# The device tool brings back only a few files per call: every round's JSON and log go in one
# archive (STRATA_AB_PACK=0 leaves them as they are).
if [ "${STRATA_AB_PACK:-1}" != 0 ]; then
  tar czf "$OUT/ab-run.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
fi

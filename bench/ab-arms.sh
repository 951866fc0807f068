#!/usr/bin/env bash
# Makes bench/ab-run.sh's arm folders from patch files, on the developer machine: each argument
# NAME=PATCH[+PATCH ...] becomes scratch/arms/NAME, holding every file the patches change as it is
# with them applied, in order, to HEAD (in a temporary git worktree, so uncommitted changes of the
# working tree are not part of any arm). scratch/ is git-ignored: the folders go to the device in
# the run's `carry` (e.g. carry: [".deps", "scratch/arms"]).
# Usage: bash bench/ab-arms.sh hcload=bench/results/X/arms/a.patch both=a.patch+b.patch ...
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -gt 0 ] || { echo "usage: bench/ab-arms.sh NAME=PATCH[+PATCH ...] ..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/wt" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach -q "$tmp/wt" HEAD
for spec in "$@"; do
  name=${spec%%=*}
  list=${spec#*=}
  [ -n "$name" ] && [ "$name" != "$spec" ] || { echo "ab-arms: '$spec' is not NAME=PATCH[+PATCH ...]" >&2; exit 2; }
  (cd "$tmp/wt" && git checkout -q -- . && git clean -qfd)
  IFS=+ read -r -a patches <<<"$list"
  for p in "${patches[@]}"; do
    (cd "$tmp/wt" && git apply "$root/$p") || { echo "ab-arms: $p does not apply to HEAD (arm $name)" >&2; exit 1; }
  done
  rm -rf "scratch/arms/$name"
  (cd "$tmp/wt" && git diff --name-only) | while read -r f; do
    mkdir -p "scratch/arms/$name/$(dirname "$f")"
    cp "$tmp/wt/$f" "scratch/arms/$name/$f"
  done
  echo "scratch/arms/$name: $(cd "scratch/arms/$name" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
done

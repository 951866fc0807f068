#!/usr/bin/env bash
# One device run: build for sm_90 on the device's cores, run the GPU checks and benches, and
# leave full JSON plus a short table under $OUT (the table is printed last).
#
# The device image has fmt, nlohmann-json, CLI11 and gtest but no ICU headers; its ICU
# runtime is 74. bench/device-deps.sh (run on the developer machine first) copies ICU's C
# headers into .deps/icu; the headers' stable C API (u_charType, u_hasBinaryProperty) is
# linked against the device's libicuuc.so.74 by renaming entry points to the _74 suffix.
#
# Usage (device): bash bench/device-run.sh [extra strata bench args]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log=$OUT/build.log

icu_lib=$(ls /usr/lib/x86_64-linux-gnu/libicuuc.so.* 2>/dev/null | head -n1 || true)
icu_args=()
if [ ! -d /usr/include/unicode ] && [ -n "$icu_lib" ] && [ -d .deps/icu/include ]; then
  icu_major=$(basename "$icu_lib" | sed -E 's/libicuuc\.so\.([0-9]+).*/\1/')
  # A forced include: a macro with parentheses does not survive the build tool's shell.
  echo "#define U_ICU_ENTRY_POINT_RENAME(x) x##_${icu_major}" >.deps/icu/rename.h
  icu_args=(-DICU_INCLUDE_DIR="$PWD/.deps/icu/include" -DICU_UC_LIBRARY_RELEASE="$icu_lib"
            "-DCMAKE_CXX_FLAGS=-include $PWD/.deps/icu/rename.h")
fi

start=$(date +%s)
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DSTRATA_TESTS=OFF "${icu_args[@]}" >"$log" 2>&1
cmake --build build-device -j"$(nproc)" >>"$log" 2>&1 || { tail -n 60 "$log"; exit 1; }
build_s=$(( $(date +%s) - start ))
strata=build-device/bin/strata

"$strata" devices --measure --json >"$OUT/devices.json"

echo "== summary"
echo "build_seconds $build_s (nproc $(nproc))"
python3 - "$OUT/devices.json" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1])):
    print(f"cuda:{d['index']} {d['name']} sm_{d['compute_capability']} read_gb_s {d['read_gb_s']:.0f}")
PY

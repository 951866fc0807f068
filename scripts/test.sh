#!/usr/bin/env bash
# Run every test: the unit tests (ctest), the same tests under AddressSanitizer + UBSan,
# the GGUF reader fuzzer for a bounded time, and the Python oracle tests (pytest).
# Needs scripts/setup.sh first. STRATA_FUZZ_SECONDS sets the fuzz time (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Each phase line carries the seconds since the start, so a slow phase shows in the CI log
# (the whole run has to stay under an hour on 2 cores).
phase() { echo "== $1 (at ${SECONDS}s)"; }

phase "unit tests (build/)"
cmake --build build
ctest --test-dir build --output-on-failure -j"$jobs"

phase "unit tests under AddressSanitizer + UBSan (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF -DSTRATA_SANITIZE=address,undefined >/dev/null
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j"$jobs"

phase "fuzz (build-fuzz/, clang libFuzzer)"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF -DSTRATA_FUZZ=ON \
  -DSTRATA_FUZZ_SECONDS="${STRATA_FUZZ_SECONDS:-60}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz --target fuzz_gguf_reader
ctest --test-dir build-fuzz -L fuzz --output-on-failure -V | grep -E "stat::|Test #|tests passed|Passed|Failed"

phase "oracle tests (pytest)"
STRATA_BIN="$PWD/build/bin/strata" .venv/bin/python -m pytest -q tests/oracle tests/tools
phase "done"

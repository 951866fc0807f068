#!/usr/bin/env bash
# Make what a device run needs but the device image lacks, into .deps/ (git-ignored, sent with
# `carry: [".deps"]`): ICU's C headers (see bench/device-run.sh), and the tiny oracle model the
# decoder's whole-step parity runs on (tests/oracle/tiny_models.py spec gpu_geom, converted to
# f32 and q8_0 GGUF with tools/convert_hf_to_gguf.py; needs the .venv of scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/icu/include .deps/tiny
cp -r /usr/include/unicode .deps/icu/include/
echo "copied ICU headers to .deps/icu/include"
.venv/bin/python - <<'PY'
import pathlib, sys, tempfile
sys.path[:0] = ["tests/oracle", "tools"]
import convert_hf_to_gguf as cv
import tiny_models as tm
with tempfile.TemporaryDirectory() as tmp:
    ck = tm.cached_checkpoint(tm.SPECS["gpu_geom"], pathlib.Path(tmp))
    for outtype in ("f32", "q8_0"):
        print(cv.convert(ck, pathlib.Path(f".deps/tiny/gpu_geom-{outtype}.gguf"), outtype))
PY

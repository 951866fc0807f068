#!/usr/bin/env bash
# Make what a device run needs but the device image lacks, into .deps/ (git-ignored, sent with
# `carry: [".deps"]`): ICU's C headers (see bench/device-run.sh), and the tiny oracle models the
# decoder's whole-step parity runs on (tests/oracle/tiny_models.py spec gpu_geom with its MTP
# head in f32, and gpu_geom in q8_0, converted by tools/convert_hf_to_gguf.py; needs the .venv
# of scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/icu/include .deps/tiny
cp -r /usr/include/unicode .deps/icu/include/
echo "copied ICU headers to .deps/icu/include"
.venv/bin/python - <<'PY'
import dataclasses, pathlib, sys, tempfile
sys.path[:0] = ["tests/oracle", "tools"]
import convert_hf_to_gguf as cv
import tiny_models as tm
# gpu_geom with the MTP head in f32 (the trunk's whole-step parity, the MTP parity, `run --spec`)
# and gpu_geom in q8_0 (the quantized whole step); together under the device's 64 MiB carry.
mtp = dataclasses.replace(tm.SPECS["gpu_geom"], name="gpu_geom_mtp", mtp=True)
with tempfile.TemporaryDirectory() as tmp:
    for spec, outtypes in ((tm.SPECS["gpu_geom"], ("q8_0",)), (mtp, ("f32",))):
        ck = tm.cached_checkpoint(spec, pathlib.Path(tmp))
        for outtype in outtypes:
            print(cv.convert(ck, pathlib.Path(f".deps/tiny/{spec.name}-{outtype}.gguf"), outtype))
PY

#!/usr/bin/env bash
# Copy what a device build needs but the device image lacks into .deps/ (git-ignored, sent
# with `carry`): ICU's C headers. See bench/device-run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/icu/include
cp -r /usr/include/unicode .deps/icu/include/
echo "copied ICU headers to .deps/icu/include"

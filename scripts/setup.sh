#!/usr/bin/env bash
# Set up Strata on a fresh Debian 12 machine: system packages, the Python environment for
# the tools and oracle tests (.venv), and the build (build/, binary build/bin/strata).
# Extra CMake arguments come from STRATA_CMAKE_ARGS, e.g.
#   STRATA_CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=86;90" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config python3 python3-venv
          libgtest-dev libgmock-dev nlohmann-json3-dev libfmt-dev libcli11-dev libicu-dev liburing-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q -r tests/requirements.txt
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "setup: building llama-cpp-python (several minutes)"
  # Not fatal: without it the llama.cpp layout proof is reported as skipped, with the reason.
  CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install -q -r tests/requirements-llamacpp.txt ||
    echo "setup: WARNING: llama-cpp-python did not build; tests/oracle/test_convert_llamacpp.py will skip"
fi

# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${STRATA_CMAKE_ARGS:-}
cmake --build build
echo "setup: built build/bin/strata (${SECONDS}s)"

#!/usr/bin/env bash
# Shared by the scripts: install missing Debian packages (idempotent), configure and build.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${STAGECRAFT_BUILD_DIR:-$ROOT/build}
JOBS=${STAGECRAFT_JOBS:-$(nproc)}

# Debian 12 packages the build needs. The CUDA toolkit is optional (found under /usr/local/cuda).
PACKAGES=(cmake g++ make libboost-graph-dev libyaml-cpp-dev libcli11-dev libgtest-dev
          libbenchmark-dev libdnnl-dev libonnx-dev libprotobuf-dev protobuf-compiler)

ensure_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  echo "stagecraft: installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# configure_and_build [TARGET...]: Release configuration with tests and benchmarks on (set
# explicitly, so an earlier configuration of the same folder cannot turn them off), then build the
# given targets (all when none).
configure_and_build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSTAGECRAFT_BUILD_TESTS=ON \
    -DSTAGECRAFT_BUILD_BENCHMARKS=ON >/dev/null
  local targets=()
  local t
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j"$JOBS" "${targets[@]}"
}

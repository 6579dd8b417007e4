#!/usr/bin/env bash
# Shared by the scripts: install missing Debian packages (idempotent), configure and build, and
# the project's Python virtual environment.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${STAGECRAFT_BUILD_DIR:-$ROOT/build}
JOBS=${STAGECRAFT_JOBS:-$(nproc)}
# The virtual environment of the Python tools (ONNX Runtime comparisons, plots, the model zoo).
VENV_DIR=${STAGECRAFT_VENV:-$ROOT/.venv}

# Debian 12 packages the build and the tests need. oneDNN's CMake config requires OpenCL
# (ocl-icd-opencl-dev is only a Recommends of libdnnl-dev); the CLI tests and the ONNX Runtime
# comparison run python3 in a virtual environment (python3-venv); the Python module needs the
# headers (python3-dev) and pybind11 (pybind11-dev); a test traces system calls (strace). The CUDA
# toolkit is optional (found under /usr/local/cuda).
PACKAGES=(cmake g++ make git ca-certificates libboost-graph-dev libyaml-cpp-dev libcli11-dev
          libgtest-dev libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev libonnx-dev
          libprotobuf-dev protobuf-compiler nlohmann-json3-dev python3 python3-venv python3-dev
          pybind11-dev strace)

# install_packages PACKAGE...: installs the given Debian packages that are missing.
install_packages() {
  local missing=() p
  for p in "$@"; do
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

ensure_packages() {
  install_packages "${PACKAGES[@]}"
}

# configure_and_build [TARGET...]: Release configuration with tests and benchmarks on (set
# explicitly, so an earlier configuration of the same folder cannot turn them off), then build the
# given targets (all when none).
configure_and_build() {
  # The Python module is built for the project's virtual environment when there is one.
  local python=()
  if [ -x "$VENV_DIR/bin/python" ]; then python=(-DPython_EXECUTABLE="$VENV_DIR/bin/python"); fi
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSTAGECRAFT_BUILD_TESTS=ON \
    -DSTAGECRAFT_BUILD_BENCHMARKS=ON "${python[@]}" >/dev/null
  local targets=()
  local t
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j"$JOBS" "${targets[@]}"
}

# ensure_venv [PIP_PACKAGE...]: creates the virtual environment (once) and pip-installs the given
# packages that it cannot import yet. Prints the environment's python on the last line of stdout;
# returns non-zero (with pip's log on stderr) when pip cannot install them.
#   py=$(ensure_venv numpy onnxruntime | tail -n 1)
ensure_venv() {
  local host_python
  host_python=$(command -v python3 || true)
  if [ -z "$host_python" ]; then
    echo "stagecraft: no python3 (the README's commands install Debian's python3 and python3-venv)" >&2
    return 1
  fi
  if [ ! -x "$VENV_DIR/bin/python" ]; then
    echo "stagecraft: creating the Python environment $VENV_DIR" >&2
    "$host_python" -m venv "$VENV_DIR" >&2 || return 1
    "$VENV_DIR/bin/python" -m pip install --quiet --upgrade pip >&2 || true
  fi
  local py="$VENV_DIR/bin/python" want=() p module
  for p in "$@"; do
    module=${p%%[=<>]*}
    module=${module%%\[*}  # tritonclient[http,grpc] -> tritonclient
    case "$module" in
      onnxruntime) module=onnxruntime ;;
      scikit-build-core) module=scikit_build_core ;;
      nvidia-pytriton) module=pytriton ;;
      *) module=${module//-/_} ;;
    esac
    case "$p" in 'ray[serve]'*) module=ray.serve ;; esac  # ray without its serve extra is not enough
    "$py" -c "import $module" 2>/dev/null || want+=("$p")
  done
  if ((${#want[@]} > 0)); then
    echo "stagecraft: pip install ${want[*]}" >&2
    local log
    log=$(mktemp)
    if ! "$py" -m pip install --quiet "${want[@]}" >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      rm -f "$log"
      return 1
    fi
    rm -f "$log"
  fi
  echo "$py"
}

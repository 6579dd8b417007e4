#!/usr/bin/env bash
# A soak of both servers, the Triton backend and the Ray Serve application (scripts/soak.py):
# bounded request loops mixing valid and malformed/hostile requests on loopback for --seconds
# (default 600), then the cost of NaN/Inf/denormal requests. Installs nvidia-pytriton,
# tritonclient and ray[serve] into the project's virtual environment.
#
#   scripts/soak.sh [--seconds 600] [--servers triton,ray] [--model squeezenet1_1]
#                   [--input-size 224] [--out bench/results/soak.md] [--check-cost]
#
# Uses the build in $BUILD_DIR (the Python module in $BUILD_DIR/python, the backend in
# $BUILD_DIR/serve/backends/stagecraft/); --backend PATH names another libtriton_stagecraft.so.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
py=$(ensure_venv numpy requests nvidia-pytriton 'tritonclient[http]' 'ray[serve]' | tail -n 1) ||
  { echo "soak.sh: cannot pip-install nvidia-pytriton, tritonclient and ray[serve] into $VENV_DIR" >&2; exit 77; }
export PYTHONPATH="$BUILD_DIR/python:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" "$here/soak.py" "$@"

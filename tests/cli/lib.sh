#!/usr/bin/env bash
# Sourced by the ctest scripts that run the project's Python tools against the stagecraft command
# (tests/cli/test_compare_ort.sh, tests/cli/test_ops_vs_ort.sh, bench/test_pytorch_baseline.sh):
#   source lib.sh "$@"   (the script's arguments: PATH/TO/stagecraft)
# Sets `bin` to the command and `work` to a scratch folder removed when the script exits, with the
# profile cache inside it (STAGECRAFT_CACHE_DIR) and passive OpenMP waiting; sources
# scripts/common.sh for ensure_venv and turns its -e and pipefail off again (these scripts check
# exit codes themselves; unset variables stay errors).
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STAGECRAFT_CACHE_DIR="$work/cache"
export OMP_WAIT_POLICY=passive
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set +e +o pipefail

# venv_python_or_skip MESSAGE PIP_PACKAGE...: sets `py` to the python of the project's virtual
# environment (made and filled with the packages when needed), or exits 77 (skipped) printing
# "SKIP: MESSAGE" and the end of pip's log, so that a failed install is a skip with its reason.
venv_python_or_skip() {
  local message=$1
  shift
  if ! py=$(ensure_venv "$@" 2>"$work/pip.log" | tail -n 1) || [ -z "$py" ]; then
    echo "SKIP: $message"
    tail -n 15 "$work/pip.log"
    exit 77
  fi
}

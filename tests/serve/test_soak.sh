#!/usr/bin/env bash
# ctest serve/soak: a shortened soak of both servers (scripts/soak.py, 45 s, squeezenet1_1 at 64x64).
#   test_soak.sh PYTHON MODULE_PARENT_DIR LIBTRITON_STAGECRAFT_SO
# Checks: 0 failed valid requests, every bad request answered with one line, resident memory
# after warm-up growing <= 5%; the NaN/denormal cost is reported, not asserted (a timing).
# Skips (77) with the reason when nvidia-pytriton, tritonclient or ray[serve] cannot be installed.
set -uo pipefail
py=$1
module_dir=$2
backend=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
need="import numpy, requests, pytriton, tritonclient.http, ray.serve"
if ! "$py" -c "$need" 2>/dev/null; then
  if ! "$py" -m pip install --quiet numpy requests nvidia-pytriton 'tritonclient[http]' 'ray[serve]' >/dev/null 2>&1 ||
     ! "$py" -c "$need" 2>/dev/null; then
    echo "SKIP: cannot pip-install nvidia-pytriton, tritonclient[http] and ray[serve] for $py (no PyPI?)"
    exit 77
  fi
fi
export PYTHONPATH="$module_dir:$here/../../python${PYTHONPATH:+:$PYTHONPATH}"
export RAY_USAGE_STATS_ENABLED=0
exec "$py" "$here/../../scripts/soak.py" --seconds 45 --warmup 15 --input-size 64 --probe-rounds 20 \
  --backend "$backend"

#!/usr/bin/env bash
# stagecraft on Ray Serve on a real Ray cluster on loopback (tests/serve/ray_cluster_test.py).
#   test_ray_serve.sh PYTHON MODULE_PARENT_DIR
# PYTHON: the interpreter the module stagecraft._stagecraft was built for (the project's .venv);
# MODULE_PARENT_DIR: the folder holding stagecraft/_stagecraft*.so. Installs ray[serve] there when
# it is missing (./scripts/test.sh does it beforehand); skips (77) with the reason only when pip
# cannot install it (no PyPI).
set -uo pipefail
py=$1
module_dir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! "$py" -c "import numpy, ray.serve, requests" 2>/dev/null; then
  if ! "$py" -m pip install --quiet 'ray[serve]' requests numpy >/dev/null 2>&1 ||
     ! "$py" -c "import numpy, ray.serve, requests" 2>/dev/null; then
    echo "SKIP: cannot pip-install ray[serve] and requests for $py (no PyPI?)"
    exit 77
  fi
fi
export PYTHONPATH="$module_dir:$here/../../python${PYTHONPATH:+:$PYTHONPATH}"
export RAY_USAGE_STATS_ENABLED=0
shift 2
exec "$py" "$here/ray_cluster_test.py" "$@"

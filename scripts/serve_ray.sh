#!/usr/bin/env bash
# Serves models with stagecraft on Ray Serve (python/stagecraft/ray_serve.py): installs ray[serve]
# into the project's virtual environment, starts a local Ray cluster (loopback, in the driver
# process) and the application, and serves HTTP on 127.0.0.1:8000 until Ctrl-C.
#
#   scripts/serve_ray.sh MODEL... [--replicas N | --autoscale MIN:MAX] [--threads T]
#                        [--max-batch B] [--schedule S] [--input-size S] [--port P]
#                        [--cache-dir DIR] [--num-cpus C] [--address RAY_ADDRESS]
#
# The Python module is taken from $BUILD_DIR/python (the CMake build) unless stagecraft is
# installed (`pip install ./python`). Requests: POST /v2/models/MODEL/infer with KServe v2 JSON or
# .npy bytes (docs/ray_serve.md). On a cluster of several machines use `serve deploy` with
# docs/ray_serve.yaml instead.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
case "${1:-}" in -h|--help|"")
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
py=$(ensure_venv numpy 'ray[serve]' | tail -n 1) ||
  { echo "serve_ray.sh: cannot pip-install ray[serve] into $VENV_DIR" >&2; exit 2; }
export PYTHONPATH="$BUILD_DIR/python:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import stagecraft" 2>/dev/null ||
  { echo "serve_ray.sh: the stagecraft module is not built ($BUILD_DIR/python) nor installed: run ./scripts/test.sh or pip install ./python" >&2; exit 2; }
exec "$py" "$here/serve_ray.py" "$@"

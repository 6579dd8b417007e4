#!/usr/bin/env bash
# A real Triton server with libtriton_stagecraft.so (tests/serve/triton_test.py).
#   test_triton.sh STAGECRAFT_CLI LIBTRITON_STAGECRAFT_SO
# Skips (77) with the reason when nvidia-pytriton/tritonclient cannot be installed into the
# project's virtual environment or when tritonserver does not start on this machine.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/common.sh"
set +e
py=$(ensure_venv numpy nvidia-pytriton 'tritonclient[http,grpc]' | tail -n 1)
if [ $? -ne 0 ] || [ -z "$py" ]; then
  echo "SKIP: cannot pip-install numpy, nvidia-pytriton and tritonclient[http,grpc] into $VENV_DIR (no PyPI?)"
  exit 77
fi
if ! "$py" -c "import tritonclient.http, tritonclient.grpc" 2>/dev/null; then
  "$py" -m pip install --quiet 'tritonclient[http,grpc]' >/dev/null 2>&1
  "$py" -c "import tritonclient.http, tritonclient.grpc" 2>/dev/null ||
    { echo "SKIP: tritonclient's HTTP and gRPC clients cannot be imported in $VENV_DIR"; exit 77; }
fi
exec "$py" "$here/triton_test.py" --cli "$1" --backend "$2"

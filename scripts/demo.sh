#!/usr/bin/env bash
# The main job, end to end: list the networks, then inspect and schedule one of them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
configure_and_build -DSTAGECRAFT_BUILD_TESTS=OFF >/dev/null
stagecraft="$BUILD_DIR/cli/stagecraft"
out="$BUILD_DIR/demo"
mkdir -p "$out"

echo "== Built-in networks"
"$stagecraft" networks
echo
echo "== inception_v3: graph and blocks"
"$stagecraft" graph inception_v3 -o "$out/inception_v3.yaml" --dot "$out/inception_v3.dot"
echo
echo "== GPUs"
"$stagecraft" devices

#!/usr/bin/env bash
# The main job, end to end: list the networks, then schedule inception_v3 with each strategy
# (sequential, greedy, DP) on the analytic V100 model, export the DP schedule and show it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
configure_and_build stagecraft >/dev/null
stagecraft="$BUILD_DIR/cli/stagecraft"
out="$BUILD_DIR/demo"
mkdir -p "$out"
network=${1:-inception_v3}

echo "== Built-in networks"
"$stagecraft" networks
echo
echo "== $network: graph and blocks"
"$stagecraft" graph "$network" -o "$out/$network.yaml" --dot "$out/$network.dot"
echo
echo "== $network: schedules (analytic V100 model)"
for strategy in sequential greedy; do
  "$stagecraft" schedule "$network" --strategy "$strategy" -q -o "$out/$network.$strategy.yaml" | head -2
done
for mode in merge concurrent both; do
  "$stagecraft" schedule "$network" --mode "$mode" -q -o "$out/$network.dp-$mode.yaml" | head -3
done
echo
echo "== $network: the dp-both schedule (from $out/$network.dp-both.yaml)"
"$stagecraft" show "$out/$network.dp-both.yaml" --dot "$out/$network.dp-both.dot" | head -30
echo "..."
echo
echo "== GPUs"
"$stagecraft" devices

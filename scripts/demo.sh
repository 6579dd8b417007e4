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
  "$stagecraft" schedule "$network" --strategy "$strategy" -q -o "$out/$network.$strategy.yaml"
done
for mode in merge concurrent both; do
  "$stagecraft" schedule "$network" --mode "$mode" -q -o "$out/$network.dp-$mode.yaml"
done
echo
echo "== $network: the dp-both schedule (stage table: stagecraft show $out/$network.dp-both.yaml)"
"$stagecraft" show "$out/$network.dp-both.yaml" --summary --dot "$out/$network.dp-both.dot"
echo
echo "== GPUs"
"$stagecraft" devices
# The main job on this machine: CUDA when a GPU is usable (and the CUDA backend has kernels), else
# the CPU. The first run measures stages (about a minute for inception_v3); later runs use the cache.
backend=cpu
if "$stagecraft" devices | grep -q "^ *0 " && "$stagecraft" run squeezenet1_1 --backend cuda \
     --input-size 32 --iters 1 --warmup 0 --schedule sequential >/dev/null 2>&1; then
  backend=cuda
fi
echo
echo "== $network: search, run and compare schedules on $backend"
"$stagecraft" bench "$network" --backend "$backend" --out "$out/bench"
echo
echo "== $network in int8 on $backend: calibrate (ranges of every tensor), then the same comparison"
"$stagecraft" calibrate "$network" --samples 8 --check 20 -o "$out/$network.calib.yaml"
if ! "$stagecraft" bench "$network" --backend "$backend" --dtype int8 \
     --calibration "$out/$network.calib.yaml" --out "$out/bench-int8"; then
  echo "(int8 on $backend failed: see the error above; the CPU backend runs int8 too)"
fi
if py=$(ensure_venv matplotlib 2>/dev/null | tail -n 1) && [ -n "$py" ]; then
  "$py" "$(dirname "${BASH_SOURCE[0]}")/plot_bench.py" "$out/bench.png" "$out/bench" "$out/bench-int8" \
    --title "$network on $backend: f32 and int8 schedules" || echo "(no plot: see the error above)"
fi

#!/usr/bin/env bash
# Run on a GPU machine from an unpacked bundle (scripts/gpu_bundle.sh) or from a built checkout:
# prints the device, runs the GPU tests (CUDA outputs against the CPU backend on every network,
# graph and stream mode, f16), a compute-sanitizer memcheck of one run, and `stagecraft bench`
# for inception_v3, nasnet_a_large, randwire and squeezenet1_0, writing results with the device
# description to RESULTS_DIR (default ./bench/results/gpu-<date>).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -x "$here/bin/stagecraft" ]; then bin="$here/bin"; else bin="$here/../build/cli"; fi
stagecraft="$bin/stagecraft"
test_gpu="$bin/test_gpu"
[ -x "$test_gpu" ] || test_gpu="$here/../build/tests/test_gpu"
export STAGECRAFT_CONFIG_DIR=${STAGECRAFT_CONFIG_DIR:-$here/configs}
[ -d "$STAGECRAFT_CONFIG_DIR" ] || export STAGECRAFT_CONFIG_DIR="$here/../configs"
results=${RESULTS_DIR:-$here/bench/results/gpu-$(date +%Y%m%d-%H%M)}
mkdir -p "$results"
export STAGECRAFT_CACHE_DIR=${STAGECRAFT_CACHE_DIR:-$results/cache}

# cuDNN and cuBLAS from the Python packages when the system has none.
py=$(command -v python3 || true)
if [ -n "$py" ]; then
  for pkg in nvidia.cudnn nvidia.cublas nvidia.cuda_runtime nvidia.cu13 nvidia.cuda_nvrtc; do
    dir=$("$py" -c "import importlib, os; m = importlib.import_module('$pkg'); \
print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null) || continue
    [ -d "$dir" ] && export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"
  done
fi

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  "$stagecraft" devices 2>&1
} | tee "$results/device.txt"

echo "== missing libraries"
ldd "$stagecraft" | grep "not found" && echo "(fix LD_LIBRARY_PATH)" || echo "none"

echo "== GPU tests"
"$test_gpu" --gtest_brief=1 2>&1 | tee "$results/test_gpu.txt"

if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck of one run"
  compute-sanitizer --tool memcheck "$stagecraft" run squeezenet1_0 --backend cuda \
    --schedule dp --cost-model analytic:h100 --iters 1 --warmup 0 2>&1 | tail -20 | tee "$results/memcheck.txt"
fi

echo "== bench (batch 1, f32)"
"$stagecraft" bench inception_v3 nasnet_a_large randwire squeezenet1_0 --backend cuda \
  --iters 50 --out "$results/b1_f32" 2>&1 | tee "$results/bench_b1_f32.txt"
echo "== results in $results"

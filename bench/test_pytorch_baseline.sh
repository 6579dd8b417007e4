#!/usr/bin/env bash
# ctest `pytorch_baseline` (label torch): bench/pytorch_baseline.py --check on all 10 built-in
# networks at reduced input sizes — the PyTorch model it builds from stagecraft's graph YAML and
# ONNX weights must give stagecraft's CPU output (max relative error 1e-4). Exit 77 (skipped) with
# the reason when torch, numpy or PyYAML cannot be installed into the project's virtual environment.
# Usage: test_pytorch_baseline.sh PATH/TO/stagecraft
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cli/lib.sh" "$@"
venv_python_or_skip "cannot install torch/numpy/pyyaml into the virtual environment:" numpy pyyaml torch
networks=inception_v3:75,googlenet:64,squeezenet1_0:64,squeezenet1_1:64,resnet50:64,nasnet_a_mobile:64
networks+=,nasnet_a_large:64,randwire:64,randwire_small:64,randwire_regular:64
"$py" "$here/pytorch_baseline.py" --check --stagecraft "$bin" --networks "$networks" --batch 2 \
  --cache-dir "$work/cache" --out-prefix "$work/check"
rc=$?
if [ "$rc" -eq 3 ]; then
  echo "SKIP: pytorch_baseline.py could not import its dependencies"
  exit 77
fi
[ "$rc" -eq 0 ] || { echo "FAIL: pytorch_baseline.py --check exited $rc"; exit 1; }
rows=$(grep -c '^| [a-z]' "$work/check.md")
[ "$rows" -eq 11 ] || { echo "FAIL: expected a table of 10 networks, got $((rows - 1)) rows"; exit 1; }
echo "pytorch_baseline: passed"

#!/usr/bin/env bash
# bench/ops_vs_ort.py on exported networks (resnet50 and squeezenet1_1 at input 64): every
# convolution kernel of stagecraft's trace must find the ONNX Runtime node that computes its fused
# chain (--require-all-matched), the table must have the classes the networks have, and a
# missing model must be refused with one line. Exit 77 (skipped) with the reason when
# numpy/onnx/onnxruntime cannot be installed with pip.
# Usage: test_ops_vs_ort.sh PATH/TO/stagecraft
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../bench/ops_vs_ort.py"
source "$here/lib.sh" "$@"
venv_python_or_skip "cannot set up numpy/onnx/onnxruntime in a virtual environment:" numpy onnx onnxruntime
fail=0
for net in resnet50 squeezenet1_1; do
  if ! "$bin" graph "$net" --input-size 64 --onnx "$work/$net.onnx" >"$work/export.log" 2>&1; then
    echo "FAIL: export of $net:"; cat "$work/export.log"; exit 1
  fi
  "$py" "$script" "$work/$net.onnx" --stagecraft "$bin" --rounds 1 --ort-warmup 1 \
    --require-all-matched --out "$work/$net.md" >"$work/$net.log" 2>&1
  rc=$?
  cat "$work/$net.log"
  [ "$rc" -eq 0 ] || { echo "FAIL: ops_vs_ort.py on $net exited $rc"; fail=1; }
  grep -q '^| \*\*all matched\*\* |' "$work/$net.md" || { echo "FAIL: $net: no 'all matched' row"; fail=1; }
  grep -q '^| Conv 3x3 s1 @' "$work/$net.md" || { echo "FAIL: $net: no 3x3 convolution row"; fail=1; }
  grep -q '^| Conv 1x1 s1 @' "$work/$net.md" || { echo "FAIL: $net: no 1x1 convolution row"; fail=1; }
done
grep -q '^| MaxPool |' "$work/resnet50.md" || { echo "FAIL: resnet50: its max pool is not listed"; fail=1; }
out=$("$py" "$script" "$work/missing.onnx" --stagecraft "$bin" 2>&1)
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "no model file .*missing.onnx" <<<"$out"; then
  echo "FAIL: a missing model gave exit $rc and: $out"; fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS: ops_vs_ort matched every convolution"
exit "$fail"

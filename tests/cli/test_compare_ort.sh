#!/usr/bin/env bash
# stagecraft against ONNX Runtime: exports squeezenet1_1, googlenet, resnet50 (input 64) and
# inception_v3 (input 75) as ONNX models, runs scripts/compare_ort.py --quick on them and passes
# when it exits 0 (every output within 1e-4 relative error of ORT's) and prints the table.
# Exit 77 (skipped) with the reason when numpy/onnx/onnxruntime cannot be installed with pip.
# Usage: test_compare_ort.sh PATH/TO/stagecraft
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../scripts/compare_ort.py"

# numpy/onnx/onnxruntime come from the project's virtual environment (scripts/common.sh), made
# and filled here when needed, so that a failed install is a skip with its reason.
source "$here/lib.sh" "$@"
venv_python_or_skip "cannot set up numpy/onnx/onnxruntime in a virtual environment:" numpy onnx onnxruntime

models=()
export_model() {  # NETWORK INPUT_SIZE
  if ! "$bin" graph "$1" --input-size "$2" --onnx "$work/$1.onnx" >"$work/export.log" 2>&1; then
    echo "FAIL: export of $1 at input size $2:"
    cat "$work/export.log"
    exit 1
  fi
  models+=("$work/$1.onnx")
}
export_model squeezenet1_1 64
export_model googlenet 64
export_model resnet50 64
export_model inception_v3 75

"$py" "$script" --quick --schedules sequential,greedy,dp --stagecraft "$bin" \
  --out "$work/report.md" "${models[@]}" >"$work/out" 2>"$work/err"
rc=$?
cat "$work/out"
if [ "$rc" -eq 3 ]; then
  echo "SKIP: compare_ort.py could not get its dependencies:"
  cat "$work/err"
  exit 77
fi
if [ "$rc" -ne 0 ]; then
  echo "FAIL: compare_ort.py exited $rc"
  cat "$work/err"
  exit 1
fi

failed=0
check() {  # PATTERN WHAT: the table (stdout) has a line matching PATTERN
  if ! grep -qE -- "$1" "$work/out"; then
    echo "FAIL: no $2 in the output"
    failed=1
  fi
}
check '^\| model \| engine / mode \| median ms \| max abs err \| max rel err \|$' "table header"
for net in squeezenet1_1 googlenet resnet50 inception_v3; do
  for engine in 'ORT sequential' 'ORT parallel' 'stagecraft sequential' 'stagecraft greedy' \
                'stagecraft dp'; do
    check "^\| $net \([0-9x]+\) \| $engine[^|]* \| [0-9]+\.[0-9]+ \| " "row '$net $engine'"
  done
done
if ! grep -q '^| model | engine / mode' "$work/report.md" 2>/dev/null ||
   ! grep -q '^- machine: ' "$work/report.md"; then
  echo "FAIL: --out report lacks the machine line or the table"
  failed=1
fi
[ "$failed" -eq 0 ] && echo "compare_ort: passed"
exit "$failed"

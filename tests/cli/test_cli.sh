#!/usr/bin/env bash
# End-to-end tests of the `stagecraft` command: happy paths, and every user error is one line on
# stderr ("stagecraft: error: ...") with a non-zero exit code, never a crash or a stack trace.
# Usage: test_cli.sh PATH/TO/stagecraft
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# expect_ok NAME PATTERN -- ARGS...: exit 0 and stdout matches PATTERN (grep -E).
expect_ok() {
  local name=$1 pattern=$2
  shift 3
  local out rc=0
  out=$("$bin" "$@" 2>"$work/err") || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name: exit $rc ($(head -c 300 "$work/err"))"
    return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: output does not match '$pattern': $(head -c 300 <<<"$out")"
    return
  fi
  pass
}

# expect_error NAME PATTERN -- ARGS...: non-zero exit, exactly one stderr line, matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 3
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$rc" -eq 0 ]; then fail "$name: exit code 0"; return; fi
  if [ "$rc" -ge 128 ]; then fail "$name: crashed with signal $((rc - 128))"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$name: $lines stderr lines: $(head -c 400 "$work/err")"; return; fi
  if ! grep -qE -- "$pattern" "$work/err"; then
    fail "$name: stderr does not match '$pattern': $(cat "$work/err")"
    return
  fi
  pass
}

# make_npy PATH D0 D1 D2 D3: a float32 C-order .npy of zeros with that shape.
make_npy() {
  local path=$1 n=$(( $2 * $3 * $4 * $5 ))
  local dict="{'descr': '<f4', 'fortran_order': False, 'shape': ($2, $3, $4, $5), }"
  local total=$(( 10 + ${#dict} + 1 ))
  local pad=$(( (64 - total % 64) % 64 ))
  local header="$dict$(printf '%*s' "$pad" '')"
  local len=$(( ${#header} + 1 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((len % 256)))\\x$(printf %02x $((len / 256)))"; printf '%s\n' "$header"; head -c $((n * 4)) /dev/zero; } > "$path"
}

# ---- happy paths
expect_ok networks-table 'inception_v3 +299 +121 +94 +5\.71G' -- networks
expect_ok graph-summary 'resnet50: input 1x3x224x224 f32 nchw, 57 ops \(53 convolutions\)' -- graph resnet50
expect_ok graph-write "wrote $work/g.yaml" -- graph squeezenet1_1 --batch 2 -o "$work/g.yaml" --dot "$work/g.dot"
expect_ok graph-reload 'squeezenet1_1: input 2x3x224x224' -- graph "$work/g.yaml"
expect_ok graph-rebatch 'input 8x3x224x224' -- graph "$work/g.yaml" --batch 8
expect_ok schedule-dp 'predicted [0-9.]+ ms' -- schedule inception_v3 -q -o "$work/s.yaml" --dot "$work/s.dot"
expect_ok show 'stage +kind' -- show "$work/s.yaml"
expect_ok schedule-greedy 'greedy' -- schedule squeezenet1_0 --strategy greedy -q
expect_ok devices 'CUDA backend' -- devices
export STAGECRAFT_CACHE_DIR="$work/cache"
export OMP_WAIT_POLICY=passive
expect_ok run-sequential 'latency: median [0-9.]+ ms' -- run squeezenet1_1 --input-size 48 --schedule sequential --iters 3 --trace "$work/trace.json"
grep -q '"traceEvents"' "$work/trace.json" && pass || fail "trace file has no events"
expect_ok run-auto-layout 'latency: median [0-9.]+ ms' -- run squeezenet1_1 --input-size 32 --schedule sequential --layout auto --cache-dir "$work/cache" --iters 2 --warmup 0
if grep -qE 'layouts: predicted [0-9.]+ ms .* measured' "$work/err"; then pass; else fail "run-auto-layout: no layout summary: $(head -c 300 "$work/err")"; fi
if grep -qE 'layouts: end to end \(sequential[^)]*\): uniform [a-zA-Z0-9]+ [0-9.]+/[0-9.]+' "$work/err"; then pass; else fail "run-auto-layout: no end-to-end check: $(head -c 400 "$work/err")"; fi
expect_ok run-dp-file 'plan: [0-9]+ kernels' -- run inception_v3 --schedule "$work/s.yaml" --iters 1 --warmup 0
expect_ok schedule-measured '; [1-9][0-9]* measured \(' -- schedule squeezenet1_1 --input-size 48 --backend cpu -q --cache-dir "$work/measured-cache"
# the same search again: the schedule cache answers it (nothing searched, nothing measured)
expect_ok schedule-measured-warm 'schedule from the cache \(.*schedules/[0-9a-f]{16}\.yaml\)' -- schedule squeezenet1_1 --input-size 48 --backend cpu -q --cache-dir "$work/measured-cache"
# a budget that ends before anything beyond the single ops is measured: the best schedule of what
# was measured (valid: run executes it), and the line says the budget ended the search (the
# exhaustive search, which must measure every stage that could win: the default one may settle a
# small network from its single ops alone on a fast machine)
expect_ok schedule-budget 'the budget ended it' -- schedule squeezenet1_1 --input-size 48 --backend cpu -q --exhaustive --search-budget 0.000001 --cache-dir "$work/budget-cache" -o "$work/budget.yaml"
expect_ok run-budget-schedule 'ready to run [0-9.]+ s after the command began' -- run squeezenet1_1 --input-size 48 --schedule "$work/budget.yaml" --iters 1 --warmup 0
# an incomplete search is not reused by a longer budget: it searches on (and converges)
expect_ok schedule-budget-longer '; converged' -- schedule squeezenet1_1 --input-size 48 --backend cpu -q --exhaustive --search-budget 0 --cache-dir "$work/budget-cache"
expect_error search-budget-negative 'search-budget' -- schedule squeezenet1_1 --backend cpu --search-budget -1
expect_ok bench 'dp-both' -- bench squeezenet1_1 --input-size 48 --iters 2 --warmup 1 --out "$work/bench"
[ -s "$work/bench/bench.csv" ] && [ -s "$work/bench/bench.json" ] && pass || fail "bench wrote no CSV/JSON"
# kernels.csv: every kernel of the sequential plan, timed inside the run and alone (both > 0)
python3 - "$work/bench/kernels.csv" <<'PY' && pass || fail "bench kernels.csv: $(head -c 400 "$work/bench/kernels.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) >= 10, len(rows)
assert [int(r["index"]) for r in rows] == list(range(len(rows)))
assert all(r["schedule"] == "sequential" and r["kernel"] and r["implementation"] for r in rows)
assert all(float(r["in_run_ms"]) > 0 and float(r["alone_ms"]) > 0 for r in rows)
PY
# layouts chosen first, recorded in the schedule file, used by run
expect_ok schedule-layout-auto 'layout auto \(values:' -- schedule squeezenet1_1 --input-size 32 --backend cpu --layout auto -q -o "$work/la.yaml"
grep -q '^layouts:' "$work/la.yaml" && pass || fail "schedule file has no per-value layouts"
expect_ok run-layout-file 'latency: median [0-9.]+ ms' -- run squeezenet1_1 --input-size 32 --schedule "$work/la.yaml" --iters 1 --warmup 0
expect_error schedule-layout-auto-no-backend 'add --backend cpu' -- schedule squeezenet1_1 --layout auto
# int8: calibration file, quantised runs, and the errors a user can make with them
expect_ok calibrate 'calibrated [0-9]+ values on 2 generated input\(s\), method minmax' -- calibrate squeezenet1_1 --input-size 48 --samples 2 --check 3 -o "$work/sq.calib.yaml"
grep -q 'absmax' "$work/sq.calib.yaml" && pass || fail "calibration file has no ranges"
expect_ok calibrate-check 'int8 vs f32 over 3 random inputs: cosine' -- calibrate squeezenet1_1 --input-size 48 --samples 1 --check 3 -o "$work/sq1.calib.yaml"
# A batch norm that no convolution precedes (DenseNet's) runs as a depthwise convolution in int8,
# with weights the f32 model does not have: --check must make them (it once refused the model).
cat > "$work/dense.yaml" <<'EOF'
format: stagecraft-graph
version: 1
name: dense_tiny
inputs:
  - {name: input, shape: [1, 3, 16, 16], dtype: f32}
ops:
  - {name: a, kind: conv2d, inputs: [input], in_channels: 3, out_channels: 8, kernel: 3, padding: 1, bias: true}
  - {name: b, kind: conv2d, inputs: [input], in_channels: 3, out_channels: 8, kernel: 1, bias: true}
  - {name: cat, kind: concat, inputs: [a, b]}
  - {name: norm, kind: batch_norm, inputs: [cat]}
  - {name: act, kind: relu, inputs: [norm]}
  - {name: c, kind: conv2d, inputs: [act], in_channels: 16, out_channels: 10, kernel: 1, bias: true}
  - {name: pool, kind: global_avg_pool, inputs: [c]}
outputs: [pool]
EOF
expect_ok calibrate-check-batch-norm 'int8 vs f32 over 2 random inputs: cosine' -- calibrate "$work/dense.yaml" --samples 2 --check 2 -o "$work/dense.calib.yaml"
expect_ok calibrate-worst '^    [0-9.]+  \+[0-9.]+  conv2d  [abc]$' -- calibrate "$work/dense.yaml" --samples 2 --check 2 --worst 2 -o "$work/dense.calib.yaml"
expect_error calibrate-worst-needs-check 'requires --check' -- calibrate "$work/dense.yaml" --samples 2 --worst 2 -o "$work/dense.calib.yaml"
expect_ok run-int8 'latency: median [0-9.]+ ms' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" --schedule dp --iters 2 --warmup 0
expect_ok run-int8-inline 'latency: median [0-9.]+ ms' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration-samples 2 --schedule sequential --iters 1 --warmup 0
grep -q 'int8: calibrated' "$work/err" && pass || fail "run-int8-inline: no calibration line: $(head -c 300 "$work/err")"
expect_ok schedule-int8 'int8|i8|u8|predicted' -- schedule squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" -q -o "$work/q.yaml"
expect_ok run-int8-file 'plan: [0-9]+ kernels' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" --schedule "$work/q.yaml" --iters 1 --warmup 0
expect_ok show-int8 'int8' -- show "$work/q.yaml" --input-size 48 --calibration "$work/sq.calib.yaml" --summary
expect_ok bench-int8 'dp-both' -- bench squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" --iters 1 --warmup 0 --out "$work/bench8"
grep -q ',int8,dp-both,' "$work/bench8/bench.csv" && pass || fail "bench CSV has no int8 rows: $(head -c 300 "$work/bench8/bench.csv")"
expect_ok graph-int8 'int8: [0-9]+ of [0-9]+ tensors are 8-bit' -- graph squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml"
expect_error calibration-without-int8 'applies to --dtype int8' -- run squeezenet1_1 --input-size 48 --calibration "$work/sq.calib.yaml"
make_npy "$work/x48.npy" 1 3 48 48
make_npy "$work/x32.npy" 1 3 32 32
expect_ok calibrate-files 'on 2 supplied input\(s\)' -- calibrate squeezenet1_1 --input-size 48 --input "$work/x48.npy" --input "$work/x48.npy" -o "$work/files.calib.yaml"
expect_error calibrate-file-shape 'does not match the graph input 1x3x48x48' -- calibrate squeezenet1_1 --input-size 48 --input "$work/x32.npy"
if ! "$bin" devices | grep -q '^ *0 '; then
  expect_error int8-cuda-without-gpu 'cuda' -- run squeezenet1_1 --input-size 48 --dtype int8 --backend cuda
fi
expect_error calibrate-zero 'at least one sample' -- calibrate squeezenet1_1 --input-size 48 --samples 0
expect_error int8-zero-samples 'at least one sample' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration-samples 0
# bf16: converted graph, agreement with f32 printed by run, and one line on a CPU without it
if grep -q avx512_bf16 /proc/cpuinfo; then
  expect_ok run-bf16 'bf16 vs f32 \(first output, 2 random inputs\): cosine' -- run squeezenet1_1 --input-size 48 --dtype bf16 --check 2 --schedule sequential --iters 1 --warmup 0
  expect_ok run-bf16-names-it 'squeezenet1_1 \(batch 1, bf16\) on cpu' -- run squeezenet1_1 --input-size 48 --dtype bf16 --check 0 --schedule sequential --iters 1 --warmup 0
fi
DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 expect_error bf16-without-native 'no native bf16; bf16 needs a CPU with AVX512_BF16 or AMX\); use --dtype f32' -- run squeezenet1_1 --input-size 48 --dtype bf16 --iters 1
expect_error bf16-raw 'drop --raw' -- run squeezenet1_1 --input-size 48 --dtype bf16 --raw
expect_ok run-int8-check 'int8 vs f32 \(first output, 2 random inputs\): cosine' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" --check 2 --schedule sequential --iters 1 --warmup 0
# A forced layout whose kernels are reference-only runs them in a native layout, with one warning.
expect_ok int8-blocked-layout 'latency: median' -- run squeezenet1_1 --input-size 48 --dtype int8 --calibration "$work/sq.calib.yaml" --layout nChw16c --schedule sequential --iters 1
if [ "$(grep -c 'warning: --layout nChw16c: .* only a reference kernel in nChw16c .* they run .* in nhwc' "$work/err")" -eq 1 ]; then pass; else fail "int8-blocked-layout: no single warning naming the layouts: $(head -c 400 "$work/err")"; fi
expect_error int8-other-calibration 'has no range for value' -- run googlenet --input-size 64 --dtype int8 --calibration "$work/sq.calib.yaml" --schedule sequential --iters 1
expect_error int8-missing-calibration 'cannot read the calibration file' -- run squeezenet1_1 --dtype int8 --calibration "$work/none.yaml"
expect_error f16-on-cpu 'f16 runs on the CUDA backend' -- run squeezenet1_1 --input-size 48 --dtype f16 --schedule sequential --iters 1
expect_ok help 'schedule' -- --help
grep -q 'cluster_block0' "$work/g.dot" && pass || fail "graph dot has no block clusters"
grep -q 'cluster_stage0' "$work/s.dot" && pass || fail "schedule dot has no stage clusters"

# ---- ONNX models and tensor files
expect_ok export-onnx "wrote $work/sq.onnx" -- graph squeezenet1_1 --input-size 48 --onnx "$work/sq.onnx"
expect_ok import-onnx 'squeezenet1_1: input 1x3x48x48' -- graph "$work/sq.onnx"
expect_ok onnx-flag 'predicted' -- schedule --onnx "$work/sq.onnx" -q
python3 - "$work/x.npy" <<'PY'  # a NumPy file written by hand: stagecraft must read it
import sys, struct
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 48, 48), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%df" % (3 * 48 * 48), *[((i * 7919) % 1000) / 1000.0 for i in range(3 * 48 * 48)]))
PY
expect_ok run-tensor-files "wrote $work/y.npy \(1x1000\)" -- run "$work/sq.onnx" --schedule sequential --input "$work/x.npy" --output "$work/y.npy" --iters 1 --warmup 0
expect_ok run-tensor-files-pb "wrote $work/y.pb" -- run squeezenet1_1 --input-size 48 --schedule sequential --input "$work/x.npy" --output "$work/y.pb" --iters 1 --warmup 0
cmp -s <(tail -c 4000 "$work/y.npy") <(tail -c 4000 "$work/y.pb") && pass || fail "outputs of the ONNX model and the built-in network differ"

# ---- user errors: one line each
expect_error unknown-network "unknown network 'resnet5'.*did you mean 'resnet50'" -- graph resnet5
expect_error missing-file "cannot read '$work/none.yaml'" -- graph "$work/none.yaml"
printf 'format: stagecraft-graph\nversion: 1\ninputs: [{name: x, shape: [1, 4, 8, 8]}]\nops:\n  - {name: a, kind: relu, inputs: [b]}\n  - {name: b, kind: relu, inputs: [a]}\noutputs: [b]\n' >"$work/cycle.yaml"
expect_error cycle "cycle\.yaml:[0-9]+:[0-9]+: the graph has a cycle: " -- graph "$work/cycle.yaml"
printf 'format: stagecraft-graph\nversion: 1\ninputs: [{name: x, shape: [1, 4, 8, 8]}]\nops:\n  - {name: c, kind: conv2d, inputs: [x], in_channels: 3, out_channels: 2, kernel: 1}\noutputs: [c]\n' >"$work/mismatch.yaml"
expect_error channel-mismatch "op 'c' \(conv2d\): input has 4 channels but in_channels is 3" -- graph "$work/mismatch.yaml"
printf 'ops: [\n' >"$work/broken.yaml"
expect_error bad-yaml "broken\.yaml:[0-9]+:[0-9]+: not valid" -- graph "$work/broken.yaml"
expect_error input-size-on-file "--input-size applies to built-in networks only" -- graph "$work/g.yaml" --input-size 64
expect_error too-small "input size must be >= 75" -- graph inception_v3 --input-size 40
expect_error bad-device "unknown device 'k80'" -- schedule squeezenet1_0 --cost-model analytic:k80
expect_error bad-cost-model "unknown cost model 'profiled'" -- schedule squeezenet1_0 --cost-model profiled
expect_error measured-without-backend "cost model 'measured' needs a backend" -- schedule squeezenet1_0 --cost-model measured
expect_error unknown-backend "unknown backend 'tpu'" -- run squeezenet1_0 --backend tpu
expect_error no-gpu "backend 'cuda'" -- run squeezenet1_0 --backend cuda
expect_error bad-layout "unknown activation layout 'nhcw'" -- run squeezenet1_0 --layout nhcw --schedule sequential
expect_error bad-cache-dir "cannot use cache directory" -- schedule squeezenet1_1 --backend cpu --input-size 32 --cache-dir "$work/g.yaml/sub"
expect_error bad-schedule-arg "neither a file nor one of sequential, greedy, dp" -- run squeezenet1_0 --schedule fastest
expect_error wrong-batch "the schedule is for batch 1 but the graph has batch 4" -- show "$work/s.yaml" --graph inception_v3 --batch 4 2>/dev/null
expect_error wrong-network "the schedule is for network 'inception_v3' but the graph is 'googlenet'" -- show "$work/s.yaml" --graph googlenet
sed 's/kind: merge/kind: fused/' "$work/s.yaml" >"$work/bad_kind.yaml"
expect_error bad-stage-kind "unknown stage kind 'fused'" -- show "$work/bad_kind.yaml"
expect_error bad-option "--frobnicate" -- graph resnet50 --frobnicate
expect_error bad-strategy "--strategy" -- schedule resnet50 --strategy random
expect_error no-command "subcommand" --
printf 'garbage' > "$work/bad.onnx"
expect_error bad-onnx "bad.onnx: not an ONNX model" -- graph "$work/bad.onnx"
expect_error input-shape "does not match the graph input 1x3x64x64" -- run squeezenet1_1 --input-size 64 --schedule sequential --input "$work/x.npy"
expect_error unwritable "cannot write '$work/no/dir/x.yaml'" -- graph resnet50 -o "$work/no/dir/x.yaml"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# On a lease: why stagecraft ran ~2x slower in bench/cpu_engines.py than `stagecraft run` on the
# AMX Xeon (bench/results/cpu_engines_amx_xeon16.md). The executor's AMX-sensitive tests, the CLI
# on the same ONNX exports (sequential, back to back), then bench/interleave_gap.py in separate
# processes: stagecraft alone; with ONNX Runtime, OpenVINO and NNCF loaded; the same with the
# thread limiter off; and inception_v3. Leaves gap.log under $OUT.
#   bash bench/cpu_device_pass/gap.sh [DEADLINE_S (default 540)]     (carry: [".cpu-kit"])
set -u
T0=$(date +%s); DEADLINE=${1:-540}; END=$((T0 + DEADLINE))
: "${OUT:?}"
exec > >(tee "$OUT/gap.log") 2>&1
ts() { echo "[+$(($(date +%s) - T0))s]"; }
left() { echo $((END - $(date +%s))); }
PY=${PYTHON:-python3}
B=/tmp/amxbin; M=/tmp/models
mkdir -p $B $M
grep -m1 "model name" /proc/cpuinfo; nproc
echo "flags: $(grep -o -E 'amx[a-z_0-9]*|avx512_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
tar -C $B -xJf .cpu-kit/bin.tar.xz || exit 3
source bench/cpu_device_pass/unpack.sh || exit 3
( EXPORT_THREADS=4 "$PY" bench/cpu_device_pass/export.py $M resnet50 inception_v3 2>&1 | grep -E "^export|rror" ) &
EXPORTER=$!
echo "$(ts) == executor tests, AMX as decided"
timeout 100 $B/test_executor --gtest_filter='AmxTrial.*:Quantised*:*BF16*:*Bf16*:Winograd*:KernelChoices*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED|SKIPPED) |this CPU|Failure|Expected|Which is|\[  FAILED|tests ran" | head -30
wait $EXPORTER
ls -la $M
echo "$(ts) == CLI, sequential, 30 runs back to back, the ONNX exports"
for net in resnet50 inception_v3; do for dt in int8 bf16 f32; do
  timeout 90 $B/stagecraft run $M/${net}_ts.onnx --dtype $dt --schedule sequential --iters 30 \
    --cache-dir /tmp/gapcache --plan-listing /tmp/pl.txt > /tmp/r.txt 2>&1
  echo "$(ts) cli $net $dt rc=$? amx_kernels=$(grep -c amx /tmp/pl.txt) $(grep -o 'latency: median [0-9.]* ms' /tmp/r.txt) $(grep -o 'post-ops[^;,]*' /tmp/r.txt | head -1)"
done; done
G="$PY bench/interleave_gap.py"
run() { local l; l=$(left); [ "$l" -lt 40 ] && { echo "$(ts) skipped (time): $*"; return; }
        echo "$(ts) == $*"; timeout -k 5 $((l - 10)) "$@" 2>&1 | grep -v -E "Warning|warn\(|^ *$|Statistics coll"; }
run env $G $M/resnet50_ts.onnx --only-stagecraft --cache-dir /tmp/gapcache
run env $G $M/resnet50_ts.onnx --cache-dir /tmp/gapcache
run env STAGECRAFT_ADAPT_THREADS=0 $G $M/resnet50_ts.onnx --dtypes int8,bf16 --cache-dir /tmp/gapcache
run env $G $M/inception_v3_ts.onnx --dtypes int8,bf16 --schedules sequential,dp --cache-dir /tmp/gapcache
run env OMP_WAIT_POLICY=active $G $M/resnet50_ts.onnx --dtypes int8,bf16 --cache-dir /tmp/gapcache
echo "$(ts) done"

#!/usr/bin/env bash
# The CPU side of a GPU lease, in one command (the lease's host: an Intel Xeon with AMX, 16 cores,
# on the H200 machines so far): the AMX decision and the executor's AMX-sensitive tests, an AMX
# on/off A/B of int8 and bf16 (CLI, sequential schedule), then the engines (measure.sh). Leaves
# pass.log, engines/{log.txt,summary.md} and extras.tar.gz (plan listings, the cpu-kernels
# verdicts: AMX or not per convolution) under $OUT. Made here by kit.sh; run there as
#   bash bench/cpu_device_pass/pass.sh [DEADLINE_S (default 540)]     (carry: [".cpu-kit"])
set -u
T0=$(date +%s); DEADLINE=${1:-540}
: "${OUT:?}"
exec > >(tee "$OUT/pass.log") 2>&1
ts() { echo "[+$(($(date +%s) - T0))s]"; }
B=/tmp/amxbin; P=/tmp/scpre
mkdir -p $B $P /tmp/extras
tar -C $B -xJf .cpu-kit/bin.tar.xz || exit 3
tar -C $P -xJf .cpu-kit/sckit.tar.xz ./lib 2>/dev/null || tar -C $P -xJf .cpu-kit/sckit.tar.xz lib || exit 3
source scripts/gpu_env.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$P/lib:${LD_LIBRARY_PATH:-}
grep -m1 "model name" /proc/cpuinfo; nproc
echo "$(ts) == the CLI's first lines (AMX decided by a trial child)"
$B/stagecraft run squeezenet1_1 --iters 2 --schedule sequential 2>&1 | head -4 | cut -c1-400
echo "$(ts) == executor tests, AMX as decided (16 threads)"
timeout 120 $B/test_executor --gtest_filter='AmxTrial.*:Quantised*:*BF16*:*Bf16*:Winograd*:KernelChoices*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED|SKIPPED) |this CPU|first candidate|Failure|Expected|Which is|\[  FAILED" | head -40
echo "test rc=${PIPESTATUS[0]}"
echo "$(ts) == A/B: STAGECRAFT_AMX on/off, sequential, int8 and bf16 (ms medians of 30 runs)"
for net in inception_v3 resnet50; do for dt in int8 bf16; do for amx in on off; do
  STAGECRAFT_AMX=$amx timeout 60 $B/stagecraft run $net --dtype $dt --schedule sequential --iters 30 \
    --cache-dir /tmp/abcache --plan-listing /tmp/extras/pl_${net}_${dt}_${amx}.txt > /tmp/r.txt 2>&1
  rc=$?
  echo "$net $dt amx=$amx rc=$rc amx_kernels=$(grep -c -E 'amx' /tmp/extras/pl_${net}_${dt}_${amx}.txt 2>/dev/null) chose_without=$(grep -c 'faster here than' /tmp/extras/pl_${net}_${dt}_${amx}.txt 2>/dev/null) layout=$(head -1 /tmp/extras/pl_${net}_${dt}_${amx}.txt | grep -o 'layout.*') $(grep -o 'latency: median [0-9.]* ms' /tmp/r.txt) $(grep -o 'input-dependent part.*cosine min [0-9.]*' /tmp/r.txt | grep -o 'cosine min [0-9.]*')"
  [ $rc -ne 0 ] && tail -3 /tmp/r.txt
done; done; done
cp /tmp/abcache/*cpu-kernels* /tmp/extras/ 2>/dev/null
left=$((DEADLINE - ($(date +%s) - T0)))
echo "$(ts) == engines, $left s left"
bash bench/cpu_device_pass/measure.sh $((left - 15))
cp /tmp/sccache/*cpu-kernels* /tmp/extras/ 2>/dev/null
tar -C /tmp/extras -czf "$OUT/extras.tar.gz" . && echo "$(ts) extras: $(ls /tmp/extras | wc -l) files"

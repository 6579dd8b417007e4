#!/usr/bin/env bash
# The GPU run, in phases that each fit one command of a GPU lease (at most 10 minutes, and only the
# files written to RESULTS_DIR come back: at most 8 per command, 2 folder levels). Runs from an
# unpacked bundle (scripts/gpu_bundle.sh) or from a built checkout; builds nothing.
#
#   gpu_check.sh PHASE RESULTS_DIR [--cache-in FILE] [--budget SECONDS]
#
# Phases (each writes PHASE.log and PHASE.md, a Markdown summary whose first line is the status):
#   info         the device, driver, libraries found, glibc, PyTorch      + info.json
#   tests        every test of test_gpu, in parallel shards                  + tests.json
#   memcheck     compute-sanitizer memcheck/initcheck of small networks after an untimed run that
#                warms the algorithm cache                                  + cache.tar.gz
#   bench-small  `stagecraft bench` of squeezenet1_0/1_1, googlenet, resnet50, inception_v3 at
#                batch 1 in f32 strict, f32 with TF32 (--tf32) and f16 (nhwc), labelled
#                                                                           + .csv .json cache.tar.gz
#   bench-large  the same for nasnet_a_mobile, nasnet_a_large, randwire, randwire_small,
#                randwire_regular                                           + .csv .json cache.tar.gz
#   baseline     bench/pytorch_baseline.py: PyTorch eager, torch.compile (default and
#                reduce-overhead) in f32, TF32 and f16 beside stagecraft     + .csv .json cache.tar.gz
#
# Caches: profile and algorithm caches live in a working directory ($STAGECRAFT_GPU_CACHE, default
# gpu-cache/ beside this script), which stays between commands on a machine that is still held;
# phases that fill it pack it into RESULTS_DIR/cache.tar.gz, and --cache-in FILE unpacks such a file
# first (on a fresh machine). A phase stops starting work when its budget (default 540 s) is spent:
# finished benchmarks are kept (in the working directory and the packed cache), so running the
# phase again — with --cache-in on a fresh machine — continues where it stopped.
#
# Rehearsal without a GPU (to check this script's plumbing: files, caches, budget, continuation):
#   STAGECRAFT_GPU_BACKEND=cpu       run the bench and baseline phases on the CPU backend
#   STAGECRAFT_GPU_NETWORKS="a b"    the networks of a bench phase
#   STAGECRAFT_GPU_VARIANTS="f32-strict:;nhwc:--layout nhwc"   LABEL:FLAGS;... variants of a bench phase
#   STAGECRAFT_GPU_EXTRA="--input-size 64"  more flags for `stagecraft bench`
#   STAGECRAFT_GPU_ITERS=3           timed rounds of `stagecraft bench` (default 50)
#   STAGECRAFT_GPU_BASELINE_ARGS="..."      more arguments for pytorch_baseline.py
#
# Exit status: 0 done, 1 failures (tests, sanitizer errors, runs), 2 incomplete (budget: run again),
# 3 no usable GPU (the reason is the last line), 4 the binaries cannot start (a loader error).
# On a machine without a GPU every phase ends with the runtime's reason and writes only under
# RESULTS_DIR.
set -uo pipefail

usage() {
  echo "usage: gpu_check.sh PHASE RESULTS_DIR [--cache-in FILE] [--budget SECONDS]" >&2
  echo "phases: info tests memcheck bench-small bench-large baseline" >&2
  exit 64
}
[ $# -ge 2 ] || usage
phase=$1
results=$2
shift 2
cache_in=""
budget=${STAGECRAFT_GPU_BUDGET:-540}
while [ $# -gt 0 ]; do
  case "$1" in
    --cache-in) cache_in=$(realpath -m "$2"); shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) usage ;;
  esac
done
case "$phase" in info | tests | memcheck | bench-small | bench-large | baseline) ;; *) usage ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -x "$here/bin/stagecraft" ]; then  # an unpacked bundle
  stagecraft="$here/bin/stagecraft"
  test_gpu="$here/bin/test_gpu"
  baseline="$here/pytorch_baseline.py"
  configs="$here/configs"
  default_cache="$here/gpu-cache"
else  # a built checkout
  root=$(cd "$here/.." && pwd)
  stagecraft="$root/build/cli/stagecraft"
  test_gpu="$root/build/tests/test_gpu"
  baseline="$root/bench/pytorch_baseline.py"
  configs="$root/configs"
  default_cache="$root/build/gpu-cache"
fi
export STAGECRAFT_CONFIG_DIR=${STAGECRAFT_CONFIG_DIR:-$configs}
cache=${STAGECRAFT_GPU_CACHE:-$default_cache}
backend=${STAGECRAFT_GPU_BACKEND:-cuda}
read -r -a extra <<<"${STAGECRAFT_GPU_EXTRA:-}"
read -r -a baseline_args <<<"${STAGECRAFT_GPU_BASELINE_ARGS:-}"

mkdir -p "$results"
results=$(cd "$results" && pwd)
# Temporary files (the tests' scratch caches included) stay under RESULTS_DIR and go at the end.
tmp="$results/.tmp-$phase"
mkdir -p "$tmp"
export TMPDIR="$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$results/$phase.log"
summary="$results/$phase.md"
deadline=$((SECONDS + budget))
remaining() { echo $((deadline - SECONDS)); }

say() { echo "gpu_check $phase: $*"; }
# Summary file: a status line first, then the sections written by the phase.
status_line=""
body=""
finish() {  # STATUS_CODE STATUS_TEXT
  { echo "status: $2"; echo; echo "phase \`$phase\` on $(hostname) at $(date -u +%FT%TZ)"; echo; printf '%s\n' "$body"; } >"$summary"
  if [ -d "$cache" ] && [ "$3" = pack ]; then
    tar -C "$cache" --exclude=./inductor -czf "$results/cache.tar.gz" . 2>/dev/null &&
      say "caches packed into $results/cache.tar.gz ($(du -h "$results/cache.tar.gz" | cut -f1))"
  fi
  say "$2"
  exit "$1"
}
add() {  # LINE...: appends lines to the summary
  local line
  for line in "$@"; do body+="$line"$'\n'; done
}

preflight() {
say "$(date -u +%FT%TZ), budget ${budget}s, results in $results"

# ---- Libraries and the device --------------------------------------------------------------------
# shellcheck source=gpu_env.sh
source "$here/gpu_env.sh"
say "CUDA libraries: $(printf '%s' "$STAGECRAFT_CUDA_LIBS" | awk '{printf "%s%s in %s", sep, $1, $2; sep="; "}')"
[ -n "$STAGECRAFT_CUDA_MISSING" ] && say "CUDA libraries not found: $STAGECRAFT_CUDA_MISSING"
[ -n "${STAGECRAFT_CXX_RUNTIME:-}" ] && say "C++ runtime: $STAGECRAFT_CXX_RUNTIME"

if ! devices=$("$stagecraft" devices 2>&1); then
  echo "$devices"
  add "The stagecraft binary cannot start:" "" '```' "$devices" '```'
  add "" "missing libraries: ${STAGECRAFT_CUDA_MISSING:-none reported by gpu_env.sh}"
  finish 4 "cannot start $stagecraft (see $phase.log)" no
fi
echo "$devices"
gpu_reason=$(printf '%s\n' "$devices" | sed -n 's/^no usable GPU: //p')
have_gpu=1
[ -n "$gpu_reason" ] && have_gpu=0
if [ "$backend" = cpu ]; then
  say "rehearsal on the CPU backend (STAGECRAFT_GPU_BACKEND=cpu)"
  have_gpu=1
fi

sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
python=${STAGECRAFT_PYTHON:-$(command -v python3 || true)}

}

no_gpu() { finish 3 "no usable GPU: $gpu_reason" no; }

# The start of a phase that runs on the GPU with the working cache: stops without a GPU or, given
# a tool's path (empty when it was not found) and a reason, without the tool; then prepares the cache.
start_gpu_phase() {  # [TOOL_PATH MISSING_REASON]
  [ $have_gpu = 1 ] || no_gpu
  [ $# = 0 ] || [ -n "$1" ] || finish 1 "$2" no
  prepare_cache
}

prepare_cache() {
  mkdir -p "$cache"
  if [ -n "$cache_in" ]; then
    if [ -f "$cache_in" ]; then
      tar -C "$cache" -xzf "$cache_in" && say "caches carried in from $cache_in"
    else
      say "warning: --cache-in $cache_in does not exist; starting from $cache as it is"
    fi
  fi
  say "working cache: $cache ($(find "$cache" -type f | wc -l) files)"
}

# ---- info ----------------------------------------------------------------------------------------
phase_info() {
  local smi glibc torch_line
  smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader 2>&1 ||
        echo "nvidia-smi not found or failed")
  glibc=$(ldd --version 2>/dev/null | head -n 1)
  torch_line=$("$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())' 2>&1 | tail -n 1)
  say "nvidia-smi: $smi"
  say "glibc: $glibc"
  say "python: $("$python" --version 2>&1); $torch_line"
  [ -f "$here/MANIFEST.txt" ] && cat "$here/MANIFEST.txt"
  echo "== ldd"
  ldd "$stagecraft" "$test_gpu" 2>&1
  add "| item | value |" "|---|---|"
  add "| nvidia-smi | ${smi//$'\n'/; } |"
  add "| stagecraft devices | ${devices//$'\n'/<br>} |"
  add "| CUDA libraries | $(printf '%s' "$STAGECRAFT_CUDA_LIBS" | tr '\n' ';' | sed 's/;$//; s/;/<br>/g') |"
  add "| not found | ${STAGECRAFT_CUDA_MISSING:-none} |"
  add "| glibc | $glibc |"
  add "| C++ runtime | ${STAGECRAFT_CXX_RUNTIME:-system} |"
  add "| python / torch | $torch_line |"
  {
    printf '{\n  "gpu": "%s",\n  "nvidia_smi": "%s",\n' "$([ $have_gpu = 1 ] && echo yes || echo no)" "${smi//\"/\'}"
    printf '  "no_gpu_reason": "%s",\n  "glibc": "%s",\n  "torch": "%s",\n' "${gpu_reason//\"/\'}" "$glibc" "${torch_line//\"/\'}"
    printf '  "cuda_libraries": {'
    printf '%s' "$STAGECRAFT_CUDA_LIBS" | awk 'NF {printf "%s\"%s\": \"%s\"", sep, $1, $2; sep=", "}'
    printf '},\n  "cuda_missing": "%s"\n}\n' "$STAGECRAFT_CUDA_MISSING"
  } >"$results/info.json"
  [ $have_gpu = 1 ] || no_gpu
  finish 0 "done" no
}

# ---- tests ---------------------------------------------------------------------------------------
# Every test of test_gpu, in STAGECRAFT_GPU_TEST_SHARDS (default 4) processes at once (GoogleTest's
# sharding: each process runs every N-th test), each with its own scratch folder: correctness
# tests share the GPU, so a lease's minutes go further; none of them times anything.
phase_tests() {
  local shards=${STAGECRAFT_GPU_TEST_SHARDS:-4}
  local failed=0 incomplete=0 i out rc passed failures skipped jsons=() pids=()
  add "| shard | exit | passed | failed | skipped |" "|---|---|---|---|---|"
  say "test_gpu in $shards shards, up to $(remaining)s"
  for ((i = 0; i < shards; i++)); do
    mkdir -p "$tmp/shard-$i"
    TMPDIR="$tmp/shard-$i" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      timeout -k 10 "$(remaining)" "$test_gpu" --gtest_output="json:$tmp/tests-$i.json" \
      >"$tmp/tests-$i.txt" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}"
    rc=$?
    out="$tmp/tests-$i.txt"
    echo "==== shard $i (exit $rc)"
    cat "$out"
    [ -f "$tmp/tests-$i.json" ] && jsons+=("$tmp/tests-$i.json")
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    failures=$(grep -c '^\[  FAILED  \] .*([0-9]* ms)$' "$out")
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && incomplete=1
    [ "$rc" != 0 ] && failed=1
    add "| $i | $rc | ${passed:-0} | $failures | ${skipped:-0} |"
  done
  add "" "Failed tests:" "" '```' "$(cat "$tmp"/tests-*.txt | grep '^\[  FAILED  \] .*([0-9]* ms)$' || echo none)" '```'
  add "" "Skipped tests:" "" '```' "$(cat "$tmp"/tests-*.txt | grep -A1 '^\[  SKIPPED \] [A-Z]' | head -n 40 || true)" '```'
  if [ ${#jsons[@]} -gt 0 ] && [ -n "$python" ]; then
    "$python" - "$results/tests.json" "${jsons[@]}" <<'PYEOF'
import json, sys
merged = {"shards": []}
for path in sys.argv[2:]:
    with open(path) as f:
        merged["shards"].append(json.load(f))
with open(sys.argv[1], "w") as f:
    json.dump(merged, f, indent=1)
PYEOF
  fi
  [ $have_gpu = 1 ] || no_gpu
  [ $incomplete = 1 ] && finish 2 "incomplete: the budget ran out (run the phase again)" no
  [ $failed = 1 ] && finish 1 "failures (see tests.log)" no
  finish 0 "done: every test passed" no
}

# ---- memcheck ------------------------------------------------------------------------------------
phase_memcheck() {
  start_gpu_phase "$sanitizer" "compute-sanitizer not found"
  local common=(run squeezenet1_1 --input-size 64 --backend cuda --cache-dir "$cache" --schedule greedy
                --cost-model analytic:h100 --iters 2 --warmup 0)
  local configs=("f32 nchw graph:" "f32 stream mode:--stream-mode" "f16 nhwc:--dtype f16 --layout nhwc"
                 "int8 nhwc:--dtype int8")
  local failed=0 c label flags rc errors tool
  add "| run | tool | exit | errors |" "|---|---|---|---|"
  for c in "${configs[@]}"; do
    label=${c%%:*}
    read -r -a flags <<<"${c#*:}"
    for tool in memcheck initcheck; do
      [ "$tool" = initcheck ] && [ "$label" != "f32 nchw graph" ] && continue
      if [ "$(remaining)" -lt 60 ]; then
        add "| $label | $tool | not run (budget) | |"
        finish 2 "incomplete: the budget ran out (run the phase again)" pack
      fi
      # Untimed run first: the algorithm search (many cuDNN calls) is not what is checked.
      say "warm run: $label"
      timeout -k 10 "$(remaining)" "$stagecraft" "${common[@]}" "${flags[@]}" >"$tmp/warm.txt" 2>&1 || cat "$tmp/warm.txt"
      say "$tool: $label"
      timeout -k 10 "$(remaining)" "$sanitizer" --tool "$tool" --error-exitcode 99 --print-limit 20 \
        "$stagecraft" "${common[@]}" "${flags[@]}" 2>&1 | tee "$tmp/san.txt" | tail -n 40
      rc=${PIPESTATUS[0]}
      errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$tmp/san.txt" | tail -n 1)
      add "| $label | $tool | $rc | ${errors:-?} |"
      [ "$rc" != 0 ] && failed=1
    done
  done
  [ $failed = 1 ] && finish 1 "sanitizer errors or failed runs (see memcheck.log)" pack
  finish 0 "done: no sanitizer errors" pack
}

# ---- bench-small, bench-large ----------------------------------------------------------------------
phase_bench() {  # NETWORK...
  start_gpu_phase
  local state="$cache/state/$phase" variants=("f32-strict:" "tf32:--tf32" "f16-nhwc:--dtype f16 --layout nhwc")
  if [ -n "${STAGECRAFT_GPU_VARIANTS:-}" ]; then IFS=';' read -r -a variants <<<"$STAGECRAFT_GPU_VARIANTS"; fi
  if [ -n "${STAGECRAFT_GPU_NETWORKS:-}" ]; then read -r -a nets <<<"$STAGECRAFT_GPU_NETWORKS"; set -- "${nets[@]}"; fi
  local net v label flags dir rc incomplete=0 failed=0
  for net in "$@"; do
    for v in "${variants[@]}"; do
      label=${v%%:*}
      read -r -a flags <<<"${v#*:}"
      dir="$state/$label/$net"
      if [ -f "$dir/bench.json" ]; then
        say "$net $label: done in an earlier command"
        continue
      fi
      if [ "$(remaining)" -lt 40 ]; then
        incomplete=1
        continue
      fi
      say "$net $label: searching and timing (up to $(remaining)s; caches are saved as it goes)"
      mkdir -p "$tmp/bench"
      timeout -k 15 "$(remaining)" "$stagecraft" bench "$net" --backend "$backend" --cache-dir "$cache" "${flags[@]}" \
        --iters "${STAGECRAFT_GPU_ITERS:-50}" "${extra[@]}" --out "$tmp/bench/$label-$net" 2>&1
      rc=$?
      if [ "$rc" = 0 ] && [ -f "$tmp/bench/$label-$net/bench.json" ]; then
        mkdir -p "$dir" && cp "$tmp/bench/$label-$net"/bench.* "$tmp/bench/$label-$net"/kernels.csv "$dir/" 2>/dev/null
      elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        say "$net $label: stopped by the budget; the next run continues from the saved caches"
        incomplete=1
      else
        say "$net $label: failed (exit $rc)"
        failed=1
      fi
    done
  done
  # Everything done so far (this command and earlier ones), labelled by variant.
  local csv="$results/$phase.csv" json="$results/$phase.json" first=1 f
  : >"$csv"
  for f in "$state"/*/*/bench.csv; do
    [ -f "$f" ] || continue
    label=$(basename "$(dirname "$(dirname "$f")")")
    if [ $first = 1 ]; then sed -n '1s/^/variant,/p' "$f" >>"$csv"; first=0; fi
    sed -n "2,\$s/^/$label,/p" "$f" >>"$csv"
  done
  {
    echo '{"phase": "'"$phase"'", "variants": {'
    local sep="" l d
    for d in "$state"/*/; do
      [ -d "$d" ] || continue
      l=$(basename "$d")
      echo "$sep\"$l\": ["
      local s2=""
      for f in "$state/$l"/*/bench.json; do
        [ -f "$f" ] || continue
        echo "$s2"
        cat "$f"
        s2=","
      done
      echo "]"
      sep=","
    done
    echo '}}'
  } >"$json"
  add "Median latency (ms) of each schedule at batch 1; f32-strict: FMA only; tf32: \`--tf32\` (TF32 tensor cores" \
      "for f32, as PyTorch allows for cuDNN convolutions by default); f16-nhwc: \`--dtype f16 --layout nhwc\`." ""
  add "| variant | network | sequential | greedy | dp-merge | dp-concurrent | dp-both | dp-both speed-up |" \
      "|---|---|---|---|---|---|---|---|"
  body+=$(awk -F, 'NR > 1 {m[$1 "|" $2 "|" $5] = $7; sp[$1 "|" $2] = ($5 == "dp-both") ? $11 : sp[$1 "|" $2]; k[$1 "|" $2] = 1}
    END {for (key in k) {split(key, a, "|"); printf "| %s | %s | %s | %s | %s | %s | %s | %sx |\n", a[1], a[2],
      m[key "|sequential"], m[key "|greedy"], m[key "|dp-merge"], m[key "|dp-concurrent"], m[key "|dp-both"], sp[key]}}' "$csv" | sort)
  body+=$'\n'
  [ $failed = 1 ] && finish 1 "failures (see $phase.log)" pack
  [ $incomplete = 1 ] && finish 2 "incomplete: the budget ran out; run the phase again (with --cache-in cache.tar.gz on a fresh machine) to continue" pack
  finish 0 "done" pack
}

# ---- baseline ------------------------------------------------------------------------------------
phase_baseline() {
  start_gpu_phase "$python" "no python3 for the PyTorch baseline"
  export TORCHINDUCTOR_CACHE_DIR="$cache/inductor"
  local rc
  local device=cuda
  [ "$backend" = cpu ] && device=cpu
  "$python" "$baseline" --device "$device" --stagecraft "$stagecraft" --cache-dir "$cache" \
    --state "$cache/state/baseline" --time-budget "$(( $(remaining) - 30 ))" \
    --out-prefix "$results/baseline" "${baseline_args[@]}"
  rc=$?
  [ -f "$results/baseline.md" ] && body+=$(cat "$results/baseline.md") && rm -f "$results/baseline.md"
  body+=$'\n'
  case $rc in
    0) finish 0 "done" pack ;;
    2) finish 2 "incomplete: the budget ran out; run the phase again (with --cache-in cache.tar.gz on a fresh machine) to continue" pack ;;
    *) finish 1 "failures (exit $rc, see baseline.log)" pack ;;
  esac
}

run_phase() {
  preflight
case "$phase" in
  info) phase_info ;;
  tests) phase_tests ;;
  memcheck) phase_memcheck ;;
  bench-small) phase_bench squeezenet1_0 squeezenet1_1 googlenet resnet50 inception_v3 ;;
  bench-large) phase_bench nasnet_a_mobile nasnet_a_large randwire randwire_small randwire_regular ;;
  baseline) phase_baseline ;;
esac
}

# Everything goes to the terminal and to PHASE.log.
run_phase 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# One GPU lease command that does the whole pass (issue 46): unpacks the bundle, refreshes its
# scripts from this checkout (so a fix to them needs no rebuild), then runs the phases of
# gpu_check.sh under one deadline — correctness first (the test shards and compute-sanitizer side
# by side: neither times anything), then the timed work alone on the GPU (`stagecraft bench`, the
# PyTorch baseline) — and leaves at most five files in OUT_DIR, as a lease brings back only a few:
#   pass.log          everything printed, written as it goes (comes back even when the command is killed)
#   summary.md        each phase's Markdown summary, status line first
#   results.tar.gz    every phase's files (logs, csv, json)
#   cache.tar.gz      profile, algorithm and schedule caches, for --cache-in on the next machine
#
#   scripts/gpu_pass.sh OUT_DIR [--bundle FILE.tar.gz] [--budget SECONDS] [--cache-in FILE]
#                       [--steps STEP,...]
# Steps (default info,tests+memcheck,bench,baseline), each given what is left of the budget, or at
# most SECONDS when written NAME#SECONDS[:ARGS]:
#   info                 the device and the libraries
#   tests+memcheck       test_gpu's shards and the sanitizer at once (tests or memcheck alone also work)
#   bench[:NETS[:VARIANTS]]  `stagecraft bench` (NETS space- or '/'-separated; VARIANTS as
#                        STAGECRAFT_GPU_VARIANTS, ';'-separated LABEL=FLAGS with '=' for ':')
#   baseline[:NETS[:ENGINES[:PRECISIONS]]]  bench/pytorch_baseline.py (PyTorch eager and
#                        torch.compile; each list '/'-separated)
#   onnx[:MODELS]        bench/gpu_onnx_check.py: the committed ONNX pattern models and torchvision
#                        exports (MODELS '/'-separated, '-' for none) through `stagecraft run --backend cuda`
# Environment: STAGECRAFT_PASS_BENCH_EXTRA (default "--search-budget 15") goes to every
# `stagecraft bench`, STAGECRAFT_GPU_ITERS (default 30) is its timed rounds;
# STAGECRAFT_PASS_ENGINES the baseline's engines.
set -uo pipefail

usage() {
  echo "usage: gpu_pass.sh OUT_DIR [--bundle FILE.tar.gz] [--budget SECONDS] [--cache-in FILE] [--steps STEP,...]" >&2
  exit 64
}
[ $# -ge 1 ] || usage
out=$(realpath -m "$1")
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle_tar="$root/gpu-bundle.tar.gz"
budget=540
cache_in=""
steps="info,tests+memcheck,bench,baseline"
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle_tar=$(realpath -m "$2"); shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --cache-in) cache_in=$(realpath -m "$2"); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) usage ;;
  esac
done

mkdir -p "$out"
exec > >(tee -a "$out/pass.log") 2>&1
deadline=$((SECONDS + budget))
left() { echo $((deadline - SECONDS)); }
say() { echo "gpu_pass [$(date -u +%T), $(left)s left]: $*"; }

work=${STAGECRAFT_PASS_WORK:-/tmp/stagecraft-pass}
results="$work/results"
mkdir -p "$work" "$results"
if [ ! -x "$work/gpu-bundle/bin/stagecraft" ]; then
  [ -f "$bundle_tar" ] || { say "no bundle at $bundle_tar (scripts/gpu_bundle.sh makes it)"; exit 64; }
  tar -C "$work" -xzf "$bundle_tar" || exit 4
fi
bundle="$work/gpu-bundle"
cp "$root/scripts/gpu_check.sh" "$root/scripts/gpu_env.sh" "$root/bench/pytorch_baseline.py" "$bundle/"
export STAGECRAFT_GPU_CACHE="$work/cache" STAGECRAFT_GPU_ITERS=${STAGECRAFT_GPU_ITERS:-30}
mkdir -p "$STAGECRAFT_GPU_CACHE"
if [ -n "$cache_in" ] && [ -f "$cache_in" ]; then
  tar -C "$STAGECRAFT_GPU_CACHE" -xzf "$cache_in" && say "caches carried in from $cache_in"
fi
check="$bundle/gpu_check.sh"
say "bundle: $(head -n 1 "$bundle/MANIFEST.txt"); steps: $steps"

# phase NAME BUDGET [ENV=VALUE...]: one gpu_check.sh phase, under the pass's deadline.
phase() {
  local name=$1 b=$2
  shift 2
  [ "$b" -gt "$(left)" ] && b=$(left)
  if [ "$b" -lt 20 ]; then
    say "$name: not started (deadline)"
    echo "status: not started (the pass's deadline)" >"$results/$name.md"
    return 2
  fi
  say "$name: up to ${b}s"
  env "$@" timeout -k 10 $((b + 15)) "$check" "${name%%@*}" "$results/${name#*@}" --budget "$b"
  local rc=$?
  say "$name: exit $rc"
  return $rc
}

pack() {
  {
    echo "# GPU pass $(date -u +%FT%TZ)"
    echo
    echo "steps: $steps"
    local f
    for f in "$results"/*/*.md "$results"/*.md; do
      [ -f "$f" ] || continue
      echo
      echo "## ${f#"$results"/}"
      echo
      cat "$f"
    done
  } >"$out/summary.md"
  tar -C "$results" --exclude=cache.tar.gz --exclude='.tmp-*' -czf "$out/results.tar.gz" .
  tar -C "$STAGECRAFT_GPU_CACHE" --exclude=./inductor -czf "$out/cache.tar.gz" . 2>/dev/null
  say "packed: $(cd "$out" && du -h summary.md results.tar.gz cache.tar.gz | tr '\n\t' '; ')"
}
trap pack EXIT

IFS=',' read -r -a step_list <<<"$steps"
step_no=0  # bench and baseline steps each write to their own folder (bench1, baseline2, ...)
for step in "${step_list[@]}"; do
  name=${step%%:*}
  args=""
  [ "$step" != "$name" ] && args=${step#*:}
  cap=$(left)  # NAME#SECONDS: at most that long
  if [[ "$name" == *"#"* ]]; then cap=${name#*#}; name=${name%%#*}; fi
  [ "$cap" -gt "$(left)" ] && cap=$(left)
  case "$name" in
    info) phase info@info 60 ;;
    tests) phase tests@tests "$cap" ;;
    memcheck) phase memcheck@memcheck "$cap" ;;
    tests+memcheck)
      # Side by side: the sanitizer run is mostly host time; tests are correctness only.
      b=$cap
      [ "$step" = "$name" ] && b=$(( $(left) * 2 / 5 )) && [ "$b" -gt 200 ] && b=200
      phase memcheck@memcheck "$b" &
      mpid=$!
      phase tests@tests "$b"
      wait $mpid
      ;;
    bench)
      nets=${args%%:*}
      variants=""
      [ "$args" != "$nets" ] && variants=${args#*:}
      envs=(STAGECRAFT_GPU_EXTRA="${STAGECRAFT_PASS_BENCH_EXTRA:---search-budget 15}")
      [ -n "$nets" ] && envs+=(STAGECRAFT_GPU_NETWORKS="${nets//\// }")
      [ -n "$variants" ] && envs+=(STAGECRAFT_GPU_VARIANTS="${variants//=/:}")
      step_no=$((step_no + 1))
      phase bench-small@bench$step_no "$cap" "${envs[@]}"
      ;;
    baseline)
      IFS=':' read -r b_nets b_engines b_precisions <<<"$args"
      b_engines=${b_engines:-${STAGECRAFT_PASS_ENGINES:-pytorch-eager,pytorch-compile,pytorch-compile-ro}}
      b_args="--engines ${b_engines//\//,} --iters 30"
      [ -n "$b_nets" ] && b_args+=" --networks ${b_nets//\//,}"
      [ -n "$b_precisions" ] && b_args+=" --precisions ${b_precisions//\//,}"
      step_no=$((step_no + 1))
      phase baseline@baseline$step_no "$cap" STAGECRAFT_GPU_BASELINE_ARGS="$b_args"
      ;;
    onnx)
      step_no=$((step_no + 1))
      models=()
      [ -n "$args" ] && models=(--models "${args//\//,}")
      [ "$args" = "-" ] && models=(--models "")
      say "onnx@onnx$step_no: up to ${cap}s"
      # The check starts no new model after its budget; the timeout catches one that hangs.
      (source "$bundle/gpu_env.sh" && timeout -k 10 $((cap + 60)) "${STAGECRAFT_PYTHON:-python3}" \
        "$root/bench/gpu_onnx_check.py" --stagecraft "$bundle/bin/stagecraft" --backend "${STAGECRAFT_GPU_BACKEND:-cuda}" --out "$results/onnx$step_no" \
        --budget "$((cap * 2 / 3))" "${models[@]}")
      say "onnx@onnx$step_no: exit $?"
      ;;
    *) say "unknown step $name"; exit 64 ;;
  esac
done
say "done"

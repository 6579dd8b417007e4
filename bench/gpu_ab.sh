#!/usr/bin/env bash
# Two GPU bundles (scripts/gpu_bundle.sh of two commits) timed against each other on one GPU, in
# alternating rounds: `stagecraft run NETWORK --backend cuda --schedule S` of each, medians of
# ITERS runs per round, each bundle with its own cache. A regression check between commits: a
# difference of a few percent between two lease machines is the machines, not the code, so the
# two must run on the same one.
#
#   bench/gpu_ab.sh OLD.tar.gz NEW.tar.gz OUT_DIR [ROUNDS] [ITERS]
# Cases: STAGECRAFT_AB_CASES (default "inception_v3:sequential inception_v3:greedy
# nasnet_a_large:sequential squeezenet1_0:sequential"). Writes OUT_DIR/ab.md (a table of medians
# and new/old ratios), ab.log and each bundle's plan listing of the first case.
# STAGECRAFT_AB_BACKEND=cpu rehearses it without a GPU.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: gpu_ab.sh OLD.tar.gz NEW.tar.gz OUT_DIR [ROUNDS] [ITERS]" >&2; exit 64; }
old_tar=$(realpath "$1") new_tar=$(realpath "$2") out=$(realpath -m "$3")
rounds=${4:-3} iters=${5:-200}
read -r -a cases <<<"${STAGECRAFT_AB_CASES:-inception_v3:sequential inception_v3:greedy nasnet_a_large:sequential squeezenet1_0:sequential}"
work=$(mktemp -d /tmp/gpu-ab.XXXXXX)
mkdir -p "$out" "$work/old" "$work/new"
exec > >(tee -a "$out/ab.log") 2>&1
tar -C "$work/old" -xzf "$old_tar" && tar -C "$work/new" -xzf "$new_tar" || exit 4
# shellcheck source=../scripts/gpu_env.sh
source "$work/new/gpu-bundle/gpu_env.sh"
for side in old new; do
  echo "$side: $(head -n 1 "$work/$side/gpu-bundle/MANIFEST.txt")"
done

declare -A samples
for ((r = 1; r <= rounds; r++)); do
  for c in "${cases[@]}"; do
    net=${c%%:*} schedule=${c#*:}
    for side in old new; do
      # Alternate which side goes first, so that neither always runs on a warmer GPU.
      [ $((r % 2)) -eq 0 ] && side=$([ "$side" = old ] && echo new || echo old)
      listing=()
      [ "$r" -eq 1 ] && [ "$c" = "${cases[0]}" ] && listing=(--plan-listing "$out/plan-$side.txt")
      line=$("$work/$side/gpu-bundle/bin/stagecraft" run "$net" --backend "${STAGECRAFT_AB_BACKEND:-cuda}" --schedule "$schedule" \
        --iters "$iters" --warmup 20 --cache-dir "$work/cache-$side" "${listing[@]}" 2>&1 |
        grep -oE 'latency: median [0-9.]+' | grep -oE '[0-9.]+$')
      echo "round $r $c $side: ${line:-failed} ms"
      samples["$c $side"]+="${line:-nan} "
    done
  done
done

{
  echo "| case | old median of rounds (ms) | new (ms) | new / old | rounds old | rounds new |"
  echo "|---|---|---|---|---|---|"
  for c in "${cases[@]}"; do
    python3 - "$c" "${samples["$c old"]}" "${samples["$c new"]}" <<'EOF'
import statistics, sys
case, old, new = sys.argv[1], [float(v) for v in sys.argv[2].split()], [float(v) for v in sys.argv[3].split()]
mo, mn = statistics.median(old), statistics.median(new)
print(f"| {case} | {mo:.3f} | {mn:.3f} | {mn / mo:.3f} | {' '.join(f'{v:.3f}' for v in old)} | {' '.join(f'{v:.3f}' for v in new)} |")
EOF
  done
} >"$out/ab.md"
cat "$out/ab.md"

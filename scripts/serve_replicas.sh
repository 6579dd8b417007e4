#!/usr/bin/env bash
# Scale-out on one machine: N tritonservers with stagecraft's backend (scripts/serve.sh) on
# loopback ports, each pinned (taskset) to its own share of the cores and told its size
# (--backend-cores), so that their core pools do not overlap. Clients spread requests over them
# with serve/replicas.py's ReplicaClient (least busy replica first, failing over).
#
#   scripts/serve_replicas.sh MODEL... --replicas N [--port P] [--pid-dir DIR] [serve.sh options]
#                             [-- TRITONSERVER_ARGS]
#   scripts/serve_replicas.sh --repo DIR --replicas N ...     (a repository written before)
#
# Replica i listens on HTTP P+10i, gRPC P+10i+1, metrics P+10i+2 (P default 8000) and runs on cores
# [i*C/N, (i+1)*C/N) of the C cores this process may use (all cores when N > C). Stops them all on
# Ctrl-C or SIGTERM; --pid-dir writes replica-i.pid for each.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"

die() { echo "serve_replicas.sh: $*" >&2; exit 2; }

replicas=2 port=8000 pid_dir="" repo="" pass=() models=() extra=()
while (($#)); do
  case "$1" in
    --replicas) replicas=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --pid-dir) pid_dir=$2; shift 2 ;;
    --repo) repo=$2; shift 2 ;;
    --grpc-port|--metrics-port|--backend-cores|--no-server) die "$1: set per replica by this script" ;;
    --explicit) pass+=("$1"); shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) pass+=("$1" "$2"); shift 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ $replicas =~ ^[1-9][0-9]*$ ]] || die "--replicas '$replicas': a whole number >= 1"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin the replicas"
repo=${repo:-$BUILD_DIR/serve/models}
if ((${#models[@]} > 0)); then "$here/serve.sh" "${models[@]}" --repo "$repo" "${pass[@]}" --no-server; fi

mapfile -t cores < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ if (NF == 2) { for (c = $1; c <= $2; c++) print c } else print $1 }')
n=${#cores[@]}
share=$((n / replicas))
if ((share < 1)); then
  echo "serve_replicas.sh: $replicas replicas on $n core(s): they share cores" >&2
  share=0
fi
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait || true; }
trap 'stop_all; exit 0' INT TERM
for ((i = 0; i < replicas; i++)); do
  if ((share > 0)); then
    list=$(IFS=,; echo "${cores[*]:$((i * share)):$share}")
    size=$share
  else
    list=$(IFS=,; echo "${cores[*]}")
    size=$n
  fi
  p=$((port + 10 * i))
  taskset -c "$list" "$here/serve.sh" --repo "$repo" "${pass[@]}" --port "$p" --grpc-port $((p + 1)) \
    --metrics-port $((p + 2)) --backend-cores "$size" -- "${extra[@]}" &
  pids+=($!)
  [ -z "$pid_dir" ] || { mkdir -p "$pid_dir"; echo $! >"$pid_dir/replica-$i.pid"; }
  echo "serve_replicas.sh: replica $i: HTTP 127.0.0.1:$p, gRPC :$((p + 1)), cores $list" >&2
done
wait

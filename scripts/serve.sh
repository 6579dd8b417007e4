#!/usr/bin/env bash
# Serves models with Triton Inference Server and stagecraft's backend (serve/triton/): installs
# nvidia-pytriton (its tritonserver binary) and tritonclient into the project's virtual
# environment, builds libtriton_stagecraft.so when missing, writes a model repository with one
# model per MODEL (a built-in network name or an .onnx file) and starts tritonserver on it.
#
#   scripts/serve.sh MODEL... [options] [-- TRITONSERVER_ARGS...]
#   scripts/serve.sh --repo DIR [options]          (serve a repository written before)
#
# Options (the model ones apply to every MODEL of the call):
#   --repo DIR            model repository (default: $BUILD_DIR/serve/models)
#   --name NAME           model name (one MODEL; default: the network or file name)
#   --max-batch N         max_batch_size (default 8); dynamic batching on
#   --instances N         instances of the model (instance_group count, KIND_CPU; default 1)
#   --schedule S          sequential | greedy | dp (default) | a schedule file
#   --cores N             threads per run (cores granted from the shared pool; 0: all)
#   --reserve-cores N     cores reserved for the model alone
#   --input-size N, --dtype f32|int8, --layout L, --cache-dir DIR, --warmup B1,B2,
#   --search-budget SECONDS (dp), --batch-sizes B1,B2 (the only sizes planned; smaller batches padded)
#   --port P              HTTP port (default 8000); gRPC P+1, metrics P+2 unless given:
#   --grpc-port P, --metrics-port P
#   --explicit            model control mode explicit (models loaded at start; load/unload later)
#   --backend-cores N     cores of the whole process's pool (default: all it may run on)
#   --backend-dir DIR     folder holding stagecraft/libtriton_stagecraft.so
#                         (default: $BUILD_DIR/serve/backends, built when missing)
#   --no-server           write the repository and stop
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

die() { echo "serve.sh: $*" >&2; exit 2; }

models=() names=() repo="" max_batch=8 instances=1 schedule="" cores="" reserve="" input_size=""
dtype="" layout="" cache_dir="" warmup="" port=8000 grpc_port="" metrics_port="" explicit=0
backend_cores="" no_server=0 extra=() backend_dir="" budget="" batch_sizes=""
while (($#)); do
  case "$1" in
    --repo) repo=$2; shift 2 ;;
    --name) names+=("$2"); shift 2 ;;
    --max-batch) max_batch=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    --schedule) schedule=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --reserve-cores) reserve=$2; shift 2 ;;
    --input-size) input_size=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --layout) layout=$2; shift 2 ;;
    --cache-dir) cache_dir=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --search-budget) budget=$2; shift 2 ;;
    --batch-sizes) batch_sizes=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --grpc-port) grpc_port=$2; shift 2 ;;
    --metrics-port) metrics_port=$2; shift 2 ;;
    --explicit) explicit=1; shift ;;
    --backend-cores) backend_cores=$2; shift 2 ;;
    --no-server) no_server=1; shift ;;
    --backend-dir) backend_dir=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) models+=("$1"); shift ;;
  esac
done
repo=${repo:-$BUILD_DIR/serve/models}
grpc_port=${grpc_port:-$((port + 1))}
metrics_port=${metrics_port:-$((port + 2))}
if ((${#names[@]} > 0 && ${#names[@]} != ${#models[@]})); then
  die "--name given ${#names[@]} time(s) for ${#models[@]} model(s): one --name per MODEL"
fi
[[ $max_batch =~ ^[0-9]+$ ]] || die "--max-batch '$max_batch': a whole number >= 0"
[[ $instances =~ ^[1-9][0-9]*$ ]] || die "--instances '$instances': a whole number >= 1"

# One model folder: config.pbtxt (inputs and outputs are completed by the backend) and 1/.
param() { [ -z "$2" ] || printf '  parameters { key: "%s" value: { string_value: "%s" } }\n' "$1" "$2"; }
write_model() {
  local spec=$1 name=$2 dir="$repo/$2"
  mkdir -p "$dir/1"
  local model_param="$spec"
  if [[ $spec == *.onnx ]]; then
    [ -f "$spec" ] || die "$spec: no such file"
    cp -f "$spec" "$dir/1/model.onnx"
    model_param=""
  fi
  {
    echo "name: \"$name\""
    echo "backend: \"stagecraft\""
    echo "max_batch_size: $max_batch"
    if ((max_batch > 0)); then echo "dynamic_batching { }"; fi
    echo "instance_group [ { kind: KIND_CPU, count: $instances } ]"
    param model "$model_param"
    param schedule "$schedule"
    param cores "$cores"
    param reserve_cores "$reserve"
    param input_size "$input_size"
    param dtype "$dtype"
    param layout "$layout"
    param cache_dir "$cache_dir"
    param warmup_batch_sizes "$warmup"
    param search_budget "$budget"
    param batch_sizes "$batch_sizes"
  } >"$dir/config.pbtxt"
  echo "serve.sh: model '$name' ($spec) in $dir" >&2
}

mkdir -p "$repo"
for i in "${!models[@]}"; do
  spec=${models[$i]}
  name=${names[$i]:-$(basename "${spec%.onnx}")}
  write_model "$spec" "$name"
done
((no_server)) && exit 0
if [ -z "$(ls -A "$repo" 2>/dev/null)" ]; then die "$repo holds no model: name a MODEL"; fi

# The server (nvidia-pytriton's tritonserver) and the backend library.
py=$(ensure_venv nvidia-pytriton | tail -n 1) ||
  die "cannot install nvidia-pytriton into $VENV_DIR (pip's log above)"
server=$("$py" -c 'import os, pytriton; print(os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver"))')
[ -x "$server" ] || die "no tritonserver binary at $server"
if [ -z "$backend_dir" ]; then
  backend_dir="$BUILD_DIR/serve/backends"
  [ -f "$backend_dir/stagecraft/libtriton_stagecraft.so" ] || configure_and_build triton_stagecraft >&2
fi
[ -f "$backend_dir/stagecraft/libtriton_stagecraft.so" ] ||
  die "no $backend_dir/stagecraft/libtriton_stagecraft.so (build the target triton_stagecraft)"
args=(--model-repository="$repo" --backend-directory="$backend_dir" --http-port="$port"
      --grpc-port="$grpc_port" --metrics-port="$metrics_port")
if ((explicit)); then
  args+=(--model-control-mode=explicit)
  for d in "$repo"/*/; do args+=(--load-model="$(basename "$d")"); done
fi
[ -z "$backend_cores" ] || args+=(--backend-config="stagecraft,cores=$backend_cores")
echo "serve.sh: $server ${args[*]} ${extra[*]}" >&2
exec "$server" "${args[@]}" "${extra[@]}"

#!/usr/bin/env bash
# One-shot CPU engine measurement on the AMX machine. Run from the repository root, OUT set:
#   bash bench/cpu_device_pass/measure.sh [DEADLINE_S (default 520)]
# Unpacks .cpu-kit/{ovkit,sckit}.tar.xz (made by bench/cpu_device_pass/kit.sh) to /tmp/amxkit, exports the models with
# this machine's torch in the background (bench/cpu_device_pass/export.py -> /tmp/models), runs bench/cpu_engines.py
# once per model, and leaves $OUT/engines/{log.txt,summary.md}.
# Env overrides (for rehearsals): PYTHON (python3), CUDA_PYTHON (the python whose nvidia packages
# hold the CUDA libraries; default PYTHON), EXPORT_PYTHON (the python with torch; default PYTHON),
# MODELS (space-separated file stems, default the eight below), MODEL_DIR (/tmp/models),
# EXPORT_THREADS (torch threads of the background export, default 4), CPU_ENGINES_ARGS (extra args).
set -u
T0=$(date +%s)
DEADLINE=${1:-520}
END=$((T0 + DEADLINE))
left() { echo $((END - $(date +%s))); }
ts() { echo "[+$(($(date +%s) - T0))s]"; }
: "${OUT:?OUT must be set}"
PY=${PYTHON:-python3}
CUDA_PY=${CUDA_PYTHON:-$PY}
EXPORT_PY=${EXPORT_PYTHON:-$PY}
MODELS=${MODELS:-"inception_v3 resnet50 googlenet squeezenet1_0 mobilenet_v2 densenet121 convnext_tiny timm_nasnetalarge"}
MDIR=${MODEL_DIR:-/tmp/models}
ROOT=$(pwd)
K=/tmp/amxkit
E=$OUT/engines
MD=/tmp/amxkit_md   # finished per-model tables (kept out of $OUT: at most 6 files may come back)
mkdir -p "$E" "$MDIR"
rm -rf "$MD"; mkdir -p "$MD"
LOG=$E/log.txt
exec > >(tee -a "$LOG") 2>&1
echo "== measure.sh start $(date -u +%FT%TZ), deadline ${DEADLINE}s, models: $MODELS"

# --- the machine
echo "nproc: $(nproc)"
grep -m1 "model name" /proc/cpuinfo
echo "flags: $(grep -o -E 'amx[a-z_0-9]*|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
lscpu 2>/dev/null | grep -E "^(Socket|Core|Thread|NUMA node\(s\)|L2|L3)" | tr -s ' '
free -g | head -2

# --- the kit
source bench/cpu_device_pass/unpack.sh || exit 3

# --- exports in the background: squeezenet first (quick; it names the oneDNN ISA below), then the
# measurement order.
export_names=""
for m in squeezenet1_0 $MODELS; do
  n=${m/#timm_/timm/}
  case " $export_names " in *" $n "*) ;; *) export_names+=" $n" ;; esac
done
case " $MODELS " in *" squeezenet1_0 "*) ;; *) export_names=${export_names/ squeezenet1_0/} ;; esac
echo "$(ts) exporting in the background:$export_names"
( EXPORT_THREADS=${EXPORT_THREADS:-4} "$EXPORT_PY" bench/cpu_device_pass/export.py "$MDIR" $export_names 2>&1 \
    | grep --line-buffered -v -E "Warning|warnings.warn|^ *$|torch.onnx.export\(|^\s+(module|x|with)\b" \
    | while IFS= read -r line; do echo "$(ts) $line"; done
  echo "$(ts) export: all done" ) &
EXPORTER=$!

# --- the python environment
echo "$(ts) python: $(command -v "$PY") $("$PY" -V 2>&1)"
"$PY" - <<'EOF'
import importlib
for m in ("numpy", "onnxruntime", "onnx", "openvino", "nncf", "torch", "stagecraft"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m} {getattr(mod, '__version__', '?')} {mod.__file__}")
    except Exception as e:
        print(f"  {m} IMPORT FAILED: {type(e).__name__}: {e}")
try:
    import openvino as ov
    print("  openvino devices:", ov.Core().available_devices)
except Exception as e:
    print("  openvino devices FAILED:", e)
EOF
"$PY" -c "import stagecraft; print(stagecraft.__file__)"

model_file() { echo "$MDIR/$1_ts.onnx"; }
# Waits for a model's export; 0 when it is there, 1 when it failed or time ran out.
wait_model() {
  local f; f=$(model_file "$1")
  while [ ! -f "$f" ]; do
    [ -f "$MDIR/$1_ts.failed" ] && return 1
    kill -0 $EXPORTER 2>/dev/null || { [ -f "$f" ] && return 0; return 1; }
    [ "$(left)" -lt 45 ] && return 1
    sleep 1
  done
}

# --- which ISA oneDNN uses: one Session per dtype on the first model there (squeezenet when listed)
first=squeezenet1_0; case " $MODELS " in *" squeezenet1_0 "*) ;; *) first=${MODELS%% *} ;; esac
if wait_model "$first"; then
  echo "$(ts) oneDNN on $first (sequential schedule, one run per dtype, DNNL_VERBOSE=1):"
  DNNL_VERBOSE=1 ONEDNN_VERBOSE=1 timeout 90 "$PY" - "$(model_file "$first")" > /tmp/amxkit_isa.txt 2>&1 <<'EOF'
import collections, re, sys, numpy as np, stagecraft
path = sys.argv[1]
for dtype in ("f32", "bf16", "int8"):
    try:
        kw = {"calibration_samples": 2} if dtype == "int8" else {}
        print(f"== dtype {dtype}: start", flush=True)
        s = stagecraft.Session(path, dtype=dtype, schedule="sequential", progress=False, **kw)
        print(f"== dtype {dtype}: description: {s.description}", flush=True)
        print(f"== dtype {dtype}: plan: {s.plan}", flush=True)
        listing = s.plan_listing().splitlines()
        isa = collections.Counter(w.lower() for line in listing
                                  for w in re.findall(r"[A-Za-z0-9_:]*(?:amx|avx512|avx2|vnni|brg|jit|gemm|ref)[A-Za-z0-9_:]*", line, re.I))
        print(f"== dtype {dtype}: plan listing ({len(listing)} lines) ISA-ish words: {dict(isa.most_common(12))}", flush=True)
        for line in listing[:6]:
            print(f"   | {line[:200]}")
        s.run(np.random.default_rng(0).random(s.inputs[0].shape, dtype=np.float32))
        print(f"== dtype {dtype}: ran", flush=True)
    except Exception as e:
        print(f"== dtype {dtype}: FAILED {type(e).__name__}: {e}", flush=True)
EOF
  echo "  rc=$?"
  grep -m2 -E "verbose,info,cpu,isa|verbose,info,oneDNN" /tmp/amxkit_isa.txt | sed 's/^/  /'
  grep -E "^(== dtype [a-z0-9]+: [^s]|   \|)" /tmp/amxkit_isa.txt | sed 's/^/  /'
  awk '/^== dtype/ {d=$3} /verbose,exec,cpu,/ {split($0, a, ","); k[d " " a[4] " " a[5]]++}
       END {for (x in k) print "    executed " x ": " k[x]}' /tmp/amxkit_isa.txt | sort | head -60
  grep -E "FAILED|Error" /tmp/amxkit_isa.txt | head -5 | sed 's/^/  /'
else
  echo "$(ts) $first not exported: no oneDNN ISA listing"
fi

# --- one bench/cpu_engines.py per model
summary() {
  {
    echo "# CPU engines on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
    echo
    echo "Generated by bench/cpu_device_pass/measure.sh $(date -u +%FT%TZ); deadline ${DEADLINE}s; module $(head -1 "$K/stagecraft/MODULE_SHA256" | cut -c1-12)."
    echo "Exports ran in the background until: ${EXPORT_DONE:-still running at the time of writing}."
    echo
    for m in $MODELS; do
      [ -f "$MD/$m.md" ] && { echo "## $m (run from +${START[$m]}s to +${STOP[$m]}s)"; echo; cat "$MD/$m.md"; echo; }
    done
    echo "## Not measured"
    echo
    if [ ${#SKIPPED[@]} -eq 0 ]; then echo "(none)"; else printf -- '- %s\n' "${SKIPPED[@]}"; fi
  } > "$E/summary.md"
}
declare -A START STOP
SKIPPED=()
EXPORT_DONE=""
for m in $MODELS; do
  if ! wait_model "$m"; then
    if [ -f "$MDIR/${m}_ts.failed" ]; then SKIPPED+=("$m: export failed ($(head -c 200 "$MDIR/${m}_ts.failed"))")
    elif [ "$(left)" -lt 45 ]; then SKIPPED+=("$m: time (export not finished, $(left) s left)")
    else SKIPPED+=("$m: export missing"); fi
    summary; continue
  fi
  l=$(left)
  if [ "$l" -lt 45 ]; then SKIPPED+=("$m: time ($l s left)"); summary; continue; fi
  kill -0 $EXPORTER 2>/dev/null && echo "$(ts) note: exports still running during $m"
  echo "$(ts) === $m: cpu_engines.py, timeout $((l - 10)) s"
  START[$m]=$(($(date +%s) - T0))
  timeout -k 5 $((l - 10)) "$PY" bench/cpu_engines.py "$(model_file "$m")" --int8 --rounds 4 --block 3 \
      --samples 4 --calibration 8 --search-budget 8 --cache-dir /tmp/sccache --out "$E/$m.md" \
      ${CPU_ENGINES_ARGS:-}
  rc=$?
  STOP[$m]=$(($(date +%s) - T0))
  echo "$(ts) === $m: rc=$rc after $((STOP[$m] - START[$m])) s"
  if [ -f "$E/$m.md" ]; then mv "$E/$m.md" "$MD/$m.md"
  else
    case $rc in 124|137) SKIPPED+=("$m: killed at the deadline after $((STOP[$m] - START[$m])) s") ;;
                *) SKIPPED+=("$m: cpu_engines.py failed (rc=$rc, see log.txt)") ;; esac
  fi
  kill -0 $EXPORTER 2>/dev/null || EXPORT_DONE=${EXPORT_DONE:-"before +${STOP[$m]}s"}
  summary
done
kill -0 $EXPORTER 2>/dev/null && { echo "$(ts) stopping the exporter"; pkill -P $EXPORTER 2>/dev/null; kill $EXPORTER 2>/dev/null; }
summary
echo "$(ts) == done; files under OUT:"
find "$OUT" -type f | xargs ls -la

#!/usr/bin/env bash
# Smoke test of the GPU bundle on a machine without a GPU: the CUDA libraries come only from a
# virtual environment holding the same wheels as the GPU machine's Python packages (the CUDA 13
# runtime, cuBLAS 13 and cuDNN 9 for CUDA 13, from PyPI), and the bundle's programs run with an
# environment that is empty but for what gpu_env.sh sets (LD_LIBRARY_PATH included). Passes when
#   - every library the bundle's binaries, and the cuDNN and cuBLAS libraries they use, need is
#     found (ldd reports nothing missing), the CUDA ones in the virtual environment, the others in
#     the bundle's lib/ (none from the build machine's /usr/lib or /usr/local/cuda);
#   - `stagecraft devices` starts and reports "no usable GPU: <the runtime's reason>";
#   - `test_gpu` starts, its host tests pass and its GPU tests skip with that reason.
# Usage: scripts/gpu_bundle_smoke.sh [BUNDLE_DIR]   (default ./gpu-bundle, built when missing)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bundle=$(realpath -m "${1:-$ROOT/gpu-bundle}")
if [ ! -x "$bundle/bin/stagecraft" ]; then "$ROOT/scripts/gpu_bundle.sh" "$bundle"; fi
venv=${STAGECRAFT_SMOKE_VENV:-$ROOT/.venv-gpu-smoke}
wheels=(nvidia-cuda-runtime==13.* nvidia-cublas==13.* nvidia-cudnn-cu13==9.*)

host_python=$(command -v python3)
if [ ! -x "$venv/bin/python" ]; then
  echo "smoke: creating $venv"
  "$host_python" -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip show nvidia-cudnn-cu13 nvidia-cublas nvidia-cuda-runtime >/dev/null 2>&1; then
  echo "smoke: pip install ${wheels[*]}"
  "$venv/bin/python" -m pip install --quiet "${wheels[@]}"
fi
"$venv/bin/python" -m pip list 2>/dev/null | grep -i '^nvidia' | sed 's/^/smoke: wheel /'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
  echo "smoke: FAIL: $*"
  failed=1
}

# Runs a command in an empty environment plus what gpu_env.sh sets, with the venv's Python.
in_bundle_env() {
  env -i HOME="$work" PATH=/usr/bin:/bin TMPDIR="$work" STAGECRAFT_PYTHON="$venv/bin/python" \
    bash -c 'source "$1/gpu_env.sh"; shift; "$@"' _ "$bundle" "$@"
}

echo "smoke: LD_LIBRARY_PATH set by gpu_env.sh: $(in_bundle_env printenv LD_LIBRARY_PATH)"
missing=$(in_bundle_env bash -c 'echo "$STAGECRAFT_CUDA_MISSING"')
[ -z "$missing" ] || fail "gpu_env.sh did not find: $missing"

# Every library resolved, and from where it should be.
# The CUDA libraries gpu_env.sh found, all of them in the virtual environment.
# (Optional ones, such as libnvJitLink, may come from the system when the wheels lack them.)
listed=$(in_bundle_env bash -c 'printf "%s" "$STAGECRAFT_CUDA_LIBS"')
required=$(in_bundle_env bash -c 'echo "${STAGECRAFT_CUDA_SONAMES[*]}"')
cuda_libs=$(printf '%s\n' "$listed" | awk 'NF == 2 {print $2 "/" $1}')
for lib in $cuda_libs; do
  [[ "$lib" == "$venv"/* ]] || fail "gpu_env.sh chose $lib, not a library of $venv"
done
for soname in $required; do
  printf '%s\n' "$listed" | awk -v s="$soname" '$1 == s && NF == 2 {found = 1} END {exit !found}' ||
    fail "$soname was not found in $venv"
done
# libcuda.so.1 is the driver: a GPU machine has it, this one has none (cuDNN's runtime-compiled
# engines link it).
for object in "$bundle"/bin/* $cuda_libs; do
  in_bundle_env ldd "$object" >"$work/ldd.txt" 2>&1 || true
  if grep "not found" "$work/ldd.txt" | grep -qv 'libcuda\.so\.1 '; then
    fail "$(basename "$object"): $(grep "not found" "$work/ldd.txt" | tr -s ' \t' ' ' | tr '\n' ';')"
  fi
  while read -r soname path; do
    path=$(realpath "$path")
    case "$soname" in
      libcudart.so.* | libcublas*.so.* | libcudnn*.so.* | libnvrtc*.so.* | libnvJitLink.so.*)
        [[ "$path" == "$venv"/* ]] || fail "$(basename "$object") loads $soname from $path, not from $venv" ;;
      libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux-x86-64.so.* | linux-vdso.so.*) ;;
      libstdc++.so.6 | libgcc_s.so.1) ;;  # the machine's (GCC 12 or newer) or the bundle's lib/cxx/
      *)
        # The bundle's binaries take every other library from its lib/ (the CUDA libraries' own
        # needs, such as libz, are the machine's).
        if [[ "$object" == "$bundle"/bin/* && "$path" != "$bundle/lib/"* ]]; then
          fail "$(basename "$object") loads $soname from $path (not the bundle's lib/)"
        fi ;;
    esac
  done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' "$work/ldd.txt")
done
echo "smoke: ldd of $(ls "$bundle"/bin | tr '\n' ' ')and $(echo "$cuda_libs" | wc -w) CUDA libraries: checked"

echo "smoke: == stagecraft devices"
if in_bundle_env "$bundle/bin/stagecraft" devices >"$work/devices.txt" 2>&1; then
  cat "$work/devices.txt"
  grep -q '^no usable GPU: .\+' "$work/devices.txt" || fail "stagecraft devices did not report 'no usable GPU: <reason>'"
else
  cat "$work/devices.txt"
  fail "stagecraft devices did not start or failed"
fi

echo "smoke: == test_gpu"
rc=0
in_bundle_env "$bundle/bin/test_gpu" >"$work/tests.txt" 2>&1 || rc=$?
grep -E '^\[ *(PASSED|FAILED|SKIPPED) *\] [0-9]+ test|^\[==========\]' "$work/tests.txt" || true
reason=$(grep -m1 -o 'no usable GPU: .*' "$work/tests.txt" || true)
echo "smoke: first skip reason: ${reason:-none}"
[ "$rc" = 0 ] || fail "test_gpu exited $rc: $(grep -E 'error while loading|FAILED' "$work/tests.txt" | head -5 | tr '\n' ';')"
[ -n "$reason" ] || fail "test_gpu printed no 'no usable GPU' reason"
grep -q 'error while loading shared libraries' "$work/tests.txt" "$work/devices.txt" && fail "loader error"

if [ "$failed" = 0 ]; then
  echo "smoke: PASS: the bundle loads every library from the bundle and the CUDA wheels and reports the runtime's reason"
fi
exit "$failed"

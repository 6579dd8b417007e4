#!/usr/bin/env bash
# Builds the kit a GPU lease's host CPU measures the CPU engines with (its Python is 3.12 with
# torch, onnxruntime and numpy, no OpenVINO, no network): .cpu-kit/ (git-ignored), carried by the
# lease (`carry: [".cpu-kit"]`, under 50 MiB), run there by bench/cpu_device_pass/pass.sh.
#   sckit.tar.xz  stagecraft/_stagecraft.cpython-312-x86_64-linux-gnu.so: python/src compiled against
#                 Python 3.12's headers and linked with build/'s libraries (the link line of
#                 build/python), and lib/: every non-CUDA, non-glibc library it loads
#   bin.tar.xz    the CLI and test_executor from build/ (same libraries)
#   ovkit.tar.xz  site/: OpenVINO (CPU plugin, ONNX and IR front ends), NNCF, openvino-telemetry and
#                 pydot for cp312, unpacked with no dependency resolution (the lease has the rest)
# Usage: bench/cpu_device_pass/kit.sh   (after `make -C build`; PY312_INCLUDE: a folder holding
#        Python.h of CPython 3.12, default pyenv's; FORCE=1 rebuilds ovkit)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIT=$ROOT/.cpu-kit
WORK=$ROOT/.cache/cpu-kit
PYINC=${PY312_INCLUDE:-$(ls -d /root/.pyenv/versions/3.12*/include/python3.12 2>/dev/null | head -1)}
[ -f "$PYINC/Python.h" ] || { echo "kit: no Python 3.12 headers (set PY312_INCLUDE to the folder of Python.h)" >&2; exit 64; }
[ -f "$ROOT/build/python/CMakeFiles/_stagecraft.dir/link.txt" ] || { echo "kit: build/ has no Python module (make -C build first)" >&2; exit 64; }
mkdir -p "$KIT" "$WORK/obj" "$WORK/whl"
XZ="xz -T0 -6"
MOD=_stagecraft.cpython-312-x86_64-linux-gnu.so

# pybind11's headers (any version that knows 3.12).
if [ ! -f "$WORK/pybind11/include/pybind11/pybind11.h" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$WORK/whl" "pybind11>=2.12"
  rm -rf "$WORK/pybind11" && mkdir -p "$WORK/pybind11" && unzip -q -o "$WORK"/whl/pybind11-*.whl -d "$WORK/pybind11/w"
  mv "$WORK/pybind11/w/pybind11/include" "$WORK/pybind11/include"
fi

# The module, as build/python makes it for the build's Python, for 3.12.
flags=$(sed -n 's/^CXX_FLAGS = //p' "$ROOT/build/python/CMakeFiles/_stagecraft.dir/flags.make")
defines=$(sed -n 's/^CXX_DEFINES = //p' "$ROOT/build/python/CMakeFiles/_stagecraft.dir/flags.make")
for s in module convert exception_translation; do
  c++ $flags $defines -I"$ROOT" -isystem "$WORK/pybind11/include" -isystem "$PYINC" \
      -c "$ROOT/python/src/$s.cpp" -o "$WORK/obj/$s.o" &
done
wait
link=$(sed -e "s#-o stagecraft/_stagecraft[^ ]*#-o $WORK/$MOD#" \
           -e "s#CMakeFiles/_stagecraft.dir/src/\([a-z_]*\).cpp.o#$WORK/obj/\1.o#g" \
           "$ROOT/build/python/CMakeFiles/_stagecraft.dir/link.txt")
(cd "$ROOT/build/python" && eval "$link")

# Libraries: what the module and the programs load, less glibc and CUDA (the lease has CUDA in
# its Python packages: scripts/gpu_env.sh finds them) and the C++ runtime (the lease's is newer).
S=$(mktemp -d /tmp/cpu-kit.XXXXXX)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/sc/stagecraft" "$S/sc/lib" "$S/bin"
cp "$WORK/$MOD" "$S/sc/stagecraft/"
cp "$ROOT/build/cli/stagecraft" "$ROOT/build/tests/test_executor" "$S/bin/"
strip --strip-unneeded "$S/sc/stagecraft/$MOD" "$S"/bin/*
skip='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|linux-vdso|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnvrtc|libnvJitLink)\.so'
for b in "$S/sc/stagecraft/$MOD" "$S"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  [[ "$soname" =~ $skip ]] || cp -L "$path" "$S/sc/lib/$soname"
done
sha256sum "$WORK/$MOD" | awk '{print $1}' > "$S/sc/stagecraft/MODULE_SHA256"
git -C "$ROOT" describe --always --dirty >> "$S/sc/stagecraft/MODULE_SHA256"
tar -C "$S/sc" -cf - stagecraft lib | $XZ > "$KIT/sckit.tar.xz"
tar -C "$S/bin" -cf - . | $XZ > "$KIT/bin.tar.xz"

# OpenVINO for cp312, cut to what compile_model(..., "CPU") and NNCF's quantisation load.
if [ ! -f "$KIT/ovkit.tar.xz" ] || [ "${FORCE:-0}" = 1 ]; then
  ov=openvino==${OPENVINO_VERSION:-2026.4.1}
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$WORK/whl" "$ov" openvino-telemetry nncf pydot
  site="$S/ov/site"; mkdir -p "$site"
  for w in "$WORK"/whl/openvino-*.whl "$WORK"/whl/openvino_telemetry-*.whl "$WORK"/whl/nncf-*.whl "$WORK"/whl/pydot-*.whl; do
    unzip -q -o "$w" -d "$site"
  done
  O="$site/openvino"
  rm -f "$O"/libs/libopenvino_intel_{gpu,npu}_plugin.so "$O"/libs/libopenvino_{auto,auto_batch,hetero}_plugin.so \
        "$O"/libs/libopenvino_{gguf,jax,paddle,pytorch,tensorflow,tensorflow_lite}_frontend.so.* \
        "$O"/libs/cache.json "$O"/libs/libopenvino_c.so.*
  rm -rf "$O"/include "$O"/cmake "$O"/torch "$O"/frontend/{jax,paddle,pytorch,tensorflow}
  tar -C "$S/ov" -cf - site | $XZ > "$KIT/ovkit.tar.xz"
fi
echo "kit: $(du -sb "$KIT" | awk '{printf "%.1f MiB", $1/1048576}') in $KIT (a lease carries at most 64 MiB with the tree)"
ls -la "$KIT"

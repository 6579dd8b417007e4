#!/usr/bin/env bash
# Builds a relocatable bundle for a GPU machine that has the CUDA runtime, cuBLAS and cuDNN (as
# Python packages or system libraries) but not our Debian libraries:
#   gpu-bundle/bin/{stagecraft,test_gpu,test_executor}   rpath $ORIGIN/../lib
#   gpu-bundle/lib/                                       oneDNN, yaml-cpp, OpenMP runtime
#   gpu-bundle/configs/, gpu-bundle/gpu_check.sh
# Usage: scripts/gpu_bundle.sh [OUT_DIR]   (default: ./gpu-bundle; must stay under 60 MB)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages

out=${1:-$ROOT/gpu-bundle}
build="$ROOT/build-bundle"
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTAGECRAFT_CUDA=ON \
  -DSTAGECRAFT_BUILD_TESTS=ON -DSTAGECRAFT_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_RPATH='$ORIGIN/../lib' -DCMAKE_BUILD_WITH_INSTALL_RPATH=OFF >/dev/null
cmake --build "$build" -j"$JOBS" --target stagecraft test_gpu test_executor

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/cli/stagecraft" "$build/tests/test_gpu" "$build/tests/test_executor" "$out/bin/"
strip --strip-unneeded "$out"/bin/* 2>/dev/null || true
cp -r "$ROOT/configs" "$out/configs"
cp "$ROOT/scripts/gpu_check.sh" "$out/gpu_check.sh"

# Non-CUDA shared libraries the binaries need; CUDA, cuBLAS and cuDNN come from the GPU machine,
# glibc and the C++ runtime too (newer there).
skip='libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libstdc\+\+|libgcc_s|libcud|libcublas|linux-vdso'
for binary in "$out"/bin/*; do
  ldd "$binary" | awk '/=> \//{print $3}' | grep -Ev "$skip" || true
done | sort -u | while read -r lib; do
  cp -L "$lib" "$out/lib/"
done
strip --strip-unneeded "$out"/lib/* 2>/dev/null || true

size=$(du -sm "$out" | cut -f1)
echo "stagecraft: bundle in $out: ${size} MB"
ls -la "$out/bin" "$out/lib"
if [ "$size" -ge 60 ]; then
  echo "stagecraft: the bundle is over 60 MB" >&2
  exit 1
fi

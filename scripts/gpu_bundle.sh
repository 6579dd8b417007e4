#!/usr/bin/env bash
# Builds a relocatable bundle for a GPU machine that has the CUDA 13 runtime, cuBLAS and cuDNN 9
# (in its Python packages, as PyTorch installs them) but not our Debian libraries, and packs it:
#   gpu-bundle/bin/{stagecraft,test_gpu}  DT_RPATH $ORIGIN/../lib (--disable-new-dtags: an RPATH,
#                                         unlike a RUNPATH, also serves the libraries' own needs)
#   gpu-bundle/lib/                       every non-CUDA library they need, transitive ones included
#                                         (oneDNN, its libOpenCL.so.1, OpenMP, yaml-cpp, protobuf,
#                                         ONNX; the C++ runtime in lib/cxx/, used only when the
#                                         machine's is older); glibc and CUDA are the machine's
#   gpu-bundle/gpu_check.sh, gpu_env.sh   the GPU run in phases (gpu_env.sh finds the CUDA libraries)
#   gpu-bundle/pytorch_baseline.py        the PyTorch baseline
#   gpu-bundle/configs/, MANIFEST.txt     device configs; what is inside and what it needs
#   gpu-bundle.tar.gz                     the packed bundle (must stay under 40 MB)
# Built for sm_90 (H100/H200) unless STAGECRAFT_BUNDLE_ARCH says otherwise. Only what a GPU lease
# runs is inside: the CLI and the GPU test program (the other test programs stay here).
# Usage: scripts/gpu_bundle.sh [OUT_DIR]   (default: ./gpu-bundle, packed beside it)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages

out=$(realpath -m "${1:-$ROOT/gpu-bundle}")
build=${STAGECRAFT_BUNDLE_BUILD:-$ROOT/build-bundle}
arch=${STAGECRAFT_BUNDLE_ARCH:-90}
limit_mb=40

# PRE_TEST discovery: the test list is read when ctest runs, not after linking (the build tree's
# binaries cannot start here with the bundle's RPATH, which names only ../lib).
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTAGECRAFT_CUDA=ON \
  -DSTAGECRAFT_CUDA_ARCHITECTURES="$arch" -DSTAGECRAFT_BUILD_TESTS=ON -DSTAGECRAFT_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN/../lib' \
  -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=OFF -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags" \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
cmake --build "$build" -j"$JOBS" --target stagecraft test_gpu

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/cli/stagecraft" "$build/tests/test_gpu" "$out/bin/"
strip --strip-unneeded "$out"/bin/*
cp -r "$ROOT/configs" "$out/configs"
cp "$ROOT/scripts/gpu_check.sh" "$ROOT/scripts/gpu_env.sh" "$ROOT/bench/pytorch_baseline.py" "$out/"

# Every library the binaries load, transitively (ldd lists them all), except glibc's own and the
# CUDA libraries the machine provides.
system='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|linux-vdso)\.so'
cuda='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnvrtc|libnvJitLink)\.so'
for binary in "$out"/bin/*; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ "$soname" =~ $system || "$soname" =~ $cuda ]]; then continue; fi
  cp -L "$path" "$out/lib/$soname"
done
# The C++ runtime goes to lib/cxx/, off the RPATH: Debian 12's needs glibc 2.36, newer than the
# binaries (2.34), and any GCC 12 or newer libstdc++ of the machine serves them (GLIBCXX_3.4.30).
# gpu_env.sh puts lib/cxx/ on LD_LIBRARY_PATH only when the machine's libstdc++ is older.
mkdir -p "$out/lib/cxx"
for cxx in libstdc++.so.6 libgcc_s.so.1; do
  [ -f "$out/lib/$cxx" ] && mv "$out/lib/$cxx" "$out/lib/cxx/"
done
strip --strip-unneeded "$out"/lib/*.so* "$out"/lib/cxx/* 2>/dev/null || true
chmod 644 "$out"/lib/*.so* "$out"/lib/cxx/*

# The RPATH must be exactly $ORIGIN/../lib (no build-tree or /usr/local/cuda paths, which the
# loader would search before LD_LIBRARY_PATH on the GPU machine).
for binary in "$out"/bin/*; do
  rpath=$(readelf -d "$binary" | awk '/\((RPATH|RUNPATH)\)/ {print $1, $NF}')
  if [ "$rpath" != '0x000000000000000f [$ORIGIN/../lib]' ]; then
    echo "stagecraft: $binary has RPATH/RUNPATH '$rpath', expected an RPATH of exactly \$ORIGIN/../lib" >&2
    exit 1
  fi
done

# The newest glibc symbol version anything in the bundle needs (the machine's glibc must be at
# least that) and the CUDA libraries left to the machine.
glibc_needed=$(objdump -T "$out"/bin/* "$out"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
glibcxx_needed=$(objdump -T "$out"/bin/* "$out"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)
cxx_glibc=$(objdump -T "$out"/lib/cxx/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
cuda_needed=$(for b in "$out"/bin/* "$out"/lib/*.so*; do
  readelf -d "$b" | awk '/NEEDED/ {gsub(/[][]/, "", $NF); print $NF}'
done | grep -E "$cuda" | sort -u | tr '\n' ' ')
{
  echo "stagecraft GPU bundle, built $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "CUDA architectures: sm_$arch"
  echo "needs glibc >= ${glibc_needed#GLIBC_} and a libstdc++ with $glibcxx_needed (the machine's, or lib/cxx/, which needs glibc >= ${cxx_glibc#GLIBC_})"
  echo "needs from the machine: $cuda_needed(gpu_env.sh finds them in the Python packages)"
  echo "run: ./gpu_check.sh PHASE RESULTS_DIR   (phases: info tests memcheck bench-small bench-large baseline)"
  echo
  (cd "$out" && find bin lib -type f -printf '%8k KiB  %p\n' | sort -k3)
} >"$out/MANIFEST.txt"

tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
unpacked_mb=$(du -sm "$out" | cut -f1)
packed_bytes=$(stat -c %s "$out.tar.gz")
packed_mb=$(( (packed_bytes + (1 << 20) - 1) >> 20 ))
cat "$out/MANIFEST.txt"
echo "stagecraft: bundle in $out (${unpacked_mb} MB unpacked), packed into $out.tar.gz (${packed_mb} MB)"
if [ "$packed_mb" -gt "$limit_mb" ]; then
  echo "stagecraft: the packed bundle is over $limit_mb MB" >&2
  exit 1
fi

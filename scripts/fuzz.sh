#!/usr/bin/env bash
# Fuzzes the graph YAML and ONNX loaders with libFuzzer + AddressSanitizer for SECONDS (default
# 600), starting from a corpus of real graph files and ONNX models. Any crash, sanitizer report or
# escaping exception stops the run and leaves the input in build-fuzz/crash-*.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PACKAGES+=(clang libclang-rt-14-dev)
ensure_packages
seconds=${1:-600}
fuzz_build="$ROOT/build-fuzz"
cmake -S "$ROOT" -B "$fuzz_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DSTAGECRAFT_CUDA=OFF -DSTAGECRAFT_BUILD_TESTS=OFF \
  -DSTAGECRAFT_BUILD_BENCHMARKS=OFF -DSTAGECRAFT_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address" >/dev/null
cmake --build "$fuzz_build" -j"$JOBS" --target fuzz_loaders

# Seeds: graph files and small ONNX models of the built-in networks.
configure_and_build stagecraft >/dev/null
corpus="$fuzz_build/corpus"
mkdir -p "$corpus"
for net in squeezenet1_1 googlenet resnet50; do
  "$BUILD_DIR/cli/stagecraft" graph "$net" --input-size 32 -o "$corpus/$net.yaml" >/dev/null
  "$BUILD_DIR/cli/stagecraft" graph "$net" --input-size 32 --onnx "$corpus/$net.onnx" >/dev/null
done
cd "$fuzz_build"
./fuzz/fuzz_loaders -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 \
  -max_len=4000000 "$corpus"

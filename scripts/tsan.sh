#!/usr/bin/env bash
# ThreadSanitizer run of the executor tests (streams, events, plans on several streams).
# Builds into build-tsan/ (RelWithDebInfo, no CUDA); libgomp and oneDNN are not instrumented, so
# races reported inside them are suppressed (tests/tsan/suppressions.txt); ours are not.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
BUILD_DIR="$ROOT/build-tsan"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTAGECRAFT_CUDA=OFF \
  -DSTAGECRAFT_BUILD_BENCHMARKS=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target test_executor
TSAN_OPTIONS="suppressions=$ROOT/tests/tsan/suppressions.txt halt_on_error=1" \
OMP_WAIT_POLICY=passive "$BUILD_DIR/tests/test_executor" \
  --gtest_filter='Plan.*:Merge.*:Errors.*:Reference.SequentialPlan*:Networks/EveryNetwork.*/googlenet:Networks/QuantisedNetwork.*/squeezenet1_1_batch1:Networks/QuantisedNetwork.*/googlenet_batch1'

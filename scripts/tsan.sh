#!/usr/bin/env bash
# ThreadSanitizer run of the executor's multi-stream tests (streams, events, plans on several
# streams, merged and quantised networks) and of the serving core pool and model runner (requests
# from many threads). Builds into build-tsan/ (RelWithDebInfo, no CUDA); libgomp and oneDNN are
# not instrumented, so races reported inside them are suppressed (tests/tsan/suppressions.txt);
# ours are not. Exit status: 0 no race, else the failing program's.
#
# What kept it from starting, each handled:
#  - a segmentation fault before main, inside the dynamic loader's relocations, in a pool
#    kernel's OpenMP body (seen on an Intel Xeon and here on an AMD EPYC): the ifunc resolver
#    that target_clones made for it ran before TSAN's runtime started. pool_ops.cpp now chooses
#    its AVX2 loop at run time instead;
#  - the test programs' GoogleTest discovery runs them at build time, so a program that cannot
#    start failed the build before any race was checked: discovery is PRE_TEST in this tree;
#  - GCC 12's TSAN expects its own memory layout, which the kernel's address randomisation breaks
#    when it uses 32 bits (/proc/sys/vm/mmap_rnd_bits = 32, as on some recent kernels): "FATAL:
#    ThreadSanitizer: unexpected memory mapping" (reproduced here by setting it to 32). The
#    programs run with randomisation off for themselves (`setarch -R`), which needs no privileges.
# The CPU kernels that share work through OpenMP are compiled without instrumentation in this tree
# (executor/CMakeLists.txt), like oneDNN: libgomp's barriers are invisible to TSAN, so every
# access inside a team looked racy, and reporting those (suppressed) took a multi-stream googlenet
# test past 12 minutes. What TSAN watches is ours: stream workers, events, the caller's stream,
# plans, the core pool, the model runner's requests.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
BUILD_DIR="$ROOT/build-tsan"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTAGECRAFT_CUDA=OFF \
  -DSTAGECRAFT_BUILD_BENCHMARKS=OFF -DSTAGECRAFT_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target test_executor test_serve

echo "tsan: vm.mmap_rnd_bits = $(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo unknown); programs run under setarch -R"
run() {  # PROGRAM FILTER
  echo "tsan: $(basename "$1") --gtest_filter=$2"
  TSAN_OPTIONS="suppressions=$ROOT/tests/tsan/suppressions.txt halt_on_error=1 second_deadlock_stack=1" \
  OMP_WAIT_POLICY=passive setarch "$(uname -m)" -R "$1" --gtest_filter="$2"
}
run "$BUILD_DIR/tests/test_executor" \
  'Plan.*:Merge.*:Errors.*:Reference.SequentialPlan*:CallerStream.*:LaunchOrder.*:EveryScheduleOf.*:Networks/EveryNetwork.*/googlenet:Networks/QuantisedNetwork.*/squeezenet1_1_batch1:Networks/QuantisedNetwork.*/googlenet_batch1'
run "$BUILD_DIR/tests/test_serve" 'CorePool.*:ModelRunner.*'
echo "tsan: no race reported"

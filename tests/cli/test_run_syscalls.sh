#!/usr/bin/env bash
# A run makes no file system calls: `stagecraft run squeezenet1_1 --schedule sequential` under strace
# opens as many files with 42 timed runs as with 2. (Each kernel's launch once asked
# std::thread::hardware_concurrency(), which reads /sys/devices/system/cpu/online on every call:
# 5-8 µs per kernel, 7% of mobilenet_v2's latency.) --fixed-threads: under strace every run is slow,
# and the executor would build its kernels again for fewer threads once (opening the kernel-choice
# cache and oneDNN's JIT profiling library), which is not a per-run cost. Skipped (77) without
# strace or ptrace.
set -euo pipefail
bin=$1
if ! command -v strace >/dev/null; then
  echo "SKIP: strace is not installed (apt-get install strace)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! strace -f -qq -e trace=none -o /dev/null true 2>"$tmp/err"; then
  echo "SKIP: strace cannot trace here ($(head -1 "$tmp/err"))"
  exit 77
fi
opens() {  # opens(ITERS): files opened by a run of ITERS timed iterations
  OMP_NUM_THREADS=2 strace -f -qq -e trace=open,openat -o "$tmp/trace" \
    "$bin" run squeezenet1_1 --schedule sequential --fixed-threads --warmup 1 --iters "$1" --cache-dir "$tmp/cache" >/dev/null
  grep -c "open" "$tmp/trace" || true
}
few=$(opens 2)
many=$(opens 42)
echo "files opened: $few with 2 runs, $many with 42"
if [ "$((many - few))" -gt 4 ]; then
  echo "FAIL: 40 more runs opened $((many - few)) more files:"
  grep open "$tmp/trace" | sed 's/^[0-9]* *//; s/ = .*//' | sort | uniq -c | sort -rn | head -5
  exit 1
fi

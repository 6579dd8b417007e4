#!/usr/bin/env bash
# Installs what is missing, builds (Release, all cores) and runs the whole test suite.
# GPU tests (ctest label `gpu`) skip with a printed reason on machines without a usable GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
ensure_packages
# The Python tools the tests call (ONNX Runtime comparison, pytest of the Python package) live in
# the project's virtual environment; made here once, before configuring (the Python module is
# built for its interpreter), so that parallel tests do not race to make it.
ensure_venv numpy onnx onnxruntime pytest pandas tqdm >/dev/null ||
  echo "stagecraft: no Python environment with numpy/onnx/onnxruntime/pytest/pandas/tqdm: the ONNX Runtime and Python tests will skip"
# Ray Serve (the serve/ray cluster test and the soak), from PyPI like PyTriton.
ensure_venv 'ray[serve]' requests >/dev/null ||
  echo "stagecraft: cannot pip-install ray[serve] into $VENV_DIR: the Ray Serve tests will skip"
configure_and_build
built=$(date +%s)
summary="$BUILD_DIR/ctest-summary.txt"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" | tee "$summary"
done_at=$(date +%s)
# Every skipped test, with its reason: ctest entries skipped as a whole (exit 77, or a GoogleTest
# test that skipped), and tests skipped inside an entry that ran (pytest's tests, -rs lines; the
# GoogleTest programs run whole under the capped-ISA shards). Skipped entries are named in
# ctest's summary; LastTest.log says "Test Passed." for them too.
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
# (A parameterised test's entry is named "NAME  # GetParam() = ..." there and NAME in the log.)
SKIPPED_ENTRIES=$(sed -nE 's/^[[:space:]]+[0-9]+ - (.*) \(Skipped\)$/\1/p' "$summary" | sed -E 's/  # GetParam\(\).*$//')
export SKIPPED_ENTRIES
skips=$(awk '
  BEGIN { n = split(ENVIRON["SKIPPED_ENTRIES"], names, "\n"); for (i = 1; i <= n; i++) whole[names[i]] = 1 }
  /^[0-9]+\/[0-9]+ Test: / { name = $3; first = ""; pending = 0; next }
  pending { pending = 0; reason = ($0 ~ /^\[  SKIPPED \]/) ? "(no reason given)" : $0 }
  /: Skipped$/ { pending = 1; next }
  /^SKIP: / { if (first == "") first = substr($0, 7); next }
  /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ {
    if (name in whole) { if (first == "") first = reason }
    else print "inside\t1\t" name ": " $4 ": " reason
    next
  }
  /^SKIPPED \[[0-9]+\] / {
    count = $2; gsub(/[^0-9]/, "", count); text = $0; sub(/^SKIPPED \[[0-9]+\] /, "", text)
    if (!(name in whole)) print "inside\t" count "\t" name ": " text (count > 1 ? " (" count " tests)" : "")
    next
  }
  /^<end of output>$/ { if (name in whole) print "entry\t1\t" name ": " (first == "" ? "(no reason given)" : first) }
' "$log" 2>/dev/null || true)
inside_skipped=$(printf '%s\n' "$skips" | awk -F'\t' '$1 == "inside" {n += $2} END {print n + 0}')
if [ -n "$skips" ]; then
  echo "stagecraft: skipped tests and why:"
  printf '%s\n' "$skips" | awk -F'\t' 'NF == 3 {print "  " $3}' | sort
fi
echo "stagecraft: build $((built - start)) s, tests $((done_at - built)) s"
# The closing line: ctest's entries (a GoogleTest test each, or a whole program or script), and the
# tests skipped inside entries that ran.
total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$summary")
failed=$(sed -nE 's/.*, ([0-9]+) tests failed out of.*/\1/p' "$summary")
skipped=$(grep -c "(Skipped)" "$summary" || true)
echo "$((total - failed - skipped)) passed, $failed failed, $((skipped + inside_skipped)) skipped" \
     "($skipped ctest entries, $inside_skipped tests inside entries that ran)"

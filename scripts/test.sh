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
ensure_venv numpy onnx onnxruntime pytest >/dev/null ||
  echo "stagecraft: no Python environment with numpy/onnx/onnxruntime/pytest: the ONNX Runtime and Python tests will skip"
configure_and_build
built=$(date +%s)
summary="$BUILD_DIR/ctest-summary.txt"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" | tee "$summary"
done_at=$(date +%s)
# Say why each skipped test was skipped: GoogleTest writes the reason under "Skipped", the
# script tests a "SKIP:" line.
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if grep -q -e "^\[  SKIPPED \]" -e "^SKIP: " "$log" 2>/dev/null; then
  echo "stagecraft: skipped tests and why:"
  grep -B1 -A1 -h "^.*: Skipped$" "$log" | grep -v -e "^--$" -e ": Skipped$" -e "^\[ RUN" |
    sort -u | sed 's/^/  /'
  grep -hE "^\[  SKIPPED \] .* \([0-9]+ ms\)$" "$log" | sort -u | sed 's/^/  /'
  awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /^SKIP: /{print "  " name ": " substr($0, 7)}' "$log"
fi
echo "stagecraft: build $((built - start)) s, tests $((done_at - built)) s"
# The closing line: counts from ctest's summary.
total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$summary")
failed=$(sed -nE 's/.*, ([0-9]+) tests failed out of.*/\1/p' "$summary")
skipped=$(grep -c "(Skipped)" "$summary" || true)
echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"

#!/usr/bin/env bash
# Installs what is missing, builds (Release, all cores) and runs the whole test suite.
# GPU tests (ctest label `gpu`) skip with a printed reason on machines without a usable GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
ensure_packages
configure_and_build
built=$(date +%s)
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS"
done_at=$(date +%s)
echo "stagecraft: build $((built - start)) s, tests $((done_at - built)) s"

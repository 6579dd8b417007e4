#!/usr/bin/env bash
# ctest `python/pytest` (label python): the package's tests (python/tests) against the module of
# this build, with PYTHONPATH = the module's folder + the package sources, the CLI for the
# agreement tests, and a temporary profile cache. Exit 77 (skipped) with the reason when the
# interpreter the module was built for lacks numpy or pytest. `-rs` names each skipped test with
# its reason ("SKIPPED [n] file:line: reason"), which scripts/test.sh counts in its closing line.
# Usage: run_pytest.sh PYTHON MODULE_PARENT_DIR PATH/TO/stagecraft [PYTEST_ARGS...]
set -u
py=$1
module_dir=$2
cli=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
if ! "$py" -c "import numpy, pytest" 2>/dev/null; then
  echo "SKIP: $py cannot import numpy and pytest (./scripts/test.sh installs them into .venv)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$module_dir:$here/..${PYTHONPATH:+:$PYTHONPATH}"
export STAGECRAFT_CLI=$cli
export STAGECRAFT_CACHE_DIR="$work/cache"
export OMP_WAIT_POLICY=passive
cd "$work"  # tests write into temporary folders only
"$py" -m pytest -q -rs -p no:cacheprovider -o console_output_style=classic "$here" "$@"

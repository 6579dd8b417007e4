#!/usr/bin/env python3
"""ONNX's node conformance tests through stagecraft (stagecraft.onnx_backend): a coverage table,
the exclusion list the tests check, and the check itself.

  scripts/onnx_conformance.py [--out docs/onnx_conformance.md] [--json FILE]
                              [--write-exclusions FILE] [--check FILE] [--all-types]

The cases are the node tests the installed `onnx` package generates, those whose every input and
output is float32 (--all-types: every case). Each ends `pass`, `refused` (a one-line
stagecraft.Error: outside what stagecraft runs), `wrong` (outputs beyond the case's tolerances),
`error` (any other exception) or `crash` (the worker process died).

--check FILE: exit 1 unless no case is wrong, errs or crashes, every case FILE lists is refused,
and every case it does not list passes — except, when FILE was written with another onnx version,
refused cases FILE does not know (printed, not failed). --write-exclusions FILE: writes the
refused cases with their reasons (the list --check reads).

Uses the module of the build (build/python) and the package sources (python/) unless stagecraft
is installed; runs in the project's virtual environment (.venv, with onnx and numpy).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from pyenv import machine, reexec_in_venv  # noqa: E402

reexec_in_venv("onnx_conformance", __file__, ["numpy", "onnx"], ["numpy", "onnx"])
for path in (ROOT / "python", ROOT / "build" / "python"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import onnx  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft.onnx_backend import (STATUSES, check_results, node_test_cases,  # noqa: E402
                                      node_test_results, read_exclusions)

HEADER = """\
# The ONNX node tests that stagecraft refuses, each with its one-line reason: the coverage table
# of the ONNX importer. Cases: those the onnx package generates{types}.
# Made with onnx {version} by
#   scripts/onnx_conformance.py --write-exclusions {path}
# python/tests/test_onnx_conformance.py checks it: a listed case must be refused cleanly (one
# line), a case not listed must pass, and no case may give a wrong answer, raise anything else or
# crash. A change that makes a listed case pass fails until its line goes.
"""


def check(results: list[dict], path: Path) -> list[str]:
    """The failures of --check (empty: passed); refused cases another onnx version added are printed."""
    listed, version = read_exclusions(path)
    failures, unknown = check_results(results, listed, version)
    if unknown:
        print(f"onnx_conformance: {len(unknown)} refused case(s) of onnx {onnx.__version__} that the list "
              f"(onnx {version or 'unknown'}) does not know: {', '.join(unknown[:20])}"
              + (" ..." if len(unknown) > 20 else ""))
    return failures


def table(results: list[dict], all_types: bool) -> str:
    counts = collections.Counter(r["status"] for r in results)
    lines = [f"# ONNX node conformance tests through stagecraft",
             "",
             f"onnx {onnx.__version__} node tests ({'every case' if all_types else 'float32 inputs and outputs only'}), "
             f"stagecraft {stagecraft.__version__} on {machine()}; `scripts/onnx_conformance.py`.",
             "",
             "| cases | " + " | ".join(STATUSES) + " |",
             "|---|" + "---|" * len(STATUSES),
             f"| {len(results)} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |",
             "",
             "## Why cases are refused (first line of the error, by count)",
             "",
             "| cases | reason |",
             "|---|---|"]
    reasons = collections.Counter(r["message"] for r in results if r["status"] == "refused")
    for reason, n in reasons.most_common():
        lines.append(f"| {n} | {reason.replace('|', '/')} |")
    lines += ["", "## By op type", "", "| op | cases | pass | refused | other |", "|---|---|---|---|---|"]
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        by_op[r["ops"]][r["status"]] += 1
    for op in sorted(by_op):
        c = by_op[op]
        other = sum(c[s] for s in ("wrong", "error", "crash"))
        lines.append(f"| {op} | {sum(c.values())} | {c['pass']} | {c['refused']} | {other} |")
    rounded = [r for r in results if r["status"] == "pass" and r["message"]]
    if rounded:
        lines += ["", "## Passed within float32 rounding (outside ONNX's atol, within two ulps of the output's scale)", ""]
        lines += [f"- `{r['name']}`: {r['message']}" for r in rounded]
    bad = [r for r in results if r["status"] in ("wrong", "error", "crash")]
    if bad:
        lines += ["", "## Wrong answers, errors and crashes", ""]
        lines += [f"- `{r['name']}`: {r['status']}: {r['message']}" for r in bad]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="Markdown coverage table")
    p.add_argument("--json", type=Path, help="every case's result")
    p.add_argument("--write-exclusions", type=Path, help="write the refused cases (the list --check reads)")
    p.add_argument("--check", type=Path, help="check the results against this list (exit 1 on a failure)")
    p.add_argument("--all-types", action="store_true", help="every case, not only all-float32 ones")
    args = p.parse_args()

    cases = node_test_cases(float32_only=not args.all_types)
    print(f"onnx_conformance: {len(cases)} node tests of onnx {onnx.__version__}", flush=True)
    results = node_test_results(cases)
    counts = collections.Counter(r["status"] for r in results)
    print("onnx_conformance: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES))
    if args.out:
        args.out.write_text(table(results, args.all_types))
        print(f"onnx_conformance: wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"onnx": onnx.__version__, "results": results}, indent=1) + "\n")
    if args.write_exclusions:
        types = "" if args.all_types else ",\n# those whose inputs and outputs are all float32"
        text = HEADER.format(types=types, version=onnx.__version__,
                             path=os.path.relpath(args.write_exclusions, ROOT))
        text += "".join(f"{r['name']}  # {r['message']}\n" for r in results if r["status"] == "refused")
        args.write_exclusions.write_text(text)
        print(f"onnx_conformance: wrote {args.write_exclusions}")
    if args.check:
        failures = check(results, args.check)
        for f in failures:
            print(f"FAIL: {f}")
        if failures:
            return 1
        print(f"onnx_conformance: as {args.check.name} says: {counts.get('pass', 0)} pass, the rest refused cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())

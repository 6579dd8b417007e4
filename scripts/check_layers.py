#!/usr/bin/env python3
"""Checks that dependencies point one way: every #include of a project header reaches a folder on a
lower floor (or the file's own folder), as docs/design.md's table of folders says, and the
libraries stay where their folders' READMEs put them (CUDA only in executor/cuda/, oneDNN only in
executor/cpu/ among the libraries). Prints one line per violation; exit status 1 when there is any.

Usage: scripts/check_layers.py [--root DIR]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# The floors of docs/design.md ("Folders, bottom up"); the tools above the libraries on top.
FLOORS = {
    "common": 1, "graph": 2, "frontend": 3, "networks": 3, "scheduler": 3, "executor": 4,
    "profiler": 5, "quant": 5, "layouts": 6, "session": 7, "cli": 8, "python": 8, "serve": 8,
    "fuzz": 9, "bench": 9, "tests": 9,
}
# Headers of a library, and the one folder of the libraries that may include them.
CONFINED = [
    (re.compile(r"^(cuda|cudnn|cublas|cuda_runtime|nvrtc)[a-zA-Z0-9_]*\.h$"), "executor/cuda/"),
    (re.compile(r"^(oneapi/)?dnnl[a-z_.]*$"), "executor/cpu/"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCES = (".cpp", ".h", ".cu", ".cuh", ".inc")


def violations(root: Path) -> list[str]:
    found = []
    paths = (p for folder in FLOORS for p in (root / folder).rglob("*"))
    for path in sorted(p for p in paths if p.suffix in SOURCES and p.is_file()):
        rel = path.relative_to(root)
        folder = rel.parts[0]
        if folder not in FLOORS or len(rel.parts) < 2:
            continue
        text = path.read_text(errors="replace")
        for line_no, (bracket, header) in ((text.count("\n", 0, m.start()) + 1, m.groups())
                                           for m in INCLUDE.finditer(text)):
            target = header.split("/")[0]
            if bracket == '"' and "/" in header and target in FLOORS and target != folder:
                if FLOORS[target] >= FLOORS[folder]:
                    found.append(f"{rel}:{line_no}: includes {header}: {target}/ (floor {FLOORS[target]}) "
                                 f"is not below {folder}/ (floor {FLOORS[folder]})")
            for pattern, home in CONFINED:
                if pattern.match(header) and not str(rel).startswith(home) and FLOORS[folder] < 9:
                    found.append(f"{rel}:{line_no}: includes <{header}>: only {home} may use that library")
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = p.parse_args()
    found = violations(args.root)
    for line in found:
        print(line)
    print(f"check_layers: {len(found)} include(s) against the floors of docs/design.md")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
